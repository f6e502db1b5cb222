//! One direction of an emulated link, sans-IO: packets arrive with a timestamp, the model
//! says when (and whether) each leaves. Order of stages, as in the seeds' `tc` setups and
//! mahimahi: random loss → droptail bottleneck queue → rate (constant or trace) → one-way
//! delay (optionally jittered, never reordering).

use std::collections::VecDeque;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::trace::Trace;

/// Bytes one mahimahi delivery opportunity carries.
pub const OPPORTUNITY_BYTES: u64 = 1500;

#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    /// kbit/s.
    Constant(u64),
    Trace(Trace),
    /// No rate limit (for throughput tests of the emulator itself).
    Unlimited,
}

#[derive(Debug, Clone, PartialEq)]
pub enum QueueLimit {
    Bytes(u64),
    /// Milliseconds' worth of the link rate (constant rate; traces use their mean rate).
    Millis(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct LinkParams {
    pub delay: Duration,
    pub jitter: Duration,
    pub rate: Rate,
    /// Probability in [0, 1].
    pub loss: f64,
    pub queue: QueueLimit,
}

impl LinkParams {
    /// Rate in bytes per second (mean rate for traces, None if unlimited).
    pub fn bytes_per_sec(&self) -> Option<f64> {
        match &self.rate {
            Rate::Constant(kbit) => Some(*kbit as f64 * 1000.0 / 8.0),
            Rate::Trace(t) => Some(t.mean_bytes_per_sec()),
            Rate::Unlimited => None,
        }
    }

    pub fn queue_bytes(&self) -> u64 {
        match self.queue {
            QueueLimit::Bytes(b) => b,
            QueueLimit::Millis(ms) => match self.bytes_per_sec() {
                // At least a few packets, or nothing could ever pass a tiny queue.
                Some(bps) => ((bps * ms as f64 / 1000.0) as u64).max(4 * OPPORTUNITY_BYTES),
                None => u64::MAX,
            },
        }
    }
}

/// Packets under this many bytes count as small (acknowledgements, handshakes, pings).
pub const SMALL_PACKET: u64 = 200;

/// Statistics of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub arrived: u64,
    pub delivered: u64,
    pub delivered_bytes: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    pub dropped_down: u64,
    /// Lost outside the model: the kernel dropped frames before the emulator read them
    /// (receive buffer full) or refused to send them. Non-zero means the emulator, not
    /// the configured link, was a bottleneck.
    pub dropped_io: u64,
    /// Each delivered packet's time in the bottleneck: arrival to the end of its
    /// transmission (queueing plus its own serialisation), so a queue-control claim
    /// ("the bottleneck holds about 20 ms") is checked where the queue is.
    pub sojourn: MsHist,
    /// How late the emulator handed each packet on, past its modelled delivery time: on
    /// a busy machine this is delay the model did not ask for.
    pub late: MsHist,
    /// Packets delivered that were under [`SMALL_PACKET`] bytes (acknowledgements, small
    /// frames).
    pub small: u64,
}

/// Counts of durations in 1 ms buckets (0–1 ms, 1–2 ms, …), the last bucket taking
/// everything from [`MsHist::BUCKETS`] − 1 ms on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MsHist {
    counts: Vec<u64>,
}

impl MsHist {
    pub const BUCKETS: usize = 2000;

    pub fn add(&mut self, d: Duration) {
        if self.counts.is_empty() {
            self.counts = vec![0; Self::BUCKETS];
        }
        let i = (d.as_micros() / 1000).min(Self::BUCKETS as u128 - 1) as usize;
        self.counts[i] += 1;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q`-quantile (0..=1) in ms, as its bucket's upper edge; None when empty.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(i as f64 + 1.0);
            }
        }
        None
    }

    pub fn clear(&mut self) {
        self.counts.clear();
    }
}

/// Time is a `Duration` since the link's start.
pub struct Link<P> {
    params: LinkParams,
    up: bool,
    rng: StdRng,
    /// (packet, size, arrival time).
    queue: VecDeque<(P, u64, Duration)>,
    queued_bytes: u64,
    /// Constant rate: when the transmitter is free again.
    busy_until: Duration,
    /// Trace: index of the next opportunity, how many loops of the trace were used, and
    /// the bytes left in the current opportunity.
    trace_pos: usize,
    trace_loops: u64,
    opp_left: u64,
    /// Trace: when its first repetition started (the link's start, or the last
    /// [`Link::rewind_trace`]).
    trace_origin: Duration,
    /// In flight on the wire: (delivery time, packet).
    wire: VecDeque<(Duration, P)>,
    last_delivery: Duration,
    pub stats: LinkStats,
}

impl<P> Link<P> {
    pub fn new(params: LinkParams, seed: u64) -> Self {
        Link {
            params,
            up: true,
            rng: StdRng::seed_from_u64(seed),
            queue: VecDeque::new(),
            queued_bytes: 0,
            busy_until: Duration::ZERO,
            trace_pos: 0,
            trace_loops: 0,
            opp_left: 0,
            trace_origin: Duration::ZERO,
            wire: VecDeque::new(),
            last_delivery: Duration::ZERO,
            stats: LinkStats::default(),
        }
    }

    pub fn params(&self) -> &LinkParams {
        &self.params
    }

    /// Changes parameters from now on (rate or delay change events).
    pub fn set_params(&mut self, params: LinkParams) {
        self.params = params;
    }

    /// Replays a trace from its beginning, starting at `now` (no effect on other rates):
    /// transfers that each rewind first meet the same sequence of delivery opportunities,
    /// wherever in the looped trace the previous one left it.
    pub fn rewind_trace(&mut self, now: Duration) {
        self.trace_origin = now;
        self.trace_pos = 0;
        self.trace_loops = 0;
        self.opp_left = 0;
    }

    /// Takes the link down (everything queued or on the wire is lost) or up.
    pub fn set_up(&mut self, up: bool) {
        if !up {
            self.stats.dropped_down += (self.queue.len() + self.wire.len()) as u64;
            self.queue.clear();
            self.queued_bytes = 0;
            self.wire.clear();
        }
        self.up = up;
    }

    /// A packet of `size` bytes arrives at `now`.
    pub fn arrive(&mut self, now: Duration, pkt: P, size: u64) {
        self.stats.arrived += 1;
        if !self.up {
            self.stats.dropped_down += 1;
            return;
        }
        if self.params.loss > 0.0 && self.rng.gen::<f64>() < self.params.loss {
            self.stats.dropped_loss += 1;
            return;
        }
        if self.queued_bytes + size > self.params.queue_bytes() {
            self.stats.dropped_queue += 1;
            return;
        }
        if self.queue.is_empty() {
            // An idle transmitter starts on this packet now; it banks no credit.
            self.busy_until = self.busy_until.max(now);
        }
        self.queued_bytes += size;
        self.queue.push_back((pkt, size, now));
        self.serve(now);
    }

    /// Moves packets whose transmission finished by `now` from the queue onto the wire.
    fn serve(&mut self, now: Duration) {
        loop {
            let Some(&(_, size, _)) = self.queue.front() else {
                return;
            };
            let done = match &self.params.rate {
                Rate::Unlimited => now,
                Rate::Constant(kbit) => {
                    let tx = Duration::from_nanos(size * 8 * 1_000_000 / (*kbit).max(1));
                    let done = self.busy_until + tx;
                    if done > now {
                        // Not finished yet; `next_event` tells the caller when.
                        return;
                    }
                    self.busy_until = done;
                    done
                }
                Rate::Trace(t) => {
                    // Consume opportunities (each 1500 bytes) until the packet fits.
                    let mut need = size;
                    let mut when = Duration::ZERO;
                    let (mut pos, mut loops, mut left) = (self.trace_pos, self.trace_loops, self.opp_left);
                    while need > 0 {
                        if left == 0 {
                            let at = self.trace_origin + t.opportunity(pos, loops);
                            if at > now {
                                return;
                            }
                            when = at;
                            left = OPPORTUNITY_BYTES;
                            pos += 1;
                            if pos == t.len() {
                                pos = 0;
                                loops += 1;
                            }
                        }
                        let take = need.min(left);
                        need -= take;
                        left -= take;
                    }
                    // Opportunities that passed while the queue was empty are not saved
                    // up (mahimahi semantics): `skip_idle` drops them on arrival.
                    self.trace_pos = pos;
                    self.trace_loops = loops;
                    self.opp_left = left;
                    when
                }
            };
            let (pkt, size, arrived) = self.queue.pop_front().expect("front");
            self.queued_bytes -= size;
            self.stats.sojourn.add(done.saturating_sub(arrived));
            self.stats.small += (size < SMALL_PACKET) as u64;
            let jitter = if self.params.jitter > Duration::ZERO {
                Duration::from_nanos(self.rng.gen_range(0..=self.params.jitter.as_nanos() as u64))
            } else {
                Duration::ZERO
            };
            // Never reorder: a packet leaves the wire no earlier than the one before it.
            let at = (done + self.params.delay + jitter).max(self.last_delivery);
            self.last_delivery = at;
            self.wire.push_back((at, pkt));
        }
    }

    /// Drops unused trace opportunities before `now` when the queue is empty, so an idle
    /// link does not bank capacity.
    fn skip_idle(&mut self, now: Duration) {
        if !self.queue.is_empty() {
            return;
        }
        if let Rate::Trace(t) = &self.params.rate {
            self.opp_left = 0;
            while self.trace_origin + t.opportunity(self.trace_pos, self.trace_loops) < now {
                self.trace_pos += 1;
                if self.trace_pos == t.len() {
                    self.trace_pos = 0;
                    self.trace_loops += 1;
                }
            }
        }
    }

    /// Arrival entry point that first discards idle trace capacity.
    pub fn push(&mut self, now: Duration, pkt: P, size: u64) {
        self.skip_idle(now);
        self.arrive(now, pkt, size);
    }

    /// Packets due for delivery at `now`.
    pub fn poll(&mut self, now: Duration, out: &mut Vec<P>) {
        self.serve(now);
        while self.wire.front().is_some_and(|(t, _)| *t <= now) {
            let (t, p) = self.wire.pop_front().expect("front");
            self.stats.delivered += 1;
            self.stats.late.add(now.saturating_sub(t));
            out.push(p);
        }
    }

    /// Counts delivered bytes (the caller knows packet sizes).
    pub fn count_bytes(&mut self, n: u64) {
        self.stats.delivered_bytes += n;
    }

    /// When something next happens (a transmission ends or a delivery is due).
    pub fn next_event(&self) -> Option<Duration> {
        let wire = self.wire.front().map(|(t, _)| *t);
        let tx = self.queue.front().map(|&(_, size, _)| match &self.params.rate {
            Rate::Unlimited => Duration::ZERO,
            Rate::Constant(kbit) => self.busy_until + Duration::from_nanos(size * 8 * 1_000_000 / (*kbit).max(1)),
            Rate::Trace(t) => {
                if self.opp_left >= size {
                    Duration::ZERO
                } else {
                    self.trace_origin + t.opportunity(self.trace_pos, self.trace_loops)
                }
            }
        });
        match (wire, tx) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn params(kbit: u64, delay_ms: u64) -> LinkParams {
        LinkParams {
            delay: ms(delay_ms),
            jitter: Duration::ZERO,
            rate: Rate::Constant(kbit),
            loss: 0.0,
            queue: QueueLimit::Bytes(1 << 20),
        }
    }

    /// Runs the link in 0.1 ms steps until `end`, returning delivery times.
    fn run(link: &mut Link<u32>, arrivals: &[(Duration, u32, u64)], end: Duration) -> Vec<(Duration, u32)> {
        run_from(link, Duration::ZERO, arrivals, end)
    }

    /// [`run`] from `start` on (a link used before is not polled back in time).
    fn run_from(
        link: &mut Link<u32>,
        start: Duration,
        arrivals: &[(Duration, u32, u64)],
        end: Duration,
    ) -> Vec<(Duration, u32)> {
        let mut out = Vec::new();
        let mut t = start;
        let mut i = 0;
        let mut buf = Vec::new();
        while t <= end {
            while i < arrivals.len() && arrivals[i].0 <= t {
                link.push(t, arrivals[i].1, arrivals[i].2);
                i += 1;
            }
            link.poll(t, &mut buf);
            out.extend(buf.drain(..).map(|p| (t, p)));
            t += Duration::from_micros(100);
        }
        out
    }

    #[test]
    fn sojourn_counts_queueing_and_serialisation_and_small_packets_are_counted() {
        // 12 Mbit/s: a 1500-byte packet takes 1 ms. Ten at once: the k-th waits k − 1 ms
        // and takes 1 ms itself.
        let mut l = Link::new(params(12_000, 10), 1);
        let burst: Vec<_> = (0..10).map(|i| (ms(0), i, 1500)).collect();
        run(&mut l, &burst, ms(40));
        assert_eq!(l.stats.sojourn.count(), 10);
        assert_eq!(
            l.stats.sojourn.quantile_ms(0.0),
            Some(2.0),
            "1 ms: the first bucket ends at 2"
        );
        assert_eq!(l.stats.sojourn.quantile_ms(1.0), Some(11.0), "the last: 10 ms");
        assert_eq!(l.stats.small, 0);
        run_from(&mut l, ms(40), &[(ms(41), 11, 52)], ms(60));
        assert_eq!(l.stats.small, 1);
        assert!(
            l.stats.late.count() == 11 && l.stats.late.quantile_ms(1.0) == Some(1.0),
            "polled on time"
        );
        l.stats.sojourn.clear();
        assert_eq!(l.stats.sojourn.quantile_ms(0.5), None);
    }

    #[test]
    fn delay_and_serialisation() {
        // 12 Mbit/s: a 1500-byte packet takes 1 ms; delay 10 ms.
        let mut l = Link::new(params(12_000, 10), 1);
        let got = run(&mut l, &[(ms(0), 1, 1500), (ms(0), 2, 1500)], ms(30));
        assert_eq!(got, vec![(ms(11), 1), (ms(12), 2)]);
    }

    #[test]
    fn constant_rate_throughput() {
        let mut l = Link::new(params(8_000, 0), 1); // 1 MB/s
        let arrivals: Vec<_> = (0..2000).map(|i| (ms(0), i, 1000)).collect();
        let got = run(&mut l, &arrivals, ms(1000));
        // 1000 packets of 1000 bytes per second.
        assert!((995..=1001).contains(&got.len()), "{}", got.len());
    }

    #[test]
    fn droptail_queue_in_millis() {
        let mut p = params(12_000, 0);
        p.queue = QueueLimit::Millis(10); // 15 000 bytes
        let mut l = Link::new(p, 1);
        for i in 0..100 {
            l.push(ms(0), i, 1500);
        }
        // The first departs at once... the queue holds 10.
        assert_eq!(l.stats.dropped_queue, 90);
    }

    #[test]
    fn loss_rate_is_statistical() {
        let mut p = params(1_000_000, 0);
        p.loss = 0.1;
        let mut l = Link::new(p, 42);
        for i in 0..20_000 {
            l.push(ms(i / 10), i as u32, 100);
        }
        let lost = l.stats.dropped_loss as f64 / 20_000.0;
        assert!((0.09..0.11).contains(&lost), "{lost}");
    }

    #[test]
    fn down_drops_everything() {
        let mut l = Link::new(params(12_000, 10), 1);
        l.push(ms(0), 1, 1500);
        l.set_up(false);
        l.push(ms(1), 2, 1500);
        let mut out = Vec::new();
        l.poll(ms(50), &mut out);
        assert!(out.is_empty());
        assert_eq!(l.stats.dropped_down, 2);
        l.set_up(true);
        l.push(ms(60), 3, 1500);
        l.poll(ms(80), &mut out);
        assert_eq!(out, vec![3]);
    }

    #[test]
    fn trace_opportunities() {
        // One opportunity at 1 ms and two at 3 ms, looping every 3 ms.
        let t = Trace::from_millis(vec![1, 3, 3]).unwrap();
        let mut p = params(0, 0);
        p.rate = Rate::Trace(t);
        let mut l = Link::new(p, 1);
        let arrivals: Vec<_> = (0..6).map(|i| (ms(0), i, 1500)).collect();
        let got = run(&mut l, &arrivals, ms(10));
        let times: Vec<Duration> = got.iter().map(|g| g.0).collect();
        assert_eq!(times, vec![ms(1), ms(3), ms(3), ms(4), ms(6), ms(6)]);
    }

    #[test]
    fn a_rewound_trace_replays_from_its_start() {
        // Opportunities at 1, 2 and 10 ms, looping every 10 ms.
        let t = Trace::from_millis(vec![1, 2, 10]).unwrap();
        let mut p = params(0, 5);
        p.rate = Rate::Trace(t);
        let mut l = Link::new(p, 1);
        // Delivery times of three 1500-byte packets arriving together at `at` ms.
        let burst = |l: &mut Link<u32>, at: u64| -> Vec<Duration> {
            let arrivals: Vec<_> = (0..3).map(|i| (ms(at), i, 1500)).collect();
            run_from(l, ms(at), &arrivals, ms(at + 40))
                .iter()
                .map(|g| g.0)
                .collect()
        };
        // Not rewound, a burst at 33 ms meets the trace in its fourth repetition, where 31
        // and 32 ms have passed: it leaves at 40, 41 and 42 ms.
        assert_eq!(burst(&mut l, 33), vec![ms(45), ms(46), ms(47)]);
        // Rewound at 63 ms: the same burst meets opportunities 1, 2 and 10 ms after it.
        l.rewind_trace(ms(63));
        assert_eq!(burst(&mut l, 63), vec![ms(69), ms(70), ms(78)]);
        // And again later: the same offsets.
        l.rewind_trace(ms(200));
        assert_eq!(burst(&mut l, 200), vec![ms(206), ms(207), ms(215)]);
    }

    #[test]
    fn idle_trace_link_banks_nothing() {
        let t = Trace::from_millis(vec![1]).unwrap(); // 1 packet per ms
        let mut p = params(0, 0);
        p.rate = Rate::Trace(t);
        let mut l = Link::new(p, 1);
        let arrivals: Vec<_> = (0..5).map(|i| (ms(100), i, 1500)).collect();
        let got = run(&mut l, &arrivals, ms(110));
        let times: Vec<Duration> = got.iter().map(|g| g.0).collect();
        assert_eq!(times, vec![ms(100), ms(101), ms(102), ms(103), ms(104)]);
    }

    #[test]
    fn jitter_stays_in_bounds_and_never_reorders() {
        let mut p = params(12_000, 10);
        p.jitter = ms(5);
        let mut l = Link::new(p, 3);
        // One 1500-byte packet per ms: each takes exactly 1 ms to serialise.
        let arrivals: Vec<_> = (0..300).map(|i| (ms(i), i as u32, 1500)).collect();
        let got = run(&mut l, &arrivals, ms(400));
        assert_eq!(got.len(), 300);
        let mut extra = Vec::new();
        for (k, (t, id)) in got.iter().enumerate() {
            assert_eq!(*id, k as u32, "reordered");
            let base = ms(*id as u64 + 1 + 10);
            assert!(
                *t >= base && *t <= base + ms(5) + Duration::from_micros(100),
                "{id}: {t:?}"
            );
            extra.push((*t - base).as_secs_f64() * 1000.0);
        }
        // The jitter is really there: on average about half its range.
        let mean = extra.iter().sum::<f64>() / extra.len() as f64;
        assert!((1.5..4.5).contains(&mean), "{mean}");
    }

    #[test]
    fn rate_change_applies_to_queued_packets() {
        let mut l = Link::new(params(12_000, 0), 1);
        for i in 0..6 {
            l.push(ms(0), i, 1500);
        }
        let mut out = Vec::new();
        l.poll(ms(2), &mut out);
        assert_eq!(out, vec![0, 1]);
        // Half the rate from now: 2 ms per packet.
        let mut p = l.params().clone();
        p.rate = Rate::Constant(6_000);
        l.set_params(p);
        let got = run(&mut l, &[], ms(12));
        let times: Vec<Duration> = got.iter().map(|g| g.0).collect();
        assert_eq!(times, vec![ms(4), ms(6), ms(8), ms(10)]);
    }

    #[test]
    fn queue_limit_in_bytes_and_recovery() {
        let mut p = params(12_000, 0);
        p.queue = QueueLimit::Bytes(4500);
        let mut l = Link::new(p, 1);
        for i in 0..5 {
            l.push(ms(0), i, 1500);
        }
        assert_eq!(l.stats.dropped_queue, 2);
        assert_eq!(l.queued_bytes(), 4500);
        // Once drained, the queue takes packets again.
        let got = run(&mut l, &[(ms(10), 9, 1500)], ms(12));
        let ids: Vec<u32> = got.iter().map(|g| g.1).collect();
        assert_eq!(ids, vec![0, 1, 2, 9]);
        assert_eq!(l.stats.delivered, 4);
    }
}
