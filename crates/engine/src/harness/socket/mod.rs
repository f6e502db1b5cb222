//! The harness's simulated kernel TCP socket and the link under it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mpflex_wire::record;

use super::path_spec::PathSpec;
use crate::kernel::{TcpInfo, INFINITE_SSTHRESH, INIT_CWND};

/// Segment size of the simulated sockets.
pub const MSS: u32 = 1448;

/// A segment on the link (or its acknowledgement on the way back).
#[derive(Debug)]
struct Segment {
    /// When it reaches the receiver, and when its acknowledgement reaches the sender.
    arrives: Instant,
    acked: Instant,
    sent: Instant,
    /// Its payload, until the receiver takes it.
    bytes: Option<Bytes>,
    len: usize,
    /// The delivery-rate sampling state when it was sent (`tcp_rate_skb_sent`).
    prior_delivered: u64,
    prior_mstamp: Instant,
    first_tx: Instant,
    app_limited: bool,
    /// Sent again (Karn: no RTT sample from it).
    retransmitted: bool,
    /// Reached the link while it was dark: lost, to be retransmitted when it heals.
    dropped: bool,
}

/// A simulated kernel TCP socket and the link under it, one direction of a path.
///
/// The application's bytes form one stream, cut into segments of at most [`MSS`] (the
/// path sockets set `TCP_NODELAY`, so a short tail goes at once); a segment leaves while
/// fewer than `cwnd` segments are unacknowledged, and everything else waits unsent (what
/// `tcpi_notsent_bytes` counts). The link serialises segments at its rate, delivers them
/// after its delay (the receiver reassembles the records), and each acknowledgement comes
/// back after the same delay: an RTT sample includes the wait in the bottleneck queue, as
/// the kernel's does. The delivery rate is sampled as Linux's `tcp_rate.c` does, and the
/// application-limited mark is set on a write that finds the socket with less than a
/// segment unsent and window room (`tcp_rate_check_app_limited`).
#[derive(Debug)]
pub struct SimSocket {
    spec: PathSpec,
    pub(super) cwnd: u32,
    /// The congestion control's state (with `spec.buffer`): slow-start threshold,
    /// acknowledgements counted toward the next segment of growth, when a drop will have
    /// been detected, and until when the window is in recovery (no growth, no second cut).
    ssthresh: u32,
    cwnd_cnt: u32,
    drop_detected: Option<Instant>,
    recovery_until: Option<Instant>,
    /// When the pacer lets the next segment go (with `spec.pacing`).
    pace_next: Instant,
    /// Segments the bottleneck buffer dropped.
    pub drops: u32,
    /// Written by the application, not yet sent.
    unsent: BytesMut,
    /// Sent and not yet acknowledged.
    flight: VecDeque<Segment>,
    /// The receiver's reassembly buffer: stream bytes that do not complete a record yet.
    pub(super) rx: BytesMut,
    /// Whole records delivered to the receiver, waiting for the harness to pick up.
    pub(super) arrived: VecDeque<Vec<u8>>,
    busy_until: Instant,
    srtt: Duration,
    rttvar: Duration,
    min_rtt: Duration,
    /// Delivery-rate state (`tcp_sock`'s `delivered`, `delivered_mstamp`,
    /// `first_tx_mstamp`, `app_limited`, and the retained sample).
    delivered: u64,
    delivered_mstamp: Instant,
    first_tx_mstamp: Instant,
    app_limited_until: u64,
    rate_delivered: u64,
    rate_interval: Duration,
    rate_app_limited: bool,
    last_send: Instant,
    /// When an ACK last reached the sender (duplicates included: `tcpi_last_ack_recv`).
    last_ack: Instant,
    /// Data segments sent, retransmissions included, and retransmissions
    /// (`tcpi_data_segs_out`, `tcpi_total_retrans`).
    segs_out: u32,
    total_retrans: u32,
    /// The loss generator's state (xorshift64).
    rng: u64,
    /// Delivers nothing and acknowledges nothing (a link gone dark or dead).
    pub dark: bool,
    /// BBR's minimum-RTT probe (PROBE_RTT): the window held at four segments while the
    /// pacing rate stays what the path's window sets it to.
    pub probing_rtt: bool,
    /// Reports a congestion control's bandwidth estimate, as BBR's `tcp_bbr_info` does.
    pub bbr: bool,
    /// The most bytes ever unsent in the socket (for late-binding tests).
    pub max_notsent: usize,
    /// The longest a segment waited in the bottleneck queue (its RTT beyond the path's
    /// two delays and its own serialisation), for queue-control tests.
    pub max_queue_delay: Duration,
    /// The sum and count of the segments' bottleneck waits, for their mean.
    pub queue_delay_sum: Duration,
    pub queue_delay_samples: u32,
}

impl SimSocket {
    pub fn new(spec: PathSpec, now: Instant) -> Self {
        let rtt = 2 * spec.delay;
        let bdp = (spec.rate as u128 * rtt.as_micros() / 1000) as u32 / MSS;
        SimSocket {
            spec,
            cwnd: if spec.buffer.is_some() {
                INIT_CWND
            } else {
                spec.cwnd.unwrap_or(bdp + 10).max(1)
            },
            ssthresh: INFINITE_SSTHRESH,
            cwnd_cnt: 0,
            drop_detected: None,
            recovery_until: None,
            pace_next: now,
            drops: 0,
            unsent: BytesMut::new(),
            flight: VecDeque::new(),
            rx: BytesMut::new(),
            arrived: VecDeque::new(),
            busy_until: now,
            // The handshake's RTT sample, as the kernel has it.
            srtt: rtt,
            rttvar: rtt / 2,
            min_rtt: rtt,
            delivered: 0,
            delivered_mstamp: now,
            first_tx_mstamp: now,
            app_limited_until: 0,
            rate_delivered: 0,
            rate_interval: Duration::ZERO,
            rate_app_limited: false,
            last_send: now,
            last_ack: now,
            segs_out: 0,
            total_retrans: 0,
            rng: (spec.delay.as_nanos() as u64 ^ (spec.rate as u64).rotate_left(32)) | 1,
            dark: false,
            probing_rtt: false,
            bbr: false,
            max_notsent: 0,
            max_queue_delay: Duration::ZERO,
            queue_delay_sum: Duration::ZERO,
            queue_delay_samples: 0,
        }
    }

    /// The window segments leave under: four while probing the minimum RTT.
    fn window(&self) -> u32 {
        if self.probing_rtt {
            self.cwnd.min(4)
        } else {
            self.cwnd
        }
    }

    /// The congestion control's bandwidth estimate, bytes per second (BBR's: the link's
    /// rate; a window-based one keeps none).
    pub fn cc_bandwidth(&self) -> Option<u64> {
        self.bbr.then_some(self.spec.rate as u64 * 1000)
    }

    /// Bytes in flight (sent, not acknowledged).
    fn in_flight_bytes(&self) -> u64 {
        self.flight.iter().map(|s| s.len as u64).sum()
    }

    /// The application writes `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        if self.spec.ideal {
            return self.write_ideal(bytes);
        }
        // tcp_rate_check_app_limited, at the start of tcp_sendmsg: less than a segment
        // unsent and room in the window: the samples of what is in flight now are
        // application-limited.
        if self.unsent.len() < MSS as usize && (self.flight.len() as u32) < self.window() {
            self.app_limited_until = (self.delivered + self.in_flight_bytes()).max(1);
        }
        self.unsent.extend_from_slice(bytes);
        self.max_notsent = self.max_notsent.max(self.unsent.len());
    }

    /// The fluid model: the record goes straight onto the link.
    fn write_ideal(&mut self, bytes: &[u8]) {
        let now = self.last_send;
        let start = self.busy_until.max(now);
        self.busy_until = start + Duration::from_nanos(bytes.len() as u64 * 1_000_000 / self.spec.rate.max(1) as u64);
        let arrives = self.busy_until + self.spec.delay;
        self.flight.push_back(Segment {
            arrives,
            acked: arrives + self.spec.delay,
            sent: now,
            bytes: Some(Bytes::copy_from_slice(bytes)),
            len: bytes.len(),
            prior_delivered: 0,
            prior_mstamp: now,
            first_tx: now,
            app_limited: false,
            retransmitted: false,
            dropped: false,
        });
    }

    /// The retained delivery-rate sample becomes an application-limited one of `rate`
    /// bytes per second, as a real kernel's sometimes does (a fresh connection's first
    /// exchanges, or acknowledgements that arrive together, give samples far above the
    /// link's rate). Only a faster application-limited sample, or one that is not
    /// application-limited, replaces it.
    pub fn spurious_rate_sample(&mut self, rate: u64) {
        let interval = self.min_rtt.max(Duration::from_millis(1));
        self.rate_delivered = (rate as u128 * interval.as_nanos() / 1_000_000_000) as u64;
        self.rate_interval = interval;
        self.rate_app_limited = true;
    }

    /// The link changes for segments sent from now on; the window stays.
    pub fn set_spec(&mut self, spec: PathSpec) {
        self.spec = spec;
    }

    /// Whether the next segment is lost.
    fn draw_loss(&mut self) -> bool {
        if self.spec.loss <= 0.0 {
            return false;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let draw = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        draw < self.spec.loss
    }

    /// The link works again at `now`. The segments it dropped while dark are sent again
    /// `after` from now (the connection's backed-off retransmission timer), in order.
    pub fn heal(&mut self, now: Instant, after: Duration) {
        self.dark = false;
        let delay = self.spec.delay;
        let resent = now + after + delay;
        for s in self.flight.iter_mut() {
            if s.dropped || s.bytes.is_some() {
                // Not delivered: sent into the dark link or caught on it.
                s.dropped = false;
                s.retransmitted = true;
                s.arrives = resent;
                s.acked = resent + delay;
                self.total_retrans += 1;
                self.segs_out += 1;
            } else if s.acked <= now {
                // Delivered, but its ACK was lost in the dark: the retransmissions'
                // cumulative ACK covers it.
                s.acked = resent + delay;
            }
            // Segments sent from now on arrive and are acknowledged selectively (a
            // duplicate ACK: the link works), but wait for these at the receiver.
        }
    }

    /// Advances to `now`: acknowledgements come back, segments go out as the window
    /// allows, and what reached the receiver is reassembled into records.
    pub fn advance(&mut self, now: Instant) {
        if self.spec.ideal {
            self.last_send = now;
        }
        self.take_acks(now);
        self.cut_window_on_drop(now);
        self.send_segments(now);
        self.deliver_in_order(now);
        self.lift_records();
    }

    /// Every segment that reached the receiver sends an ACK back (a duplicate, while one
    /// before it is missing); the acknowledged front of the flight leaves it. A dark link
    /// brings no ACK back.
    fn take_acks(&mut self, now: Instant) {
        if self.dark {
            return;
        }
        for s in self.flight.iter().filter(|s| s.acked <= now && !s.dropped) {
            self.last_ack = self.last_ack.max(s.acked);
        }
        while self.flight.front().is_some_and(|s| s.acked <= now && !s.dropped) {
            let s = self.flight.pop_front().expect("front");
            if !self.spec.ideal {
                self.ack(s, now);
            }
        }
    }

    /// The duplicate ACKs of the segments behind a drop are back: the window is cut once
    /// (CUBIC's β), and holds through the recovery's round trip.
    fn cut_window_on_drop(&mut self, now: Instant) {
        if self.drop_detected.is_some_and(|t| t <= now) {
            self.drop_detected = None;
            self.ssthresh = (self.cwnd * 7 / 10).max(2);
            self.cwnd = self.ssthresh;
            self.cwnd_cnt = 0;
            self.recovery_until = Some(now + self.srtt);
        }
    }

    /// Sends segments of the unsent bytes while the window (and the pacer) allows.
    fn send_segments(&mut self, now: Instant) {
        while (self.flight.len() as u32) < self.window() && !self.unsent.is_empty() {
            let len = self.unsent.len().min(MSS as usize);
            if self.spec.pacing && self.spec.buffer.is_some() {
                // The pacer's credit is a tick at most: time it was not used is lost.
                let start = self.pace_next.max(now - Duration::from_millis(1));
                if start > now {
                    break;
                }
                self.pace_next = start + Duration::from_secs_f64(len as f64 / self.pacing_rate() as f64);
            }
            let bytes = self.unsent.split_to(len).freeze();
            if self.flight.is_empty() {
                if self.spec.buffer.is_some() {
                    self.restart_after_idle(now);
                }
                // A new flight: the sampling interval starts now (tcp_rate_skb_sent).
                self.first_tx_mstamp = now;
                self.delivered_mstamp = now;
            }
            let (arrives, resent) = self.cross_link(now, len);
            self.last_send = now;
            self.flight.push_back(Segment {
                arrives,
                acked: arrives + self.spec.delay,
                sent: now,
                bytes: Some(bytes),
                len,
                prior_delivered: self.delivered,
                prior_mstamp: self.delivered_mstamp,
                first_tx: self.first_tx_mstamp,
                app_limited: self.app_limited_until != 0,
                retransmitted: resent,
                dropped: false,
            });
        }
    }

    /// A segment of `len` bytes sent at `now` meets the bottleneck: when it arrives, and
    /// whether it had to be retransmitted on the way (dropped at a full buffer, or lost).
    fn cross_link(&mut self, now: Instant, len: usize) -> (Instant, bool) {
        let own = Duration::from_nanos(len as u64 * 1_000_000 / self.spec.rate.max(1) as u64);
        let waiting = self.busy_until.saturating_duration_since(now);
        if self.spec.buffer.is_some_and(|b| waiting + own > b) {
            // The buffer is full: dropped, resent once the ACKs of the segments behind
            // it show the gap (a round trip), when it meets the queue again.
            self.drops += 1;
            self.total_retrans += 1;
            self.segs_out += 2;
            let detected = now + 2 * self.spec.delay + waiting;
            if self.drop_detected.is_none() && self.recovery_until.is_none_or(|t| detected >= t) {
                self.drop_detected = Some(detected);
                self.recovery_until = Some(detected + self.srtt);
            }
            return (detected + waiting + own + self.spec.delay, true);
        }
        let start = self.busy_until.max(now);
        self.busy_until = start + own;
        let mut arrives = self.busy_until + self.spec.delay;
        self.segs_out += 1;
        let lost = self.draw_loss();
        if lost {
            // Retransmitted once the ACKs of the segments behind it are back: an RTT.
            arrives += 2 * self.spec.delay + Duration::from_millis(1);
            self.total_retrans += 1;
            self.segs_out += 1;
        }
        (arrives, lost)
    }

    /// In order: a segment still on its way holds those behind it back (TCP's receive
    /// queue), though they arrived. A dark link drops what reaches it.
    fn deliver_in_order(&mut self, now: Instant) {
        for s in &mut self.flight {
            if s.arrives > now || s.dropped {
                break;
            }
            if self.dark {
                s.dropped = true;
                break;
            }
            if let Some(b) = s.bytes.take() {
                self.rx.extend_from_slice(&b);
            }
        }
        if self.dark {
            for s in self.flight.iter_mut().filter(|s| s.arrives <= now) {
                s.dropped = true;
            }
        }
    }

    /// Whole records go up.
    fn lift_records(&mut self) {
        while self.rx.len() >= record::LEN_PREFIX {
            let len = u16::from_be_bytes([self.rx[0], self.rx[1]]) as usize;
            if self.rx.len() < record::LEN_PREFIX + len {
                break;
            }
            self.arrived
                .push_back(self.rx.split_to(record::LEN_PREFIX + len).to_vec());
        }
    }

    /// The mean wait of the segments acknowledged since the maxima were last reset.
    pub fn mean_queue_delay(&self) -> Duration {
        self.queue_delay_sum / self.queue_delay_samples.max(1)
    }

    /// An acknowledgement: the RTT estimator and a delivery-rate sample (`tcp_rate_gen`).
    fn ack(&mut self, s: Segment, now: Instant) {
        self.delivered += s.len as u64;
        self.delivered_mstamp = now;
        // The segment's own ACK (a SACK, when it waited behind a lost one) is its RTT
        // sample; a retransmitted segment gives none (Karn).
        let rtt = s.acked.min(now) - s.sent;
        let own = Duration::from_nanos(s.len as u64 * 1_000_000 / self.spec.rate.max(1) as u64);
        if !s.retransmitted {
            // A resent segment's time includes the wait for its loss to be seen, not a
            // queue.
            let waited = rtt.saturating_sub(2 * self.spec.delay + own);
            self.max_queue_delay = self.max_queue_delay.max(waited);
            self.queue_delay_sum += waited;
            self.queue_delay_samples += 1;
            self.rttvar = (3 * self.rttvar + self.srtt.abs_diff(rtt)) / 4;
            self.srtt = (7 * self.srtt + rtt) / 8;
            self.min_rtt = self.min_rtt.min(rtt);
        }
        if self.spec.buffer.is_some() {
            self.grow(now);
        }
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let send_elapsed = s.sent - s.first_tx;
        let ack_elapsed = now - s.prior_mstamp;
        self.first_tx_mstamp = s.sent;
        let interval = send_elapsed.max(ack_elapsed);
        let delivered = self.delivered - s.prior_delivered;
        // An interval shorter than the minimum RTT is an artefact (ACK compression).
        if interval < self.min_rtt {
            return;
        }
        // An application-limited sample replaces the retained one only if it is faster.
        let faster =
            delivered as u128 * self.rate_interval.as_nanos() >= self.rate_delivered as u128 * interval.as_nanos();
        if !s.app_limited || faster {
            self.rate_delivered = delivered;
            self.rate_interval = interval;
            self.rate_app_limited = s.app_limited;
        }
    }

    /// The window's growth on an acknowledgement (with `spec.buffer`): none in recovery;
    /// in slow start a segment per acknowledged segment while the sender used more than
    /// half the window (`tcp_is_cwnd_limited`); after it a segment per window's worth of
    /// acknowledgements while the sender filled the window.
    fn grow(&mut self, now: Instant) {
        if self.recovery_until.is_some_and(|t| now < t) || self.drop_detected.is_some() {
            return;
        }
        let out = self.flight.len() as u32 + 1;
        if self.cwnd < self.ssthresh {
            if 2 * out > self.cwnd {
                self.cwnd += 1;
            }
        } else if out + 1 >= self.cwnd {
            self.cwnd_cnt += 1;
            if self.cwnd_cnt >= self.cwnd {
                self.cwnd += 1;
                self.cwnd_cnt = 0;
            }
        }
    }

    /// The window after an idle spell (RFC 2861; Linux's `tcp_cwnd_restart`): sending
    /// with nothing in flight more than an RTO after the last send, the threshold keeps
    /// three quarters of the window at least, and the window halves per RTO of idleness,
    /// down to the initial window.
    fn restart_after_idle(&mut self, now: Instant) {
        let rto = self.rto();
        let idle = now.saturating_duration_since(self.last_send);
        if idle <= rto || self.segs_out == 0 {
            return;
        }
        if self.recovery_until.is_none_or(|t| now >= t) {
            self.ssthresh = self.ssthresh.max(self.cwnd / 2 + self.cwnd / 4);
        }
        let restart = INIT_CWND.min(self.cwnd);
        let mut cwnd = self.cwnd;
        let mut left = idle.saturating_sub(rto);
        while !left.is_zero() && cwnd > restart {
            cwnd /= 2;
            left = left.saturating_sub(rto);
        }
        self.cwnd = cwnd.max(restart);
        self.cwnd_cnt = 0;
    }

    /// The kernel's pacing rate, bytes per second (`tcp_update_pacing_rate`): the window
    /// (or what is in flight, if more) per smoothed RTT, doubled while the window is
    /// under half the threshold (in the congestion-control model's slow start), else × 1.2
    /// (a fixed window is a settled one).
    fn pacing_rate(&self) -> u64 {
        let segs = self.cwnd.max(self.flight.len() as u32) as f64;
        let slow_start = self.spec.buffer.is_some() && self.cwnd < self.ssthresh / 2;
        let ratio = if slow_start { 2.0 } else { 1.2 };
        (ratio * segs * MSS as f64 / self.srtt.as_secs_f64().max(1e-4)) as u64
    }

    /// `__tcp_set_rto`: smoothed RTT + max(4 × its variation, `tcp_rto_min`).
    fn rto(&self) -> Duration {
        self.srtt + (4 * self.rttvar).max(Duration::from_millis(200))
    }

    /// What the kernel would report in `TCP_INFO` at `now`.
    pub fn info(&self, now: Instant) -> TcpInfo {
        if self.spec.ideal {
            return self.info_ideal(now);
        }
        let delivery_rate = if self.rate_interval.is_zero() {
            0
        } else {
            (self.rate_delivered as u128 * 1_000_000_000 / self.rate_interval.as_nanos()) as u64
        };
        TcpInfo {
            state: 1,
            snd_mss: MSS,
            snd_cwnd: self.window(),
            snd_ssthresh: self.ssthresh,
            unacked: self.flight.len() as u32,
            bytes_sent: self.delivered + self.in_flight_bytes(),
            bytes_acked: self.delivered,
            notsent_bytes: self.unsent.len() as u32,
            rtt: self.srtt.as_micros() as u32,
            rttvar: self.rttvar.as_micros() as u32,
            min_rtt: self.min_rtt.as_micros() as u32,
            rto: self.rto().as_micros() as u32,
            delivery_rate,
            flags: self.rate_app_limited as u8,
            pacing_rate: self.pacing_rate(),
            last_data_sent: (now - self.last_send).as_millis() as u32,
            last_ack_recv: (now.saturating_duration_since(self.last_ack)).as_millis() as u32,
            data_segs_out: self.segs_out,
            total_retrans: self.total_retrans,
            ..TcpInfo::default()
        }
    }

    /// The fluid model's statistics: the path takes bytes while its link has less than
    /// 2 ms of them to serialise.
    fn info_ideal(&self, now: Instant) -> TcpInfo {
        let backlogged = self.busy_until > now + Duration::from_millis(2);
        let rtt = 2 * self.spec.delay;
        let rate = self.spec.rate as u64 * 1000;
        // A backlogged link shows the writer its low-water mark (10 ms of the rate, as
        // `PathWriter` sets it) unsent, so it waits; an idle one nothing.
        let lowat = (rate / 100).clamp(crate::MIN_LOWAT as u64, crate::NOTSENT_LOWAT as u64) as u32;
        TcpInfo {
            state: 1,
            snd_mss: MSS,
            snd_cwnd: 100,
            snd_ssthresh: INFINITE_SSTHRESH,
            notsent_bytes: if backlogged { lowat } else { 0 },
            rtt: rtt.as_micros() as u32,
            rttvar: (self.spec.delay / 2).as_micros() as u32,
            min_rtt: u32::MAX,
            rto: (rtt + Duration::from_millis(200)).as_micros() as u32,
            delivery_rate: rate,
            ..TcpInfo::default()
        }
    }

    pub(super) fn take_arrived(&mut self) -> Option<Vec<u8>> {
        self.arrived.pop_front()
    }
}

#[cfg(test)]
mod tests;
