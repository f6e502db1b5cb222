//! Late binding: how many bytes a path's socket may take now.
//!
//! A byte handed to a kernel socket is bound to that path; the scheduler can no longer
//! move it. So each path's writer hands over only what keeps its link busy until the next
//! wake-up — about 10 ms of the path's delivery rate unsent in the kernel, enforced with
//! `TCP_NOTSENT_LOWAT` — and the scheduler decides, message by message, at the moment a
//! path can actually send (MPFlex's user-level scheduling; the same short queue keeps
//! on-device buffers from bloating, as QCUT argues). Until the kernel has a rate estimate,
//! a quarter of the congestion window stands in for it.
//!
//! This module is the policy only; the driver reads `TCP_INFO`, applies the low-water
//! mark, and moves the bytes [`crate::Session::drive_writer`] wrote.

use std::time::{Duration, Instant};

use mpflex_sched::PathSnapshot;

use crate::kernel::{RateEstimate, TcpInfo};

/// `tcpi_state` values (linux/tcp_states.h) in which a socket can still send.
const TCP_ESTABLISHED: u8 = 1;
const TCP_CLOSE_WAIT: u8 = 8;

/// The low-water mark a path starts with, before the kernel has estimates.
pub const INITIAL_LOWAT: u32 = 32 * 1024;
/// The smallest low-water mark: below it a writer wakes up for every few segments.
pub const MIN_LOWAT: u32 = 8 * 1024;

/// What a path's socket may take now (see [`PathWriter::budget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes of anything: control, copies owed, interactive frames.
    pub total: usize,
    /// Bytes of bulk frames: `total`, or less under queue control (then frames are cut to
    /// fit, so the path's queue stays at its target however large a frame is).
    pub bulk: usize,
    /// Queue control holds bulk bytes back (`bulk` is 0): when to look again if nothing
    /// else is sent.
    pub retry: Option<Duration>,
}

impl Budget {
    /// Whether queue control set the bulk budget below the socket's.
    pub fn bulk_limited(&self) -> bool {
        self.bulk < self.total
    }
}

/// The standing queue queue control steers to, as a fraction of its target (see
/// [`PathWriter::steer`]).
pub const STEER_AIM: f64 = 1.0;

/// The least queue control's steering scales its byte limit to. The steering's signal
/// (one-way delays of whole records) also carries the records' serialisation and the
/// emulated links' batching, 10-15 ms on 2 Mbit/s links; a lower floor let it read that
/// as queue and starve a path to half its rate. The delivery-rate estimate it scales errs
/// high (see [`PathWriter::steer`]), so 0.75 of it still keeps the link busy.
pub const MIN_GAIN: f64 = 0.75;

/// The smallest bulk budget worth a write under queue control: two segments. Less is
/// treated as none (the queue is at its target) rather than sent as a sliver: each record
/// costs its header, tag and frame header (~40 bytes, 2 % of a 2 KB record).
const MIN_BULK: u64 = 1448;

/// What a path's writer does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterStep {
    /// The connection was reset or closed under us (its TCP state): end the path. Such a
    /// socket polls writable while its unsent count stays frozen, so a writer that waited
    /// on it would spin.
    Closed { state: u8 },
    /// The kernel holds at least the low-water mark unsent: wait until it drains below.
    Full,
    /// Nothing to send: wait for a wake-up, or until `until`.
    Idle { until: Option<std::time::Instant> },
    /// The path's bottleneck queue is at its target (queue control) and nothing else was
    /// to be sent: look again after `retry` (when about a tenth of the queue has drained)
    /// or at a wake-up, whichever comes first.
    Throttled { retry: Duration },
    /// Records were written: seal and write them — after resetting the path's slow-start
    /// threshold if `reset_ssthresh` (see [`PathWriter`]).
    Write { reset_ssthresh: bool },
}

/// One path writer's late-binding state.
///
/// It also decides when an idle path's slow-start threshold goes back to a new
/// connection's. A persistent path keeps whatever threshold its last window reduction
/// left, while the kernel restarts its *window* after every idle spell longer than an RTO
/// (RFC 2861). A keepalive lost while the path idles times out and sets the threshold to
/// 0.7 × a restarted window of 10 segments; every later burst then leaves slow start at 7
/// segments and the path stays slow transfer after transfer. A threshold below the initial
/// window comes from a loss at a window no larger than a restart's: it says nothing of the
/// path's capacity. So when a write finds the kernel about to restart the window
/// ([`TcpInfo::ssthresh_reset_due`]) with such a threshold, the driver resets it. A
/// threshold from a congestion event of a real burst stays: it is RFC 2861's memory of the
/// path, and dropping it makes the next burst overshoot the bottleneck buffer again.
#[derive(Debug)]
pub struct PathWriter {
    lowat: u32,
    lowat_max: u32,
    /// Whether the kernel restarts this connection's window after idle spells.
    idle_restart: bool,
    /// Whether idle restarts reset a low slow-start threshold.
    ssthresh_reset: bool,
    rate: RateEstimate,
    /// The delivery-rate estimate of the last sample, bytes per second.
    delivery_rate: u64,
    /// Queue control's delay target; zero: off.
    queue_target: Duration,
    /// Queue control's correction of its byte limit, steered by the measured queue (see
    /// [`PathWriter::steer`]).
    gain: f64,
    steered: Option<Instant>,
    /// The limit held bulk bytes back since the last steering step.
    limited: bool,
    /// Threshold resets asked for.
    pub resets: u64,
}

impl PathWriter {
    /// A writer whose low-water mark never exceeds `lowat_max`. `idle_restart`: the kernel
    /// restarts this connection's window after idle spells (not so for BBR, or with
    /// `tcp_slow_start_after_idle` off); `fresh_ssthresh`: reset low thresholds then.
    pub fn new(lowat_max: u32, idle_restart: bool, fresh_ssthresh: bool) -> Self {
        PathWriter {
            lowat: INITIAL_LOWAT,
            lowat_max: lowat_max.max(MIN_LOWAT),
            idle_restart,
            ssthresh_reset: fresh_ssthresh && idle_restart,
            rate: RateEstimate::default(),
            delivery_rate: 0,
            queue_target: Duration::ZERO,
            gain: 1.0,
            steered: None,
            limited: false,
            resets: 0,
        }
    }

    /// Keeps the bytes queued at the path's bottleneck at about `target` of its rate
    /// (QCUT-D's rule, Pan et al., applied to every path in user space): the writer hands
    /// bytes over only while what the path holds — in flight and unsent — stays within
    /// rate × (min RTT + target). A fixed byte threshold fails because the right value
    /// changes with the link; a delay target follows it. Zero turns it off.
    pub fn with_queue_target(mut self, target: Duration) -> Self {
        self.queue_target = target;
        self
    }

    /// What the path may hold (in flight and unsent) under queue control, bytes: `None`
    /// while it is off or the rate or the minimum RTT is not known yet.
    fn queue_limit(&self, info: &TcpInfo) -> Option<u64> {
        if self.queue_target.is_zero() || self.delivery_rate == 0 || info.min_rtt == 0 || info.min_rtt == u32::MAX {
            return None;
        }
        let horizon = Duration::from_micros(info.min_rtt as u64) + self.queue_target;
        // Never below a few segments: a path must always be able to carry something.
        let floor = 4 * info.snd_mss.max(1) as u64;
        Some(((self.delivery_rate as f64 * horizon.as_secs_f64() * self.gain) as u64).max(floor))
    }

    /// Steers queue control's byte limit by the queue the path's frames actually meet
    /// (`queue`, the standing queue from the peer's arrival reports), at most once per min
    /// RTT (10 ms at least). The limit starts from the delivery rate, but under queue
    /// control the path is application-limited by design, and the kernel's
    /// application-limited samples only ever raise the estimate: measured on emulated
    /// 2 Mbit/s links it settles 30–70 % above the link's rate, and the queue at ~50 ms
    /// instead of 20. So the limit is scaled down while the standing queue is above
    /// [`STEER_AIM`] of the target (by up to 10 % per step, in proportion to the excess;
    /// a quarter overshot into starving the link under BBR's probing), and up by 5 % per step while it is below half of that and the limit held
    /// bytes back (a rate estimate too low would starve the link). The aim is below the
    /// target because a frame meets the standing queue plus the bursts above it: the
    /// target bounds what an interactive frame waits, not the queue's minimum. The scale
    /// stays within 0.25 to 2.
    pub fn steer(&mut self, queue: Option<Duration>, min_rtt: Duration, now: Instant) {
        let Some(queue) = queue else { return };
        if self.queue_target.is_zero() {
            return;
        }
        let every = min_rtt.max(Duration::from_millis(10));
        if self.steered.is_some_and(|t| now.saturating_duration_since(t) < every) {
            return;
        }
        self.steered = Some(now);
        tracing::debug!(
            gain = self.gain,
            queue_ms = queue.as_secs_f64() * 1e3,
            rate = self.delivery_rate,
            min_rtt_ms = min_rtt.as_secs_f64() * 1e3,
            "steer"
        );
        let aim = self.queue_target.as_secs_f64() * STEER_AIM;
        let q = queue.as_secs_f64();
        if q > aim {
            let over = ((q - aim) / aim).min(1.0);
            self.gain *= 1.0 - 0.25 * over;
        } else if q < aim / 2.0 && std::mem::take(&mut self.limited) {
            self.gain *= 1.05;
        }
        self.gain = self.gain.clamp(MIN_GAIN, 2.0);
    }

    /// Queue control's current scale of its byte limit (1: the rate estimate's).
    pub fn gain(&self) -> f64 {
        self.gain
    }

    /// The low-water mark the socket should have (`TCP_NOTSENT_LOWAT`).
    pub fn lowat(&self) -> u32 {
        self.lowat
    }

    /// The threshold reset cannot be done on this path (the driver could not switch its
    /// congestion control): off for good.
    pub fn disable_ssthresh_reset(&mut self) {
        self.ssthresh_reset = false;
    }

    /// Takes a `TCP_INFO` sample (and the congestion control's bandwidth estimate, if it
    /// keeps one): updates the rate estimate and the low-water mark, and returns the
    /// path's statistics for the schedulers.
    pub fn observe(&mut self, path: usize, info: &TcpInfo, bandwidth: Option<u64>) -> PathSnapshot {
        let delivery_rate = self.rate.update(info);
        self.delivery_rate = delivery_rate;
        let by_rate = delivery_rate / 100;
        let by_cwnd = info.snd_cwnd as u64 * info.snd_mss as u64 / 4;
        let want = if by_rate > 0 { by_rate } else { by_cwnd };
        let want = want.clamp(MIN_LOWAT as u64, self.lowat_max as u64) as u32;
        // Small changes are not worth a system call.
        if want.abs_diff(self.lowat) > self.lowat / 4 {
            self.lowat = want;
        }
        PathSnapshot {
            bandwidth: bandwidth.unwrap_or(0),
            delivery_rate,
            ..info.snapshot(path, self.idle_restart)
        }
    }

    /// What to do with the socket as `info` shows it: `Err(step)` if it cannot take bytes
    /// now, else how many bytes to hand over — up to the low-water mark plus at most one
    /// frame (`max_frame`), and under queue control (while `engaged`: see
    /// [`crate::Session::queue_control_engaged`]) no more bulk bytes than the path may
    /// still hold. Every byte beyond the mark is bound to this path early, and at a chunk's
    /// end that decides which path finishes last. Interactive frames are not held back by
    /// queue control (QCUT's priority band): they are few, and they are what the target
    /// protects.
    pub fn budget(&mut self, info: &TcpInfo, max_frame: usize, engaged: bool) -> Result<Budget, WriterStep> {
        if info.state != TCP_ESTABLISHED && info.state != TCP_CLOSE_WAIT {
            return Err(WriterStep::Closed { state: info.state });
        }
        if info.notsent_bytes >= self.lowat {
            return Err(WriterStep::Full);
        }
        let total = (self.lowat - info.notsent_bytes) as usize + max_frame;
        let Some(limit) = self.queue_limit(info).filter(|_| engaged) else {
            return Ok(Budget {
                total,
                bulk: total,
                retry: None,
            });
        };
        let held = info.in_flight_bytes() + info.notsent_bytes as u64;
        let room = limit.saturating_sub(held);
        if room < MIN_BULK {
            self.limited = true;
            // Look again once about a tenth of the limit has drained (1 to 10 ms).
            let drain = Duration::from_secs_f64(limit as f64 / 10.0 / self.delivery_rate as f64);
            let retry = drain.clamp(Duration::from_millis(1), Duration::from_millis(10));
            return Ok(Budget {
                total,
                bulk: 0,
                retry: Some(retry),
            });
        }
        Ok(Budget {
            total,
            bulk: total.min(room as usize),
            retry: None,
        })
    }

    /// Whether the write about to happen should first reset the slow-start threshold.
    pub fn reset_ssthresh_before_write(&mut self, info: &TcpInfo) -> bool {
        let due = self.ssthresh_reset && info.ssthresh_reset_due();
        self.resets += due as u64;
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(notsent: u32, rate: u64) -> TcpInfo {
        TcpInfo {
            state: TCP_ESTABLISHED,
            snd_cwnd: 40,
            snd_mss: 1448,
            notsent_bytes: notsent,
            delivery_rate: rate,
            snd_ssthresh: crate::kernel::INFINITE_SSTHRESH,
            ..TcpInfo::default()
        }
    }

    #[test]
    fn late_binding_keeps_ten_ms_of_the_rate_unsent() {
        let mut w = PathWriter::new(1 << 20, true, true);
        assert_eq!(w.lowat(), INITIAL_LOWAT);
        w.observe(0, &info(0, 5_000_000), None);
        assert_eq!(w.lowat(), 50_000, "10 ms of 5 MB/s");
        w.observe(0, &info(0, 5_500_000), None);
        assert_eq!(w.lowat(), 50_000, "a change under a quarter is not applied");
        w.observe(0, &info(0, 500_000), None);
        assert_eq!(w.lowat(), MIN_LOWAT, "never below the minimum");
        w.observe(0, &info(0, 1_000_000_000), None);
        assert_eq!(w.lowat(), 1 << 20, "never above the configured maximum");
    }

    #[test]
    fn late_binding_uses_a_quarter_window_before_a_rate_is_known() {
        let mut w = PathWriter::new(1 << 20, true, true);
        w.observe(0, &info(0, 0), None);
        assert_eq!(w.lowat(), 40 * 1448 / 4);
    }

    #[test]
    fn notsent_at_the_mark_waits_and_below_it_fills_to_the_mark_plus_a_frame() {
        let mut w = PathWriter::new(1 << 20, true, true);
        assert_eq!(w.budget(&info(INITIAL_LOWAT, 0), 16_448, true), Err(WriterStep::Full));
        let b = w.budget(&info(INITIAL_LOWAT - 1000, 0), 16_448, true).unwrap();
        assert_eq!((b.total, b.bulk, b.retry), (1000 + 16_448, 1000 + 16_448, None));
    }

    #[test]
    fn late_binding_ends_a_path_whose_connection_is_gone() {
        let mut w = PathWriter::new(1 << 20, true, true);
        let mut i = info(0, 0);
        i.state = 7; // TCP_CLOSE
        assert_eq!(w.budget(&i, 100, true), Err(WriterStep::Closed { state: 7 }));
        i.state = TCP_CLOSE_WAIT;
        assert!(
            w.budget(&i, 100, true).is_ok(),
            "the peer half-closed: we may still send"
        );
    }

    #[test]
    fn queue_control_keeps_what_a_path_holds_within_its_rate_times_min_rtt_plus_target() {
        let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
        let mut i = info(0, 1_000_000);
        i.min_rtt = 50_000;
        w.observe(0, &i, None);
        // 1 MB/s × (50 + 20) ms = 70,000 bytes.
        i.unacked = 40; // 57,920 bytes in flight
        let b = w.budget(&i, 16_448, true).unwrap();
        assert_eq!(b.bulk, 70_000 - 57_920);
        assert!(
            b.bulk_limited() && b.total > b.bulk,
            "interactive frames are not held back"
        );
        i.unacked = 48; // 69,504: less than a segment of room
        let b = w.budget(&i, 16_448, true).unwrap();
        assert_eq!((b.bulk, b.retry), (0, Some(Duration::from_millis(7))));
        assert_eq!(b.total, 10_000 + 16_448, "the socket still takes interactive frames");
        let mut off = PathWriter::new(1 << 20, true, true);
        assert!(
            !off.budget(&i, 16_448, true).unwrap().bulk_limited(),
            "off unless configured"
        );
        i.min_rtt = u32::MAX;
        assert!(
            !w.budget(&i, 16_448, true).unwrap().bulk_limited(),
            "no minimum RTT yet: no limit"
        );
    }

    #[test]
    fn late_binding_reads_an_application_limited_trickle_as_a_lower_bound() {
        let mut w = PathWriter::new(1 << 20, true, true);
        let busy = w.observe(0, &info(0, 2_000_000), None);
        assert_eq!(busy.delivery_rate, 2_000_000);
        let mut trickle = info(0, 40_000);
        trickle.flags = 1; // application-limited sample
        assert_eq!(w.observe(0, &trickle, Some(3_000_000)).delivery_rate, 2_000_000);
        assert_eq!(w.observe(0, &trickle, Some(3_000_000)).bandwidth, 3_000_000);
    }

    #[test]
    fn late_binding_resets_a_low_threshold_only_where_the_window_restarts() {
        let mut i = info(0, 0);
        i.snd_ssthresh = 7;
        i.rto = 300_000;
        i.last_data_sent = 1000;
        assert!(PathWriter::new(1 << 20, true, true).reset_ssthresh_before_write(&i));
        assert!(
            !PathWriter::new(1 << 20, false, true).reset_ssthresh_before_write(&i),
            "no idle restart (BBR, or the sysctl off): the threshold stays"
        );
        assert!(
            !PathWriter::new(1 << 20, true, false).reset_ssthresh_before_write(&i),
            "off"
        );
        let mut w = PathWriter::new(1 << 20, true, true);
        w.disable_ssthresh_reset();
        assert!(!w.reset_ssthresh_before_write(&i));
    }
}
