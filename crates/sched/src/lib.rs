//! Multipath schedulers, sans-IO.
//!
//! The session engine asks a scheduler what a path should carry at the moment that path
//! can accept bytes (late binding: the path's kernel socket has little unsent data queued).
//! The scheduler sees a snapshot of every path and a view of the send queue, and answers
//! with a [`Decision`]. Time is an argument; a scheduler never reads a clock or touches a
//! socket, so every decision can be pinned in a unit test.
#![forbid(unsafe_code)]

mod blest;
mod dems;
mod ecf;
mod kind;
mod minrtt;
mod redundant;
mod roundrobin;
mod txdelay;

pub use blest::{Blest, BlestConfig};
pub use dems::{Dems, DemsVariant};
pub use ecf::{Delta, Ecf, EcfConfig};
pub use kind::{SchedulerKind, UnknownScheduler};
pub use minrtt::MinRtt;
pub use redundant::Redundant;
pub use roundrobin::RoundRobin;
pub use txdelay::TxDelay;

use std::time::{Duration, Instant};

/// What the scheduler knows of one path (mostly from the kernel's `TCP_INFO`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathSnapshot {
    pub id: usize,
    /// The path connection is established and not known to be broken.
    pub alive: bool,
    /// The path is waiting for bytes right now (its socket has room below the low-water
    /// mark and its writer is idle). Only a ready path can be given bytes.
    pub ready: bool,
    /// A backup path carries data only when no non-backup path is alive.
    pub backup: bool,
    /// Smoothed RTT and its variation, as the kernel measures them.
    pub srtt: Duration,
    pub rttvar: Duration,
    /// The smallest RTT the kernel has measured on the path (`tcpi_min_rtt`, a windowed
    /// minimum): its propagation delay without the queue its own bytes build. Zero if
    /// unknown. Unlike `srtt` it is not left inflated when the path goes idle after a
    /// queue built up (`srtt` changes only with new samples, which need traffic).
    pub min_rtt: Duration,
    /// Congestion window in segments, and the segment size.
    pub cwnd: u32,
    pub mss: u32,
    /// `Some(w)`: the path has been idle so long that the kernel will shrink its window to
    /// `w` segments at its next write (idle restart; `TCP_INFO` still shows the old window
    /// in `cwnd` until then). What a write now can put on the wire at once is `w`
    /// ([`PathSnapshot::send_cwnd`]); the old window is what the path had before.
    pub restart_cwnd: Option<u32>,
    /// Segments sent and not yet acknowledged by the peer's kernel.
    pub in_flight: u32,
    /// Bytes written to the socket but not yet sent.
    pub notsent: u32,
    /// The kernel's delivery-rate estimate, bytes per second (0 if unknown).
    pub delivery_rate: u64,
    /// The rate the sender's congestion control paces at, bytes per second (0 if unknown):
    /// for a window-based one such as CUBIC 2× (slow start) or 1.2× (congestion
    /// avoidance) window / srtt; for BBR its bandwidth estimate times its pacing gain.
    pub pacing_rate: u64,
    /// The congestion control's own estimate of the path's bottleneck bandwidth, bytes per
    /// second, where it keeps one (BBR's `bbr_bw`, a windowed maximum of delivery-rate
    /// samples); 0 otherwise (CUBIC, or no sample yet).
    pub bandwidth: u64,
    /// One-way delay to the peer at the path's current bytes in flight, microseconds, from
    /// the peer's feedback (binned by bytes in flight). It includes the unknown offset
    /// between the two hosts' clocks, the same for every path: only differences between
    /// paths mean anything. `None` until feedback arrived.
    pub owd_us: Option<i64>,
    /// Mean absolute deviation of the path's one-way-delay samples from their estimates,
    /// microseconds.
    pub owd_dev_us: u64,
}

impl PathSnapshot {
    /// The window a write now gets: `restart_cwnd` if the kernel is about to shrink an
    /// idle path's window, else `cwnd`.
    pub fn send_cwnd(&self) -> u32 {
        self.restart_cwnd.map_or(self.cwnd, |w| w.min(self.cwnd))
    }

    /// The RTT a byte written now can expect: at most `min_rtt + rttvar` plus the time the
    /// bytes already on the path (in flight and unsent) take at its rate, and never more
    /// than `srtt`. `srtt` changes only with new samples, which need traffic: a path that
    /// goes idle after its bytes built a queue keeps reading that queue although it has
    /// drained, for as long as it idles (a control frame in flight now and then does not
    /// change that). On a busy path the bytes on it take about an srtt to drain, so this is
    /// `srtt`. `srtt` when `min_rtt` is unknown.
    pub fn rtt_now(&self) -> Duration {
        if self.min_rtt.is_zero() {
            return self.srtt;
        }
        let ahead = queued_on_path(self) as f64 / self.rate_estimate().max(1.0);
        self.srtt
            .min(self.min_rtt + self.rttvar + Duration::from_secs_f64(ahead.min(3600.0)))
    }

    /// Whether the window a write now gets ([`PathSnapshot::send_cwnd`]) has room for
    /// another segment.
    pub fn has_cwnd_space(&self) -> bool {
        let queued_segs = self.notsent.div_ceil(self.mss.max(1));
        self.in_flight + queued_segs < self.send_cwnd().max(1)
    }

    /// Bytes the path can put on the wire per second, from the congestion window, the
    /// delivery-rate estimate as a floor once the kernel has one.
    pub fn rate_estimate(&self) -> f64 {
        let srtt = self.srtt.as_secs_f64().max(1e-4);
        let cwnd_rate = self.cwnd.max(1) as f64 * self.mss.max(1) as f64 / srtt;
        cwnd_rate.max(self.delivery_rate as f64)
    }

    /// The rate the path is sending at, bytes per second, for capping a window read as a
    /// rate: the larger of the delivery rate (what arrived, which lags a window growing
    /// in slow start by up to half) and the pacing rate (what the sender intends; for a
    /// window-based congestion control always above window / srtt, for BBR about its
    /// bandwidth estimate, although its window holds two — and up to 2.89 × that estimate
    /// in its start-up; [`PathSnapshot::bandwidth`] has the estimate). 0 if neither is known.
    pub fn sending_rate(&self) -> u64 {
        self.delivery_rate.max(self.pacing_rate)
    }

    /// Whether the window is BBR's minimum-RTT probe rather than what the path carries:
    /// BBR holds it at four segments for about 200 ms every 10 s to drain its queue
    /// (PROBE_RTT; Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue
    /// 2016) while its pacing rate stays at its bandwidth estimate. A BBR path (one with
    /// a `bandwidth` estimate) whose window is four segments and at most a quarter of what
    /// it paces per round trip is in that probe. A window-based congestion control keeps
    /// no estimate: its small window after a loss (paced by what is still in flight, so
    /// also far below its pacing rate) is the path's capacity.
    pub fn probing_rtt(&self) -> bool {
        let window = self.cwnd as f64 * self.mss.max(1) as f64;
        self.bandwidth > 0
            && self.cwnd == PROBE_RTT_CWND
            && self.pacing_rate as f64 * self.srtt.as_secs_f64() >= 4.0 * window
    }

    /// Usable for data: alive, and not a backup unless `allow_backup`.
    pub fn usable(&self, allow_backup: bool) -> bool {
        self.alive && (allow_backup || !self.backup)
    }
}

/// Whether backup paths may carry data: only when no regular path is alive.
pub fn backups_allowed(paths: &[PathSnapshot]) -> bool {
    !paths.iter().any(|p| p.alive && !p.backup)
}

/// Whether a path (other than `me`) that is faster than `me` is ready and has congestion-window
/// space: MinRTT's reason for `me` to wait, since that path is being asked too.
pub(crate) fn faster_available(paths: &[PathSnapshot], me: usize, allow_backup: bool) -> bool {
    let m = &paths[me];
    paths
        .iter()
        .enumerate()
        .any(|(i, p)| i != me && p.usable(allow_backup) && p.ready && p.has_cwnd_space() && p.srtt < m.srtt)
}

/// BBR's window while it probes the minimum RTT, segments (`bbr_cwnd_min_target`).
pub const PROBE_RTT_CWND: u32 = 4;
/// How long BBR probes the minimum RTT (`bbr_probe_rtt_mode_ms`).
pub const PROBE_RTT: Duration = Duration::from_millis(200);

/// Whether a path faster than `me` is only held back by BBR's minimum-RTT probe
/// ([`PathSnapshot::probing_rtt`]) while the `backlog` is one it sends within the probe
/// and a round trip at its sending rate: `me` waits for it. The probe's window is no
/// measure of the path, and the slower path handed the overflow for those 200 ms may be
/// one that is failing (a WiFi link fading out of coverage took a quarter of a stream's
/// rate, and an outage stranded what it took); the faster path meanwhile delivers four
/// segments per round trip and catches up when the probe ends. A bulk backlog, more than
/// that, overflows as ever — and so does a sustained one however little of it is queued
/// here: under the bound on bytes ahead of the paths a bulk upload shows only some tens of
/// KB, and the slower path, waiting out each of the faster one's probes, drained its own
/// short queue and idled (a BBR upload's LTE path 250 ms in every 10 s: MinRTT's share of
/// capacity 0.5–1 point under ECF's).
pub(crate) fn faster_probing(paths: &[PathSnapshot], me: usize, allow_backup: bool, q: &QueueView) -> bool {
    let m = &paths[me];
    !q.sustained
        && paths.iter().enumerate().any(|(i, p)| {
            i != me
                && p.usable(allow_backup)
                && p.srtt < m.srtt
                && p.probing_rtt()
                && (q.bytes as f64) <= p.sending_rate() as f64 * (PROBE_RTT + p.srtt).as_secs_f64()
        })
}

/// Index of the usable path with the smallest smoothed RTT among those with an RTT sample
/// (`srtt > 0`), ready or not, with or without congestion-window space (ECF's and BLEST's
/// x_f). Ties go to the lower index.
pub(crate) fn fastest(paths: &[PathSnapshot], allow_backup: bool) -> Option<usize> {
    paths
        .iter()
        .enumerate()
        .filter(|(_, p)| p.usable(allow_backup) && !p.srtt.is_zero())
        .min_by_key(|(i, p)| (p.srtt, *i))
        .map(|(i, _)| i)
}

/// Bytes already handed to the path's socket and not yet acknowledged: unsent plus in flight
/// (in flight counted as full segments).
pub(crate) fn queued_on_path(p: &PathSnapshot) -> u64 {
    p.notsent as u64 + p.in_flight as u64 * p.mss.max(1) as u64
}

/// Free congestion-window space in bytes (`cwnd` given separately so callers may substitute
/// a remembered window), at least one segment: a chunk this size leaves the socket at once.
pub(crate) fn cwnd_room(p: &PathSnapshot, cwnd: u32) -> usize {
    let mss = p.mss.max(1) as u64;
    let room = (cwnd.max(1) as u64 * mss).saturating_sub(queued_on_path(p));
    room.max(mss) as usize
}

/// Whether `bytes` is within one round of the two paths: what both deliver, at
/// [`PathSnapshot::rate_estimate`], in the sum of their srtts. A backlog this small is a
/// chunk's end, where the path each byte is bound to decides the completion time.
pub(crate) fn within_one_round(bytes: u64, a: &PathSnapshot, b: &PathSnapshot) -> bool {
    let round = (a.srtt + b.srtt).as_secs_f64();
    bytes as f64 <= (a.rate_estimate() + b.rate_estimate()) * round
}

/// How a slow path is handed bytes near a chunk's end: only while its window (the one a
/// write now gets) has room, and only that room (at least one segment). Bytes beyond the
/// window would wait in its socket for the acknowledgements of a whole round, arriving
/// one srtt later than the path's delay says; the kernel's MPTCP schedulers likewise only
/// consider a subflow with window space. Without room: ask again shortly, when
/// acknowledgements will have opened the window (nothing signals that to user space).
/// The engine keeps the whole record within the room on the wire (its control frames and
/// overhead included), cutting a frame that does not fit ([`Decision::in_window`]).
pub(crate) fn send_within_window(now: Instant, p: &PathSnapshot, end: End, budget: usize) -> Decision {
    if !p.has_cwnd_space() {
        return Decision::Wait {
            until: Some(now + window_poll(p)),
        };
    }
    Decision::in_window(end, cwnd_room(p, p.send_cwnd()).min(budget))
}

/// How soon to look again at a path waiting for window room: a sixteenth of its srtt
/// (a few acknowledgements of a full window), between 2 and 10 ms.
pub fn window_poll(p: &PathSnapshot) -> Duration {
    (p.srtt / 16).clamp(Duration::from_millis(2), Duration::from_millis(10))
}

/// What is waiting to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueView {
    /// Bytes of stream payload queued and not yet sent on any path.
    pub bytes: u64,
    /// Number of frames queued.
    pub frames: usize,
    /// Bytes the session's flow control still lets the sender put on paths: the unsent queue
    /// (already within the window) plus the credit the application has not used yet, i.e.
    /// MPTCP's `tcp_wnd_end − snd_nxt`. `u64::MAX` when unknown or unlimited (the default).
    /// Only [`Blest`] reads it.
    pub send_window: u64,
    /// The applications write faster than the paths carry (backlogged for a second and
    /// refused room lately): a bulk transfer that the bound on bytes ahead of the paths
    /// holds back, so `bytes` is a window onto a larger backlog, not all there is.
    pub sustained: bool,
    /// The applications hold more than `bytes` shows, and `bytes` is already a second
    /// of the paths' rate: a stream was refused room lately under the engine's loose
    /// bound on bytes ahead of the paths (the one that applies without queue control's
    /// tighter bound, a second of their rate) and has not run dry since. Unlike
    /// `sustained` this holds from a transfer's first refusal, before it has kept the
    /// session backlogged for a second; a transfer that fits the bound whole never sets it.
    pub withheld: bool,
}

impl Default for QueueView {
    fn default() -> Self {
        QueueView {
            bytes: 0,
            frames: 0,
            send_window: u64::MAX,
            sustained: false,
            withheld: false,
        }
    }
}

/// Which end of the send queue to take bytes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Head,
    /// Two-ended schedulers (DEMS) let the slow path send from the back of the queue.
    Tail,
}

/// The scheduler's answer for the path that asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send up to `max_bytes` from `end` of the queue on the asking path. With
    /// `duplicate`, the same frames are also sent on every other usable path.
    ///
    /// With `exact`, `max_bytes` is a hard limit on the wire (a path's window room): the
    /// engine keeps the whole record within it, control frames and record overhead
    /// included, and cuts a frame that does not fit. Without, it is a target: whole frames
    /// go, the decision's first even if it is larger.
    Send {
        end: End,
        max_bytes: usize,
        duplicate: bool,
        exact: bool,
    },
    /// Send nothing now; ask again when something changes or at `until`.
    Wait { until: Option<Instant> },
    /// Send again, on the asking path, frames that other paths carry and the peer has not
    /// acknowledged yet: up to `max_bytes`, walking the sequence space up from the lowest
    /// (`Head`) or down from the highest (`Tail`), skipping frames last sent longer than
    /// `max_age` ago. With `sooner_only`, only frames a copy on this path would bring
    /// sooner: its expected arrival (now + this path's one-way delay at its bytes in
    /// flight) beats the frame's expected arrival on the paths holding it by more than the
    /// two paths' delay deviations, or the frame is overdue there (unreported for longer
    /// than that path's `srtt + 4·rttvar` plus the largest srtt, the report's way back:
    /// stuck behind a loss). Frames or paths without delay estimates yet count as sooner.
    /// Asked for only by schedulers whose [`Scheduler::reinjects`] is true, typically once
    /// the unsent queue is empty.
    Reinject {
        end: End,
        max_bytes: usize,
        max_age: Option<Duration>,
        sooner_only: bool,
    },
}

impl Decision {
    /// Send from `end` at most `max_bytes` on the wire, exactly (a path's window room).
    pub fn in_window(end: End, max_bytes: usize) -> Self {
        Decision::Send {
            end,
            max_bytes,
            duplicate: false,
            exact: true,
        }
    }

    pub fn head(max_bytes: usize) -> Self {
        Decision::Send {
            end: End::Head,
            max_bytes,
            duplicate: false,
            exact: false,
        }
    }
}

/// A multipath scheduler.
pub trait Scheduler: Send {
    /// Name used in configuration and reports.
    fn name(&self) -> &'static str;

    /// `path` (an index into `paths`) can accept bytes now and the queue is not empty.
    /// `budget` is the most the engine will hand it in one go.
    fn decide(
        &mut self,
        now: Instant,
        path: usize,
        paths: &[PathSnapshot],
        queue: &QueueView,
        budget: usize,
    ) -> Decision;

    /// Every time the engine learns new path statistics (each path's writer reports them
    /// before it asks, and while it cannot take bytes): schedulers that keep history
    /// (ECF's window memory across idle spells) see the paths also when they are not asked.
    fn observe(&mut self, _now: Instant, _paths: &[PathSnapshot]) {}

    /// Whether this scheduler wants to be asked also when nothing new is queued but frames
    /// are in flight unacknowledged (to answer with [`Decision::Reinject`]).
    fn reinjects(&self) -> bool {
        false
    }
}

/// Builds a scheduler from its configuration name or an alias ([`SchedulerKind`]'s
/// `FromStr`).
pub fn by_name(name: &str) -> Option<Box<dyn Scheduler>> {
    name.parse::<SchedulerKind>().ok().map(SchedulerKind::build)
}

#[cfg(test)]
mod rtt_tests {
    use super::test_util::path;
    use super::*;

    /// An idle path reads at its base RTT plus rttvar, whatever queue its srtt still holds;
    /// a few bytes on it add their time at its rate; a busy path reads at its srtt; without
    /// a minimum RTT the srtt stands.
    #[test]
    fn rtt_now_drops_the_queue_an_idle_path_no_longer_has() {
        let mut p = path(0, 195);
        assert_eq!(p.rtt_now(), Duration::from_millis(195));
        p.min_rtt = Duration::from_millis(70);
        p.rttvar = Duration::from_millis(20);
        p.cwnd = 100;
        p.delivery_rate = 1_000_000;
        assert_eq!(p.rtt_now(), Duration::from_millis(90));
        // One 1448-byte segment in flight at ~1 MB/s: 1.4 ms more.
        p.in_flight = 1;
        let one = p.rtt_now();
        assert!(
            one > Duration::from_millis(91) && one < Duration::from_millis(92),
            "{one:?}"
        );
        // A full window on the path: as long to drain as an srtt.
        p.in_flight = 100;
        assert_eq!(p.rtt_now(), Duration::from_millis(195));
        // Never above srtt.
        let mut q = path(1, 60);
        q.min_rtt = Duration::from_millis(55);
        q.rttvar = Duration::from_millis(15);
        assert_eq!(q.rtt_now(), Duration::from_millis(60));
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    pub fn path(id: usize, srtt_ms: u64) -> PathSnapshot {
        PathSnapshot {
            id,
            alive: true,
            ready: true,
            backup: false,
            srtt: Duration::from_millis(srtt_ms),
            rttvar: Duration::from_millis(srtt_ms / 4),
            min_rtt: Duration::ZERO,
            cwnd: 10,
            restart_cwnd: None,
            mss: 1448,
            in_flight: 0,
            notsent: 0,
            delivery_rate: 0,
            pacing_rate: 0,
            bandwidth: 0,
            owd_us: None,
            owd_dev_us: 0,
        }
    }

    pub fn queue(bytes: u64) -> QueueView {
        QueueView {
            bytes,
            frames: bytes.div_ceil(16384) as usize,
            ..QueueView::default()
        }
    }

    /// A queue of `bytes` with `window` bytes of session flow-control room left.
    pub fn queue_win(bytes: u64, window: u64) -> QueueView {
        QueueView {
            send_window: window,
            ..queue(bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwnd_space_counts_unsent_bytes() {
        let mut p = test_util::path(0, 10);
        assert!(p.has_cwnd_space());
        p.in_flight = 9;
        assert!(p.has_cwnd_space());
        p.notsent = 1448;
        assert!(!p.has_cwnd_space());
    }
}
