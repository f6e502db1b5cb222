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
use crate::kernel::{RateEstimate, TcpInfo, INIT_CWND};
use crate::owd::BASE_WINDOW;

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

/// The largest change of queue control's byte limit per steering step (a factor of
/// 1 ± this): the queue it reads answers a change one round trip later, so a step that
/// corrected the whole error at once would overshoot.
const MAX_STEP: f64 = 0.25;

/// How queue control's byte limit grows per steering step until the path first shows a
/// queue, while the limit holds bytes back (see [`PathWriter::steer`]).
const RAMP_STEP: f64 = 1.5;

/// The same while no interactive or realtime traffic is there to protect (see
/// [`PathWriter::set_protecting`]): slow start's own doubling per round trip.
const EAGER_RAMP_STEP: f64 = 2.0;

/// The eager ramp's full-pipe test (BBR's, Cardwell et al.): the path's delivery rate
/// still grows while it rises by this factor per steering step at least.
const RAMP_GROWTH: f64 = 1.25;

/// Steps without that growth after which the eager ramp ends even with no queue shown
/// (BBR leaves its start-up after three such rounds).
const RAMP_FLAT_STEPS: u32 = 3;

/// The queue, in aims, at which the eager ramp stops between two steering steps (see
/// [`PathWriter::brake_ramp`]): the direct cut's own threshold.
const BRAKE_QUEUE: f64 = 2.0;

/// Under queue control, how much faster than the rate its limit stands for a path may
/// pace its bytes (see [`PathWriter::pacing_cap`]).
const PACE_GAIN: f64 = 1.25;

/// The shortest time between two steering steps of queue control's limit.
const STEER_EVERY_MIN: Duration = Duration::from_millis(20);

/// How far the one-way queue reading looks back: the lowest delay of the last two 50 ms
/// windows ([`crate::owd::QueueDelay`]).
const READING_LAG: Duration = Duration::from_millis(100);

/// The queue reading queue control steers to, as a fraction of its target: a frame
/// meets the queue plus the bursts around it (a segment in transmission, 6 ms at
/// 2 Mbit/s, and the reading's lag), so steering the reading to the target itself left
/// interactive frames waiting more than the target (0.75 of it: pings beside an upload on
/// `seed-default`'s 2 Mbit/s uplinks waited 22–24 ms more than idle at the median).
pub const STEER_AIM: f64 = 0.6;

/// How often a held path drains its queue so the one-way base delay is read again (see
/// [`PathWriter::steer`]): within each of the queue reading's base windows.
const BASE_PROBE_EVERY: Duration = BASE_WINDOW.saturating_sub(Duration::from_secs(2));

/// A path whose congestion window drained it this recently needs no base probe: the
/// window's drain refreshed the base. A little longer than BBR's 10 s between its own
/// minimum-RTT probes (which last 200 ms and more), so those replace ours rather than
/// come on top of them (a probe 8 s after each of BBR's cost a BBR upload about half a
/// point of its share), and no longer than the base's history (10–20 s).
const DRAIN_LOOKBACK: Duration = BASE_WINDOW.saturating_add(Duration::from_secs(2));

/// How long a base probe holds the path at [`BASE_PROBE_SHARE`] of its limit: its
/// smoothed RTT twice, and at least this (BBR's minimum-RTT probe lasts 200 ms).
const BASE_PROBE_MIN: Duration = Duration::from_millis(200);

/// The share of its limit a path holds during a base probe: well below its pipe, so the
/// queue drains in a few milliseconds rather than at the margin between two rates.
const BASE_PROBE_SHARE: f64 = 0.5;

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
    /// What the path may hold (in flight and unsent) under queue control, bytes: set
    /// when queue control engages, then steered by the measured queue (see
    /// [`PathWriter::steer`]); cleared when it disengages.
    limit: Option<f64>,
    /// The limit has not yet met a queue since queue control engaged: it grows as slow
    /// start does (see [`PathWriter::steer`]).
    ramping: bool,
    /// Interactive or realtime traffic is there to protect (see
    /// [`PathWriter::set_protecting`]).
    protecting: bool,
    /// The eager ramp's full-pipe test: bytes acknowledged at the last steering step and
    /// when, the best delivery rate over a step so far (bytes per second), and the steps
    /// since it last grew by [`RAMP_GROWTH`].
    ramp_acked: Option<(u64, Instant)>,
    ramp_best: f64,
    ramp_flat: u32,
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
    /// When the next base probe is due, and until when the current one holds the path
    /// (see [`PathWriter::steer`]).
    next_probe: Option<Instant>,
    probe_until: Option<Instant>,
    /// A base probe holds the path now.
    probing: bool,
    /// When the congestion window last held the path below the limit (which drains its
    /// queue as a base probe does).
    window_drained: Option<Instant>,
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
            limit: None,
            ramping: false,
            protecting: true,
            ramp_acked: None,
            ramp_best: 0.0,
            ramp_flat: 0,
            steered: None,
            limited: false,
            window_bound: None,
            min_rtt: Duration::ZERO,
            peak_sample: None,
            next_probe: None,
            probe_until: None,
            probing: false,
            window_drained: None,
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
    /// until the path shows a queue it grows as slow start does, doubling per round trip
    /// (never past twice the window), not by half. By half per round trip it held a 470 ms LTE
    /// path below its pipe for the rest of a 4 MB chunk (MinRTT, ECF and DEMS-F 1.20–1.27 ×
    /// queue control off; docs/latency.md). So, with nothing to protect, the limit starts
    /// at what the path holds when queue control engages (up to its window), not below
    /// it; the ramp ends on a queue only once the delivery rate stops growing
    /// (`PathWriter::ramp_growing`); and a cut keeps the rate the held bytes show (see
    /// [`PathWriter::steer`]). Without the last two, a start at the window starved the
    /// path: its first reading showed the queue slow start had built before queue control
    /// engaged, the ramp ended there, and the cut went to the rate sample of a path that
    /// had carried only overflow (LTE then carried 151 KB of 4 MB).
    pub fn set_protecting(&mut self, protecting: bool) {
        self.protecting = protecting;
    }

    /// Where queue control's byte limit starts when it engages: rate × (min RTT +
    /// target), the bytes that fill the path's pipe plus the target's worth of queue
    /// (QCUT-D's rule). Before the kernel has a rate or a minimum RTT, the initial window:
    /// a path that never carried bulk must not meet its first bulk burst unlimited, or
    /// slow start fills a 500 ms LTE buffer before the steering sees it.
    fn initial_limit(&self, info: &TcpInfo) -> f64 {
        let mss = info.snd_mss.max(1) as f64;
        let window = INIT_CWND as f64 * mss;
        if self.delivery_rate == 0 || info.min_rtt == 0 || info.min_rtt == u32::MAX {
            return window;
        }
        let horizon = Duration::from_micros(info.min_rtt as u64) + self.queue_target;
        // A path that carried only small exchanges has a rate estimate far below its
        // link's: never less than the initial window. Nor more than its congestion
        // window now: the estimate of a path that carried only exchanges can also be far
        // above its link's (72 MB/s from requests on a loopback path with a 0.5 MB/s
        // bottleneck), and the ramp grows the limit by half per round trip from there.
        let cwnd = info.snd_cwnd as f64 * mss;
        (self.delivery_rate as f64 * horizon.as_secs_f64())
            .min(cwnd)
            .max(window)
    }

    /// Steers queue control's byte limit toward the target by the queue the path's bytes
    /// actually meet, at most once per smoothed RTT (20 ms at least). `owd_queue` is the
    /// standing queue from the peer's arrival reports (one-way, this direction only); the
    /// kernel's smoothed RTT above its minimum, plus the socket's unsent bytes at the
    /// path's rate, is the other reading (it also carries the
    /// reverse direction's queue, which the one-way reading does not, while the one-way
    /// reading carries the records' serialisation and the peer's read timing). Both err
    /// high, so the lower one is used.
    ///
    /// The limit starts from the delivery rate, but under queue control the path is
    /// application-limited by design and the kernel's application-limited samples only
    /// ever raise the estimate: measured on emulated 2 Mbit/s links it settles 30–70 %
    /// above the link's rate, and a limit that trusted it kept the queue at ~40 ms
    /// instead of 20. So the limit is corrected by the queue it produces: bytes held =
    /// rate × (min RTT + queue), hence the limit that gives the target is this one scaled
    /// by (min RTT + target) / (min RTT + queue). Half of that correction (in log terms)
    /// is applied per step, at most ±[`MAX_STEP`]: the queue answers a change one round
    /// trip later. The limit rises only if it held bytes back since the last step (a
    /// short queue on a path with nothing to send says nothing about the limit).
    ///
    /// Nor does a short queue while, or just after, the congestion window held the path
    /// below the limit: BBR's minimum-RTT probe (four segments for 200 ms every 10 s) and
    /// a loss's recovery drain the queue, and the readings show that empty queue for a
    /// smoothed RTT plus their own look-back after the window has reopened, while the
    /// limit binds again at once. Until then the limit may fall but not rise. Read as
    /// room, the drained queue raised the limit until a small bottleneck buffer
    /// overflowed, and each loss's recovery read as room again (docs/latency.md).
    pub fn steer(&mut self, owd_queue: Option<Duration>, info: &TcpInfo, now: Instant) {
        if self.queue_target.is_zero() || info.min_rtt == 0 || info.min_rtt == u32::MAX {
            return;
        }
        let Some(limit) = self.limit else { return };
        // A window below the limit during the eager ramp is slow start behind a limit
        // that leads it by design (see below), not a probe's or a recovery's drain.
        let eager = self.ramping && !self.protecting;
        if !eager && (info.snd_cwnd as f64 * info.snd_mss.max(1) as f64) < limit {
            self.window_bound = Some(now);
            self.window_drained = Some(now);
        }
        let min_rtt = Duration::from_micros(info.min_rtt as u64);
        let srtt = Duration::from_micros(info.rtt as u64);
        self.base_probe(srtt, now);
        let limit = if eager && self.ramp_acked.is_some() {
            self.brake_ramp(owd_queue, info, limit, srtt.saturating_sub(min_rtt))
        } else {
            limit
        };
        // A step shows in the reading only after the bytes it let through have crossed the
        // path and the kernel's smoothed RTT has taken them in: once per smoothed RTT,
        // and never faster than every 20 ms (on a path of 1 ms RTT faster steps stacked
        // on readings that did not show the last one yet and the limit swung).
        let every = srtt.max(min_rtt).max(STEER_EVERY_MIN);
        if self.steered.is_some_and(|t| now.saturating_duration_since(t) < every) {
            return;
        }
        // Bytes still unsent in the socket wait there too, for the window or for the
        // pacer (BBR paces at about the path's rate, so a share of the queue a frame
        // meets sits in the sender's kernel, where the RTT does not see it). Not during
        // the eager ramp: its limit leads the window by a round trip by design, so bytes
        // wait in the socket for slow start's next round, not behind a full pipe — read
        // as queue (26 ms of a 28 ms reading on a 470 ms LTE path restarting from its
        // initial window after idle), they ended the ramp at a fifth of the pipe and cut
        // the limit below what the path held.
        let unsent = if self.delivery_rate > 0 && !eager {
            Duration::from_secs_f64(info.notsent_bytes as f64 / self.delivery_rate as f64)
        } else {
            Duration::ZERO
        };
        let rtt_queue = Duration::from_micros(info.rtt.saturating_sub(info.min_rtt) as u64) + unsent;
        let queue = owd_queue.map_or(rtt_queue, |q| q.min(rtt_queue));
        self.steered = Some(now);
        let limited = std::mem::take(&mut self.limited);
        let aim = self.queue_target.mul_f64(STEER_AIM);
        let want = (min_rtt + aim).as_secs_f64() / (min_rtt + queue).as_secs_f64();
        // Only a queue the limit's own bytes made steers it. While the path holds more
        // than the limit lets through, the queue is of other bytes — a response's first
        // 64 KB go unheld as interactive, a transfer was under way when queue control
        // engaged, a cut has not drained yet — and the path sends no bulk byte until
        // they have drained: the limit neither falls nor ends its ramp on it. Nor does a
        // queue read while the limit held nothing back end the ramp (a path carrying only
        // pings reads 5–8 ms of queue from its smoothed RTT alone on `seed-default`).
        // Steered by those queues, the limit fell below the path's pipe and grew back by
        // the correction's 5–10 % per round trip: a download 1.5 s at half the links'
        // rate, a warm 4 MB chunk's LTE path a second below its pipe; and cuts stacked
        // on a queue that earlier bytes still held (three cuts in 150 ms after a BBR
        // start-up's 144 ms on LTE).
        let held = info.held_bytes();
        let beyond = held as f64 > limit + 4.0 * info.snd_mss.max(1) as f64;
        // With nothing to protect, a queue read while the delivery rate still grows is
        // the ramp's transient (see `ramp_growing`) — unless it is twice the aim, a queue
        // slow start's bursts do not make once the limit leads the window; but at the
        // first step after engaging even that is the queue slow start built before.
        let first = self.ramp_acked.is_none();
        let growing = self.ramp_growing(info, limited, now);
        let transient = growing && !self.protecting && (first || queue < aim * 2);
        if queue >= aim / 2 && limited && !beyond && !transient {
            self.ramping = false;
        }
        if self.ramping && !self.protecting && self.ramp_flat >= RAMP_FLAT_STEPS {
            self.ramping = false;
        }
        let settling = self
            .window_bound
            .is_some_and(|t| now.saturating_duration_since(t) < every + READING_LAG);
        let step = if self.ramping && limited {
            // Until the path first shows a queue, the link is not full, and by how much
            // the reading cannot say (the correction below assumes the limit is near the
            // pipe). Grow as slow start does, by half per round trip: from the initial
            // window, the correction's 11 % per round trip took over a second to fill a
            // 9 Mbit/s path, 6 % of a 20 s download. Only then: later, a reading below
            // the aim is as often the lag after a cut, and a jump by half overshot.
            if self.protecting {
                RAMP_STEP
            } else {
                EAGER_RAMP_STEP
            }
        } else {
            want.sqrt().clamp(1.0 - MAX_STEP, 1.0 + MAX_STEP)
        };
        let step = if settling { step.min(1.0) } else { step };
        // Nor does a queue read while the limit held nothing back and the path held less
        // than half of it: the path's own bytes did not make it. Before a MinRTT download
        // the slower path carries only pings, and its smoothed RTT's noise cut its limit
        // from the initial window to 8 KB before the first bulk byte; with the ramp over,
        // the download then took 3 s to fill LTE (90 % of capacity over the run, against
        // ECF's 93 %).
        let unused = !limited && (held as f64) < limit / 2.0;
        let step = if beyond || unused { step.max(1.0) } else { step };
        tracing::debug!(
            limit,
            step,
            queue_ms = queue.as_secs_f64() * 1e3,
            owd_queue_ms = owd_queue.map(|q| q.as_secs_f64() * 1e3),
            rtt_queue_ms = rtt_queue.as_secs_f64() * 1e3,
            unsent_ms = unsent.as_secs_f64() * 1e3,
            rate = self.delivery_rate,
            sample = info.delivery_rate,
            held,
            beyond,
            limited,
            settling,
            cwnd = info.snd_cwnd,
            "steer"
        );
        let fresh_sample = (info.delivery_rate > 0 && !info.delivery_rate_app_limited()).then_some(info.delivery_rate);
        if let Some(r) = fresh_sample {
            if self
                .peak_sample
                .is_none_or(|(p, t)| r >= p || now.saturating_duration_since(t) > every * 2)
            {
                self.peak_sample = Some((r, now));
            }
        }
        let eager_ramp = self.ramping && !self.protecting;
        let keep_lead = eager_ramp && transient && held as f64 >= limit / 2.0;
        if step < 1.0 || limited || keep_lead {
            let floor = 4.0 * info.snd_mss.max(1) as f64;
            let mut next = limit * step;
            if eager_ramp {
                // The eager ramp leads the window's own slow start by its next round
                // trip (twice the window), no further: capped at the window, the limit
                // trailed it by a round trip — the path held half its window in flight,
                // and the window grew by half per round trip instead of doubling (a 4 MB
                // chunk's LTE path at 470 ms, MinRTT 1.12 × queue control off).
                // Nor does it trail the window when a step found the path using at
                // least half the limit without the limit quite binding (within a few
                // segments of it, or the scheduler sent less for a while): slow start
                // doubles per round trip regardless, and a limit that waited a round
                // trip to bind trailed it by that round trip for the rest of a chunk (a
                // warm 4 MB chunk over a 470 ms LTE path, DEMS-F 1.08 × off in the
                // harness's model). So at least twice what the path holds, within the
                // same lead, at every step of the ramp's transient.
                let lead = 2.0 * info.snd_cwnd as f64 * info.snd_mss.max(1) as f64;
                next = next.min(lead.max(limit));
                if keep_lead {
                    next = next.max(lead.min(2.0 * held as f64));
                }
            }
            // A standing queue of twice the aim or more: the link is full, so the
            // kernel's latest rate sample, unless application-limited, is its
            // bottleneck's rate, and QCUT-D's rule gives the limit directly — rate ×
            // (min RTT + aim). The stepwise correction alone needs a round trip per
            // quarter, and the round trip is the bloated queue itself. Not while, or just
            // after, the congestion window held the path below the limit (`settling`):
            // a sample from BBR's minimum-RTT probe (four segments) or a loss's recovery
            // measures the window, not the link. Nor below the largest such sample of the
            // last two steps: a sample's interval spans any pause in the sending (the
            // limit had held the path, or a response's unheld first 64 KB went before
            // it), and one taken across a pause reads low — 0.65 MB/s on a 1.1 MB/s LTE
            // path cut its limit a third below its pipe, and the correction's 7 % per
            // round trip took 0.6 s to refill it.
            //
            // With nothing to protect, not below the rate the held bytes show either:
            // Little's law, held / (min RTT + queue), which errs high while the queue
            // reading lags a growing window (the correction then takes the rest). The
            // kernel's sample of a path that carried only a scheduler's overflow reads far
            // below its link (125 KB/s on a 1.15 MB/s LTE path at 470 ms), and a cut to it
            // took the path below a quarter of its pipe for the rest of a chunk. And no
            // direct cut at all during the ramp's transient (`transient`: its first
            // step after engaging, whose queue slow start's unpaced bursts built — about
            // half a window at the bottleneck, far from a full pipe): cut there, a 470 ms
            // LTE path's limit fell below what it held and trailed its window for the
            // rest of a 4 MB chunk (ECF 1.08 × queue control off in the model).
            if queue >= aim * 2 && !settling && !beyond && !transient && fresh_sample.is_some() {
                let mut rate = self.peak_sample.map_or(0, |(r, _)| r) as f64;
                if !self.protecting {
                    rate = rate.max(held as f64 / (min_rtt + queue).as_secs_f64());
                }
                next = next.min(rate * (min_rtt + aim).as_secs_f64());
            }
            self.limit = Some(next.max(floor));
        }
    }

    /// Ends the eager ramp between two steering steps, at the path's first real queue: a
    /// smoothed RTT (or one-way reading) [`BRAKE_QUEUE`] times the aim above its minimum
    /// while the path holds at least half the limit. The limit then stops where the
    /// path is — what it holds — and the next step's cut takes it to the target. A
    /// steering step comes once per smoothed RTT, and the ramp doubles the limit at each;
    /// the kernel's smoothed RTT follows every acknowledgement. Waiting for the next step
    /// on a 470 ms LTE path let slow start go on for most of a round trip with the queue
    /// already growing: the path came to hold its pipe plus its whole 500 ms buffer,
    /// segments were lost at the top, and a chunk's last bytes waited a 970 ms round trip
    /// for their retransmission (docs/latency.md). Paced, slow start queues
    /// at the bottleneck only once its window is past half the pipe, so a queue read with
    /// the path holding half the limit is the pipe filling, not a burst; the brake keeps
    /// what the path holds, never cuts below it (cut below, a path that had carried little
    /// starved: see [`PathWriter::set_protecting`]). Not at the first step after engaging,
    /// whose readings still carry the queue slow start built before (`ramp_acked` unset).
    /// Returns the limit from here on.
    fn brake_ramp(&mut self, owd_queue: Option<Duration>, info: &TcpInfo, limit: f64, rtt_queue: Duration) -> f64 {
        let queue = owd_queue.map_or(rtt_queue, |q| q.min(rtt_queue));
        let aim = self.queue_target.mul_f64(STEER_AIM);
        let held = info.held_bytes() as f64;
        if queue < aim.mul_f64(BRAKE_QUEUE) || held < limit / 2.0 {
            return limit;
        }
        self.ramping = false;
        let next = limit.min(held).max(4.0 * info.snd_mss.max(1) as f64);
        self.limit = Some(next);
        tracing::debug!(limit = next, held, queue_ms = queue.as_secs_f64() * 1e3, "ramp braked");
        next
    }

    /// Whether the path's delivery rate over the last step grew by [`RAMP_GROWTH`] over
    /// the best of the earlier steps of the ramp (counting the steps it did not in
    /// `ramp_flat`). With nothing to protect the ramp ends on this as well as on a queue:
    /// a queue read while the delivery rate still grows is the ramp's own transient — the
    /// bursts of slow start before queue control engaged, still in the smoothed RTT, or a
    /// frame's segments meeting the link at once — not a full pipe. On a 470 ms LTE path
    /// such a reading (12 ms, the aim's half is 6) ended the ramp at a fifth of the pipe,
    /// where the correction, whose step is the queue's share of the round trip, grew the
    /// limit 1 % per round trip for the rest of a 4 MB chunk. A step in which the limit
    /// did not bind says nothing of the pipe and is not counted.
    fn ramp_growing(&mut self, info: &TcpInfo, limited: bool, now: Instant) -> bool {
        let prev = self.ramp_acked.replace((info.bytes_acked, now));
        let Some((acked, t)) = prev.filter(|_| self.ramping && limited) else {
            return true;
        };
        let secs = now.saturating_duration_since(t).as_secs_f64();
        if secs <= 0.0 {
            return true;
        }
        let rate = info.bytes_acked.saturating_sub(acked) as f64 / secs;
        if rate >= self.ramp_best * RAMP_GROWTH {
            self.ramp_best = rate;
            self.ramp_flat = 0;
            true
        } else {
            self.ramp_best = self.ramp_best.max(rate);
            self.ramp_flat += 1;
            false
        }
    }

    /// Drains the path's queue now and then so the one-way reading's base stays the
    /// path's propagation delay. The base is the lowest one-way delay of the last 10–20 s,
    /// and a path that queue control holds at its aim never drains: its base rises by the
    /// least queue of the window, the reading falls by as much, and the steering lets the
    /// queue grow by it, window after window. Beside a 30 s CUBIC upload the one-way
    /// reading held 11.5 ms throughout while the RTT reading rose from 17 to 28 ms and the
    /// bottleneck's median sojourn was 22 ms; under BBR, whose minimum-RTT probe drains
    /// the queue every 10 s, the RTT reading stayed at 16–17 ms (docs/latency.md). So once
    /// per base window (less 2 s) the path holds half its limit for two smoothed RTTs
    /// (200 ms at least) — LEDBAT++'s periodic slowdown, BBR's minimum-RTT probe — unless
    /// its congestion window held it below the limit in the last [`DRAIN_LOOKBACK`]
    /// (which drained the queue as well). During the probe and a reading's lag after it the limit does not
    /// rise: the drained queue is the probe's, not room.
    fn base_probe(&mut self, srtt: Duration, now: Instant) {
        if self.ramping {
            return;
        }
        let Some(due) = self.next_probe else {
            self.next_probe = Some(now + BASE_PROBE_EVERY);
            return;
        };
        if self.probe_until.is_none_or(|t| now >= t) && now >= due {
            self.next_probe = Some(now + BASE_PROBE_EVERY);
            let drained = self
                .window_drained
                .is_some_and(|t| now.saturating_duration_since(t) < DRAIN_LOOKBACK);
            if !drained {
                self.probe_until = Some(now + (srtt * 2).max(BASE_PROBE_MIN));
                self.base_probes += 1;
                tracing::debug!(probes = self.base_probes, "base probe");
            }
        }
        self.probing = self.probe_until.is_some_and(|t| now < t);
        if self.probing {
            // The window-bound rule keeps the limit from rising on the drained readings,
            // during the probe and for a reading's lag after it.
            self.window_bound = Some(now);
        }
    }

    /// Queue control's byte limit now (None: not engaged).
    pub fn queue_limit(&self) -> Option<u64> {
        self.limit.map(|l| l as u64)
    }

    /// The pacing cap the path's socket should have under queue control, bytes per
    /// second (None: the socket's own). The limit stands for a rate — limit / (min RTT +
    /// aim) — and once it has met a queue the socket paces at most [`PACE_GAIN`] times
    /// that. Not while the limit ramps: the rate it stands for is then below the link's
    /// by design, and a transfer that ends before a queue shows (a request's first 64 KB,
    /// which engage queue control as interactive) would pay for it in its first round
    /// trips. A path held below its congestion window
    /// is application-limited, and its congestion control paces by an estimate nothing
    /// corrects: BBR never leaves its start-up (it leaves when a round that is *not*
    /// application-limited shows no growth), pacing at 2.89 × a bandwidth estimate that
    /// the held path's application-limited samples had raised 25 % above the link's.
    /// Each write of the bytes one ACK freed then reached the bottleneck as a burst at
    /// three times its rate and overflowed a shallow buffer (WiFi's 50 ms uplink on
    /// `seed-default`: 114 KB retransmitted in 40 s, the path 8 % short of its rate).
    /// QCUT shapes the device's traffic to the link's rate for the same reason.
    pub fn pacing_cap(&self) -> Option<u64> {
        let limit = self.limit?;
        if self.min_rtt.is_zero() || self.ramping {
            return None;
        }
        let horizon = self.min_rtt + self.queue_target.mul_f64(STEER_AIM);
        Some((PACE_GAIN * limit / horizon.as_secs_f64()) as u64)
    }

    /// The low-water mark the socket should have (`TCP_NOTSENT_LOWAT`).
    pub fn lowat(&self) -> u32 {
        self.lowat
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
            self.limit = None;
            self.next_probe = None;
            self.probe_until = None;
            self.probing = false;
        } else if self.limit.is_none() {
            // With nothing to protect, the limit takes over from slow start where it is
            // (see `set_protecting`): started at the rate estimate, it halved what a 470 ms
            // LTE path had in flight when queue control engaged.
            let initial = self.initial_limit(info);
            let held = info.held_bytes().min(info.snd_cwnd as u64 * info.snd_mss as u64) as f64;
            self.limit = Some(if self.protecting { initial } else { initial.max(held) });
            self.limited = false;
            self.ramping = true;
            self.ramp_acked = None;
            self.ramp_best = 0.0;
            self.ramp_flat = 0;
        }
        let Some(limit) = self.queue_limit() else {
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
        let limit = if self.probing {
            (limit as f64 * BASE_PROBE_SHARE) as u64
        } else {
            limit
        };
        let by_limit = limit.saturating_sub(held);
        let room = by_limit.min(window.saturating_sub(held)) / mss * mss;
        if room < MIN_BULK.max(mss) {
            // Only the limit's own holding back tells the steering the limit binds.
            self.limited |= by_limit < MIN_BULK.max(mss);
            // Look again once about a tenth of the limit has drained (1 to 10 ms).
            let drain = Duration::from_secs_f64(limit as f64 / 10.0 / self.delivery_rate.max(1) as f64);
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

    /// Whether the write about to happen should first reset the slow-start threshold.
    pub fn reset_ssthresh_before_write(&mut self, info: &TcpInfo) -> bool {
        let due = self.ssthresh_reset && info.ssthresh_reset_due();
        self.resets += due as u64;
        due
    }
}

#[cfg(test)]
mod tests;
