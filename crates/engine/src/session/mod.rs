//! The session: a thin owner of the sub-machines that routes the driver's events to them.
//!
//! - [`crate::send`]: staging, sequencing, splitting, the outgoing and retransmit queues;
//! - [`crate::recv`]: the reorder buffer and per-stream early delivery;
//! - [`crate::flow`]: stream and session credit, and each stream's receive buffer;
//! - [`crate::paths`]: liveness, suspicion, keepalives, the statistics schedulers read;
//! - [`crate::control`]: ACKs, arrival reports and stall notices for the peer;
//! - [`crate::reinject`]: which copies to send where.
//!
//! `transmit` builds what a path sends (`urgent` its interactive frames, `decision` what
//! the scheduler decides of the bulk backlog), `late_binding` runs a path writer's step
//! around it, `receive` takes what a path delivered, `streams` is the stream API of this
//! side and `path_api` its path API (up and down, statistics, tiers, allowances), `backlog`
//! the bound on bytes ahead of the paths, `timers` keeps the clocks.

mod backlog;
mod decision;
mod energy;
mod flows;
mod late_binding;
mod path_api;
mod receive;
mod record;
mod send_datagrams;
mod streams;
mod timers;
mod transmit;
mod urgent;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use mpflex_sched::{PathSnapshot, Scheduler, SchedulerKind};
use mpflex_wire::{CloseCode, FlowCloseCode, ResetCode, TargetAddr};

use crate::config::{EngineConfig, Role};
use crate::control::Feedback;
use crate::datagram::{DatagramClass, DatagramCounters, Datagrams, FlowId, PendingClose};
use crate::flow::{CreditPool, SessionFlow, Stream};
use crate::paths::{bytes_in_flight, Load, PathCounters, PathStatus, Paths};
use crate::recv::Assembler;
use crate::send::SendQueue;
use crate::supervisor::PathState;
use crate::StreamId;

#[cfg(test)]
pub(crate) use backlog::MIN_AHEAD;
pub use energy::{EnergyAwareView, EnergyMode};
pub use transmit::PollTransmit;

/// Something the driver must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// (server) The peer opened a stream: connect it to `addr`. `scheduler` is the one
    /// the client asks for (`None`: the server's default).
    StreamOpened {
        stream: StreamId,
        addr: TargetAddr,
        scheduler: Option<SchedulerKind>,
    },
    /// Data or a fin is waiting in [`Session::stream_recv`].
    StreamReadable(StreamId),
    /// The stream may send again (flow-control credit arrived).
    StreamWritable(StreamId),
    /// The stream is gone: the peer reset it, or the peer lost the session.
    StreamReset { stream: StreamId, code: ResetCode },
    /// Frames are waiting: paths that are idle should poll again.
    WakePaths,
    /// Frames for this path only are waiting (its keepalive, or the answer to the peer's):
    /// its writer should poll again.
    WakePath(usize),
    /// The path has been silent for too long; the driver should drop its connection.
    PathTimedOut(usize),
    /// (server) The client says the path's link is gone (its connection cannot carry
    /// anything any more); the driver should drop its connection.
    PathGone(usize),
    /// The path is suspect (silent while holding data): the driver should probe it with a
    /// fresh connection now, whose joining replaces the silent one — its kernel socket
    /// will not try again before its backed-off retransmission timer (MPTCP-MA's point:
    /// reuse a path as soon as it works, not when TCP's timer says). Repeated every probe
    /// interval while the path stays suspect. A server cannot dial and ignores it.
    ProbePath(usize),
    /// The peer closed the session.
    Closed { code: CloseCode },
    /// This side gave the session up and queued a `Close` with `code` to the peer
    /// ([`CloseCode::NoProgress`]: the peer acknowledged nothing for
    /// [`EngineConfig::ack_timeout`]); the session is to be torn down.
    GaveUp { code: CloseCode },
    /// (server) The peer opened datagram flow `flow` towards `addr`: give it a socket, or
    /// close it ([`Session::close_flow`]).
    FlowOpened { flow: FlowId, addr: TargetAddr },
    /// The peer closed datagram flow `flow`.
    FlowClosed { flow: FlowId, code: FlowCloseCode },
    /// A datagram of `flow` arrived (first copies only).
    Datagram { flow: FlowId, data: Bytes },
}

/// A peer broke the protocol; the session cannot continue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("peer acknowledged sequence {cum} that was never sent (next is {next})")]
    AckBeyondSent { cum: u64, next: u64 },
    #[error("peer exceeded flow control on stream {0}")]
    FlowControl(StreamId),
    #[error("peer exceeded the session receive window")]
    SessionWindow,
    #[error("peer opened stream {0} twice")]
    DuplicateStream(StreamId),
    #[error("peer opened too many streams")]
    TooManyStreams,
    #[error("a client cannot accept streams")]
    UnexpectedOpen,
    #[error("a client cannot accept datagram flows")]
    UnexpectedFlowOpen,
    #[error("unexpected {0} frame on an established path")]
    Unexpected(&'static str),
    #[error("peer sent stream {0} bytes out of place (a gap or an overlap in the stream)")]
    StreamOffset(StreamId),
    #[error("peer asked for scheduler number {0}, which no scheduler has")]
    UnknownScheduler(u8),
}

/// What [`Session::stream_recv`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvResult {
    Data(Bytes),
    /// The peer will send no more.
    Fin,
    /// Nothing yet.
    Blocked,
    /// The stream does not exist (reset or finished).
    Gone,
}

pub struct Session {
    cfg: EngineConfig,
    epoch: Instant,
    scheduler: Box<dyn Scheduler>,
    /// Schedulers streams' policies ask for other than the session's, made when first
    /// needed.
    stream_schedulers: Vec<(SchedulerKind, Box<dyn Scheduler>)>,
    paths: Paths,
    streams: HashMap<StreamId, Stream>,
    /// Bytes of streams the peer reset that arrived before its reset and that the
    /// application has not read yet ([`Session::stream_take`] hands them out, then says
    /// the stream is gone). Charged to the session's receive credit until read, so the
    /// session window bounds them.
    reset_tails: HashMap<StreamId, VecDeque<Bytes>>,
    next_stream: StreamId,
    /// Streams waiting for flow-control credit.
    blocked: HashSet<StreamId>,
    /// This side closed the session for the peer's lack of acknowledgements.
    gave_up: bool,
    /// Streams whose new receive window the peer must hear of.
    windows_needed: BTreeSet<StreamId>,
    flow: SessionFlow,
    send: SendQueue,
    recv: Assembler,
    feedback: Feedback,
    events: VecDeque<Event>,
    /// Latest time the driver told us.
    last_now: Instant,
    /// When the session last started carrying (its first stream or flow after none):
    /// the path timers' [`Load`].
    carrying_since: Instant,
    /// The session carried nothing when last looked at ([`Session::settle_load`]).
    idle: bool,
    /// Paths the scheduler told to wait: a send elsewhere changes the picture for them.
    waiting: u64,
    /// (sender) The gap last re-sent on a `Stall`; one per gap.
    stall_served: Option<u64>,
    /// When an interactive stream last sent or received bytes (queue control engages only
    /// while there is interactive traffic to protect, see [`Session::queue_control_engaged`]).
    interactive_seen: Option<Instant>,
    /// Since when applications have kept the session backlogged (bytes ahead of the
    /// paths, or a stream waiting for room), and when that was last so (see
    /// [`Session::backpressure_engaged`]).
    backlog_since: Option<Instant>,
    backlog_seen: Option<Instant>,
    /// When a stream was last refused room (the application offered more than the
    /// session would take).
    refused_at: Option<Instant>,
    /// When a stream was last refused room under the loose bound on bytes ahead (see
    /// [`Session::bulk_withheld`]).
    withheld_at: Option<Instant>,
    /// Streams whose application had more to give than the session took, as far as the
    /// session knows: refused room and not since seen to run dry
    /// ([`Session::stream_source_dry`]), finish or end. While one is, the queue ahead of the
    /// paths is a window onto a larger backlog ([`Session::bulk_held`]).
    held: HashSet<StreamId>,
    counters: SessionCounters,
    dgrams: Datagrams,
    /// When a realtime datagram last went or came: a call engages queue control as an
    /// interactive stream does.
    realtime_seen: Option<Instant>,
    /// The modelled energy each path spent ([`crate::energy`]).
    energy: crate::energy::Meter,
    /// (client) The energy-aware mode, while it is on ([`crate::emptcp`]).
    aware: Option<crate::emptcp::EnergyAware>,
    /// κ and τ for the energy-aware mode.
    aware_cfg: crate::emptcp::EnergyAwareConfig,
}

/// What the session decided and re-sent since it began, for the metrics. Counting costs an
/// addition per decision or frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// The scheduler's answers to paths asking for bulk bytes: send new frames, wait, or
    /// re-send frames other paths carry ([`mpflex_sched::Decision`]).
    pub decisions_send: u64,
    pub decisions_wait: u64,
    pub decisions_reinject: u64,
    /// Frames sent again because the path holding them failed or went silent.
    pub resent_lost: u64,
    /// Frames sent again on a scheduler's `Reinject` decision.
    pub resent_scheduler: u64,
    /// Copies a path owed: redundant scheduling's duplicates and frames the peer stalled on.
    pub resent_copies: u64,
    /// Copies of small interactive frames sent on a second path ([`EngineConfig::hedge_interactive`]),
    /// and their payload bytes.
    pub hedged: u64,
    pub hedged_payload: u64,
}

impl Session {
    pub fn new(cfg: EngineConfig, scheduler: Box<dyn Scheduler>, now: Instant) -> Self {
        Session {
            epoch: now,
            scheduler,
            stream_schedulers: Vec::new(),
            paths: Paths::new(&cfg),
            streams: HashMap::new(),
            reset_tails: HashMap::new(),
            next_stream: 1,
            blocked: HashSet::new(),
            gave_up: false,
            windows_needed: BTreeSet::new(),
            flow: SessionFlow::new(cfg.session_window, None),
            send: SendQueue::default(),
            recv: Assembler::default(),
            feedback: Feedback::default(),
            events: VecDeque::new(),
            last_now: now,
            carrying_since: now,
            idle: true,
            waiting: 0,
            stall_served: None,
            interactive_seen: None,
            backlog_since: None,
            backlog_seen: None,
            refused_at: None,
            withheld_at: None,
            held: HashSet::new(),
            counters: SessionCounters::default(),
            dgrams: Datagrams::new(cfg.datagram_queue),
            realtime_seen: None,
            energy: crate::energy::Meter::new(crate::energy::EnergyProfile::default()),
            aware: None,
            aware_cfg: Default::default(),
            cfg,
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    pub fn scheduler_name(&self) -> &'static str {
        self.scheduler.name()
    }

    fn wake(&mut self) {
        self.events.push_back(Event::WakePaths);
    }

    /// Path-local control (a keepalive, its answer) waits on `path` only: its writer
    /// alone need look. A server holds thousands of idle paths, and waking every writer
    /// of a session for one path's keepalive doubled the wake-ups they cost.
    fn wake_path(&mut self, path: usize) {
        self.events.push_back(Event::WakePath(path));
    }

    /// What the session carries, for the path timers: idle while it has no stream and no
    /// datagram flow (keepalives then come further apart, see
    /// [`EngineConfig::idle_keepalive`]).
    pub(crate) fn load(&self) -> Load {
        if self.streams.is_empty() && self.dgrams.len() == 0 {
            Load::Idle
        } else {
            Load::Carrying {
                since: self.carrying_since,
            }
        }
    }

    /// A stream or flow is about to open at `now`: if it is the first, the session starts
    /// carrying. Every path's keepalive at the carrying interval is then overdue: the next
    /// timeout is due at once and sends them, so a path that died while the session was
    /// idle shows within the path timeout.
    fn start_carrying(&mut self, now: Instant) {
        if self.load() == Load::Idle {
            self.carrying_since = now;
        }
        self.idle = false;
    }

    /// A stream or flow was dropped: if it was the last, the session goes idle, and every
    /// path is asked for a word now. Idle, a path's silence is excused up to the idle
    /// keepalive interval (the peer's keepalives come that far apart), but a path that
    /// died in the last seconds of a transfer carried only data and ACKs, which nothing
    /// needs to answer: without a question of ours outstanding it would live ~29 s on
    /// that excuse. The ask's unanswered clock holds it to the path timeout (see
    /// [`crate::paths::Paths::ask`]); a live path answers within its RTT.
    fn settle_load(&mut self) {
        if self.idle || self.load() != Load::Idle {
            return;
        }
        self.idle = true;
        for i in 0..self.paths.len() {
            if self.paths.ask(i, self.last_now) {
                self.wake_path(i);
            }
        }
    }

    /// The driver's clock reading, for what follows (bytes queued by the application are
    /// timed from it).
    pub fn set_clock(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
    }

    /// The session clock, µs since `epoch` (the frames' timestamps are it modulo 2³²).
    fn clock_us(&self, now: Instant) -> i64 {
        now.saturating_duration_since(self.epoch).as_micros() as i64
    }

    fn ts(&self, now: Instant) -> u32 {
        self.clock_us(now) as u32
    }

    // ----- the whole session -----

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Queues a session close on every path.
    pub fn close(&mut self, code: CloseCode) {
        for p in self.paths.iter_mut().filter(|p| p.is_up()) {
            p.ctrl.push_back(mpflex_wire::Frame::Close { code });
        }
        self.wake();
    }

    /// Takes this session's receive credit beyond [`crate::flow::MIN_CREDIT`] from `pool`,
    /// shared with other sessions (a server's per client key). Call before the session
    /// carries anything.
    pub fn share_receive_credit(&mut self, pool: Arc<CreditPool>) {
        debug_assert_eq!(self.flow.unread(), 0, "receive credit shared after data arrived");
        self.flow = SessionFlow::new(self.cfg.session_window, Some(pool));
    }

    /// Sequenced frames kept until the peer acknowledges them (sent or not).
    pub fn buffered_frames(&self) -> usize {
        self.send.outgoing_len()
    }

    /// Stream bytes this session holds in memory: (send side: queued or sent and not yet
    /// acknowledged by the peer, framing included; receive side: arrived and not yet read
    /// by the applications, out-of-order frames included). Both stay within the session
    /// window; the process's memory follows them.
    pub fn held_bytes(&self) -> (u64, u64) {
        (self.send.held_bytes(), self.recv.payload() + self.flow.unread())
    }

    /// The session's memory account, bytes: what it holds for the peer until
    /// acknowledged (at most [`EngineConfig::send_buffer`]), the reorder buffer with a
    /// fixed charge per frame, and what applications have not read (within the session
    /// window).
    pub fn buffered_bytes(&self) -> u64 {
        self.send.held_bytes() + self.recv.memory() + self.flow.unread()
    }

    /// Bytes accepted from applications and not yet handed to any path (encoded): what
    /// queue control bounds.
    pub fn ahead_bytes(&self) -> u64 {
        self.send.backlog().0
    }

    /// Frames a stream took ahead of the session's order (another stream's frame before
    /// them was still missing), since the session began.
    pub fn early_delivered(&self) -> u64 {
        self.recv.early_delivered()
    }

    /// Frames received out of order, waiting for a gap to fill.
    pub fn reorder_frames(&self) -> usize {
        self.recv.waiting_frames()
    }

    /// (client) The server has no state for this session (it restarted): every stream is
    /// lost. The streams are reset and every sub-machine that shares state with the peer
    /// starts over.
    pub fn peer_lost_state(&mut self) {
        let mut ids = self.stream_ids();
        ids.sort_unstable();
        for stream in ids {
            self.events.push_back(Event::StreamReset {
                stream,
                code: ResetCode::PeerLostState,
            });
        }
        self.streams.clear();
        self.blocked.clear();
        self.held.clear();
        self.windows_needed.clear();
        self.flow = SessionFlow::new(self.cfg.session_window, self.flow.pool());
        self.send = SendQueue::default();
        self.recv = Assembler::default();
        self.feedback = Feedback::default();
        self.stall_served = None;
        self.waiting = 0;
        self.paths.forget_frames();
    }

    /// Whether this session has ever carried anything (a restarted peer matters only then).
    pub fn has_history(&self) -> bool {
        self.send.has_history() || self.recv.rcv_next() > 0
    }
}

impl Session {
    /// (client) A path joined and the server said whether the session is `fresh` there.
    /// A fresh session after this one carried data means the server lost it: the streams
    /// are reset ([`Session::peer_lost_state`]). Returns whether that happened.
    pub fn joined(&mut self, fresh: bool) -> bool {
        if fresh && self.has_history() {
            self.peer_lost_state();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests;
