//! Streams as the driver sees them on this side: open, how much each may queue now (its
//! credit, the session's, the send buffer and the bound on bytes ahead of the paths),
//! send, finish, reset, read, and their statistics.

use bytes::Bytes;
use mpflex_wire::{ResetCode, TargetAddr};

use super::{Event, RecvResult, Session};
use crate::class::{ClassLatency, TrafficClass};
use crate::config::Role;
use crate::flow::{Stream, StreamRead};
use crate::StreamId;

impl Session {
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
    pub(super) fn writable(&mut self, stream: StreamId) {
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
    pub(super) fn refuse(&mut self, stream: StreamId) {
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

    /// Aborts the stream in both directions, for the reason `code`: what it had queued
    /// and not yet sequenced is dropped, and so is what waited for the application.
    pub fn stream_reset(&mut self, stream: StreamId, code: ResetCode) {
        self.drop_reset_tail(stream);
        if !self.forget_stream(stream) {
            return;
        }
        self.send.sequence_reset(stream, code);
        self.wake();
    }

    /// The application aborted its connection (a read or write failed: it sent an RST, or
    /// is gone): what it gave before goes to the peer first, then the reset, so the peer's
    /// side reads what it would have read over a direct TCP connection, then the abort.
    /// Bytes waiting for the application are dropped.
    pub fn stream_abort(&mut self, stream: StreamId, code: ResetCode) {
        if self.streams.contains_key(&stream) {
            self.send.sequence_all_staged(stream);
        }
        self.stream_reset(stream, code);
    }

    /// Drops a stream that was reset, by either side. Its staged bytes need no sending (a
    /// download the client abandoned must not go on using the links for seconds), and
    /// they leave the session's count too, or its window would shrink for good; so do the
    /// bytes that waited for its application.
    pub(super) fn forget_stream(&mut self, stream: StreamId) -> bool {
        let Some(s) = self.streams.remove(&stream) else {
            return false;
        };
        self.discard_received(s.buffered() as u64);
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
        let r = self.stream_take(stream, max);
        if let RecvResult::Data(chunk) = &r {
            self.stream_delivered(chunk.len() as u64);
        }
        r
    }

    /// As [`Session::stream_recv`], but the bytes taken stay charged to the session's
    /// credit until [`Session::stream_delivered`] says the application has them: for a
    /// reader that writes them on to a socket that may take them slowly, so what it holds
    /// meanwhile stays within the credit the peer was granted.
    pub fn stream_take(&mut self, stream: StreamId, max: usize) -> RecvResult {
        let Some(s) = self.streams.get_mut(&stream) else {
            return self.take_reset_tail(stream, max);
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
        RecvResult::Data(chunk)
    }

    /// `n` bytes taken with [`Session::stream_take`] reached the application (or were
    /// dropped with it): their credit re-opens.
    pub fn stream_delivered(&mut self, n: u64) {
        if self.flow.on_consumed(n) {
            self.wake();
        }
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

    /// Bytes waiting for the application on `stream` (of a stream the peer reset too).
    pub fn stream_buffered(&self, stream: StreamId) -> usize {
        match self.streams.get(&stream) {
            Some(s) => s.buffered(),
            None => self
                .reset_tails
                .get(&stream)
                .map_or(0, |t| t.iter().map(Bytes::len).sum()),
        }
    }

    /// Up to `max` of the bytes a reset stream received before its reset; `Gone` once
    /// they are all taken (or there were none).
    fn take_reset_tail(&mut self, stream: StreamId, max: usize) -> RecvResult {
        let Some(tail) = self.reset_tails.get_mut(&stream) else {
            return RecvResult::Gone;
        };
        let Some(mut chunk) = tail.pop_front() else {
            self.reset_tails.remove(&stream);
            return RecvResult::Gone;
        };
        if chunk.len() > max {
            tail.push_front(chunk.split_off(max));
        }
        if tail.is_empty() {
            self.reset_tails.remove(&stream);
        }
        RecvResult::Data(chunk)
    }

    /// Drops what a reset stream received and its application did not read (it is
    /// gone too), giving the credit back.
    fn drop_reset_tail(&mut self, stream: StreamId) {
        if let Some(tail) = self.reset_tails.remove(&stream) {
            self.discard_received(tail.iter().map(|b| b.len() as u64).sum());
        }
    }

    /// Received bytes no application will read leave the session's receive credit, as
    /// if read: kept, they would shrink the window for good.
    fn discard_received(&mut self, n: u64) {
        if n > 0 && self.flow.on_consumed(n) {
            self.wake();
        }
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
}
