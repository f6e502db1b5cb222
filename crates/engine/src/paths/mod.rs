//! Path supervision: which paths are up, whether what they hold is getting through, which
//! of them take new data, and the statistics the schedulers read.
//!
//! A path is *down* when its connection is gone, and *suspect* when it holds data and has
//! shown no sign of life for max(3 × its minimum RTT, 150 ms): its frames are then re-sent
//! on the others and it carries nothing new until it answers. A path whose quality trends
//! say it is failing is *degraded*: it takes nothing new and its frames are copied
//! elsewhere before it fails. Of the paths that can carry, only the best tier takes new
//! data. The rules are in [`crate::supervisor`]; this module keeps the state. Idle paths
//! send keepalives so that silence means something (and stay warm for a handover).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mpflex_sched::PathSnapshot;
use mpflex_wire::{Frame, Tier};

use crate::config::EngineConfig;
use crate::kernel::TcpInfo;
use crate::owd::{OwdEstimator, QueueDelay};
use crate::supervisor::{KernelView, PathState, Quality, Suspicion, Verdict};
use crate::writer::PathWriter;
use crate::MAX_PATHS;

mod entry;
mod hedge;
mod hint;
mod liveness;

pub(crate) use entry::PathEntry;
pub(crate) use hint::HintChange;
use hint::HintState;
pub use hint::LinkHint;
pub(crate) use liveness::{Load, PathCheck};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStatus {
    /// Not connected (never was, or died and is being re-dialled).
    Down,
    Up,
}

/// What a path has carried, for status output and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathCounters {
    /// Encoded frame bytes handed to the path.
    pub bytes_sent: u64,
    /// Encoded frame bytes received on the path.
    pub bytes_received: u64,
    /// Stream payload bytes sent, first copies only.
    pub payload_sent: u64,
    /// Stream payload bytes sent again here after another path had sent them.
    pub payload_resent: u64,
    /// Payload bytes received that were already delivered (duplicates).
    pub duplicate_received: u64,
    /// Times the path went down.
    pub failures: u64,
    /// Times the path went silent while holding data, so its frames were re-sent.
    pub suspicions: u64,
    /// Times its quality trends or a link hint demoted it (degraded), so its frames were
    /// copied elsewhere.
    pub demotions: u64,
    /// Frames re-sent here because the peer's reorder buffer stalled on them.
    pub stall_reinjections: u64,
    /// Segments the kernel retransmitted on the path's connections (`tcpi_total_retrans`,
    /// summed over reconnections): loss on the link itself, which `payload_resent` does
    /// not see.
    pub tcp_retransmits: u64,
    /// Datagrams handed to the path (copies included).
    pub datagrams_sent: u64,
}

/// The least allowance a capped path takes data with: one full frame and its header
/// (smaller frames than that are not worth cutting a record for).
pub const MIN_ALLOWANCE: u64 = 16 * 1024 + 64;

/// Send-time records kept per path to match arrival reports against.
const MAX_SENT_LOG: usize = 8192;

/// How long a re-joined connection's records are corrected at no less than the rate its
/// predecessor reached ([`Paths::serialisation_rate`]): one base window, by when the new
/// connection has left slow start on the lab's links.
pub(crate) const REJOIN_RATE_FOR: Duration = crate::owd::BASE_WINDOW;

/// Bytes handed to a path's socket and not yet acknowledged by the peer's kernel.
pub(crate) fn bytes_in_flight(s: &PathSnapshot) -> u64 {
    s.notsent as u64 + s.in_flight as u64 * s.mss.max(1) as u64
}

/// How much sooner another path must deliver an interactive frame for the path asking to
/// leave it: the asking path writes now, the other's writer must first wake up.
pub(crate) const URGENT_MARGIN: Duration = Duration::from_millis(2);

/// When a frame of `len` bytes handed to the path now reaches the peer, seconds from now:
/// the one-way propagation delay (half the minimum RTT, or of the smoothed RTT while the
/// minimum is unknown), the queue ahead of it, and the time its own bytes and those unsent
/// in the socket take at the path's rate or, if longer, to fit its congestion window
/// ([`window_wait`]). Not the smoothed RTT: it lags a queue that
/// built up or drained (the latency issue asks for the path that delivers first *now*;
/// TxDelay, seed 000 ch. IV, counts the local queue the same way). The queue is the one
/// the peer's arrival reports measure (`queue`) while they are fresh; otherwise the bytes
/// in flight beyond rate × min RTT stand for it — which also counts the ACKs of a path
/// whose reverse direction is loaded as queue. Infinite for a path without estimates.
pub(crate) fn arrival_secs(s: &PathSnapshot, queue: Option<Duration>, len: usize) -> f64 {
    let base = if s.min_rtt.is_zero() { s.srtt } else { s.min_rtt };
    if base.is_zero() {
        return f64::INFINITY;
    }
    let rate = if s.delivery_rate > 0 {
        s.delivery_rate as f64
    } else {
        s.rate_estimate()
    }
    .max(1.0);
    let queued = match queue {
        Some(q) => q.as_secs_f64(),
        None => {
            let pipe = rate * base.as_secs_f64();
            let in_flight = s.in_flight as f64 * s.mss.max(1) as f64;
            (in_flight - pipe).max(0.0) / rate
        }
    };
    let ahead = s.notsent as f64 + len as f64;
    base.as_secs_f64() / 2.0 + queued + (ahead / rate).max(window_wait(s, ahead))
}

/// How long the last of `ahead` bytes written to the socket now waits for room in the
/// congestion window, seconds: beyond the window, segments leave as acknowledgements free
/// room, a window per round trip. The delivery rate does not show a window cut: BBR's
/// ProbeRTT holds a path at four segments for 200 ms every 10 s (Cardwell et al., BBR),
/// and a loss halves CUBIC's, while the rate estimate still reads the rate before; an
/// interactive frame written there waits a round trip or more.
fn window_wait(s: &PathSnapshot, ahead: f64) -> f64 {
    let cwnd = s.send_cwnd().max(1) as f64;
    let segments = (ahead / s.mss.max(1) as f64).ceil();
    let over = (s.in_flight as f64 + segments - cwnd).max(0.0);
    over / cwnd * s.srtt.as_secs_f64()
}

/// What a `TCP_INFO` reading changed on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reading {
    /// A suspect path answered: it is released.
    pub released: bool,
    pub verdict: Verdict,
}

#[derive(Debug)]
pub(crate) struct Paths {
    entries: Vec<PathEntry>,
    /// The peer's ACK delay, part of every suspicion threshold.
    pub ack_delay: Duration,
}

impl Paths {
    pub fn new(cfg: &EngineConfig) -> Self {
        Paths {
            entries: Vec::new(),
            ack_delay: cfg.ack_delay,
        }
    }

    pub fn ensure(&mut self, path: usize, now: Instant) {
        assert!(path < MAX_PATHS, "path index {path} out of range");
        while self.entries.len() <= path {
            let id = self.entries.len();
            self.entries.push(PathEntry::new(id, now));
        }
    }

    pub fn get(&self, path: usize) -> Option<&PathEntry> {
        self.entries.get(path)
    }

    pub fn get_mut(&mut self, path: usize) -> Option<&mut PathEntry> {
        self.entries.get_mut(path)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &PathEntry> {
        self.entries.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut PathEntry> {
        self.entries.iter_mut()
    }

    /// A connection of `path` is established (first time or again).
    pub fn up(&mut self, path: usize, now: Instant) {
        self.ensure(path, now);
        let p = &mut self.entries[path];
        // The snapshot still holds the connection before this one (the new one's first
        // `TCP_INFO` reading replaces it): what that one delivered, before its silence if
        // it had one, is the link's rate for this one's first records
        // ([`Paths::serialisation_rate`]).
        let before = p.snap.delivery_rate.max(std::mem::take(&mut p.rate_at_silence));
        p.rejoined = (p.joins > 0 && before > 0).then_some((before as f64, now));
        p.status = PathStatus::Up;
        p.joins = p.joins.wrapping_add(1);
        p.snap.ready = false;
        p.last_recv = now;
        p.last_send = now;
        p.unanswered = None;
        p.progress = now;
        p.held = 0;
        p.suspicion.since = None;
        p.suspicion.next_probe = None;
        p.kernel = KernelView::new(now);
        p.quality.new_connection();
        if p.counters.failures > 0 || p.counters.suspicions > 0 {
            p.quality.outage(now);
        }
        p.ctrl.clear();
        p.dup.clear();
        // A new connection counts its retransmissions from zero.
        p.retrans_seen = 0;
        self.refresh();
    }

    /// Sets `path`'s tier.
    /// Sets what the path may still be handed under a data cap (`None`: no cap). A path
    /// with less than [`MIN_ALLOWANCE`] left takes no data until it gets more: the next
    /// tier carries meanwhile.
    pub fn set_allowance(&mut self, path: usize, allowance: Option<u64>, now: Instant) {
        self.ensure(path, now);
        self.entries[path].allowance = allowance;
        self.refresh();
    }

    /// Counts `n` frame bytes handed to the path against its allowance.
    pub fn spend(&mut self, path: usize, n: u64) {
        let Some(a) = self.entries.get_mut(path).and_then(|p| p.allowance.as_mut()) else {
            return;
        };
        let was = *a >= MIN_ALLOWANCE;
        *a = a.saturating_sub(n);
        if was && *a < MIN_ALLOWANCE {
            self.refresh();
        }
    }

    pub fn set_tier(&mut self, path: usize, tier: Tier, now: Instant) {
        self.ensure(path, now);
        let p = &mut self.entries[path];
        let was_quiet = p.quiet();
        p.tier = tier;
        self.woken(path, was_quiet, now);
    }

    /// Holds `path` back for the energy-aware mode, or lets it carry again.
    pub fn set_energy_standby(&mut self, path: usize, standby: bool, now: Instant) {
        self.ensure(path, now);
        let p = &mut self.entries[path];
        let was_quiet = p.quiet();
        p.energy_standby = standby;
        self.woken(path, was_quiet, now);
    }

    /// After a tier change: a path that was quiet and no longer is starts its silence
    /// clocks now (it was not expected to talk), and the carrying set is decided again.
    fn woken(&mut self, path: usize, was_quiet: bool, now: Instant) {
        let p = &mut self.entries[path];
        p.snap.backup = p.effective_tier() >= Tier::Backup;
        if was_quiet && !p.quiet() {
            p.last_recv = p.last_recv.max(now);
            p.unanswered = None;
            p.progress = p.progress.max(now);
        }
        self.refresh();
    }

    /// Decides which paths take new data: of those up and not suspect, the healthy ones
    /// (or, while none is, the degraded ones: a failing path is better than none, and
    /// WearMan never withdraws one before a replacement exists), and of those the best
    /// tier. The schedulers see only these as alive.
    pub fn refresh(&mut self) {
        let carrying = self.carrying_without(0);
        for p in &mut self.entries {
            p.eligible = carrying & (1u64 << p.snap.id) != 0;
            p.snap.alive = p.eligible;
        }
    }

    /// Whether some path other than `path` would take new data (the rule of
    /// [`Paths::refresh`] with `path` left out).
    pub fn others_carry(&self, path: usize) -> bool {
        let exclude = self.get(path).map_or(0, |p| 1u64 << p.snap.id);
        self.carrying_without(exclude) != 0
    }

    /// The paths (a mask) that would take new data were those in `exclude` suspect: the
    /// rule of [`Paths::refresh`] over the others.
    fn carrying_without(&self, exclude: u64) -> u64 {
        let spent = |p: &PathEntry| p.allowance.is_some_and(|a| a < MIN_ALLOWANCE);
        let candidate = |p: &PathEntry| {
            exclude & (1u64 << p.snap.id) == 0 && p.is_up() && !p.suspect() && p.tier < Tier::Off && !spent(p)
        };
        let healthy = self.entries.iter().any(|p| candidate(p) && !p.degraded());
        let pool = |p: &PathEntry| candidate(p) && (!healthy || !p.degraded());
        let best = self
            .entries
            .iter()
            .filter(|p| pool(p))
            .map(|p| p.effective_tier())
            .min();
        self.entries
            .iter()
            .filter(|p| pool(p) && Some(p.effective_tier()) == best)
            .fold(0, |m, p| m | 1u64 << p.snap.id)
    }

    /// The kernel reports `total` retransmitted segments on `path`'s current connection.
    pub fn kernel_retransmits(&mut self, path: usize, total: u32) {
        let Some(p) = self.entries.get_mut(path) else { return };
        p.counters.tcp_retransmits += total.saturating_sub(p.retrans_seen) as u64;
        p.retrans_seen = p.retrans_seen.max(total);
    }

    /// A `TCP_INFO` reading of `path`'s socket at `now`: retransmissions, the socket's
    /// last ACK (a suspect path that was acknowledged something answered), and with
    /// `proactive` the quality monitor's verdict.
    pub fn read_kernel(&mut self, path: usize, info: &TcpInfo, now: Instant, proactive: bool) -> Reading {
        let before = self.get(path).map(|p| p.counters.tcp_retransmits);
        self.kernel_retransmits(path, info.total_retrans);
        if let Some(p) = self.entries.get_mut(path) {
            if before.is_some_and(|b| p.counters.tcp_retransmits > b) {
                p.last_loss = Some(now);
            }
        }
        let Some(p) = self.entries.get_mut(path).filter(|p| p.is_up()) else {
            return Reading {
                released: false,
                verdict: Verdict::Unchanged,
            };
        };
        let was_idle = p.kernel.unacked == 0;
        let seen_idle = p.kernel.read_at;
        let answer = p.kernel.read(info, now);
        if was_idle && info.unacked > 0 {
            // Bytes written since the last reading, when the socket held none: its busy
            // spell started then, not at its last ACK.
            p.progress = p.progress.max(seen_idle);
        }
        // A suspect path is released when its connection moves. An ACK that moves
        // nothing (a duplicate: the peer receives, but the bytes the dark link swallowed
        // still wait for the connection's backed-off retransmission) says the link is
        // back: probe now, a fresh connection carries at once.
        let released = answer.moved && p.suspect();
        if answer.link && !answer.moved && p.suspect() {
            p.suspicion.next_probe = Some(now);
        }
        let verdict = if proactive && !p.suspect() && !released {
            p.quality.read(info, now)
        } else {
            Verdict::Unchanged
        };
        if verdict == Verdict::Demoted {
            p.counters.demotions += 1;
        }
        if released || verdict != Verdict::Unchanged {
            if released {
                self.release(path, now);
            } else {
                self.refresh();
            }
        }
        Reading { released, verdict }
    }

    /// The suspect `path` answered at `now`: it carries again.
    fn release(&mut self, path: usize, now: Instant) {
        let threshold = self.suspect_after(&self.entries[path], now);
        let p = &mut self.entries[path];
        p.suspicion.release(now, threshold);
        p.progress = now;
        p.quality.outage(now);
        self.refresh();
    }

    /// The connection of `path` is gone. False if it was not up.
    pub fn down(&mut self, path: usize) -> bool {
        let Some(p) = self.entries.get_mut(path) else {
            return false;
        };
        if p.status == PathStatus::Down {
            return false;
        }
        p.status = PathStatus::Down;
        p.snap.ready = false;
        p.counters.failures += 1;
        p.ctrl.clear();
        p.dup.clear();
        p.held = 0;
        p.suspicion.since = None;
        p.suspicion.next_probe = None;
        p.kernel.unacked = 0;
        self.refresh();
        true
    }

    /// `bytes` arrived on `path`. True if a suspect path came back.
    pub fn heard(&mut self, path: usize, now: Instant, bytes: usize) -> bool {
        self.ensure(path, now);
        let p = &mut self.entries[path];
        p.last_recv = now;
        p.unanswered = None;
        p.progress = now;
        p.counters.bytes_received += bytes as u64;
        if p.suspect() && p.is_up() {
            self.release(path, now);
            return true;
        }
        false
    }

    /// Marks `path` suspect at `now` (the session re-sends what it held).
    pub fn mark_suspect(&mut self, path: usize, now: Instant) {
        let p = &mut self.entries[path];
        p.rate_at_silence = p.rate_at_silence.max(p.snap.delivery_rate);
        p.suspicion.start(now);
        p.quality.outage(now);
        p.held = 0;
        p.counters.suspicions += 1;
        self.refresh();
    }

    pub fn progress(&mut self, path: usize, now: Instant) {
        if let Some(p) = self.entries.get_mut(path) {
            p.progress = now;
        }
    }

    /// A frame copy left `path` acknowledged.
    /// The ACK shows progress only on a path that held the sole copy: of several copies
    /// it cannot say which arrived, and crediting them all would keep a dark path that
    /// held one of them from being suspected (the arrival reports credit the path each
    /// copy actually crossed).
    pub fn released(&mut self, mask: u64, now: Instant) {
        let sole = mask.is_power_of_two();
        let mut bits = mask;
        while bits != 0 {
            let p = &mut self.entries[bits.trailing_zeros() as usize];
            bits &= bits - 1;
            p.held = p.held.saturating_sub(1);
            if sole {
                p.progress = now;
            }
        }
    }

    /// Books a frame copy handed to `path`: it holds one more, and a stamped data frame's
    /// send time and bytes in flight are kept for its arrival report.
    pub fn booked(&mut self, path: usize, now: Instant, stamp: Option<(u32, u64)>) {
        let p = &mut self.entries[path];
        if p.held == 0 {
            p.progress = now;
        }
        p.held += 1;
        if let Some((ts, bif)) = stamp {
            if p.sent_log.len() >= MAX_SENT_LOG {
                p.sent_log.pop_front();
            }
            p.sent_log.push_back((ts, bif, 0));
        }
    }

    /// A record of `len` bytes stamped `ts` was closed on `path`: its frames arrive when
    /// the whole record has, so their one-way delays include its serialisation.
    pub fn record_closed(&mut self, path: usize, ts: u32, len: usize) {
        let p = &mut self.entries[path];
        for e in p.sent_log.iter_mut().rev() {
            if e.0 != ts {
                break;
            }
            e.2 = len as u32;
        }
    }

    /// The peer's arrival report of a frame stamped `ts` on path `on`, `delay` after; the
    /// frame left `age` ago. True if it released a suspect path.
    pub fn on_report(&mut self, on: usize, ts: u32, delay: u32, age: Duration, now: Instant) -> bool {
        let released = self.entries.get(on).is_some_and(|p| p.suspect() && p.is_up());
        if released {
            self.release(on, now);
        }
        let Some(p) = self.entries.get_mut(on) else {
            return false;
        };
        // The path showed life when the frame reached the peer, not when the report came
        // back (over the slowest path, perhaps): sent `age` ago, it arrived after the
        // path's one-way delay (half its minimum RTT) and the queue it met (its delay
        // beyond the smallest the reports showed; the clock offset cancels).
        let arrived = match (now.checked_sub(age), p.queue.base()) {
            (Some(sent), Some(base)) => {
                let queued = Duration::from_micros((delay as i32 as i64 - base).max(0) as u64);
                (sent + Self::base_rtt(p) / 2 + queued).min(now)
            }
            _ => now,
        };
        p.progress = p.progress.max(arrived);
        // The bytes in flight when the frame was sent: drop older records, find this one.
        let mut found = None;
        while let Some(&(t, b, len)) = p.sent_log.front() {
            if t == ts {
                found = Some((b, len));
                break;
            }
            if (ts.wrapping_sub(t) as i32) > 0 {
                p.sent_log.pop_front();
            } else {
                break;
            }
        }
        let (bif, len) = found.unwrap_or_else(|| (bytes_in_flight(&p.snap), 0));
        // Wrapping difference of two microsecond clocks: offset plus delay, signed.
        let owd = delay as i32 as i64;
        p.owd.sample(bif, owd);
        // The queue is what the record waited beyond its own serialisation: a 3 KB record
        // takes 12 ms on a 2 Mbit/s link, and the smallest records set the base. The rate
        // is the higher of the window's and the delivery rate's: a low early sample would
        // inflate the correction, lower the base for its whole window and read every later
        // sample as queue.
        let own = (len as f64 / Self::serialisation_rate(p, now).max(1.0) * 1e6) as i64;
        p.queue.sample(owd - own, now);
        released
    }

    /// The rate a record's serialisation is taken off its one-way delay at (bytes per
    /// second): the path's rate estimate, but for [`REJOIN_RATE_FOR`] after a re-join no
    /// less than the delivery rate of the connection before (before its silence).
    ///
    /// Rule: a correction at a rate below the link's lowers the queue reading's base, and
    /// the base is a minimum kept 10 to 20 s ([`QueueDelay`]), so every later reading of
    /// the path shows a queue that is not there. A connection that re-joins after an
    /// outage crosses the same link as the one before it, but its rate estimate (initial
    /// window over RTT) is a fifth of the link's for its first round trips: LTE's 16 KB
    /// records on seed-default were corrected by 80 ms instead of 14, the base sat 66 ms
    /// low, queue control held the path at a few segments, and when WiFi went down 9 s
    /// later LTE carried 2 of its 9 Mbit/s alone (lab workload `outages`, down-1-0). The
    /// connection before measured the link: its delivery rate, not its window over its
    /// RTT, which can stand for several times the link's rate (an uploading LTE path held
    /// 71 segments for 285 KB/s) and would then leave part of every record's own
    /// serialisation in its samples, recent ones too, read as queue. Bounded in time
    /// because the link may have changed during the outage, and by then the new
    /// connection's estimate has its own measure of it. (The first connection of a path
    /// has none before it; its base can start low: docs/latency.md, Open.)
    fn serialisation_rate(p: &PathEntry, now: Instant) -> f64 {
        let own = p.snap.rate_estimate();
        match p.rejoined {
            Some((before, at)) if now.saturating_duration_since(at) < REJOIN_RATE_FOR => own.max(before),
            _ => own,
        }
    }

    /// How long `path`'s frames wait in queues now (see [`QueueDelay`]).
    pub fn queue_delay(&self, path: usize, now: Instant) -> Option<Duration> {
        self.get(path)?.queue.get(now)
    }

    /// Until when `path`'s queue reading keeps its base within `slack` if no lower sample
    /// comes (see [`QueueDelay::base_kept_until`]).
    pub fn base_kept_until(&self, path: usize, slack: Duration) -> Option<Instant> {
        self.get(path)?.queue.base_kept_until(slack)
    }

    /// Whether an interactive frame of `len` bytes goes on `on`, `pending` more bytes
    /// being on their way to its socket: unless another path that carries delivers it
    /// sooner (see [`arrival_secs`]) by more than [`URGENT_MARGIN`] — `on` is the one
    /// ready to write now. Of the paths that carry: a standby tier never.
    pub fn urgent_here(&self, len: usize, on: usize, pending: usize, now: Instant) -> bool {
        self.first_within(len, on, pending, now, URGENT_MARGIN)
    }

    /// Whether `on` delivers `len` bytes (behind `pending` more) no later than `margin`
    /// after the path that carries and delivers them first (see [`arrival_secs`]).
    pub fn first_within(&self, len: usize, on: usize, pending: usize, now: Instant, margin: Duration) -> bool {
        let Some(here) = self.get(on).filter(|p| p.carries()) else {
            return false;
        };
        // Only eligible paths carry: the tiers are in `carries` already.
        let usable = |p: &PathEntry| p.carries();
        let mine = arrival_secs(&here.snap, here.queue.get(now), len + pending);
        !self
            .entries
            .iter()
            .filter(|p| p.snap.id != on && usable(p))
            .any(|p| arrival_secs(&p.snap, p.queue.get(now), len) + margin.as_secs_f64() < mine)
    }

    /// Every path's statistics, with the one-way-delay estimates, for a scheduler.
    pub fn snapshots(&self) -> Vec<PathSnapshot> {
        self.entries
            .iter()
            .map(|p| {
                let mut s = p.snap.clone();
                s.owd_us = p.owd.estimate(bytes_in_flight(&s));
                s.owd_dev_us = p.owd.deviation();
                s
            })
            .collect()
    }

    /// The raw statistics, as the kernel reported them.
    pub fn raw_snapshots(&self) -> Vec<PathSnapshot> {
        self.entries.iter().map(|p| p.snap.clone()).collect()
    }

    pub fn entry(&mut self, path: usize) -> &mut PathEntry {
        &mut self.entries[path]
    }

    /// Forgets every frame reference (the peer lost the session): copies owed, send logs
    /// and held counts.
    pub fn forget_frames(&mut self) {
        for p in &mut self.entries {
            p.dup.clear();
            p.sent_log.clear();
            p.held = 0;
        }
    }
}

#[cfg(test)]
mod tests;
