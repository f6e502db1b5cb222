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
//! The session owns each path's writer (made from its [`crate::EngineConfig`] when the path
//! comes up); this module is the policy only. The driver reads `TCP_INFO`, hands it to
//! [`crate::Session::drive_writer`], applies the socket options the session asks for
//! ([`SocketWants`]), and moves the bytes it wrote.

use std::time::{Duration, Instant};

use mpflex_sched::PathSnapshot;

use mpflex_wire::RECORD_OVERHEAD;

use crate::config::EngineConfig;
use crate::kernel::{RateEstimate, TcpInfo};

mod queue;

pub use queue::{QueuePhase, RampTest};

/// `tcpi_state` values (linux/tcp_states.h) in which a socket can still send.
const TCP_ESTABLISHED: u8 = 1;
const TCP_CLOSE_WAIT: u8 = 8;

/// The low-water mark a path starts with, before the kernel has estimates.
pub const INITIAL_LOWAT: u32 = 32 * 1024;
/// The smallest low-water mark: below it a writer wakes up for every few segments.
pub const MIN_LOWAT: u32 = 8 * 1024;

/// What the driver knows of a path connection's socket when it comes up
/// ([`crate::Session::path_up_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSocket {
    /// The kernel restarts the connection's window after idle spells (not so for BBR, or
    /// with `net.ipv4.tcp_slow_start_after_idle` off).
    pub idle_restart: bool,
    /// The driver can reset the connection's slow-start threshold (its congestion control
    /// is known and not BBR, and BBR is there to switch to).
    pub ssthresh_reset: bool,
}

impl Default for PathSocket {
    /// A loss-based congestion control under the kernel's defaults.
    fn default() -> Self {
        PathSocket {
            idle_restart: true,
            ssthresh_reset: true,
        }
    }
}

/// The socket options a path's writer wants now ([`crate::Session::socket_wants`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketWants {
    /// `TCP_NOTSENT_LOWAT`.
    pub lowat: u32,
    /// Queue control's pacing cap (`SO_MAX_PACING_RATE`), bytes per second; `None`: the
    /// connection's own.
    pub pacing_cap: Option<u64>,
}

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

/// The smallest bulk budget worth a write under queue control: one segment. Less is
/// treated as none (the queue is at its target) rather than sent as a sliver: each record
/// costs its header, tag and frame header.
const MIN_BULK: u64 = 1448;

/// With nothing to protect, the share of queue control's limit a bulk write waits for
/// (see [`PathWriter::bulk_batch`]).
const BATCH_SHARE: f64 = 0.25;

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
    /// Queue control's phase ([`queue::QueuePhase`]).
    phase: QueuePhase,
    /// What the path may hold (in flight and unsent) under queue control, bytes: set
    /// when queue control engages, then steered by the measured queue (see
    /// [`PathWriter::steer`]); meaningless while the phase is `Off`.
    limit: f64,
    /// Interactive or realtime traffic is there to protect (see
    /// [`PathWriter::set_protecting`]).
    protecting: bool,
    steered: Option<Instant>,
    /// The limit held bulk bytes back since the last steering step.
    limited: bool,
    /// When the congestion window was last below the limit (see [`PathWriter::steer`]).
    window_bound: Option<Instant>,
    /// The path's minimum RTT as the last budget saw it (zero: none yet).
    min_rtt: Duration,
    /// The largest delivery-rate sample (not application-limited) the steering saw in
    /// its last two steps, and when (see [`PathWriter::steer`]).
    peak_sample: Option<(u64, Instant)>,
    /// When the next base probe is due.
    next_probe: Option<Instant>,
    /// When the congestion window last held the path below the limit (which drains its
    /// queue as a base probe does).
    window_drained: Option<Instant>,
    /// Until when the one-way queue reading keeps its base if the path does not drain
    /// (see [`PathWriter::set_base_kept_until`]); `None`: no such reading.
    base_kept: Option<Instant>,
    /// Base probes made.
    pub base_probes: u64,
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
            phase: QueuePhase::Off,
            limit: 0.0,
            protecting: true,
            steered: None,
            limited: false,
            window_bound: None,
            min_rtt: Duration::ZERO,
            peak_sample: None,
            next_probe: None,
            window_drained: None,
            base_kept: None,
            base_probes: 0,
            resets: 0,
        }
    }

    /// The writer of a path connection that `socket` describes, as `cfg` configures it.
    pub fn for_path(cfg: &EngineConfig, socket: PathSocket) -> Self {
        PathWriter::new(
            cfg.notsent_lowat,
            socket.idle_restart,
            cfg.fresh_ssthresh && socket.ssthresh_reset,
        )
        .with_queue_target(cfg.queue_target)
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

    /// Whether interactive or realtime traffic is there to protect now (the default), or
    /// queue control is engaged only because a transfer keeps the paths backlogged
    /// ([`crate::Session::queue_control_engaged`]). Then the limit's job is to have the
    /// queue short by the time such traffic comes, not to slow the transfer's start-up:
    /// the ramp is eager (it starts at what the path holds, grows as slow start does and
    /// ends on a queue only once the delivery rate stops growing), and a cut keeps the
    /// rate the held bytes show (see [`PathWriter::steer`]).
    pub fn set_protecting(&mut self, protecting: bool) {
        self.protecting = protecting;
    }

    /// The low-water mark the socket should have (`TCP_NOTSENT_LOWAT`).
    pub fn lowat(&self) -> u32 {
        self.lowat
    }

    /// How close to the base of the one-way queue reading a sample must be to count as
    /// the path drained (see [`PathWriter::set_base_kept_until`]): a quarter of the
    /// target. A base that rose by as much lets the queue stand that much above the aim.
    pub fn base_slack(&self) -> Duration {
        self.queue_target / 4
    }

    /// Until when the path's one-way queue reading keeps its base (its lowest sample of
    /// the last windows) if the path does not drain meanwhile, with [`Self::base_slack`]
    /// (`None`: no such reading). With nothing to protect, a held path makes a base probe
    /// only shortly before then (see [`PathWriter::steer`]).
    pub fn set_base_kept_until(&mut self, until: Option<Instant>) {
        self.base_kept = until;
    }

    /// The socket options this writer wants now.
    pub fn socket_wants(&self) -> SocketWants {
        SocketWants {
            lowat: self.lowat,
            pacing_cap: self.pacing_cap(),
        }
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
        if info.min_rtt != 0 && info.min_rtt != u32::MAX {
            self.min_rtt = Duration::from_micros(info.min_rtt as u64);
        }
        if !engaged || self.queue_target.is_zero() {
            self.disengage();
        } else if self.phase == QueuePhase::Off {
            self.engage(info);
        }
        let Some(limit) = self.holding_limit() else {
            return Ok(Budget {
                total,
                bulk: total,
                retry: None,
            });
        };
        let held = info.held_bytes();
        // Whole segments: with the socket's queue kept this short every write leaves at
        // once, and a write that is not a multiple of the segment size sends a short
        // segment whose headers cost the link's rate (a 2.3 KB write goes as 1448 + 900
        // bytes). The record's length prefix and tag go in the same write.
        let mss = info.snd_mss.max(1) as u64;
        // Nor more than the congestion window sends now: bulk bytes beyond it wait unsent
        // in the socket, and an interactive frame written after them waits too — for
        // 200 ms when BBR probes its minimum RTT with a window of four segments, the
        // 99th percentile of pings beside a BBR upload.
        let window = info.snd_cwnd as u64 * mss;
        let by_limit = limit.saturating_sub(held);
        let room = by_limit.min(window.saturating_sub(held)) / mss * mss;
        let batch = self.bulk_batch(limit, mss, max_frame);
        if room < MIN_BULK.max(mss) || by_limit < batch {
            // Only the limit's own holding back tells the steering the limit binds.
            self.limited |= by_limit < batch;
            // Look again once about a tenth of the limit, or what the batch still lacks,
            // has drained (1 to 10 ms).
            let wait = (limit / 10).max(batch.saturating_sub(by_limit));
            let drain = Duration::from_secs_f64(wait as f64 / self.delivery_rate.max(1) as f64);
            let retry = drain.clamp(Duration::from_millis(1), Duration::from_millis(10));
            return Ok(Budget {
                total,
                bulk: 0,
                retry: Some(retry),
            });
        }
        // The socket's own budget is cut to whole segments too (it holds at least a frame,
        // more than a segment).
        let whole = (total as u64).min(room) / mss * mss;
        Ok(Budget {
            total,
            bulk: (whole as usize).saturating_sub(RECORD_OVERHEAD),
            retry: None,
        })
    }

    /// The least room under queue control's limit worth a bulk write, bytes (whole
    /// segments). Every write is a record, and a record costs its length, tag and frame
    /// header (47 bytes with a `Data` frame's) whatever it carries: written as each
    /// acknowledgement frees a segment, as a held path's are, a 2 Mbit/s path's records
    /// carried 1.1 segments on average and the framing took 2.9 % of what the link
    /// carried. While interactive traffic is there to protect, every segment goes as soon
    /// as the limit lets it (a frame meets the queue plus what waits for the batch).
    /// With nothing to protect, a write waits for [`BATCH_SHARE`] of the limit, at most a
    /// whole frame's record: the path's bytes then swing by that share below the limit,
    /// and the steering, which reads the lowest queue of each look-back, keeps that
    /// trough at the aim.
    fn bulk_batch(&self, limit: u64, mss: u64, max_frame: usize) -> u64 {
        if self.protecting {
            return MIN_BULK.max(mss);
        }
        let frame = (max_frame + RECORD_OVERHEAD) as u64;
        (((limit as f64 * BATCH_SHARE) as u64).min(frame) / mss * mss).max(MIN_BULK.max(mss))
    }

    /// Whether the write about to happen should first reset the slow-start threshold.
    pub fn reset_ssthresh_before_write(&mut self, info: &TcpInfo) -> bool {
        let due = self.ssthresh_reset && info.ssthresh_reset_due();
        self.resets += due as u64;
        due
    }
}

#[cfg(test)]
mod tests;
