//! What a path sends: control first, then datagrams placed on it, then copies it owes,
//! then frames of dead paths, then interactive frames (if this path delivers them first),
//! then what the scheduler decides of the bulk backlog — and the path writer's
//! late-binding loop around it.

use std::ops::Range;
use std::time::Instant;

use mpflex_sched::{Decision, End, PathSnapshot, QueueView};
use mpflex_wire::{record, Frame, MAX_RECORD, RECORD_OVERHEAD};

use super::record::{trace_decision, Limits, Rec};
use super::Session;
use crate::kernel::TcpInfo;
use crate::reinject::{self, Request};
use crate::supervisor::Verdict;
use crate::writer::{Budget, PathSocket, PathWriter, SocketWants, WriterStep};

/// Result of [`Session::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollTransmit {
    /// This many bytes were appended.
    Sent(usize),
    /// Nothing to send on this path now; poll again on [`super::Event::WakePaths`] or at
    /// `until`.
    Wait { until: Option<Instant> },
}

/// How stale a socket's `TCP_INFO` may get while it has bytes unacknowledged: an idle
/// writer looks again this soon, so a silent path's kernel view is fresh when its
/// suspicion threshold (150 ms at least) comes.
const KERNEL_READ: std::time::Duration = std::time::Duration::from_millis(50);

/// A scheduler's `Send` decision.
#[derive(Debug, Clone, Copy)]
struct SendNew {
    end: End,
    max_bytes: usize,
    duplicate: bool,
    exact: bool,
}

impl Session {
    /// Runs `path`'s writer's late-binding step on the socket state `info` (from
    /// `TCP_INFO`; `bandwidth` from the congestion control, if it keeps one): records its
    /// statistics, and if the socket has room appends records for it to `out` (their
    /// ranges in `records`, to be sealed), up to the writer's budget. The socket options
    /// the writer wants then are [`Session::socket_wants`].
    pub fn drive_writer(
        &mut self,
        path: usize,
        info: &TcpInfo,
        bandwidth: Option<u64>,
        now: Instant,
        out: &mut Vec<u8>,
        records: &mut Vec<Range<usize>>,
    ) -> WriterStep {
        let snap = self.writer_mut(path, now).observe(path, info, bandwidth);
        self.read_kernel(path, info, now);
        let protecting = self.protecting(now);
        let engaged = protecting || self.engaged_by_backlog(now);
        let queue = engaged.then(|| self.paths.queue_delay(path, now));
        let max_frame = self.max_frame_len();
        let writer = self.writer_mut(path, now);
        writer.set_protecting(protecting);
        if let Some(queue) = queue {
            writer.steer(queue, info, now);
        }
        let budget = match writer.budget(info, max_frame, engaged) {
            Ok(budget) => budget,
            Err(step) => {
                if matches!(step, WriterStep::Full) {
                    // While it waits, the schedulers read the kernel's own latest rate.
                    let kernel = PathSnapshot {
                        delivery_rate: info.delivery_rate,
                        ..snap
                    };
                    self.set_path_stats(path, kernel, now);
                    self.set_path_ready(path, false);
                }
                return step;
            }
        };
        self.set_path_stats(path, snap, now);
        // Held back by queue control, the path takes no bulk bytes: not ready for them.
        self.set_path_ready(path, budget.bulk > 0);
        let until = self.fill(path, now, budget, out, records);
        if records.is_empty() {
            return match budget.retry {
                Some(retry) => WriterStep::Throttled { retry },
                None if info.unacked > 0 => WriterStep::Idle {
                    until: Some(until.map_or(now + KERNEL_READ, |u| u.min(now + KERNEL_READ))),
                },
                None => WriterStep::Idle { until },
            };
        }
        // Busy writing until the kernel has taken these bytes: other paths must not wait
        // for this one as if it were free, on statistics from before the write.
        self.set_path_ready(path, false);
        WriterStep::Write {
            reset_ssthresh: self.writer_mut(path, now).reset_ssthresh_before_write(info),
        }
    }

    /// `path`'s writer, made for a socket of [`PathSocket::default`] if the path never
    /// came up with one.
    fn writer_mut(&mut self, path: usize, now: Instant) -> &mut PathWriter {
        self.paths.ensure(path, now);
        let cfg = &self.cfg;
        self.paths
            .entry(path)
            .writer
            .get_or_insert_with(|| PathWriter::for_path(cfg, PathSocket::default()))
    }

    /// `path`'s writer (queue control's state, for tests and statistics); `None` before
    /// the path first came up.
    pub fn path_writer(&self, path: usize) -> Option<&PathWriter> {
        self.paths.get(path)?.writer.as_ref()
    }

    /// The socket options `path`'s writer wants now (the driver applies them after
    /// [`Session::drive_writer`]).
    pub fn socket_wants(&self, path: usize) -> SocketWants {
        match self.path_writer(path) {
            Some(w) => w.socket_wants(),
            None => PathWriter::for_path(&self.cfg, PathSocket::default()).socket_wants(),
        }
    }

    /// The driver could not reset `path`'s slow-start threshold (it could not switch its
    /// congestion control): its writer stops asking.
    pub fn ssthresh_reset_failed(&mut self, path: usize) {
        if let Some(w) = self.paths.get_mut(path).and_then(|p| p.writer.as_mut()) {
            w.disable_ssthresh_reset();
        }
    }

    /// A `TCP_INFO` reading of `path`'s socket: a suspect path that was acknowledged
    /// something is released; the quality monitor may demote or promote it (see
    /// [`crate::supervisor`]). A demoted path's unacknowledged frames are copied to the
    /// fastest path that carries, make-before-break: it keeps delivering what it holds,
    /// and whichever copy arrives first counts.
    fn read_kernel(&mut self, path: usize, info: &TcpInfo, now: Instant) {
        let r = self.paths.read_kernel(path, info, now, self.cfg.proactive);
        if r.verdict == Verdict::Demoted {
            let n = self.copy_elsewhere(path);
            let why = self.paths.get(path).map_or("", |p| p.quality.why());
            tracing::info!(path, frames = n, why, "path degrading; new data goes elsewhere");
        } else if r.verdict == Verdict::Promoted {
            if self.paths.get(path).is_some_and(|p| p.hinted_weak()) {
                tracing::info!(path, "path trends healthy again; its link is still hinted weak");
            } else {
                tracing::info!(path, "path healthy again");
            }
        }
        if r.released || r.verdict != Verdict::Unchanged {
            self.restate_control();
            self.wake();
        }
    }

    /// Queues copies of the frames `path` holds and the peer has not reported on the
    /// fastest path that carries, or while none other does, on the one that would carry
    /// without `path` (`Paths::copy_target`; none if there is none). Returns how many.
    pub(super) fn copy_elsewhere(&mut self, path: usize) -> usize {
        let Some(to) = self.paths.copy_target(path) else {
            return 0;
        };
        let mut seqs = self.send.unreported_on(path);
        seqs.retain(|seq| self.send.get(*seq).is_some_and(|o| o.allowed_on(to)));
        let n = seqs.len();
        self.paths.entry(to).dup.extend(seqs);
        n
    }

    /// Appends records for `path` to `out` until they hold `budget.total` bytes (of which
    /// at most `budget.bulk` for bulk frames) or nothing is left to send now; returns when
    /// to look again in the latter case.
    fn fill(
        &mut self,
        path: usize,
        now: Instant,
        budget: Budget,
        out: &mut Vec<u8>,
        records: &mut Vec<Range<usize>>,
    ) -> Option<Instant> {
        let base = out.len();
        let frame = self.max_frame_len();
        // A record is opened only once all of it arrived, so one larger than the window a
        // write now gets holds its first frames back by a round trip or more: a path
        // restarting after an idle spell with 10 segments, given 32 KB of frames a
        // silent path held, delivered the first of them 85 ms late. Records stay within
        // that window; only a record's first frame may exceed it (progress). The window
        // is no floor for the record's other frames: ten segments (CUBIC's restart
        // window) hold less than one largest frame, and a record filled to that size
        // with small frames sent its tail an LTE round trip after the rest. A large
        // window changes nothing.
        let window = self
            .paths
            .get(path)
            .map(|p| p.snap.send_cwnd() as usize * p.snap.mss as usize)
            .filter(|&w| w > 0)
            .unwrap_or(MAX_RECORD);
        while out.len() - base < budget.total {
            let start = record::begin(out);
            let room = budget.total.saturating_sub(start - base).max(frame).min(MAX_RECORD);
            let within = window.saturating_sub(RECORD_OVERHEAD).min(room);
            let bulk = if budget.bulk_limited() {
                budget.bulk.saturating_sub(start - base)
            } else {
                room
            };
            let limits = Limits {
                max: room,
                window: within,
                bulk,
                bulk_exact: budget.bulk_limited(),
            };
            match self.poll_record(path, now, out, limits) {
                PollTransmit::Sent(_) => records.push(start..record::end(out, start)),
                PollTransmit::Wait { until } => {
                    out.truncate(start);
                    return until;
                }
            }
        }
        None
    }

    /// The most one stream frame takes on the wire (its payload limit plus headers): a
    /// `poll_transmit` with at least this much room always makes progress.
    pub fn max_frame_len(&self) -> usize {
        self.cfg.max_frame_data + 64
    }

    /// Appends to `out` what `path` should send now, at most `max` bytes. Call when the
    /// path's socket can take bytes.
    pub fn poll_transmit(&mut self, path: usize, now: Instant, out: &mut Vec<u8>, max: usize) -> PollTransmit {
        let limits = Limits {
            max,
            window: max,
            bulk: max,
            bulk_exact: false,
        };
        self.poll_record(path, now, out, limits)
    }

    /// [`Session::poll_transmit`] with at most `bulk` bytes of bulk frames, cut to fit if
    /// `bulk_exact` (queue control's limit).
    fn poll_record(&mut self, path: usize, now: Instant, out: &mut Vec<u8>, limits: Limits) -> PollTransmit {
        self.last_now = self.last_now.max(now);
        if !self.paths.get(path).is_some_and(|p| p.is_up()) {
            return PollTransmit::Wait { until: None };
        }
        let Limits {
            max,
            window,
            bulk,
            bulk_exact,
        } = limits;
        // A capped path takes records only within what is left of its allowance (while
        // too little is left it carries no data: see `Paths::set_allowance`).
        let (max, bulk) = match self.paths.get(path).and_then(|p| p.allowance) {
            Some(left) => (max.min(left as usize), bulk.min(left as usize)),
            None => (max, bulk),
        };
        let rec = Rec {
            path,
            start: out.len(),
            max,
            window: window.min(max),
            now,
            ts: self.ts(now),
            bulk,
            bulk_exact,
        };
        // Path-local control (keepalives, pongs) goes on every path; session control and
        // data only on paths that carry — or on any, while none does.
        if !self.write_path_control(rec, out) {
            return self.sent(rec, out);
        }
        let carries = self.paths.get(path).is_some_and(|p| p.carries());
        if !carries && self.paths.iter().any(|p| p.carries()) {
            // A standby sends the copies of a silent path's frames it was given
            // (`Paths::copy_target`), and nothing else.
            if self.paths.get(path).is_some_and(|p| !p.suspect()) {
                self.write_copies(rec, out);
                if rec.used(out) > 0 {
                    tracing::debug!(path, bytes = rec.used(out), "standby path sent copies");
                }
            }
            return self.sent(rec, out);
        }
        if !self.write_control(rec, out) || !self.write_datagrams(rec, out) || !carries {
            return self.sent(rec, out);
        }
        if !self.write_owed(rec, out) || !self.write_urgent(rec, out) {
            return self.sent(rec, out);
        }
        self.send.promote_for(path, End::Head);
        let none_here = self.send.unsent_end_for(End::Head, path).is_none();
        if none_here && (self.send.outgoing_is_empty() || !self.scheduler.reinjects()) {
            return self.sent(rec, out);
        }
        // Queue control's limit leaves no room for a useful bulk frame.
        if rec.bulk_exact && rec.bulk_room(out) < crate::send::MIN_SPLIT + 64 {
            return self.sent(rec, out);
        }
        self.write_scheduled(rec, out)
    }

    /// Interactive frames, as long as this is the path on which each arrives first now
    /// (a burst of them spreads over the paths as they fill). False if the record filled
    /// up.
    fn write_urgent(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        self.send.promote_urgent();
        while let Some(seq) = self.send.urgent_front_for(rec.path) {
            let frame = &self.send.get(seq).expect("urgent frames are outgoing").frame;
            if !self
                .paths
                .urgent_here(frame.encoded_len(), rec.path, rec.used(out), rec.now)
            {
                // That path's writer was woken when the frame was queued.
                return true;
            }
            if !rec.fits(out, frame) {
                return false;
            }
            self.send.take_urgent_seq(seq);
            let payload = self.put(rec, seq, out);
            self.paths.entry(rec.path).counters.payload_sent += payload;
            self.note_payload(rec.path, crate::energy::Dir::Up, payload, self.last_now);
            self.hedge(seq, rec.path, payload, rec.now);
            if tracing::enabled!(tracing::Level::DEBUG) {
                let eta: Vec<String> = self
                    .paths
                    .iter()
                    .map(|p| {
                        let s = &p.snap;
                        format!(
                            "{}:{:.1}ms(q={:?} srtt={}us min={}us cwnd={} inflight={} notsent={} rate={})",
                            s.id,
                            crate::paths::arrival_secs(s, p.queue.get(rec.now), payload as usize) * 1000.0,
                            p.queue.get(rec.now),
                            s.srtt.as_micros(),
                            s.min_rtt.as_micros(),
                            s.send_cwnd(),
                            s.in_flight,
                            s.notsent,
                            s.delivery_rate
                        )
                    })
                    .collect();
                tracing::debug!(path = rec.path, seq, payload, ?eta, "urgent");
            }
        }
        true
    }

    /// Queues a copy of interactive frame `seq`, just handed to `path`, on the path that
    /// would deliver it next, if that copy would arrive before `path` could repair a loss
    /// of it (`Paths::hedge_target`). A request lost at a loaded bottleneck (a drop-tail
    /// uplink queue under a bulk upload) waits in the peer's TCP receive queue for the
    /// retransmission: a round trip after the loss shows, a retransmission timeout (200 ms
    /// at least) when it was the tail. The copy makes that wait the second path's delay
    /// — ReMP TCP's and the redundant scheduler's idea, spent on the frames whose latency
    /// is the point and whose bytes are few ([`HEDGE_MAX_PAYLOAD`], within
    /// [`HEDGE_SHARE`] of the session's bytes).
    fn hedge(&mut self, seq: u64, path: usize, payload: u64, now: Instant) {
        if !self.cfg.hedge_interactive || payload == 0 || payload > super::HEDGE_MAX_PAYLOAD {
            return;
        }
        // The session's bytes in both directions: a server answering an upload's
        // requests sends little but its paths carry the upload.
        let carried: u64 = self
            .paths
            .iter()
            .map(|p| p.counters.payload_sent + p.counters.bytes_received)
            .sum();
        if self.counters.hedged_payload + payload > super::HEDGE_ALLOWANCE + carried / super::HEDGE_SHARE {
            return;
        }
        let Some(o) = self.send.get(seq) else { return };
        let len = o.frame.encoded_len();
        let Some(to) = self.paths.hedge_target(len, path, o.allowed, now) else {
            tracing::debug!(target: "mpflex_engine::hedge", path, seq, "interactive frame not hedged: its path lost nothing lately, or no other path delivers it in time");
            return;
        };
        tracing::debug!(target: "mpflex_engine::hedge", path, to, seq, payload, "interactive frame hedged");
        self.send.mark_hedged(seq);
        self.paths.entry(to).dup.push_back(seq);
        self.wake_path(to);
    }

    /// Path-local control (pongs, keepalives, close). False if the record filled up.
    fn write_path_control(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        let p = self.paths.entry(rec.path);
        while let Some(f) = p.ctrl.front() {
            if !rec.fits(out, f) {
                return false;
            }
            p.ctrl.pop_front().expect("front").encode(out);
        }
        true
    }

    /// Session control (ACK, windows, arrival reports). False if the record filled up.
    fn write_control(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        if let Some(f) = self.feedback.take_ack(rec.now, self.recv.rcv_next()) {
            if !rec.fits(out, &f) {
                return false;
            }
            f.encode(out);
            self.feedback.ack_sent();
        }
        if self.flow.update_needed {
            let f = Frame::MaxData {
                max: self.flow.rx_max(),
            };
            if !rec.fits(out, &f) {
                return false;
            }
            f.encode(out);
            self.flow.update_needed = false;
        }
        while let Some(&id) = self.windows_needed.first() {
            if let Some(s) = self.streams.get(&id) {
                let f = Frame::Window {
                    stream: id,
                    max: s.rx_max,
                };
                if !rec.fits(out, &f) {
                    return false;
                }
                f.encode(out);
            }
            self.windows_needed.pop_first();
        }
        while let Some(f) = self.feedback.next_report() {
            if !rec.fits(out, f) {
                return false;
            }
            self.feedback.pop_report().expect("front").encode(out);
        }
        true
    }

    /// Copies this path owes (redundant scheduling, stalls), then frames whose paths died,
    /// which go first on whichever path asks. False if the record filled up.
    fn write_owed(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        if !self.write_copies(rec, out) {
            return false;
        }
        while let Some(seq) = self.send.next_retransmit_for(rec.path) {
            let frame = &self.send.get(seq).expect("queued frames are outgoing").frame;
            if !rec.fits(out, frame) {
                return false;
            }
            let payload = self.put(rec, seq, out);
            self.paths.entry(rec.path).counters.payload_resent += payload;
            self.note_payload(rec.path, crate::energy::Dir::Up, payload, self.last_now);
            self.counters.resent_lost += 1;
            self.send.retransmitted(seq);
        }
        true
    }

    /// Copies this path owes (redundant scheduling, stalls, hedges). False if the record
    /// filled up.
    fn write_copies(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        let bit = 1u64 << rec.path;
        while let Some(&seq) = self.paths.get(rec.path).and_then(|p| p.dup.front()) {
            match self.send.get(seq) {
                Some(o) if o.on_paths & bit == 0 && !o.received && o.allowed_on(rec.path) => {
                    if !rec.fits(out, &o.frame) {
                        return false;
                    }
                    let hedged = o.hedged;
                    let payload = self.put(rec, seq, out);
                    self.paths.entry(rec.path).counters.payload_resent += payload;
                    self.note_payload(rec.path, crate::energy::Dir::Up, payload, self.last_now);
                    if hedged {
                        tracing::debug!(target: "mpflex_engine::hedge", path = rec.path, seq, "hedged copy sent");
                        self.counters.hedged += 1;
                        self.counters.hedged_payload += payload;
                    } else {
                        self.counters.resent_copies += 1;
                    }
                }
                Some(o) if o.hedged => {
                    tracing::debug!(target: "mpflex_engine::hedge", path = rec.path, seq, received = o.received, "hedged copy not needed");
                }
                _ => {}
            }
            self.paths.entry(rec.path).dup.pop_front();
        }
        true
    }

    /// Asks the scheduler what `rec.path` carries of the backlog, and sends it.
    fn write_scheduled(&mut self, rec: Rec, out: &mut Vec<u8>) -> PollTransmit {
        let mut snaps = self.paths.snapshots();
        // The scheduler decides among the paths that may carry the frame this path would
        // send next (a stream's policy): a faster path its stream may not use is no
        // reason for this one to wait. That frame's stream also says which scheduler.
        let head = self
            .send
            .unsent_end_for(End::Head, rec.path)
            .and_then(|seq| self.send.get(seq));
        if let Some(o) = head.filter(|o| o.allowed != crate::send::ALL_PATHS) {
            for s in snaps.iter_mut().filter(|s| !o.allowed_on(s.id)) {
                s.alive = false;
            }
        }
        let sched = head.and_then(|o| o.sched);
        // The scheduler sees the whole backlog, staged or sequenced.
        let (bytes, frames) = self.send.backlog();
        let queue = QueueView {
            bytes,
            frames,
            // Unsent queue (already within the window) plus the credit not yet used.
            send_window: self.flow.send_room().saturating_add(bytes),
            sustained: self.bulk_held(rec.now),
            withheld: self.bulk_withheld(rec.now),
        };
        let budget = rec.bulk_room(out);
        let scheduler = match self.stream_schedulers.iter_mut().find(|(k, _)| Some(*k) == sched) {
            Some((_, s)) => s,
            _ => &mut self.scheduler,
        };
        let decision = scheduler.decide(rec.now, rec.path, &snaps, &queue, budget);
        trace_decision(rec.path, &snaps, &queue, budget, &decision);
        match decision {
            Decision::Send { .. } => self.counters.decisions_send += 1,
            Decision::Wait { .. } => self.counters.decisions_wait += 1,
            Decision::Reinject { .. } => self.counters.decisions_reinject += 1,
        }
        let bit = 1u64 << rec.path;
        match decision {
            Decision::Wait { until } => {
                self.waiting |= bit;
                if rec.used(out) > 0 {
                    return self.sent(rec, out);
                }
                PollTransmit::Wait { until }
            }
            Decision::Send {
                end,
                max_bytes,
                duplicate,
                exact,
            } => {
                let d = SendNew {
                    end,
                    max_bytes,
                    duplicate,
                    exact,
                };
                self.send_new(rec, out, d, budget, &snaps[rec.path])
            }
            Decision::Reinject {
                end,
                max_bytes,
                max_age,
                sooner_only,
            } => {
                let req = Request {
                    path: rec.path,
                    end,
                    max_age,
                    sooner_only,
                    used: rec.used(out),
                    max: rec.max,
                    limit: (rec.used(out) + max_bytes.min(budget)).min(rec.window.max(rec.used(out))),
                };
                self.send_copies(rec, out, req)
            }
        }
    }

    /// Sends never-sent frames as a `Send` decision says.
    fn send_new(&mut self, rec: Rec, out: &mut Vec<u8>, d: SendNew, budget: usize, p: &PathSnapshot) -> PollTransmit {
        // An exact limit (a path's window room) covers the whole record on the wire, the
        // control frames already in it and the record's own overhead included (bytes
        // beyond a path's window wait a round trip in its socket), and a frame larger than
        // what is left of it is cut to fit. A limit the record's room already keeps is no
        // window: whole frames then.
        // Queue control's limit is exact too: a frame larger than the room left under it
        // is cut, or one 16 KB frame would sit ~65 ms in a 2 Mbit/s path's queue.
        let window = d.exact && d.max_bytes < budget;
        let exact = window || rec.bulk_exact;
        let limit = if window {
            (rec.start + d.max_bytes).saturating_sub(RECORD_OVERHEAD)
        } else {
            out.len() + d.max_bytes.min(budget)
        };
        if d.end == End::Tail {
            self.send.promote(u64::MAX);
        }
        // Always make progress: at least one frame goes out if it fits the record.
        let mut first = true;
        let before = out.len();
        loop {
            if d.end == End::Head && self.send.unsent_end_for(d.end, rec.path).is_none() {
                self.send.promote_for(rec.path, d.end);
            }
            let Some(mut seq) = self.send.unsent_end_for(d.end, rec.path) else {
                break;
            };
            let room = limit.saturating_sub(out.len());
            if exact && self.send.get(seq).expect("unsent").frame.encoded_len() > room {
                seq = self.send.split_unsent(seq, d.end, room);
            }
            let len = self.send.get(seq).expect("unsent").frame.encoded_len();
            // Beyond the limit only a decision's first frame, and under a scheduler's
            // limit only into an otherwise empty record: a record of control frames goes
            // alone, and the next decision sees their bytes.
            let over = out.len() + len > limit && (!first || (exact && rec.used(out) > 0));
            if !rec.takes(rec.used(out), len) || over {
                break;
            }
            first = false;
            self.send.take_unsent_seq(seq);
            let allowed = self.send.get(seq).map_or(crate::send::ALL_PATHS, |o| o.allowed);
            let payload = self.put(rec, seq, out);
            self.paths.entry(rec.path).counters.payload_sent += payload;
            self.note_payload(rec.path, crate::energy::Dir::Up, payload, self.last_now);
            if d.duplicate {
                for other in self.paths.iter_mut() {
                    if other.snap.id != rec.path && other.carries() && allowed & (1u64 << other.snap.id) != 0 {
                        other.dup.push_back(seq);
                    }
                }
            }
        }
        tracing::debug!(
            path = rec.path,
            end = ?d.end,
            max_bytes = d.max_bytes,
            budget,
            sent = out.len() - before,
            cwnd = p.send_cwnd(),
            inflight = p.in_flight,
            notsent = p.notsent,
            "send"
        );
        self.waiting &= !(1u64 << rec.path);
        // Paths told to wait (for this one, say) must look again now.
        if d.duplicate || self.waiting != 0 {
            self.waiting = 0;
            self.wake();
        }
        self.sent(rec, out)
    }

    /// Sends copies of frames other paths carry, as a `Reinject` decision says.
    fn send_copies(&mut self, rec: Rec, out: &mut Vec<u8>, req: Request) -> PollTransmit {
        let picked = reinject::pick(&self.send, &self.paths, req, rec.now, self.clock_us(rec.now));
        let bit = 1u64 << rec.path;
        if picked.seqs.is_empty() {
            self.waiting |= bit;
            if rec.used(out) > 0 {
                return self.sent(rec, out);
            }
            return PollTransmit::Wait { until: picked.next_due };
        }
        for seq in picked.seqs {
            let payload = self.put(rec, seq, out);
            self.paths.entry(rec.path).counters.payload_resent += payload;
            self.note_payload(rec.path, crate::energy::Dir::Up, payload, self.last_now);
            self.counters.resent_scheduler += 1;
        }
        self.waiting &= !bit;
        self.sent(rec, out)
    }

    /// Encodes outgoing frame `seq` onto the record, stamped with the send time, and books
    /// the copy. Returns its payload length.
    fn put(&mut self, rec: Rec, seq: u64, out: &mut Vec<u8>) -> u64 {
        let here = self.paths.get(rec.path).expect("sending path");
        let bif = here.bif(rec.used(out));
        let eta = here.owd.estimate(bif).map(|d| self.clock_us(rec.now) + d);
        let f = self.send.book(seq, rec.path, rec.now, rec.ts, eta);
        f.encode(out);
        let stamp = f.ts().map(|ts| (ts, bif));
        let payload = f.payload_len() as u64;
        let stream = match f {
            Frame::Open { stream, .. } | Frame::Data { stream, .. } => Some(*stream),
            _ => None,
        };
        self.paths.booked(rec.path, rec.now, stamp);
        if let Some(s) = stream.and_then(|id| self.streams.get_mut(&id)).filter(|_| payload > 0) {
            s.carried_on(rec.path, payload);
        }
        payload
    }

    /// Closes the record: counts it, and until the driver reports the socket again counts
    /// what was just handed over as unsent in it, record overhead included — decisions in
    /// the meantime (is this the faster path with window space? how much room is left in
    /// its window?) must not see it as empty.
    fn sent(&mut self, rec: Rec, out: &[u8]) -> PollTransmit {
        let n = rec.used(out);
        if n == 0 {
            return PollTransmit::Wait { until: None };
        }
        self.note_backlog();
        self.unblock_drained();
        let last_now = self.last_now;
        self.paths.record_closed(rec.path, rec.ts, n + RECORD_OVERHEAD);
        self.meter_bytes(rec.path, crate::energy::Dir::Up, n + RECORD_OVERHEAD, last_now);
        let p = self.paths.entry(rec.path);
        p.counters.bytes_sent += n as u64;

        p.last_send = p.last_send.max(last_now);
        // Bytes handed to a socket that held none start a busy spell: silence counts
        // from here (frames booked did so already; this covers control frames).
        if p.held == 0 && p.kernel.unacked == 0 {
            p.progress = p.progress.max(last_now);
        }
        p.snap.notsent = p.snap.notsent.saturating_add((n + RECORD_OVERHEAD) as u32);
        self.paths.spend(rec.path, n as u64);
        PollTransmit::Sent(n)
    }
}
