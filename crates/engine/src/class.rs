//! Traffic classes: which streams go first.
//!
//! A small request queued behind a bulk upload waits for every byte ahead of it — in the
//! session's queues, in the path's socket and at the path's bottleneck. QCUT (seed 004;
//! seed 000 ch. III) separates the two: interactive traffic goes in a higher-priority band
//! while bulk traffic's queue is held short, and MPFlex (seed 000 ch. IV) applies that to
//! every path of the proxy. Here a stream's class decides the order in which its frames are
//! sequenced and sent: an interactive frame goes before any queued bulk frame, on the path
//! where it arrives first now, and is not held back by queue control, which applies to
//! bulk bytes only.
//!
//! Classes follow behaviour: a stream starts interactive and becomes bulk once the bytes
//! of its current burst pass [`BULK_BURST`] (it is backlogged: a transfer, not a
//! request). A request/response turn — the peer sends on the stream while this side has
//! nothing queued and has been quiet for [`TURN_GAP`] — or an idle spell of [`BURST_IDLE`] (waits for credit do not count)
//! starts a new burst, and the stream is interactive again. Configuration may pin a stream's class.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// A stream's traffic class. Its number indexes the per-class tables (latency, counters)
/// and is pinned, as the wire's identities are, so a class keeps its place in them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum TrafficClass {
    /// Latency-bound, small: requests, responses, keystrokes. Sent before bulk bytes.
    Interactive = 0,
    /// Throughput-bound, backlogged. Held to queue control's target on every path.
    Bulk = 1,
    /// Steady small packets with a deadline (VoIP, games): as interactive, for datagram
    /// flows.
    Realtime = 2,
}

impl TrafficClass {
    pub const ALL: [TrafficClass; 3] = [TrafficClass::Interactive, TrafficClass::Bulk, TrafficClass::Realtime];

    /// Whether frames of this class go before bulk frames and past queue control.
    pub fn is_urgent(self) -> bool {
        !matches!(self, TrafficClass::Bulk)
    }

    pub fn name(self) -> &'static str {
        match self {
            TrafficClass::Interactive => "interactive",
            TrafficClass::Bulk => "bulk",
            TrafficClass::Realtime => "realtime",
        }
    }

    /// Its pinned number.
    pub fn id(self) -> u8 {
        self as u8
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for TrafficClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A class name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown traffic class {0:?} (expected interactive, bulk or realtime)")]
pub struct UnknownClass(pub String);

impl FromStr for TrafficClass {
    type Err = UnknownClass;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TrafficClass::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownClass(s.to_string()))
    }
}

/// Bytes one burst of a stream may send and still be interactive. A request, a response
/// of a small web object, an interactive session's screen update fit; a transfer does
/// not. Larger bursts would let a bulk stream's start jump queue control for longer (64 KB
/// is ~250 ms on a 2 Mbit/s uplink).
pub const BULK_BURST: u64 = 64 * 1024;

/// A stream that sent nothing for this long starts a new burst.
pub const BURST_IDLE: Duration = Duration::from_secs(1);

/// The least a stream must have been quiet for the peer's bytes to make a turn. A bulk
/// upload whose peer reports progress now and then is not a request answered: its
/// application wrote a moment ago and is waiting only for room (mpflex's backpressure
/// keeps its queue short, so it may be momentarily empty).
pub const TURN_GAP: Duration = Duration::from_millis(10);

/// One stream's class, from its behaviour unless pinned.
#[derive(Debug, Clone)]
pub struct Classifier {
    pinned: Option<TrafficClass>,
    /// Bytes offered in the current burst.
    burst: u64,
    last_send: Option<Instant>,
    class: TrafficClass,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier {
            pinned: None,
            burst: 0,
            last_send: None,
            class: TrafficClass::Interactive,
        }
    }
}

impl Classifier {
    pub fn class(&self) -> TrafficClass {
        self.pinned.unwrap_or(self.class)
    }

    pub fn pinned(&self) -> Option<TrafficClass> {
        self.pinned
    }

    /// Pins the class (configuration), or returns it to behaviour (`None`).
    pub fn pin(&mut self, class: Option<TrafficClass>) {
        self.pinned = class;
    }

    /// The application offered `n` bytes at `now`. Returns the class they go in.
    pub fn on_send(&mut self, n: u64, now: Instant) -> TrafficClass {
        if self
            .last_send
            .is_some_and(|t| now.saturating_duration_since(t) >= BURST_IDLE)
        {
            self.new_burst();
        }
        self.last_send = Some(now);
        self.burst += n;
        if self.burst > BULK_BURST {
            self.class = TrafficClass::Bulk;
        }
        self.class()
    }

    /// Bytes the stream may still offer at `now` as interactive bytes of its current
    /// burst (a burst that has been idle for [`BURST_IDLE`] starts afresh): what it may
    /// queue beyond the bound on bytes ahead of the paths that bulk streams share. A
    /// stream pinned interactive or realtime has no such limit; one pinned bulk has none
    /// of this room.
    pub fn interactive_room(&self, now: Instant) -> u64 {
        match self.pinned {
            Some(c) if c.is_urgent() => u64::MAX,
            Some(_) => 0,
            None if self
                .last_send
                .is_some_and(|t| now.saturating_duration_since(t) >= BURST_IDLE) =>
            {
                BULK_BURST
            }
            None if self.class.is_urgent() => BULK_BURST.saturating_sub(self.burst),
            None => 0,
        }
    }

    /// The stream waited for credit until `now` (it was blocked, not idle): an idle spell
    /// counts from here.
    pub fn waited(&mut self, now: Instant) {
        if self.last_send.is_some() {
            self.last_send = Some(now);
        }
    }

    /// The peer sent on the stream at `now`. If this side has nothing queued and is not
    /// waiting for room (`drained`), and has written nothing for [`TURN_GAP`], that is a
    /// request/response turn: a new burst begins.
    pub fn on_peer_data(&mut self, drained: bool, now: Instant) {
        let quiet = self
            .last_send
            .is_none_or(|t| now.saturating_duration_since(t) >= TURN_GAP);
        if drained && quiet {
            self.new_burst();
        }
    }

    fn new_burst(&mut self) {
        self.burst = 0;
        self.class = TrafficClass::Interactive;
    }
}

/// Latency buckets: upper bounds in ms, doubling from 1 ms; the last one is open.
const BUCKETS: usize = 16;

/// How long each class's bytes wait from the application to the peer's acknowledgement:
/// a log-scale histogram per class (1 ms, 2 ms, … 16 s, beyond), for the status output
/// and the metrics.
#[derive(Debug, Clone, Default)]
pub struct ClassLatency {
    counts: [[u64; BUCKETS]; 3],
    sum_us: [u64; 3],
}

/// One class's latency summary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    pub class: TrafficClass,
    pub count: u64,
    pub mean_ms: f64,
    /// Upper bounds of the buckets holding the median and the 99th percentile, ms.
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl ClassLatency {
    /// Bucket upper bounds, ms (the last is infinite).
    pub fn bounds_ms() -> [f64; BUCKETS] {
        let mut b = [0.0; BUCKETS];
        for (i, x) in b.iter_mut().enumerate() {
            *x = if i + 1 == BUCKETS {
                f64::INFINITY
            } else {
                (1u64 << i) as f64
            };
        }
        b
    }

    pub fn record(&mut self, class: TrafficClass, d: Duration) {
        let ms = d.as_secs_f64() * 1000.0;
        let i = Self::bounds_ms().iter().position(|&b| ms <= b).unwrap_or(BUCKETS - 1);
        self.counts[class.index()][i] += 1;
        self.sum_us[class.index()] += d.as_micros() as u64;
    }

    /// Per-bucket counts of a class (bounds from [`ClassLatency::bounds_ms`]).
    pub fn buckets(&self, class: TrafficClass) -> &[u64; BUCKETS] {
        &self.counts[class.index()]
    }

    /// Sum of the recorded latencies of a class, seconds.
    pub fn sum_secs(&self, class: TrafficClass) -> f64 {
        self.sum_us[class.index()] as f64 / 1e6
    }

    /// Summaries of the classes that have samples.
    pub fn summaries(&self) -> Vec<LatencySummary> {
        TrafficClass::ALL
            .iter()
            .filter_map(|&class| {
                let counts = &self.counts[class.index()];
                let count: u64 = counts.iter().sum();
                if count == 0 {
                    return None;
                }
                let at = |q: f64| {
                    let rank = ((count as f64 * q).ceil() as u64).max(1);
                    let mut seen = 0;
                    for (i, &c) in counts.iter().enumerate() {
                        seen += c;
                        if seen >= rank {
                            return Self::bounds_ms()[i];
                        }
                    }
                    f64::INFINITY
                };
                Some(LatencySummary {
                    class,
                    count,
                    mean_ms: self.sum_us[class.index()] as f64 / count as f64 / 1000.0,
                    p50_ms: at(0.5),
                    p99_ms: at(0.99),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_the_rest_of_an_interactive_burst_is_exempt_from_the_bound_ahead() {
        let now = Instant::now();
        let mut c = Classifier::default();
        assert_eq!(c.interactive_room(now), BULK_BURST);
        c.on_send(60 * 1024, now);
        assert_eq!(c.interactive_room(now), 4 * 1024);
        c.on_send(8 * 1024, now);
        assert_eq!(c.interactive_room(now), 0, "bulk now");
        assert_eq!(
            c.interactive_room(now + BURST_IDLE),
            BULK_BURST,
            "after an idle second the next send starts a new burst"
        );
        c.pin(Some(TrafficClass::Interactive));
        assert_eq!(c.interactive_room(now), u64::MAX);
        c.pin(Some(TrafficClass::Bulk));
        assert_eq!(c.interactive_room(now + BURST_IDLE), 0);
    }

    use super::*;

    #[test]
    fn a_stream_is_interactive_until_its_burst_passes_the_bulk_size_and_again_after_a_turn() {
        let now = Instant::now();
        let mut c = Classifier::default();
        assert_eq!(c.on_send(1000, now), TrafficClass::Interactive);
        assert_eq!(c.on_send(BULK_BURST - 1000, now), TrafficClass::Interactive);
        assert_eq!(c.on_send(1, now), TrafficClass::Bulk, "past the burst size");
        c.on_peer_data(false, now + TURN_GAP);
        assert_eq!(c.class(), TrafficClass::Bulk, "the peer spoke while bytes were queued");
        c.on_peer_data(true, now + TURN_GAP / 2);
        assert_eq!(c.class(), TrafficClass::Bulk, "the stream wrote a moment ago: no turn");
        c.on_peer_data(true, now + TURN_GAP);
        assert_eq!(c.class(), TrafficClass::Interactive, "a request/response turn");
        c.on_send(2 * BULK_BURST, now);
        assert_eq!(c.class(), TrafficClass::Bulk);
        assert_eq!(
            c.on_send(100, now + BURST_IDLE),
            TrafficClass::Interactive,
            "after an idle spell a new burst begins"
        );
    }

    #[test]
    fn a_pinned_class_holds_whatever_the_stream_does() {
        let now = Instant::now();
        let mut c = Classifier::default();
        c.pin(Some(TrafficClass::Bulk));
        assert_eq!(c.on_send(10, now), TrafficClass::Bulk);
        c.pin(Some(TrafficClass::Interactive));
        assert_eq!(c.on_send(10 * BULK_BURST, now), TrafficClass::Interactive);
        c.pin(None);
        assert_eq!(c.class(), TrafficClass::Bulk, "behaviour again");
    }

    #[test]
    fn class_names_parse_and_a_bad_one_is_named() {
        for c in TrafficClass::ALL {
            assert_eq!(c.name().parse::<TrafficClass>(), Ok(c));
        }
        let e = "fast".parse::<TrafficClass>().unwrap_err();
        assert!(e.to_string().contains("\"fast\""), "{e}");
    }

    #[test]
    fn latency_percentiles_come_from_the_buckets() {
        let mut l = ClassLatency::default();
        for ms in [3, 3, 3, 3, 3, 3, 3, 3, 3, 300] {
            l.record(TrafficClass::Interactive, Duration::from_millis(ms));
        }
        let s = l.summaries();
        assert_eq!(s.len(), 1, "only classes with samples");
        assert_eq!(s[0].count, 10);
        assert_eq!(s[0].p50_ms, 4.0, "3 ms is in the (2, 4] bucket");
        assert_eq!(s[0].p99_ms, 512.0);
        assert!((s[0].mean_ms - 32.7).abs() < 0.01);
        l.record(TrafficClass::Bulk, Duration::from_secs(100));
        assert_eq!(l.summaries()[1].p50_ms, f64::INFINITY, "beyond the last bound");
    }

    /// The class numbers, pinned, and every accepted name parses to the class that shows
    /// it (the name a configuration's `[[classes]]` rule gives is the class that runs).
    #[test]
    fn class_numbers_are_pinned_and_names_round_trip() {
        let pinned = [("interactive", 0), ("bulk", 1), ("realtime", 2)];
        assert_eq!(pinned.len(), TrafficClass::ALL.len());
        for (name, n) in pinned {
            let c: TrafficClass = name.parse().unwrap();
            assert_eq!((c.id(), c.name()), (n, name));
        }
        assert_eq!(
            "voip".parse::<TrafficClass>().unwrap_err().to_string(),
            "unknown traffic class \"voip\" (expected interactive, bulk or realtime)"
        );
    }
}
