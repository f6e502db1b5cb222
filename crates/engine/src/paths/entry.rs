//! One path's entry in the path table: its connection state, counters, supervision
//! state and the readings the schedulers and the writer take from it.

use super::*;

#[derive(Debug)]
pub(crate) struct PathEntry {
    pub status: PathStatus,
    pub snap: PathSnapshot,
    pub counters: PathCounters,
    /// Control frames that must go on this very path (Ping/Pong/Close).
    pub ctrl: VecDeque<Frame>,
    /// Sequence numbers to send here as copies (redundant scheduling, stalls).
    pub dup: VecDeque<u64>,
    pub last_recv: Instant,
    /// Last time anything was handed to this path (a ping counts from when it is queued).
    pub last_send: Instant,
    /// When the oldest keepalive not followed by anything heard on the path was queued:
    /// its silence since then is not excused by the session being idle.
    pub unanswered: Option<Instant>,
    /// Silent too long while holding data (see [`crate::supervisor`]), and the
    /// threshold's hysteresis.
    pub suspicion: Suspicion,
    /// The WearMan monitor: whether its quality trends say it is failing.
    pub quality: Quality,
    /// What the link layer under it says (a WiFi signal fading: [`LinkHint`]).
    pub(super) hint: HintState,
    /// Its tier ([`Tier::Primary`] …): lower tiers carry only while no
    /// better one can.
    pub tier: Tier,
    /// Held back by the energy-aware mode ([`crate::emptcp`]): a tier below every
    /// configured one, and quiet (see [`PathEntry::quiet`]).
    pub energy_standby: bool,
    /// The path connection's writer (late binding, queue control): made when the path
    /// comes up ([`crate::Session::path_up_with`]).
    pub writer: Option<PathWriter>,
    /// Frame bytes (as `bytes_sent` counts them) the path may still be handed under a
    /// data cap; `None`: no cap (see [`crate::Session::set_path_allowance`]).
    pub allowance: Option<u64>,
    /// (client) The allowance last granted the server on this path, restated on each new
    /// connection of the path.
    pub grant: Option<u64>,
    /// May take new data now (up, not suspect, healthy unless no path is, best tier):
    /// set by [`Paths::refresh`].
    pub(super) eligible: bool,
    /// Its kernel socket at the last `TCP_INFO` reading.
    pub kernel: KernelView,
    /// The last sign of life before the silence whose frames were copied elsewhere (one
    /// hedge per silence).
    pub(super) hedged: Option<Instant>,
    pub(super) ping_id: u64,
    /// How many connections of this path have joined the session (both ends count the
    /// same joins; see [`mpflex_wire::Frame::PathGone`]).
    pub joins: u32,
    /// Unacknowledged frames this path holds a copy of.
    pub held: usize,
    /// Last sign that what this path holds is getting through: anything received on it,
    /// an arrival report or ACK covering a frame sent on it, or the moment it went from
    /// holding nothing to holding something.
    pub progress: Instant,
    /// One-way delay towards the peer, from its arrival reports.
    pub owd: OwdEstimator,
    /// The queue its frames wait in now, from the same reports.
    pub queue: QueueDelay,
    /// When the current connection is a re-join: the rate the connection before it had
    /// reached (bytes per second) and when this one joined (see
    /// [`Paths::serialisation_rate`]).
    pub(super) rejoined: Option<(f64, Instant)>,
    /// The delivery rate when the current connection was last suspected (0: never): its
    /// rate before the silence, which the kernel's samples of the retransmissions that
    /// end an outage replace with a fraction of it.
    pub(super) rate_at_silence: u64,
    /// The kernel's retransmission count on the current connection when last read.
    pub(super) retrans_seen: u32,
    /// When a reading last showed a new retransmission: the link drops segments (see
    /// [`Paths::hedge_target`]).
    pub(super) last_loss: Option<Instant>,
    /// (timestamp, bytes in flight) of recent data frames sent here, oldest first, to
    /// bin the arrival reports by the bytes in flight at send time.
    /// The record's length (bytes) rides along once the record is closed (see
    /// [`Paths::record_closed`]).
    pub(super) sent_log: VecDeque<(u32, u64, u32)>,
}

impl PathEntry {
    pub(super) fn new(id: usize, now: Instant) -> Self {
        PathEntry {
            status: PathStatus::Down,
            snap: PathSnapshot {
                id,
                ..Default::default()
            },
            counters: PathCounters::default(),
            ctrl: VecDeque::new(),
            dup: VecDeque::new(),
            last_recv: now,
            last_send: now,
            unanswered: None,
            suspicion: Suspicion::default(),
            quality: Quality::default(),
            hint: HintState::default(),
            tier: Tier::Primary,
            energy_standby: false,
            writer: None,
            allowance: None,
            grant: None,
            eligible: false,
            kernel: KernelView::new(now),
            hedged: None,
            ping_id: 0,
            joins: 0,
            held: 0,
            progress: now,
            owd: OwdEstimator::default(),
            queue: QueueDelay::default(),
            rejoined: None,
            rate_at_silence: 0,
            retrans_seen: 0,
            last_loss: None,
            sent_log: VecDeque::new(),
        }
    }

    pub fn is_up(&self) -> bool {
        self.status == PathStatus::Up
    }

    pub fn suspect(&self) -> bool {
        self.suspicion.is_suspect()
    }

    /// The path's rate for the bound on bytes ahead of the paths, bytes per second: its
    /// delivery-rate estimate, but while queue control limits what the path holds, no
    /// more than that limit per smoothed round trip (what the path carries so held, by
    /// Little's law). Held by the limit, the path is application-limited throughout, and
    /// an application-limited rate sample is kept while it is the highest (by the kernel,
    /// and by [`crate::kernel::RateEstimate`]) until one that is not replaces it — which
    /// does not come while the limit holds. A single sample far above the link's rate (a
    /// fresh connection's first exchanges give such samples) would otherwise set the
    /// bound for as long as queue control stays engaged (for a sustained upload, all of
    /// it). The
    /// limit is steered by the queue the path's bytes meet, so it does not share that
    /// error. Before a minimum RTT is known the limit is a stand-in and is not used.
    pub fn ahead_rate(&self) -> u64 {
        let rate = self.snap.delivery_rate;
        match self.writer.as_ref().and_then(PathWriter::queue_limit) {
            Some(limit) if !self.snap.min_rtt.is_zero() && !self.snap.srtt.is_zero() => {
                rate.min((limit as f64 / self.snap.srtt.as_secs_f64()) as u64)
            }
            _ => rate,
        }
    }

    /// May take new data: up, not suspect, not degraded while a healthy path exists, and
    /// of the best tier among such paths (see [`Paths::refresh`]).
    pub fn carries(&self) -> bool {
        self.eligible
    }

    /// The tier it carries in: its own, or [`Tier::EnergyStandby`] while the
    /// energy-aware mode holds it back (and the tier its peer announced, on a server).
    pub fn effective_tier(&self) -> Tier {
        if self.energy_standby {
            self.tier.max(Tier::EnergyStandby)
        } else {
            self.tier
        }
    }

    /// Sends no keepalives and times out never: an energy standby holding nothing.
    /// Reason: a keepalive wakes a cellular radio and pays its promotion and tail (Lim,
    /// seed 003 §3.1.2) — eMPTCP does not even open the subflow; and a path that must not
    /// talk cannot be expected to answer.
    pub fn quiet(&self) -> bool {
        self.effective_tier() >= Tier::EnergyStandby && !self.eligible && !self.holding()
    }

    /// Last sign of life: the session's progress or an ACK its kernel socket received.
    pub(super) fn last_life(&self) -> Instant {
        self.progress.max(self.kernel.last_ack)
    }

    /// Holds data that should be getting through: frames of ours, or bytes its kernel
    /// socket has not had acknowledged (the only sign on a path that carries just control
    /// frames, as a downloading client's does).
    pub(super) fn holding(&self) -> bool {
        self.held > 0 || self.kernel.unacked > 0
    }

    /// Judged to be failing before it fails: by its quality trends, or by a link hint.
    pub fn degraded(&self) -> bool {
        self.quality.degraded() || self.hint.weak
    }

    /// Hinted weak by the link layer (see [`LinkHint`]).
    pub fn hinted_weak(&self) -> bool {
        self.hint.weak
    }

    /// Its state as status output names it.
    pub fn state(&self) -> PathState {
        if !self.is_up() {
            PathState::Down
        } else if self.suspect() {
            PathState::Suspect
        } else if self.degraded() && !self.eligible {
            PathState::Degraded
        } else if self.eligible {
            PathState::Active
        } else if self.held > 0 {
            PathState::Draining
        } else {
            PathState::Standby
        }
    }

    /// Bytes in flight on this path plus `extra` about to be handed over.
    pub fn bif(&self, extra: usize) -> u64 {
        bytes_in_flight(&self.snap) + extra as u64
    }
}
