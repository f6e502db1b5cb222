//! The session: a thin owner of the sub-machines that routes the driver's events to them.
//!
//! - [`crate::send`]: staging, sequencing, splitting, the outgoing and retransmit queues;
//! - [`crate::recv`]: the reorder buffer and per-stream early delivery;
//! - [`crate::flow`]: stream and session credit, and each stream's receive buffer;
//! - [`crate::paths`]: liveness, suspicion, keepalives, the statistics schedulers read;
//! - [`crate::control`]: ACKs, arrival reports and stall notices for the peer;
//! - [`crate::reinject`]: which copies to send where.
//!
//! `transmit` builds what a path sends (and runs a path writer's late-binding policy),
//! `receive` takes what a path delivered, `timers` keeps the clocks.

mod backlog;
mod energy;
mod flows;
mod paths;
mod receive;
mod record;
mod send_datagrams;
mod timers;
mod transmit;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use mpflex_sched::{PathSnapshot, Scheduler, SchedulerKind};
use mpflex_wire::{CloseCode, FlowCloseCode, ResetCode, TargetAddr};

use crate::class::{ClassLatency, TrafficClass};
use crate::config::{EngineConfig, Role};
use crate::control::Feedback;
use crate::datagram::{DatagramClass, DatagramCounters, Datagrams, FlowId, PendingClose};
use crate::flow::{SessionFlow, Stream, StreamRead};
use crate::paths::{bytes_in_flight, Load, PathCounters, PathStatus, Paths};
use crate::recv::Assembler;
use crate::send::SendQueue;
use crate::supervisor::PathState;
use crate::StreamId;

pub use energy::{EnergyAwareView, EnergyMode};
pub use transmit::PollTransmit;

/// The least each carrying path counts for in the bound on bytes ahead of the paths
/// (before it has a rate estimate, and on slow paths).
pub const MIN_AHEAD: u64 = 16 * 1024;

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

/// The largest interactive frame payload that is hedged: a request, a small response, a
/// keystroke's echo. Larger frames belong to bursts whose copies would cost more than a
/// round trip saved on one frame.
pub const HEDGE_MAX_PAYLOAD: u64 = 2048;

/// Hedged payload a session may send beyond its share ([`HEDGE_SHARE`]) of the bytes it
/// sent: its first requests are hedged whatever came before.
pub const HEDGE_ALLOWANCE: u64 = 64 * 1024;

/// Hedged payload stays within 1/`HEDGE_SHARE` of the bytes the session's paths carried
/// in both directions (first copies sent, everything received), beyond
/// [`HEDGE_ALLOWANCE`]: a session of nothing but small requests pays at most an eighth
/// more bytes.
pub const HEDGE_SHARE: u64 = 8;

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
    pub fn new(cfg: EngineConfig, scheduler: Box<dyn Scheduler>, now: Instant) -> Self {
        Session {
            epoch: now,
            scheduler,
            stream_schedulers: Vec::new(),
            paths: Paths::new(&cfg),
            streams: HashMap::new(),
            next_stream: 1,
            blocked: HashSet::new(),
            gave_up: false,
            windows_needed: BTreeSet::new(),
            flow: SessionFlow::new(cfg.session_window),
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

    // ----- streams, local side -----

    /// (client) Opens a stream towards `addr`. Its first bytes, offered at once with
    /// [`Session::stream_send`], ride in the Open frame. Timed by the session clock: the
    /// driver sets it first ([`Session::set_clock`]).
    pub fn open_stream(&mut self, addr: TargetAddr) -> StreamId {
        debug_assert_eq!(self.cfg.role, Role::Client);
        let id = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(1).max(1);
        self.start_carrying(self.last_now);
        self.streams.insert(id, Stream::new(self.cfg.stream_window));
        self.send.set_class(id, TrafficClass::Interactive);
        self.send.stage_open(id, addr, self.last_now);
        self.wake();
        id
    }

    /// The driver's clock reading, for what follows (bytes queued by the application are
    /// timed from it).
    pub fn set_clock(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
    }

    /// Pins a stream's traffic class (configuration), or lets its behaviour decide again
    /// (`None`); see [`crate::class`].
    pub fn set_stream_class(&mut self, stream: StreamId, class: Option<TrafficClass>) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        s.class.pin(class);
        self.send.set_class(stream, s.class.class());
        self.wake();
    }

    /// A stream's class now, and whether configuration pinned it.
    pub fn stream_class(&self, stream: StreamId) -> Option<(TrafficClass, bool)> {
        let s = self.streams.get(&stream)?;
        Some((s.class.class(), s.class.pinned().is_some()))
    }

    /// How long each class's bytes took from the application to the peer, since the
    /// session began.
    pub fn class_latency(&self) -> &ClassLatency {
        &self.send.latency
    }

    /// Bytes `stream` may queue now (stream and session flow control, and under queue
    /// control the bound on bytes ahead of the paths). When that is zero for a live
    /// stream, [`Event::StreamWritable`] follows once there is room again.
    pub fn send_capacity(&mut self, stream: StreamId) -> u64 {
        let cap = self.peek_capacity(stream);
        tracing::trace!(
            stream,
            cap,
            room = self.backlog_room(),
            backpressure = self.backpressure_engaged(self.last_now),
            queue_control = self.queue_control_engaged(self.last_now),
            ahead = self.send.backlog().0,
            urgent = self.send.urgent_bytes(),
            since_ms = ?self.backlog_since.map(|t| self.last_now.saturating_duration_since(t).as_millis()),
            seen_ms = ?self.backlog_seen.map(|t| self.last_now.saturating_duration_since(t).as_millis()),
            "send_capacity"
        );
        if cap == 0 && self.streams.get(&stream).is_some_and(|s| !s.tx_done) {
            self.refuse(stream);
        }
        cap
    }

    /// An interactive stream's burst is not held to the bound on bytes ahead of the
    /// paths: bulk bytes fill that bound as fast as it frees, and a request that had to
    /// wait for room behind them would wait as long as behind a bloated queue. Only the rest of its burst is exempt (see
    /// [`crate::class::Classifier::interactive_room`]): a transfer starting as a new
    /// stream does not jump the bound with its first megabyte.
    fn peek_capacity(&self, stream: StreamId) -> u64 {
        self.streams.get(&stream).map_or(0, |s| {
            let room = s.send_room().min(self.flow.send_room()).min(self.send_buffer_room());
            room.min(self.backlog_room().max(s.class.interactive_room(self.last_now)))
        })
    }

    /// What the session may still take from applications before it holds
    /// [`EngineConfig::send_buffer`] bytes for the peer: the peer's credit is its word on
    /// what it can take, and this side's memory is bounded by this side's setting.
    fn send_buffer_room(&self) -> u64 {
        self.cfg.send_buffer.saturating_sub(self.send.held_bytes())
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
    fn backlog_room(&self) -> u64 {
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

    /// Streams blocked only by the bound on bytes ahead of the paths or by the send
    /// buffer may go on.
    pub(crate) fn unblock_drained(&mut self) {
        if self.blocked.is_empty() || self.backlog_room() == 0 || self.send_buffer_room() == 0 {
            return;
        }
        let ready: Vec<StreamId> = self
            .blocked
            .iter()
            .copied()
            .filter(|&id| self.peek_capacity(id) > 0)
            .collect();
        for id in ready {
            self.blocked.remove(&id);
            self.writable(id);
        }
    }

    /// Credit arrived for a blocked stream. Waiting for it was no idle spell: the burst
    /// goes on from here.
    fn writable(&mut self, stream: StreamId) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.class.waited(self.last_now);
        }
        self.events.push_back(Event::StreamWritable(stream));
    }

    /// Whether the stream still exists (not reset, not finished both ways).
    pub fn stream_exists(&self, stream: StreamId) -> bool {
        self.streams.contains_key(&stream)
    }

    /// Queues application bytes: the one way bytes enter a stream. Returns how many were
    /// accepted (up to the capacity); when fewer than offered, [`Event::StreamWritable`]
    /// follows once credit arrives.
    pub fn stream_send(&mut self, stream: StreamId, mut data: Bytes) -> usize {
        let cap = self.peek_capacity(stream) as usize;
        if cap < data.len() {
            self.refuse(stream);
        }
        let n = data.len().min(cap);
        if n == 0 {
            return 0;
        }
        data.truncate(n);
        let s = self.streams.get_mut(&stream).expect("a stream with capacity exists");
        let offset = s.tx_offset;
        s.tx_offset += n as u64;
        let class = s.class.on_send(n as u64, self.last_now);
        self.send.set_class(stream, class);
        if class.is_urgent() {
            // The clock only moves forward: the latest activity is now.
            self.interactive_seen = Some(self.last_now);
        }
        self.flow.take(n as u64);
        self.send
            .stage_data(stream, offset, data, self.cfg.max_frame_data, self.last_now);
        self.note_backlog();
        self.wake();
        n
    }

    /// The stream is refused room: it waits for [`Event::StreamWritable`], and its
    /// application is ahead of the paths until it is seen to run dry.
    fn refuse(&mut self, stream: StreamId) {
        self.blocked.insert(stream);
        self.held.insert(stream);
        self.refused_at = Some(self.last_now);
        if !self.backpressure_engaged(self.last_now) {
            self.withheld_at = Some(self.last_now);
        }
        self.note_backlog();
    }

    /// The stream's application had fewer bytes to give than the session would take (a
    /// read returned less than asked, or nothing): what is queued of it is all there is
    /// for now, so a scheduler waiting for a chunk's end may wait ([`QueueView::sustained`]).
    ///
    /// [`QueueView::sustained`]: mpflex_sched::QueueView::sustained
    pub fn stream_source_dry(&mut self, stream: StreamId) {
        self.held.remove(&stream);
    }

    /// The application half-closed its side.
    pub fn stream_finish(&mut self, stream: StreamId) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        if s.tx_done {
            return;
        }
        s.tx_done = true;
        let offset = s.tx_offset;
        self.blocked.remove(&stream);
        self.held.remove(&stream);
        self.send.stage_fin(stream, offset, self.last_now);
        self.maybe_forget(stream);
        self.wake();
    }

    /// Aborts the stream in both directions, for the reason `code`.
    pub fn stream_reset(&mut self, stream: StreamId, code: ResetCode) {
        if !self.forget_stream(stream) {
            return;
        }
        self.send.sequence_reset(stream, code);
        self.wake();
    }

    /// Drops a stream that was reset, by either side. Its staged bytes need no sending (a
    /// download the client abandoned must not go on using the links for seconds), and
    /// they leave the session's count too, or its window would shrink for good.
    fn forget_stream(&mut self, stream: StreamId) -> bool {
        if self.streams.remove(&stream).is_none() {
            return false;
        }
        self.blocked.remove(&stream);
        self.held.remove(&stream);
        self.windows_needed.remove(&stream);
        self.send.forget(stream);
        let unsent = self.send.unstage(stream);
        self.flow.give_back(unsent);
        self.settle_load();
        true
    }

    /// Takes received bytes (up to `max`) for the application.
    pub fn stream_recv(&mut self, stream: StreamId, max: usize) -> RecvResult {
        let Some(s) = self.streams.get_mut(&stream) else {
            return RecvResult::Gone;
        };
        let (read, reopen) = s.read(max, self.cfg.stream_window);
        let chunk = match read {
            StreamRead::Data(chunk) => chunk,
            StreamRead::Fin => {
                self.maybe_forget(stream);
                return RecvResult::Fin;
            }
            StreamRead::Blocked => return RecvResult::Blocked,
            StreamRead::Done => return RecvResult::Gone,
        };
        if reopen {
            self.windows_needed.insert(stream);
            self.wake();
        }
        if self.flow.on_consumed(chunk.len() as u64) {
            self.wake();
        }
        RecvResult::Data(chunk)
    }

    /// What `stream` has queued for the peer so far: (bytes, whether its end is queued).
    pub fn stream_tx(&self, stream: StreamId) -> Option<(u64, bool)> {
        self.streams.get(&stream).map(|s| (s.tx_offset, s.tx_done))
    }

    /// Stream bytes (both directions, copies included) each path carried for `stream`,
    /// indexed by path.
    pub fn stream_paths(&self, stream: StreamId) -> Option<&[u64]> {
        self.streams.get(&stream).map(|s| s.carried.as_slice())
    }

    /// Bytes waiting for the application on `stream`.
    pub fn stream_buffered(&self, stream: StreamId) -> usize {
        self.streams.get(&stream).map_or(0, Stream::buffered)
    }

    pub fn num_streams(&self) -> usize {
        self.streams.len()
    }

    /// Streams still open.
    pub fn stream_ids(&self) -> Vec<StreamId> {
        self.streams.keys().copied().collect()
    }

    fn maybe_forget(&mut self, stream: StreamId) {
        if self.streams.get(&stream).is_some_and(Stream::finished) {
            self.streams.remove(&stream);
            self.windows_needed.remove(&stream);
            self.send.set_class(stream, TrafficClass::Bulk);
            self.send.forget(stream);
            self.settle_load();
        }
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
        self.flow = SessionFlow::new(self.cfg.session_window);
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
