//! The session state machine.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpflex_sched::{Decision, End, PathSnapshot, QueueView, Scheduler};
use mpflex_wire::{Frame, TargetAddr, RECORD_OVERHEAD};

use crate::config::{EngineConfig, Role};
use crate::path::{PathCounters, PathEntry, PathStatus};
use crate::stream::Stream;
use crate::{StreamId, MAX_PATHS};

/// Something the driver must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// (server) The peer opened a stream: connect it to `addr`.
    StreamOpened { stream: StreamId, addr: TargetAddr },
    /// Data or a fin is waiting in [`Session::stream_recv`].
    StreamReadable(StreamId),
    /// The stream may send again (flow-control credit arrived).
    StreamWritable(StreamId),
    /// The peer aborted the stream; it is gone.
    StreamReset { stream: StreamId, code: u8 },
    /// Frames are waiting: paths that are idle should poll again.
    WakePaths,
    /// The path has been silent for too long; the driver should drop its connection.
    PathTimedOut(usize),
    /// The peer closed the session.
    Closed { code: u8 },
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
    #[error("unexpected {0} frame on an established path")]
    Unexpected(&'static str),
    #[error("peer sent stream {0} bytes out of place (a gap or an overlap in the stream)")]
    StreamOffset(StreamId),
}

/// A sequenced frame in the receiver's reorder buffer.
#[derive(Debug)]
enum Arrived {
    /// Waits for the frames before it.
    Waiting(Frame),
    /// Already handed to its stream; only its place in the sequence is left.
    Delivered { span: u64 },
}

/// Result of [`Session::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollTransmit {
    /// This many bytes were appended.
    Sent(usize),
    /// Nothing to send on this path now; poll again on [`Event::WakePaths`] or at `until`.
    Wait { until: Option<Instant> },
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

/// A sequenced frame the peer has not yet acknowledged.
#[derive(Debug)]
struct Outgoing {
    frame: Frame,
    /// Paths currently holding a copy that may still arrive.
    on_paths: u64,
    /// Sent at least once.
    sent: bool,
    /// When a copy was last handed to a path.
    last_sent: Option<Instant>,
    /// The peer reported its arrival (it waits in the peer's reorder buffer): no copy of
    /// it is needed any more, whatever happens to the paths.
    received: bool,
    /// When the earliest copy is expected at the peer: the session clock (µs since
    /// `epoch`) at sending plus the path's one-way-delay estimate at its bytes in flight
    /// then. It carries the clock offset of every OWD estimate, so it compares only with
    /// other such times. `None` while the path had no estimate.
    eta_us: Option<i64>,
}

/// Arrival reports kept for sending at most; older ones are dropped (they are samples).
const MAX_REPORTS: usize = 1024;
/// Send-time records kept per path to match arrival reports against.
const MAX_SENT_LOG: usize = 8192;

/// Sequenced, never-sent bytes the session keeps ahead of the paths (at least): stream
/// frames beyond it wait in their stream's staging queue without a sequence number, and
/// are sequenced round-robin across streams as the paths take bytes. A stream's new frame
/// so waits behind at most this much of other streams' data, not behind everything a bulk
/// stream has queued (its flow-control window, megabytes). Two-ended schedulers (DEMS)
/// sequence everything before sending from the tail: their chunk is the whole backlog.
/// One full frame: with 64 KB (until 2026-11-25) a 1 KB request under a bulk upload on
/// `seed-default` waited p50 593-714 ms, with 16 KB 273-324 ms; the schedulers see the
/// whole backlog either way (staged bytes count in their queue view).
pub const SEQUENCE_AHEAD: u64 = 16 * 1024;

/// The smallest payload either part of a split frame carries (a scheduler's limit cutting
/// through a frame): a smaller part is not worth its 21-byte header. Where the limit would
/// leave less behind, the part sent is cut that much shorter; where the limit allows less
/// than this, the whole frame goes when it is the decision's first, nothing otherwise.
pub const MIN_SPLIT: usize = 512;

/// Bytes handed to a path's socket and not yet acknowledged by the peer's kernel.
fn bytes_in_flight(s: &PathSnapshot) -> u64 {
    s.notsent as u64 + s.in_flight as u64 * s.mss.max(1) as u64
}

pub struct Session {
    cfg: EngineConfig,
    epoch: Instant,
    scheduler: Box<dyn Scheduler>,
    paths: Vec<PathEntry>,
    streams: HashMap<StreamId, Stream>,
    next_stream: StreamId,
    events: VecDeque<Event>,

    // Send side.
    next_seq: u64,
    /// Peer's cumulative ACK: every frame below it arrived.
    peer_cum: u64,
    outgoing: BTreeMap<u64, Outgoing>,
    /// Never sent, in sequence order.
    unsent: VecDeque<u64>,
    unsent_bytes: u64,
    /// Stream frames not sequenced yet, per stream in order (with their encoded length),
    /// and the streams that have some, in round-robin order.
    staged: HashMap<StreamId, VecDeque<(Frame, usize)>>,
    staged_order: VecDeque<StreamId>,
    staged_bytes: u64,
    staged_frames: usize,
    /// Sent on paths that died; to be sent again on any path, lowest first.
    retransmit: BTreeSet<u64>,
    /// Stream payload queued so far, and the peer's session-wide limit on it.
    tx_data: u64,
    tx_data_max: u64,
    /// Streams waiting for flow-control credit.
    blocked: HashSet<StreamId>,

    // Receive side.
    rcv_next: u64,
    /// Sequenced frames above `rcv_next`, by sequence number: waiting for a gap to fill, or
    /// already handed to their stream (a stream takes its frames as soon as its own earlier
    /// bytes are in, whatever other streams' frames are still missing).
    reorder: BTreeMap<u64, Arrived>,
    reorder_payload: u64,
    /// Frames waiting in `reorder` that a stream could take out of session order: per
    /// stream, the stream offset each starts at (a `Fin`'s is the stream's length) and its
    /// sequence number.
    waiting_at: HashMap<StreamId, BTreeMap<u64, u64>>,
    /// Frames handed to their stream ahead of the session's order.
    early_delivered: u64,
    rx_data: u64,
    rx_consumed: u64,
    rx_data_max: u64,
    ack_needed: bool,
    ack_deadline: Option<Instant>,
    unacked_bytes: u64,
    max_data_needed: bool,
    windows_needed: BTreeSet<StreamId>,
    /// Latest time the driver told us.
    last_now: Instant,
    /// Paths the scheduler told to wait: a send elsewhere changes the picture for them.
    waiting: u64,
    /// Arrival reports (`Owd` frames) for the peer, sent along with other control frames.
    reports: VecDeque<Frame>,
    /// (receiver) The gap a `Stall` was last sent for; one per gap.
    stall_sent_for: Option<u64>,
    /// (sender) The gap last re-sent on a `Stall`; one per gap.
    stall_served: Option<u64>,
}

impl Session {
    pub fn new(cfg: EngineConfig, scheduler: Box<dyn Scheduler>, now: Instant) -> Self {
        Session {
            epoch: now,
            scheduler,
            paths: Vec::new(),
            streams: HashMap::new(),
            next_stream: 1,
            events: VecDeque::new(),
            next_seq: 0,
            peer_cum: 0,
            outgoing: BTreeMap::new(),
            unsent: VecDeque::new(),
            unsent_bytes: 0,
            staged: HashMap::new(),
            staged_order: VecDeque::new(),
            staged_bytes: 0,
            staged_frames: 0,
            retransmit: BTreeSet::new(),
            tx_data: 0,
            tx_data_max: cfg.session_window,
            blocked: HashSet::new(),
            rcv_next: 0,
            reorder: BTreeMap::new(),
            reorder_payload: 0,
            waiting_at: HashMap::new(),
            early_delivered: 0,
            rx_data: 0,
            rx_consumed: 0,
            rx_data_max: cfg.session_window,
            ack_needed: false,
            ack_deadline: None,
            unacked_bytes: 0,
            max_data_needed: false,
            windows_needed: BTreeSet::new(),
            last_now: now,
            waiting: 0,
            reports: VecDeque::new(),
            stall_sent_for: None,
            stall_served: None,
            cfg,
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    pub fn scheduler_name(&self) -> &'static str {
        self.scheduler.name()
    }

    // ----- paths -----

    fn ensure_path(&mut self, path: usize, now: Instant) {
        assert!(path < MAX_PATHS, "path index {path} out of range");
        while self.paths.len() <= path {
            let id = self.paths.len();
            self.paths.push(PathEntry::new(id, now));
        }
    }

    /// A path connection is established (first time or again).
    pub fn path_up(&mut self, path: usize, now: Instant) {
        self.ensure_path(path, now);
        let p = &mut self.paths[path];
        p.status = PathStatus::Up;
        p.snap.alive = true;
        p.snap.ready = false;
        p.last_recv = now;
        p.last_send = now;
        p.suspect = false;
        p.ctrl.clear();
        p.dup.clear();
        // Control state may have been lost with an earlier connection; restate it.
        self.restate_control();
        self.events.push_back(Event::WakePaths);
    }

    /// A path connection is gone. Everything only it held is sent again elsewhere.
    pub fn path_down(&mut self, path: usize) {
        let Some(p) = self.paths.get_mut(path) else { return };
        if p.status == PathStatus::Down {
            return;
        }
        p.status = PathStatus::Down;
        p.snap.alive = false;
        p.snap.ready = false;
        p.counters.failures += 1;
        p.ctrl.clear();
        p.dup.clear();
        self.reinject_from(path);
        // Acks and window updates handed to the dead path may never arrive.
        self.restate_control();
        self.events.push_back(Event::WakePaths);
    }

    /// Treats every copy `path` holds as lost: frames no other path holds are queued for
    /// re-sending. Returns how many were.
    fn reinject_from(&mut self, path: usize) -> usize {
        let bit = 1u64 << path;
        let mut n = 0;
        for (&seq, out) in self.outgoing.iter_mut() {
            if out.on_paths & bit != 0 {
                out.on_paths &= !bit;
                if out.on_paths == 0 && out.sent && !out.received {
                    self.retransmit.insert(seq);
                    n += 1;
                }
            }
        }
        self.paths[path].held = 0;
        n
    }

    /// Time without progress after which a path holding our data is suspected: long
    /// enough for a frame to cross it behind its queue (srtt), survive one kernel
    /// retransmission timeout (at least 200 ms, as Linux's), and for the arrival report
    /// to come back on the slowest path, plus the peer's ACK delay.
    fn suspect_after(&self, p: &PathEntry) -> std::time::Duration {
        let back = self
            .paths
            .iter()
            .filter(|q| q.status == PathStatus::Up)
            .map(|q| q.snap.srtt)
            .max()
            .unwrap_or_default();
        let rto = (4 * p.snap.rttvar).max(Duration::from_millis(200));
        p.snap.srtt + rto + back + self.cfg.ack_delay + Duration::from_millis(50)
    }

    fn restate_control(&mut self) {
        self.ack_needed = true;
        self.max_data_needed = true;
        for (&id, s) in &self.streams {
            if !s.rx_fin {
                self.windows_needed.insert(id);
            }
        }
    }

    /// Latest kernel statistics of a path, read at `now`. `alive` is kept by the engine.
    /// The scheduler observes every update ([`Scheduler::observe`]).
    pub fn set_path_stats(&mut self, path: usize, snap: PathSnapshot, now: Instant) {
        if let Some(p) = self.paths.get_mut(path) {
            let (alive, ready) = (p.snap.alive, p.snap.ready);
            p.snap = PathSnapshot {
                id: path,
                alive,
                ready,
                ..snap
            };
            self.last_now = self.last_now.max(now);
            let snaps: Vec<PathSnapshot> = self.paths.iter().map(|p| p.snap.clone()).collect();
            self.scheduler.observe(now, &snaps);
        }
    }

    /// Whether the path's writer is idle and its socket has room.
    /// A path that stops being ready may be what other paths were waiting for, so they
    /// are woken to decide again.
    pub fn set_path_ready(&mut self, path: usize, ready: bool) {
        if let Some(p) = self.paths.get_mut(path) {
            if p.snap.ready && !ready {
                self.events.push_back(Event::WakePaths);
            }
            p.snap.ready = ready;
        }
    }

    pub fn set_path_backup(&mut self, path: usize, backup: bool, now: Instant) {
        self.ensure_path(path, now);
        self.paths[path].snap.backup = backup;
    }

    pub fn path_status(&self, path: usize) -> PathStatus {
        self.paths.get(path).map_or(PathStatus::Down, |p| p.status)
    }

    pub fn path_counters(&self, path: usize) -> Option<(&PathCounters, &PathSnapshot)> {
        self.paths.get(path).map(|p| (&p.counters, &p.snap))
    }

    /// The path's one-way-delay estimate at its current bytes in flight and the deviation,
    /// microseconds (with the peer's clock offset), once the peer has reported arrivals.
    pub fn path_owd(&self, path: usize) -> Option<(i64, u64)> {
        let p = self.paths.get(path)?;
        let o = p.owd.estimate(bytes_in_flight(&p.snap))?;
        Some((o, p.owd.deviation()))
    }

    pub fn num_paths(&self) -> usize {
        self.paths.len()
    }

    // ----- streams, local side -----

    /// (client) Opens a stream towards `addr`, carrying `initial` bytes in its Open frame
    /// as far as flow control allows. Returns the stream and the part of `initial` not
    /// queued yet, which the caller offers again with [`Session::stream_send`] (it is
    /// empty unless the session window is nearly used up or `initial` exceeds one frame).
    pub fn open_stream(&mut self, addr: TargetAddr, initial: Bytes, now: Instant) -> (StreamId, Bytes) {
        debug_assert_eq!(self.cfg.role, Role::Client);
        let id = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(1).max(1);
        let mut s = Stream::new(self.cfg.stream_window);
        // The Open frame's bytes count against both windows like any data: a peer that
        // has no room left for them would have to drop the session.
        let session_room = self.tx_data_max.saturating_sub(self.tx_data);
        let take = (initial.len() as u64)
            .min(self.cfg.max_frame_data as u64)
            .min(session_room)
            .min(s.tx_max) as usize;
        s.tx_offset = take as u64;
        self.tx_data += take as u64;
        self.streams.insert(id, s);
        let first = initial.slice(..take);
        let ts = self.ts(now);
        self.queue(Frame::Open {
            seq: 0,
            stream: id,
            ts,
            addr,
            data: first,
        });
        let mut rest = initial.slice(take..);
        if !rest.is_empty() {
            let n = self.stream_send(id, rest.clone(), now);
            rest = rest.slice(n..);
        }
        (id, rest)
    }

    /// Bytes `stream` may queue now (stream and session flow control). When that is zero
    /// for a live stream, [`Event::StreamWritable`] follows once credit arrives.
    pub fn send_capacity(&mut self, stream: StreamId) -> u64 {
        let cap = self.peek_capacity(stream);
        if cap == 0 && self.streams.get(&stream).is_some_and(|s| !s.tx_done) {
            self.blocked.insert(stream);
        }
        cap
    }

    fn peek_capacity(&self, stream: StreamId) -> u64 {
        match self.streams.get(&stream) {
            Some(s) if !s.tx_done => (s.tx_max - s.tx_offset).min(self.tx_data_max - self.tx_data),
            _ => 0,
        }
    }

    /// Whether the stream still exists (not reset, not finished both ways).
    pub fn stream_exists(&self, stream: StreamId) -> bool {
        self.streams.contains_key(&stream)
    }

    /// Queues application bytes. Returns how many were accepted (up to the capacity);
    /// when fewer than offered, [`Event::StreamWritable`] follows once credit arrives.
    pub fn stream_send(&mut self, stream: StreamId, mut data: Bytes, now: Instant) -> usize {
        let cap = self.peek_capacity(stream) as usize;
        if cap < data.len() {
            self.blocked.insert(stream);
        }
        let n = data.len().min(cap);
        data.truncate(n);
        let ts = self.ts(now);
        let mut offset = self.streams.get(&stream).map_or(0, |s| s.tx_offset);
        while !data.is_empty() {
            let chunk = data.split_to(data.len().min(self.cfg.max_frame_data));
            let len = chunk.len() as u64;
            self.queue(Frame::Data {
                seq: 0,
                stream,
                offset,
                ts,
                data: chunk,
            });
            offset += len;
        }
        if let Some(s) = self.streams.get_mut(&stream) {
            s.tx_offset += n as u64;
        }
        self.tx_data += n as u64;
        if n > 0 {
            self.events.push_back(Event::WakePaths);
        }
        n
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
        self.queue(Frame::Fin { seq: 0, stream, offset });
        self.maybe_forget(stream);
        self.events.push_back(Event::WakePaths);
    }

    /// Aborts the stream in both directions.
    pub fn stream_reset(&mut self, stream: StreamId, code: u8) {
        if self.streams.remove(&stream).is_none() {
            return;
        }
        self.blocked.remove(&stream);
        self.windows_needed.remove(&stream);
        self.unstage(stream);
        self.queue(Frame::Reset { seq: 0, stream, code });
        self.events.push_back(Event::WakePaths);
    }

    /// Drops a reset stream's staged frames. Bytes the peer never saw need no sending (a
    /// download the client abandoned must not go on using the links for seconds), and
    /// they leave the session's count too, or its window would shrink for good.
    fn unstage(&mut self, stream: StreamId) {
        let Some(frames) = self.staged.remove(&stream) else {
            return;
        };
        self.staged_order.retain(|&id| id != stream);
        for (f, len) in frames {
            self.staged_bytes -= len as u64;
            self.staged_frames -= 1;
            if let Frame::Data { data, .. } | Frame::Open { data, .. } = f {
                self.tx_data -= data.len() as u64;
            }
        }
    }

    /// Takes received bytes (up to `max`) for the application.
    pub fn stream_recv(&mut self, stream: StreamId, max: usize) -> RecvResult {
        let Some(s) = self.streams.get_mut(&stream) else {
            return RecvResult::Gone;
        };
        let Some(front) = s.rx_buf.front_mut() else {
            if s.rx_fin && !s.rx_fin_read {
                s.rx_fin_read = true;
                self.maybe_forget(stream);
                return RecvResult::Fin;
            }
            return if s.rx_fin_read {
                RecvResult::Gone
            } else {
                RecvResult::Blocked
            };
        };
        let chunk = if front.len() <= max {
            s.rx_buf.pop_front().expect("front exists")
        } else {
            front.split_to(max)
        };
        let n = chunk.len() as u64;
        s.rx_consumed += n;
        self.rx_consumed += n;
        // Re-open the window once half of it has been used, so updates stay rare.
        if s.rx_max - s.rx_consumed < self.cfg.stream_window / 2 && !s.rx_fin {
            s.rx_max = s.rx_consumed + self.cfg.stream_window;
            self.windows_needed.insert(stream);
            self.events.push_back(Event::WakePaths);
        }
        if self.rx_data_max - self.rx_consumed < self.cfg.session_window / 2 {
            self.rx_data_max = self.rx_consumed + self.cfg.session_window;
            self.max_data_needed = true;
            self.events.push_back(Event::WakePaths);
        }
        RecvResult::Data(chunk)
    }

    /// What `stream` has queued for the peer so far: (bytes, whether its end is queued).
    pub fn stream_tx(&self, stream: StreamId) -> Option<(u64, bool)> {
        self.streams.get(&stream).map(|s| (s.tx_offset, s.tx_done))
    }

    /// Bytes waiting for the application on `stream`.
    pub fn stream_buffered(&self, stream: StreamId) -> usize {
        self.streams
            .get(&stream)
            .map_or(0, |s| s.rx_buf.iter().map(Bytes::len).sum())
    }

    pub fn num_streams(&self) -> usize {
        self.streams.len()
    }

    fn maybe_forget(&mut self, stream: StreamId) {
        if self.streams.get(&stream).is_some_and(Stream::finished) {
            self.streams.remove(&stream);
            self.windows_needed.remove(&stream);
        }
    }

    /// Queues a frame for the peer: a stream's Open, Data and Fin wait in the stream's
    /// staging queue ([`SEQUENCE_AHEAD`]); anything else is sequenced at once.
    fn queue(&mut self, frame: Frame) {
        let stream = match &frame {
            Frame::Open { stream, .. } | Frame::Data { stream, .. } | Frame::Fin { stream, .. } => *stream,
            _ => return self.sequence(frame),
        };
        let len = frame.encoded_len();
        let q = self.staged.entry(stream).or_default();
        if q.is_empty() {
            self.staged_order.push_back(stream);
        }
        q.push_back((frame, len));
        self.staged_bytes += len as u64;
        self.staged_frames += 1;
        self.events.push_back(Event::WakePaths);
    }

    /// Sequences staged frames, one per stream in turn, until `target` bytes are sequenced
    /// and unsent (or nothing is staged).
    fn promote(&mut self, target: u64) {
        while self.unsent_bytes < target {
            let Some(stream) = self.staged_order.pop_front() else {
                break;
            };
            let q = self.staged.get_mut(&stream).expect("ordered streams are staged");
            let (frame, len) = q.pop_front().expect("staged queues are not empty");
            if q.is_empty() {
                self.staged.remove(&stream);
            } else {
                self.staged_order.push_back(stream);
            }
            self.staged_bytes -= len as u64;
            self.staged_frames -= 1;
            self.sequence(frame);
        }
    }

    /// Gives `frame` the next sequence number and appends it to the unsent queue.
    fn sequence(&mut self, mut frame: Frame) {
        let seq = self.next_seq;
        self.next_seq += frame.seq_span();
        match &mut frame {
            Frame::Open { seq: s, .. }
            | Frame::Data { seq: s, .. }
            | Frame::Fin { seq: s, .. }
            | Frame::Reset { seq: s, .. } => *s = seq,
            _ => unreachable!("only sequenced frames are queued"),
        }
        self.unsent_bytes += frame.encoded_len() as u64;
        self.outgoing.insert(
            seq,
            Outgoing {
                frame,
                on_paths: 0,
                sent: false,
                last_sent: None,
                received: false,
                eta_us: None,
            },
        );
        self.unsent.push_back(seq);
        self.events.push_back(Event::WakePaths);
    }

    /// The most one stream frame takes on the wire (its payload limit plus headers): a
    /// `poll_transmit` with at least this much room always makes progress.
    pub fn max_frame_len(&self) -> usize {
        self.cfg.max_frame_data + 64
    }

    fn ts(&self, now: Instant) -> u32 {
        self.clock_us(now) as u32
    }

    /// The session clock, µs since `epoch` (the frames' timestamps are it modulo 2³²).
    fn clock_us(&self, now: Instant) -> i64 {
        now.saturating_duration_since(self.epoch).as_micros() as i64
    }

    // ----- receiving -----

    /// A frame arrived on `path`.
    pub fn handle_frame(&mut self, path: usize, frame: Frame, now: Instant) -> Result<(), ProtocolError> {
        self.ensure_path(path, now);
        self.last_now = self.last_now.max(now);
        let p = &mut self.paths[path];
        p.last_recv = now;
        p.progress = now;
        p.counters.bytes_received += frame.encoded_len() as u64;
        if p.suspect && p.status == PathStatus::Up {
            p.suspect = false;
            p.snap.alive = true;
            self.events.push_back(Event::WakePaths);
        }
        match frame {
            Frame::Hello { .. } => return Err(ProtocolError::Unexpected("Hello")),
            Frame::HelloAck { .. } => return Err(ProtocolError::Unexpected("HelloAck")),
            Frame::Ping { id } => {
                p.ctrl.push_back(Frame::Pong { id });
                self.events.push_back(Event::WakePaths);
            }
            Frame::Pong { .. } => {}
            Frame::Close { code } => self.events.push_back(Event::Closed { code }),
            Frame::Ack { cum } => self.on_ack(cum, now)?,
            Frame::Owd {
                path: on,
                seq,
                ts,
                delay,
            } => self.on_report(on as usize, seq, ts, delay, now),
            Frame::Stall { cum } => self.on_stall(cum, now),
            Frame::Window { stream, max } => {
                if let Some(s) = self.streams.get_mut(&stream) {
                    if max > s.tx_max {
                        s.tx_max = max;
                        if self.blocked.remove(&stream) {
                            self.events.push_back(Event::StreamWritable(stream));
                        }
                    }
                }
            }
            Frame::MaxData { max } => {
                if max > self.tx_data_max {
                    self.tx_data_max = max;
                    for id in self.blocked.drain() {
                        self.events.push_back(Event::StreamWritable(id));
                    }
                }
            }
            f @ (Frame::Open { .. } | Frame::Data { .. } | Frame::Fin { .. } | Frame::Reset { .. }) => {
                self.on_sequenced(path, f, now)?
            }
        }
        Ok(())
    }

    fn on_ack(&mut self, cum: u64, now: Instant) -> Result<(), ProtocolError> {
        if cum > self.next_seq {
            return Err(ProtocolError::AckBeyondSent {
                cum,
                next: self.next_seq,
            });
        }
        if cum <= self.peer_cum {
            return Ok(());
        }
        self.peer_cum = cum;
        let keep = self.outgoing.split_off(&cum);
        let acked = std::mem::replace(&mut self.outgoing, keep);
        for (seq, out) in acked {
            let mut bits = out.on_paths;
            while bits != 0 {
                let p = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.paths[p].held = self.paths[p].held.saturating_sub(1);
                self.paths[p].progress = now;
            }
            if !out.sent {
                // Cannot be acknowledged before it was sent: the peer lies.
                return Err(ProtocolError::AckBeyondSent { cum, next: seq });
            }
        }
        self.retransmit = self.retransmit.split_off(&cum);
        Ok(())
    }

    /// The peer's arrival report for `seq`, which travelled on path `on`.
    fn on_report(&mut self, on: usize, seq: u64, ts: u32, delay: u32, now: Instant) {
        if let Some(p) = self.paths.get_mut(on) {
            p.progress = now;
            // The bytes in flight when the frame was sent: drop older records, find this one.
            let mut bif = None;
            while let Some(&(t, b)) = p.sent_log.front() {
                if t == ts {
                    bif = Some(b);
                    break;
                }
                if (ts.wrapping_sub(t) as i32) > 0 {
                    p.sent_log.pop_front();
                } else {
                    break;
                }
            }
            let bif = bif.unwrap_or_else(|| bytes_in_flight(&p.snap));
            // Wrapping difference of two microsecond clocks: offset plus delay, signed.
            p.owd.sample(bif, delay as i32 as i64);
        }
        if let Some(o) = self.outgoing.get_mut(&seq) {
            if o.sent && !o.received {
                o.received = true;
                self.retransmit.remove(&seq);
            }
        }
    }

    /// The peer's reorder buffer is filling behind the gap at `cum`: send that frame again
    /// on the lowest-RTT path that does not hold it (once per gap).
    fn on_stall(&mut self, cum: u64, now: Instant) {
        if self.stall_served == Some(cum) {
            return;
        }
        let Some(o) = self.outgoing.get(&cum) else { return };
        if !o.sent || o.received {
            return;
        }
        let holds = o.on_paths;
        let target = self
            .paths
            .iter()
            .filter(|p| p.status == PathStatus::Up && !p.suspect && holds & (1 << p.snap.id) == 0)
            .min_by_key(|p| (p.snap.srtt, p.snap.id))
            .map(|p| p.snap.id);
        if let Some(t) = target {
            self.stall_served = Some(cum);
            self.paths[t].dup.push_front(cum);
            self.paths[t].counters.stall_reinjections += 1;
            self.events.push_back(Event::WakePaths);
            tracing::debug!(seq = cum, path = t, ?now, "peer stalled on a gap; re-sending it");
        }
    }

    fn on_sequenced(&mut self, path: usize, frame: Frame, now: Instant) -> Result<(), ProtocolError> {
        let seq = frame.seq().expect("sequenced");
        let payload = frame.payload_len() as u64;
        if let Some(ts) = frame.ts() {
            // Arrival report: a one-way-delay sample for the sender, and a selective ack.
            if self.reports.len() >= MAX_REPORTS {
                self.reports.pop_front();
            }
            self.reports.push_back(Frame::Owd {
                path: path as u8,
                seq,
                ts,
                delay: self.ts(now).wrapping_sub(ts),
            });
        }
        if seq < self.rcv_next || self.reorder.contains_key(&seq) {
            self.paths[path].counters.duplicate_received += payload;
            // The sender may be retransmitting because our ACK got lost; repeat it.
            self.ack_needed = true;
            self.events.push_back(Event::WakePaths);
            return Ok(());
        }
        // The sender respects our session window, so the reorder buffer stays below it;
        // a peer that does not is cut off instead of growing our memory.
        let limit = self.rx_data_max.saturating_sub(self.rx_data);
        if self.reorder_payload + payload > limit || self.reorder.len() > 1 << 20 {
            return Err(ProtocolError::SessionWindow);
        }
        self.reorder_payload += payload;
        let early = match &frame {
            Frame::Data {
                stream, offset, data, ..
            } if !data.is_empty() => Some((*stream, *offset)),
            Frame::Fin { stream, offset, .. } => Some((*stream, *offset)),
            _ => None,
        };
        // Streams that took bytes may now take frames waiting further on.
        let mut touched: Vec<StreamId> = early.map(|e| e.0).into_iter().collect();
        match frame {
            // A new stream opens at once: its frames follow its Open in the sequence, so
            // none of them can have been mistaken for a closed stream's before it.
            Frame::Open { stream, .. } if !self.streams.contains_key(&stream) => {
                self.reorder_payload -= payload;
                self.reorder.insert(seq, Arrived::Delivered { span: frame.seq_span() });
                if seq != self.rcv_next {
                    self.early_delivered += 1;
                }
                self.deliver(frame)?;
                touched.push(stream);
            }
            frame => {
                if let Some((stream, offset)) = early {
                    self.waiting_at.entry(stream).or_default().insert(offset, seq);
                }
                self.reorder.insert(seq, Arrived::Waiting(frame));
            }
        }
        while let Some(a) = self.reorder.remove(&self.rcv_next) {
            let f = match a {
                Arrived::Delivered { span } => {
                    self.rcv_next += span;
                    continue;
                }
                Arrived::Waiting(f) => f,
            };
            self.reorder_payload -= f.payload_len() as u64;
            self.unindex(&f);
            self.rcv_next += f.seq_span();
            if let Frame::Open { stream, .. } | Frame::Data { stream, .. } = &f {
                let stream = *stream;
                if touched.last() != Some(&stream) {
                    touched.push(stream);
                }
            }
            self.deliver(f)?;
            // A frame starting inside one just delivered overlaps it: no sender of ours
            // cuts a frame it has sent, so it can only come from a broken peer, and it
            // must not sit in the buffer for ever.
            while let Some(entry) = self.reorder.first_entry() {
                if *entry.key() >= self.rcv_next {
                    break;
                }
                if let Arrived::Waiting(f) = entry.remove() {
                    self.reorder_payload -= f.payload_len() as u64;
                    self.unindex(&f);
                    self.paths[path].counters.duplicate_received += f.payload_len() as u64;
                }
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for stream in touched {
            self.deliver_early(stream)?;
        }
        // Smart reinjection: frames stuck behind a gap fill the receive buffer.
        if !self.reorder.is_empty() && self.stall_sent_for != Some(self.rcv_next) {
            let buffered = self.reorder_payload + (self.rx_data - self.rx_consumed);
            if buffered as f64 >= self.cfg.stall_fraction * self.cfg.session_window as f64 {
                self.stall_sent_for = Some(self.rcv_next);
                self.reports.push_back(Frame::Stall { cum: self.rcv_next });
                self.ack_needed = true;
                self.events.push_back(Event::WakePaths);
            }
        }
        self.unacked_bytes += payload + 16;
        if self.unacked_bytes >= self.cfg.ack_every_bytes {
            self.ack_needed = true;
            self.events.push_back(Event::WakePaths);
        } else if self.ack_deadline.is_none() {
            self.ack_deadline = Some(now + self.cfg.ack_delay);
        }
        Ok(())
    }

    /// Hands `stream` the frames waiting in the reorder buffer that continue it, ahead of
    /// the session's order; each leaves a marker so that the session sequence still
    /// advances over it.
    fn deliver_early(&mut self, stream: StreamId) -> Result<(), ProtocolError> {
        loop {
            let Some(next) = self.streams.get(&stream).map(|s| s.rx_offset) else {
                return Ok(());
            };
            let Some(index) = self.waiting_at.get_mut(&stream) else {
                return Ok(());
            };
            let Some(seq) = index.remove(&next) else {
                return Ok(());
            };
            if index.is_empty() {
                self.waiting_at.remove(&stream);
            }
            let Some(Arrived::Waiting(f)) = self.reorder.remove(&seq) else {
                unreachable!("indexed frames wait in the reorder buffer");
            };
            self.reorder_payload -= f.payload_len() as u64;
            self.reorder.insert(seq, Arrived::Delivered { span: f.seq_span() });
            self.early_delivered += 1;
            self.deliver(f)?;
        }
    }

    /// Drops a frame leaving the reorder buffer from the index of early deliveries.
    fn unindex(&mut self, f: &Frame) {
        let (Frame::Data {
            stream, offset, seq, ..
        }
        | Frame::Fin { stream, offset, seq }) = f
        else {
            return;
        };
        if let Some(index) = self.waiting_at.get_mut(stream) {
            if index.get(offset) == Some(seq) {
                index.remove(offset);
                if index.is_empty() {
                    self.waiting_at.remove(stream);
                }
            }
        }
    }

    fn deliver(&mut self, frame: Frame) -> Result<(), ProtocolError> {
        match frame {
            Frame::Open { stream, addr, data, .. } => {
                if self.cfg.role == Role::Client {
                    return Err(ProtocolError::UnexpectedOpen);
                }
                if self.streams.contains_key(&stream) {
                    return Err(ProtocolError::DuplicateStream(stream));
                }
                if self.streams.len() >= self.cfg.max_streams {
                    return Err(ProtocolError::TooManyStreams);
                }
                self.streams.insert(stream, Stream::new(self.cfg.stream_window));
                self.events.push_back(Event::StreamOpened { stream, addr });
                self.deliver_data(stream, data)?;
            }
            Frame::Data {
                stream, offset, data, ..
            } => {
                if self.streams.get(&stream).is_some_and(|s| s.rx_offset != offset) {
                    return Err(ProtocolError::StreamOffset(stream));
                }
                self.deliver_data(stream, data)?
            }
            Frame::Fin { stream, offset, .. } => {
                if let Some(s) = self.streams.get_mut(&stream) {
                    if s.rx_offset != offset {
                        return Err(ProtocolError::StreamOffset(stream));
                    }
                    s.rx_fin = true;
                    self.windows_needed.remove(&stream);
                    self.events.push_back(Event::StreamReadable(stream));
                }
            }
            Frame::Reset { stream, code, .. } => {
                if self.streams.remove(&stream).is_some() {
                    self.blocked.remove(&stream);
                    self.windows_needed.remove(&stream);
                    self.unstage(stream);
                    self.events.push_back(Event::StreamReset { stream, code });
                }
            }
            _ => unreachable!("only sequenced frames are delivered"),
        }
        Ok(())
    }

    fn deliver_data(&mut self, stream: StreamId, data: Bytes) -> Result<(), ProtocolError> {
        let n = data.len() as u64;
        self.rx_data += n;
        if self.rx_data > self.rx_data_max {
            return Err(ProtocolError::SessionWindow);
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            // Data for a stream reset locally: count it as consumed so the session window
            // does not shrink for good.
            self.rx_consumed += n;
            return Ok(());
        };
        if s.rx_offset + n > s.rx_max {
            return Err(ProtocolError::FlowControl(stream));
        }
        if n == 0 {
            return Ok(());
        }
        s.rx_offset += n;
        let was_empty = s.rx_buf.is_empty();
        s.rx_buf.push_back(data);
        if was_empty {
            self.events.push_back(Event::StreamReadable(stream));
        }
        Ok(())
    }

    // ----- sending -----

    /// Appends to `out` what `path` should send now, at most `max` bytes (frames are never
    /// split). Call when the path's socket can take bytes.
    pub fn poll_transmit(&mut self, path: usize, now: Instant, out: &mut Vec<u8>, max: usize) -> PollTransmit {
        self.last_now = self.last_now.max(now);
        let start = out.len();
        let Some(p) = self.paths.get(path) else {
            return PollTransmit::Wait { until: None };
        };
        if p.status != PathStatus::Up {
            return PollTransmit::Wait { until: None };
        }
        let bit = 1u64 << path;
        let room = |out: &Vec<u8>, f: &Frame| out.len() - start + f.encoded_len() <= max;

        // 1. Path-local control (pongs, keepalives).
        while let Some(f) = self.paths[path].ctrl.front() {
            if !room(out, f) {
                return self.sent(path, start, out);
            }
            let f = self.paths[path].ctrl.pop_front().expect("front");
            f.encode(out);
        }
        // 2. Session control: ACK, windows.
        if self.ack_needed || self.ack_deadline.is_some_and(|d| d <= now) {
            let f = Frame::Ack { cum: self.rcv_next };
            if !room(out, &f) {
                return self.sent(path, start, out);
            }
            f.encode(out);
            self.ack_needed = false;
            self.ack_deadline = None;
            self.unacked_bytes = 0;
        }
        if self.max_data_needed {
            let f = Frame::MaxData { max: self.rx_data_max };
            if !room(out, &f) {
                return self.sent(path, start, out);
            }
            f.encode(out);
            self.max_data_needed = false;
        }
        while let Some(&id) = self.windows_needed.first() {
            let f = match self.streams.get(&id) {
                Some(s) => Frame::Window {
                    stream: id,
                    max: s.rx_max,
                },
                None => {
                    self.windows_needed.pop_first();
                    continue;
                }
            };
            if !room(out, &f) {
                return self.sent(path, start, out);
            }
            f.encode(out);
            self.windows_needed.pop_first();
        }
        // Arrival reports (and a stall notice) for the peer's scheduler.
        while let Some(f) = self.reports.front() {
            if !room(out, f) {
                return self.sent(path, start, out);
            }
            self.reports.pop_front().expect("front").encode(out);
        }
        if self.paths[path].suspect {
            return self.sent(path, start, out);
        }
        let ts = self.ts(now);
        // 3. Copies this path owes (redundant scheduling, stalls).
        while let Some(&seq) = self.paths[path].dup.front() {
            match self.outgoing.get(&seq) {
                Some(o) if o.on_paths & bit == 0 && !o.received => {
                    if !room(out, &o.frame) {
                        return self.sent(path, start, out);
                    }
                    let payload = self.put(path, seq, out, start, now, ts);
                    self.paths[path].counters.payload_resent += payload;
                }
                _ => {}
            }
            self.paths[path].dup.pop_front();
        }
        // 4. Frames whose path died: they go first, on whichever path asks.
        while let Some(&seq) = self.retransmit.first() {
            if let Some(o) = self.outgoing.get(&seq) {
                if o.on_paths == 0 && !o.received {
                    if !room(out, &o.frame) {
                        return self.sent(path, start, out);
                    }
                    let payload = self.put(path, seq, out, start, now, ts);
                    self.paths[path].counters.payload_resent += payload;
                }
            }
            self.retransmit.pop_first();
        }
        // 5. New frames, as the scheduler decides (or copies, if it re-sends).
        self.promote(SEQUENCE_AHEAD);
        if self.unsent.is_empty() && (self.outgoing.is_empty() || !self.scheduler.reinjects()) {
            return self.sent(path, start, out);
        }
        let snaps: Vec<PathSnapshot> = self
            .paths
            .iter()
            .map(|p| {
                let mut s = p.snap.clone();
                s.owd_us = p.owd.estimate(bytes_in_flight(&s));
                s.owd_dev_us = p.owd.deviation();
                s
            })
            .collect();
        // The scheduler sees the whole backlog, staged or sequenced.
        let backlog = self.unsent_bytes + self.staged_bytes;
        let queue = QueueView {
            bytes: backlog,
            frames: self.unsent.len() + self.staged_frames,
            // Unsent queue (already within the window) plus the credit not yet used.
            send_window: self.tx_data_max.saturating_sub(self.tx_data).saturating_add(backlog),
        };
        let budget = max.saturating_sub(out.len() - start);
        let decision = self.scheduler.decide(now, path, &snaps, &queue, budget);
        if tracing::enabled!(tracing::Level::TRACE) {
            let view: Vec<String> = snaps
                .iter()
                .map(|p| {
                    format!(
                        "{}:{}{} srtt={}us min_rtt={}us rttvar={}us cwnd={}{} inflight={} notsent={} rate={} pacing={} bw={} owd={:?}",
                        p.id,
                        if p.alive { "up" } else { "down" },
                        if p.ready { ",ready" } else { "" },
                        p.srtt.as_micros(),
                        p.min_rtt.as_micros(),
                        p.rttvar.as_micros(),
                        p.cwnd,
                        p.restart_cwnd.map(|w| format!("->{w}")).unwrap_or_default(),
                        p.in_flight,
                        p.notsent,
                        p.delivery_rate,
                        p.pacing_rate,
                        p.bandwidth,
                        p.owd_us,
                    )
                })
                .collect();
            tracing::trace!(path, queue = queue.bytes, budget, ?decision, paths = ?view, "schedule");
        }
        match decision {
            Decision::Wait { until } => {
                self.waiting |= bit;
                if out.len() > start {
                    return self.sent(path, start, out);
                }
                PollTransmit::Wait { until }
            }
            Decision::Send {
                end,
                max_bytes,
                duplicate,
                exact,
            } => {
                // An exact limit (a path's window room) covers the whole record on the
                // wire, the control frames already in it and the record's own overhead
                // included (bytes beyond a path's window wait a round trip in its socket),
                // and a frame larger than what is left of it is cut to fit.
                // A limit the record's room already keeps is no window: whole frames then.
                let exact = exact && max_bytes < budget;
                let limit = if exact {
                    (start + max_bytes).saturating_sub(RECORD_OVERHEAD)
                } else {
                    out.len() + max_bytes.min(budget)
                };
                if end == End::Tail {
                    self.promote(u64::MAX);
                }
                // Always make progress: at least one frame goes out if it fits the record.
                let mut first = true;
                let before = out.len();
                loop {
                    if end == End::Head && self.unsent.is_empty() {
                        self.promote(SEQUENCE_AHEAD);
                    }
                    let Some(mut seq) = self.unsent_end(end) else { break };
                    let room = limit.saturating_sub(out.len());
                    if exact && self.outgoing[&seq].frame.encoded_len() > room {
                        self.split_unsent(seq, end, room);
                        seq = self.unsent_end(end).expect("a split leaves frames unsent");
                    }
                    let o = self.outgoing.get_mut(&seq).expect("unsent frames are outgoing");
                    let len = o.frame.encoded_len();
                    // Beyond the limit only a decision's first frame, and under a
                    // scheduler's limit only into an otherwise empty record: a record of
                    // control frames goes alone, and the next decision sees their bytes.
                    let over = out.len() + len > limit && (!first || (exact && out.len() > start));
                    if out.len() - start + len > max || over {
                        break;
                    }
                    first = false;
                    o.sent = true;
                    let payload = self.put(path, seq, out, start, now, ts);
                    self.unsent_bytes -= len as u64;
                    match end {
                        End::Head => self.unsent.pop_front(),
                        End::Tail => self.unsent.pop_back(),
                    };
                    self.paths[path].counters.payload_sent += payload;
                    if duplicate {
                        for other in self.paths.iter_mut() {
                            if other.snap.id != path && other.status == PathStatus::Up {
                                other.dup.push_back(seq);
                            }
                        }
                    }
                }
                if tracing::enabled!(tracing::Level::DEBUG) {
                    let p = &snaps[path];
                    tracing::debug!(
                        path,
                        ?end,
                        max_bytes,
                        budget,
                        sent = out.len() - before,
                        cwnd = p.send_cwnd(),
                        inflight = p.in_flight,
                        notsent = p.notsent,
                        "send"
                    );
                }
                self.waiting &= !bit;
                // Paths told to wait (for this one, say) must look again now.
                if duplicate || self.waiting != 0 {
                    self.waiting = 0;
                    self.events.push_back(Event::WakePaths);
                }
                self.sent(path, start, out)
            }
            Decision::Reinject {
                end,
                max_bytes,
                max_age,
                sooner_only,
            } => {
                let limit = out.len() + max_bytes.min(budget);
                let oldest = max_age.and_then(|a| now.checked_sub(a));
                // For `sooner_only`: when a copy handed to this path now would arrive (it
                // grows with what is picked), and how late a frame may be on each path.
                let now_us = self.clock_us(now);
                let here = &self.paths[path];
                let here_bif = bytes_in_flight(&here.snap) + (out.len() - start) as u64;
                let here_dev = here.owd.deviation() as i64;
                // Overdue: older than its path's srtt + 4·rttvar plus the slowest path's
                // srtt, the longest the peer's report may take to come back.
                let report = self.paths.iter().map(|p| p.snap.srtt).max().unwrap_or_default();
                let rto: Vec<Duration> = self
                    .paths
                    .iter()
                    .map(|p| p.snap.srtt + 4 * p.snap.rttvar + report)
                    .collect();
                let dev: Vec<i64> = self.paths.iter().map(|p| p.owd.deviation() as i64).collect();
                let holders = |o: &Outgoing| {
                    let on = o.on_paths;
                    (0..rto.len()).filter(move |&i| on & (1 << i) != 0)
                };
                // When a frame becomes overdue: on the first path holding it to run late.
                let due = |o: &Outgoing| {
                    let sent = o.last_sent?;
                    holders(o).map(|i| sent + rto[i]).min()
                };
                let sooner = |o: &Outgoing, extra: u64| -> bool {
                    let (Some(eta), Some(owd)) = (o.eta_us, here.owd.estimate(here_bif + extra)) else {
                        return true;
                    };
                    let margin = here_dev + holders(o).map(|i| dev[i]).max().unwrap_or(0);
                    due(o).is_some_and(|d| now > d) || now_us + owd + margin < eta
                };
                // Unacknowledged frames another path carries and the peer has not reported.
                let wanted = |o: &Outgoing| {
                    o.sent
                        && !o.received
                        && o.on_paths != 0
                        && o.on_paths & bit == 0
                        && oldest.is_none_or(|t| o.last_sent.is_some_and(|s| s >= t))
                };
                let mut picked = Vec::new();
                let mut next_due: Option<Instant> = None;
                let mut size = out.len() - start;
                let mut push = |seq: u64, o: &Outgoing| -> Option<bool> {
                    let len = o.frame.encoded_len();
                    if size + len > max || (!picked.is_empty() && start + size + len > limit) {
                        return None;
                    }
                    if sooner_only && !sooner(o, (size - (out.len() - start)) as u64) {
                        // Ask again when it becomes overdue.
                        let due = due(o).map(|d| d + Duration::from_millis(1));
                        next_due = match (next_due, due) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        };
                        return Some(false);
                    }
                    size += len;
                    picked.push(seq);
                    Some(true)
                };
                let candidates: Box<dyn Iterator<Item = (&u64, &Outgoing)>> = match end {
                    End::Head => Box::new(self.outgoing.iter()),
                    End::Tail => Box::new(self.outgoing.iter().rev()),
                };
                for (&seq, o) in candidates.filter(|(_, o)| wanted(o)) {
                    if push(seq, o).is_none() {
                        break;
                    }
                }
                if picked.is_empty() {
                    self.waiting |= bit;
                    if out.len() > start {
                        return self.sent(path, start, out);
                    }
                    return PollTransmit::Wait { until: next_due };
                }
                for seq in picked {
                    let payload = self.put(path, seq, out, start, now, ts);
                    self.paths[path].counters.payload_resent += payload;
                }
                self.waiting &= !bit;
                self.sent(path, start, out)
            }
        }
    }

    /// The never-sent frame a send from `end` takes next.
    fn unsent_end(&self, end: End) -> Option<u64> {
        match end {
            End::Head => self.unsent.front().copied(),
            End::Tail => self.unsent.back().copied(),
        }
    }

    /// Splits the never-sent Data frame `seq` (at the `end` of the unsent queue) so that the
    /// part at that end takes at most `room` bytes on the wire; both parts keep the frame's
    /// sequence numbers between them (a frame takes one per payload byte), so the peer
    /// sees two ordinary frames. Neither part carries less than [`MIN_SPLIT`] payload bytes
    /// (the part sent is cut shorter if need be); other frames are never split.
    fn split_unsent(&mut self, seq: u64, end: End, room: usize) {
        let o = self.outgoing.get_mut(&seq).expect("unsent frames are outgoing");
        debug_assert!(!o.sent && o.on_paths == 0);
        let header = o.frame.encoded_len() - o.frame.payload_len();
        let Frame::Data {
            stream,
            offset,
            ts,
            data,
            ..
        } = &mut o.frame
        else {
            return;
        };
        // Leave at least MIN_SPLIT behind: a few hundred bytes short of the limit cost
        // nothing, a few hundred beyond it may cost a round trip.
        let part = room.saturating_sub(header).min(data.len().saturating_sub(MIN_SPLIT));
        if part < MIN_SPLIT {
            return;
        }
        // Head: this frame keeps the first `part` bytes; tail: the new frame takes the last.
        let keep = match end {
            End::Head => part,
            End::Tail => data.len() - part,
        };
        let rest = data.split_off(keep);
        let (stream, ts) = (*stream, *ts);
        let second = seq + keep as u64;
        let second_offset = *offset + keep as u64;
        self.outgoing.insert(
            second,
            Outgoing {
                frame: Frame::Data {
                    seq: second,
                    stream,
                    offset: second_offset,
                    ts,
                    data: rest,
                },
                on_paths: 0,
                sent: false,
                last_sent: None,
                received: false,
                eta_us: None,
            },
        );
        self.unsent_bytes += header as u64;
        match end {
            End::Head => self.unsent.insert(1, second),
            End::Tail => self.unsent.push_back(second),
        }
    }

    /// Encodes outgoing frame `seq` onto `path`, stamped with the send time, and books the
    /// copy. Returns its payload length.
    fn put(&mut self, path: usize, seq: u64, out: &mut Vec<u8>, start: usize, now: Instant, ts: u32) -> u64 {
        let bif = bytes_in_flight(&self.paths[path].snap) + (out.len() - start) as u64;
        let eta = self.paths[path].owd.estimate(bif).map(|d| self.clock_us(now) + d);
        let o = self.outgoing.get_mut(&seq).expect("outgoing frame");
        if let Some(e) = eta {
            o.eta_us = Some(o.eta_us.map_or(e, |x| x.min(e)));
        }
        o.frame.set_ts(ts);
        o.frame.encode(out);
        o.on_paths |= 1 << path;
        o.last_sent = Some(now);
        let stamped = o.frame.ts().is_some();
        let payload = o.frame.payload_len() as u64;
        let p = &mut self.paths[path];
        if p.held == 0 {
            p.progress = now;
        }
        p.held += 1;
        if stamped {
            if p.sent_log.len() >= MAX_SENT_LOG {
                p.sent_log.pop_front();
            }
            p.sent_log.push_back((ts, bif));
        }
        payload
    }

    fn sent(&mut self, path: usize, start: usize, out: &[u8]) -> PollTransmit {
        let n = out.len() - start;
        if n == 0 {
            return PollTransmit::Wait { until: None };
        }
        let p = &mut self.paths[path];
        p.counters.bytes_sent += n as u64;
        p.last_send = p.last_send.max(self.last_now);
        // Until the driver reports the socket again, count what was just handed over as
        // unsent in it, record overhead included: decisions in the meantime (is this the
        // faster path with window space? how much room is left in its window?) must not
        // see it as empty.
        p.snap.notsent = p.snap.notsent.saturating_add((n + RECORD_OVERHEAD) as u32);
        PollTransmit::Sent(n)
    }

    /// Whether anything is waiting to be sent on any path.
    pub fn has_pending(&self) -> bool {
        !self.unsent.is_empty()
            || self.staged_frames > 0
            || !self.retransmit.is_empty()
            || self.ack_needed
            || self.max_data_needed
            || !self.windows_needed.is_empty()
    }

    // ----- timers -----

    /// The next instant [`Session::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.ack_deadline;
        let mut at = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
        for p in self.paths.iter().filter(|p| p.status == PathStatus::Up) {
            at(p.last_send + self.cfg.keepalive);
            at(p.last_recv + self.cfg.path_timeout);
            if !p.suspect && p.held > 0 {
                at(p.progress + self.suspect_after(p));
            }
        }
        t
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        if self.ack_deadline.is_some_and(|d| d <= now) {
            self.ack_needed = true;
            self.events.push_back(Event::WakePaths);
        }
        for i in 0..self.paths.len() {
            if self.paths[i].status != PathStatus::Up {
                continue;
            }
            let silent = now.saturating_duration_since(self.paths[i].last_recv);
            if silent >= self.cfg.path_timeout {
                self.events.push_back(Event::PathTimedOut(i));
                self.path_down(i);
                continue;
            }
            let stuck = now.saturating_duration_since(self.paths[i].progress);
            if !self.paths[i].suspect && self.paths[i].held > 0 && stuck >= self.suspect_after(&self.paths[i]) {
                // Frames the peer reported but cannot acknowledge yet (a gap elsewhere
                // holds its cumulative ACK back) are not stuck here.
                let bit = 1u64 << i;
                if !self.outgoing.values().any(|o| o.on_paths & bit != 0 && !o.received) {
                    self.paths[i].progress = now;
                    continue;
                }
                // Do not wait for the path timeout: what this path holds goes out on the
                // others now, and it carries nothing new until it is heard from again.
                let n = self.reinject_from(i);
                let p = &mut self.paths[i];
                p.suspect = true;
                p.snap.alive = false;
                p.counters.suspicions += 1;
                self.events.push_back(Event::WakePaths);
                tracing::debug!(
                    path = i,
                    frames = n,
                    "path silent while holding data; re-sending elsewhere"
                );
            }
            let p = &mut self.paths[i];
            if now.saturating_duration_since(p.last_send) >= self.cfg.keepalive {
                p.ping_id += 1;
                p.last_send = now;
                p.ctrl.push_back(Frame::Ping { id: p.ping_id });
                self.events.push_back(Event::WakePaths);
            }
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Queues a session close on every path.
    pub fn close(&mut self, code: u8) {
        for p in self.paths.iter_mut().filter(|p| p.status == PathStatus::Up) {
            p.ctrl.push_back(Frame::Close { code });
        }
        self.events.push_back(Event::WakePaths);
    }

    /// Sequenced frames kept until the peer acknowledges them (sent or not).
    pub fn buffered_frames(&self) -> usize {
        self.outgoing.len()
    }

    /// Stream bytes this session holds in memory: (send side: queued or sent and not yet
    /// acknowledged by the peer, framing included; receive side: arrived and not yet read
    /// by the applications, out-of-order frames included). Both stay within the session
    /// window; the process's memory follows them.
    pub fn held_bytes(&self) -> (u64, u64) {
        (
            (self.next_seq - self.peer_cum) + self.staged_bytes,
            self.reorder_payload + (self.rx_data - self.rx_consumed),
        )
    }

    /// Frames a stream took ahead of the session's order (another stream's frame before
    /// them was still missing), since the session began.
    pub fn early_delivered(&self) -> u64 {
        self.early_delivered
    }

    /// Frames received out of order, waiting for a gap to fill.
    pub fn reorder_frames(&self) -> usize {
        self.reorder
            .values()
            .filter(|a| matches!(a, Arrived::Waiting(_)))
            .count()
    }

    /// Streams still open.
    pub fn stream_ids(&self) -> Vec<StreamId> {
        self.streams.keys().copied().collect()
    }

    /// (client) The server has no state for this session (it restarted): every stream is
    /// lost. Resets them all and starts the sequence spaces over.
    pub fn peer_lost_state(&mut self) {
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for id in ids {
            self.events.push_back(Event::StreamReset { stream: id, code: 0xfe });
        }
        self.streams.clear();
        self.blocked.clear();
        self.next_seq = 0;
        self.peer_cum = 0;
        self.outgoing.clear();
        self.unsent.clear();
        self.unsent_bytes = 0;
        self.staged.clear();
        self.staged_order.clear();
        self.staged_bytes = 0;
        self.staged_frames = 0;
        self.retransmit.clear();
        self.tx_data = 0;
        self.tx_data_max = self.cfg.session_window;
        self.rcv_next = 0;
        self.reorder.clear();
        self.reorder_payload = 0;
        self.waiting_at.clear();
        self.rx_data = 0;
        self.rx_consumed = 0;
        self.rx_data_max = self.cfg.session_window;
        self.windows_needed.clear();
        self.reports.clear();
        self.stall_sent_for = None;
        self.stall_served = None;
        for p in &mut self.paths {
            p.dup.clear();
            p.sent_log.clear();
        }
    }

    /// Whether this session has ever carried anything (a restarted peer matters only then).
    pub fn has_history(&self) -> bool {
        self.next_seq > 0 || self.rcv_next > 0
    }
}
