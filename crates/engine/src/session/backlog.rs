//! Whether applications keep the session backlogged, whether queue control and the
//! bound on bytes ahead of the paths are engaged, and that bound.

use std::time::Instant;

use super::Session;

/// The least each carrying path counts for in the bound on bytes ahead of the paths
/// (before it has a rate estimate, and on slow paths).
pub const MIN_AHEAD: u64 = 16 * 1024;

/// The bound on bytes ahead of the paths while backpressure is not engaged: what the
/// paths carry in this time (see [`Session::backlog_room`]).
pub const AHEAD_HORIZON: std::time::Duration = std::time::Duration::from_secs(1);

/// How long applications must keep the session backlogged before the bound on bytes
/// ahead of the paths applies with no interactive traffic to protect (see
/// [`Session::backpressure_engaged`]).
pub const SUSTAINED_BACKLOG: std::time::Duration = std::time::Duration::from_secs(1);

/// A backlog that empties for less than this goes on (an application's next write
/// follows its last one's acceptance by a moment).
const BACKLOG_GAP: std::time::Duration = std::time::Duration::from_millis(100);

/// Once a backlog has been sustained, it ends only after this long without one: a
/// sender whose writes stall for a moment (a busy machine, a proxy that reads late) must
/// not drop back to the looser [`AHEAD_HORIZON`] bound and let a second of bytes in
/// ahead of the paths.
/// As long as it takes to engage, so the bound has symmetric hysteresis.
const SUSTAINED_GAP: std::time::Duration = SUSTAINED_BACKLOG;

/// How long queue control stays engaged after the last interactive bytes.
pub const ENGAGE_HOLD: std::time::Duration = std::time::Duration::from_secs(1);

impl Session {
    /// Whether queue control holds bulk bytes back now: only while an interactive stream
    /// exists and sent or received bytes within [`ENGAGE_HOLD`]. The target protects
    /// interactive traffic from the queue bulk traffic builds (QCUT's priority bands
    /// exist for it); with nothing to protect a bulk transfer runs at the paths' full
    /// rate, and a chunk two-ended schedulers split (DEMS) is not cut into target-sized
    /// pieces (held to the target, a lone download takes longer: docs/latency.md). A realtime
    /// datagram flow (a call, a game) engages it too, for the same reason.
    ///
    /// With [`EngineConfig::queue_control_sustained`], also while applications keep the
    /// session backlogged ([`SUSTAINED_BACKLOG`]): the queue is then short already when
    /// interactive traffic comes, instead of draining a full bottleneck buffer in front
    /// of it (QCUT keeps the on-device queue short whatever the traffic).
    pub fn queue_control_engaged(&self, now: Instant) -> bool {
        self.protecting(now) || self.engaged_by_backlog(now)
    }

    /// Whether queue control is engaged by a sustained backlog alone (see
    /// [`Session::queue_control_engaged`]).
    pub(super) fn engaged_by_backlog(&self, now: Instant) -> bool {
        self.cfg.queue_control_sustained && self.sustained_backlog(now)
    }

    /// Whether interactive or realtime traffic is there for queue control to protect now
    /// (see [`Session::queue_control_engaged`] and
    /// [`crate::writer::PathWriter::set_protecting`]).
    pub(super) fn protecting(&self, now: Instant) -> bool {
        let recent = |t: Option<Instant>| t.is_some_and(|t| now.saturating_duration_since(t) < ENGAGE_HOLD);
        (self.send.has_urgent_streams() && recent(self.interactive_seen)) || recent(self.realtime_seen)
    }

    /// Whether applications write faster than the paths carry: the session has been
    /// backlogged for [`SUSTAINED_BACKLOG`], refused a stream room within
    /// [`SUSTAINED_GAP`], and a stream refused is still ahead (not seen to run dry since,
    /// see [`Session::stream_source_dry`]). A stream at a fixed rate keeps a few bytes
    /// ahead of the paths at every look (a sustained backlog) but is never refused; a
    /// bulk transfer held to the bound on bytes ahead is, all the time — until its last
    /// bytes are read: from then on the queue is the transfer's real tail, which the
    /// schedulers must see as one. Held a second longer (the refusal's age alone), the
    /// slower path would take its share of a chunk's tail, which then waits for it.
    pub(super) fn bulk_held(&self, now: Instant) -> bool {
        !self.held.is_empty()
            && self.sustained_backlog(now)
            && self
                .refused_at
                .is_some_and(|t| now.saturating_duration_since(t) < SUSTAINED_GAP)
    }

    /// Whether an application holds more than the session took, beyond a second of the
    /// paths' rate already ahead of them: a stream refused room under the loose bound on
    /// bytes ahead (queue control not engaged) within [`SUSTAINED_GAP`], still ahead (not
    /// seen to run dry since). [`Session::bulk_held`] says so only after a second of
    /// backlog; a scheduler that weighs the queued bytes as all there is (ECF's wait rule)
    /// needs it from the first refusal. In a 4 MB chunk's first second ECF read the
    /// bound's 0.9 MB as the whole transfer, kept a 470 ms LTE path out of it until
    /// `bulk_held` came, and the path then started from its initial window.
    pub(super) fn bulk_withheld(&self, now: Instant) -> bool {
        !self.held.is_empty()
            && self
                .withheld_at
                .is_some_and(|t| now.saturating_duration_since(t) < SUSTAINED_GAP)
    }

    /// Whether applications have kept the session backlogged for [`SUSTAINED_BACKLOG`].
    pub(super) fn sustained_backlog(&self, now: Instant) -> bool {
        matches!(
            (self.backlog_since, self.backlog_seen),
            (Some(since), Some(_))
                if !self.backlog_gap(now) && now.saturating_duration_since(since) >= SUSTAINED_BACKLOG
        )
    }

    /// Whether the bound on bytes ahead of the paths applies: while queue control is
    /// engaged, and also once applications have kept the session backlogged for
    /// [`SUSTAINED_BACKLOG`] — a transfer that writes faster than the paths carry (an
    /// `iperf3` upload, a backup), which without the bound counts seconds of bytes as sent
    /// that are only waiting here (the sender would report about twice the rate that
    /// arrives). A
    /// chunk written at once is already whole in the session by then: a two-ended
    /// scheduler (DEMS) still sees all of it, and only its next chunk waits for room.
    pub fn backpressure_engaged(&self, now: Instant) -> bool {
        self.queue_control_engaged(now) || self.sustained_backlog(now)
    }

    /// Whether the backlog has been absent long enough to end it: [`BACKLOG_GAP`] while it
    /// builds, [`SUSTAINED_GAP`] once it has been sustained.
    pub(super) fn backlog_gap(&self, now: Instant) -> bool {
        let (Some(since), Some(seen)) = (self.backlog_since, self.backlog_seen) else {
            return true;
        };
        let allowed = if seen.saturating_duration_since(since) >= SUSTAINED_BACKLOG {
            SUSTAINED_GAP
        } else {
            BACKLOG_GAP
        };
        now.saturating_duration_since(seen) > allowed
    }

    /// Notes whether applications keep the session backlogged now: bytes wait ahead of
    /// the paths, or a stream waits for room.
    pub(super) fn note_backlog(&mut self) {
        let (ahead, _) = self.send.backlog();
        let busy = ahead + self.send.urgent_bytes() > 0 || !self.blocked.is_empty();
        let now = self.last_now;
        if !busy {
            return;
        }
        if self.backlog_gap(now) {
            self.backlog_since = Some(now);
        }
        self.backlog_seen = Some(now);
    }

    /// Under queue control, what the session may still accept from applications: the
    /// bytes it holds ahead of the paths (never handed to a socket) stay within what the
    /// paths carry in the queue target, plus a frame per path. Bytes beyond that would
    /// only wait in the session — a request would wait behind them as it would in a
    /// bloated queue, and the application's own rate control would see a rate the paths
    /// do not have (an upload through the proxy reporting twice what arrives). Each path
    /// counts at least [`MIN_AHEAD`] until it has a rate estimate, and a path queue
    /// control holds at most its limit per round trip
    /// ([`crate::paths::PathEntry::ahead_rate`]). That bound holds while
    /// [`Session::backpressure_engaged`]; otherwise a looser one, [`AHEAD_HORIZON`] of
    /// the paths' rate.
    pub(super) fn backlog_room(&self) -> u64 {
        let target = self.cfg.queue_target;
        if target.is_zero() {
            return u64::MAX;
        }
        let frame = self.max_frame_len() as u64;
        if !self.backpressure_engaged(self.last_now) {
            // Otherwise a second of the paths' rate: a transfer's first write is not let
            // past the paths by a whole stream window (4 MB: three seconds of a 10 Mbit/s
            // upload that an `iperf3` sender counted as sent), while a chunk that the
            // paths carry within a second is still whole in the session for a two-ended
            // scheduler. Not before every carrying path has a rate.
            let carrying = || self.paths.iter().filter(|p| p.carries());
            if carrying().next().is_none() || carrying().any(|p| p.snap.delivery_rate == 0) {
                return u64::MAX;
            }
            let bound: u64 = carrying()
                .map(|p| ((p.snap.delivery_rate as f64 * AHEAD_HORIZON.as_secs_f64()) as u64).max(MIN_AHEAD) + frame)
                .sum();
            let (ahead, _) = self.send.backlog();
            return bound.saturating_sub(ahead + self.send.urgent_bytes());
        }
        let bound: u64 = self
            .paths
            .iter()
            .filter(|p| p.carries())
            .map(|p| ((p.ahead_rate() as f64 * target.as_secs_f64()) as u64).max(MIN_AHEAD) + frame)
            .sum();
        let (ahead, _) = self.send.backlog();
        bound
            .max(MIN_AHEAD + frame)
            .saturating_sub(ahead + self.send.urgent_bytes())
    }
}
