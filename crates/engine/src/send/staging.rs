//! Staging and sequencing: a stream frame waits in its stream's staging queue without a
//! sequence number, and is sequenced round-robin across streams only as far as the paths
//! take bytes ([`SEQUENCE_AHEAD`]); urgent streams' frames are sequenced at once, into
//! the urgent queue.

use std::time::Instant;

use bytes::Bytes;
use mpflex_sched::End;
use mpflex_wire::{Frame, TargetAddr};

use super::{Outgoing, SendQueue, SEQUENCE_AHEAD};
use crate::class::TrafficClass;
use crate::StreamId;

/// How far past [`SEQUENCE_AHEAD`] a path that may carry none of the sequenced frames
/// sequences more, looking for a frame of a stream it may carry: other paths' frames
/// ahead of it must not starve it, nor may it sequence a whole backlog it cannot send.
const SEQUENCE_AHEAD_RESTRICTED: u64 = 8 * SEQUENCE_AHEAD;

/// A stream frame before it has a sequence number.
#[derive(Debug)]
pub(super) enum Staged {
    Open { addr: TargetAddr, data: Bytes },
    Data { offset: u64, data: Bytes },
    Fin { offset: u64 },
}

impl Staged {
    /// The frame, numbered `seq`; an Open carries the stream's allowed `paths`, the
    /// `scheduler` it asks for and its `energy` mode (see [`Frame::Open`]).
    pub(super) fn frame(&self, seq: u64, stream: StreamId, paths: u64, scheduler: u8, energy: u8) -> Frame {
        match self {
            Staged::Open { addr, data } => Frame::Open {
                seq,
                stream,
                ts: 0,
                paths,
                scheduler,
                energy,
                addr: addr.clone(),
                data: data.clone(),
            },
            Staged::Data { offset, data } => Frame::Data {
                seq,
                stream,
                offset: *offset,
                ts: 0,
                data: data.clone(),
            },
            Staged::Fin { offset } => Frame::Fin {
                seq,
                stream,
                offset: *offset,
            },
        }
    }

    pub(super) fn payload(&self) -> u64 {
        match self {
            Staged::Open { data, .. } | Staged::Data { data, .. } => data.len() as u64,
            Staged::Fin { .. } => 0,
        }
    }
}

impl SendQueue {
    fn stage(&mut self, stream: StreamId, s: Staged, at: Instant) {
        let len = s.frame(0, stream, 0, 0, 0).encoded_len();
        let q = self.staged.entry(stream).or_default();
        if q.is_empty() {
            self.staged_order.push_back(stream);
        }
        q.push_back((s, len, at));
        self.staged_bytes += len as u64;
        self.staged_frames += 1;
    }

    /// Stages a stream's Open frame.
    pub fn stage_open(&mut self, stream: StreamId, addr: TargetAddr, at: Instant) {
        self.stage(
            stream,
            Staged::Open {
                addr,
                data: Bytes::new(),
            },
            at,
        );
    }

    /// Stages stream bytes starting at stream `offset`, in frames of at most `max_frame`
    /// payload bytes. The first bytes of a stream whose Open is still staged ride in the
    /// Open (zero extra frames for client-speaks-first protocols).
    pub fn stage_data(&mut self, stream: StreamId, mut offset: u64, mut data: Bytes, max_frame: usize, at: Instant) {
        if let Some((Staged::Open { addr, data: first }, len, _)) =
            self.staged.get_mut(&stream).and_then(|q| q.back_mut())
        {
            if first.is_empty() && offset == 0 {
                let take = data.len().min(max_frame);
                *first = data.split_to(take);
                let new_len = Staged::Open {
                    addr: addr.clone(),
                    data: first.clone(),
                }
                .frame(0, stream, 0, 0, 0)
                .encoded_len();
                self.staged_bytes += (new_len - *len) as u64;
                *len = new_len;
                offset += take as u64;
            }
        }
        while !data.is_empty() {
            let chunk = data.split_to(data.len().min(max_frame));
            let n = chunk.len() as u64;
            self.stage(stream, Staged::Data { offset, data: chunk }, at);
            offset += n;
        }
    }

    pub fn stage_fin(&mut self, stream: StreamId, offset: u64, at: Instant) {
        self.stage(stream, Staged::Fin { offset }, at);
    }

    /// Whether the stream has frames not yet sequenced.
    pub fn has_staged(&self, stream: StreamId) -> bool {
        self.staged.contains_key(&stream)
    }

    /// Drops a stream's staged frames (the stream was reset). Returns their payload bytes,
    /// which go back to the session's flow-control window.
    pub fn unstage(&mut self, stream: StreamId) -> u64 {
        self.urgent_streams.remove(&stream);
        let Some(frames) = self.staged.remove(&stream) else {
            return 0;
        };
        self.staged_order.retain(|&id| id != stream);
        let mut payload = 0;
        for (s, len, _) in frames {
            self.staged_bytes -= len as u64;
            self.staged_frames -= 1;
            payload += s.payload();
        }
        payload
    }

    /// Sequences every staged frame of urgent streams (into the urgent queue), then bulk
    /// frames, one per stream in turn, until `target` bytes are sequenced and unsent (or
    /// nothing is staged).
    pub fn promote(&mut self, target: u64) {
        self.promote_urgent();
        while self.unsent_bytes < target {
            let Some(stream) = self.staged_order.pop_front() else {
                break;
            };
            self.sequence_staged(stream, false);
        }
    }

    /// Sequences every staged frame of the urgent streams: an interactive request is
    /// never staged behind bulk bytes.
    pub fn promote_urgent(&mut self) {
        if self.urgent_streams.is_empty() || self.staged_frames == 0 {
            return;
        }
        let urgent: Vec<StreamId> = self
            .staged_order
            .iter()
            .copied()
            .filter(|id| self.urgent_streams.contains_key(id))
            .collect();
        if urgent.is_empty() {
            return;
        }
        self.staged_order.retain(|id| !self.urgent_streams.contains_key(id));
        for stream in urgent {
            while self.sequence_staged(stream, true) {}
        }
    }

    /// Sequences the next staged frame of `stream` (taken out of the round-robin order);
    /// `all`: the stream's other frames follow, so it is not put back in the order.
    /// Returns whether frames remain staged.
    fn sequence_staged(&mut self, stream: StreamId, all: bool) -> bool {
        let q = self.staged.get_mut(&stream).expect("ordered streams are staged");
        let (s, len, at) = q.pop_front().expect("staged queues are not empty");
        let left = !q.is_empty();
        if !left {
            self.staged.remove(&stream);
        } else if !all {
            self.staged_order.push_back(stream);
        }
        self.staged_bytes -= len as u64;
        self.staged_frames -= 1;
        let frame = s.frame(
            self.next_seq,
            stream,
            self.allowed(stream),
            self.schedulers.get(&stream).map_or(0, |k| k.wire()),
            self.energy.get(&stream).copied().unwrap_or(0),
        );
        let class = self.urgent_streams.get(&stream).copied().unwrap_or(TrafficClass::Bulk);
        self.push_sequenced(frame, class, Some(at));
        left
    }

    /// [`SendQueue::promote`], and for a path that may carry none of the unsent frames
    /// (they belong to streams restricted to other paths), further frames until one it
    /// may carry is sequenced, within [`SEQUENCE_AHEAD_RESTRICTED`].
    pub fn promote_for(&mut self, path: usize, end: End) {
        self.promote(SEQUENCE_AHEAD);
        if self.allowed.is_empty() {
            return;
        }
        while self.unsent_end_for(end, path).is_none() && self.unsent_bytes < SEQUENCE_AHEAD_RESTRICTED {
            let bit = 1u64 << path;
            // Only streams this path may carry: others' frames would wait for their paths.
            let Some(pos) = self
                .staged_order
                .iter()
                .position(|id| self.allowed.get(id).is_none_or(|m| m & bit != 0))
            else {
                break;
            };
            let stream = self.staged_order.remove(pos).expect("position is in range");
            self.sequence_staged(stream, false);
        }
    }

    /// Sequences every staged frame of `stream` now (a reset follows them).
    pub fn sequence_all_staged(&mut self, stream: StreamId) {
        if !self.staged.contains_key(&stream) {
            return;
        }
        self.staged_order.retain(|&id| id != stream);
        while self.sequence_staged(stream, true) {}
    }

    /// Gives a frame that needs no staging (a Reset) the next sequence number.
    pub fn sequence_reset(&mut self, stream: StreamId, code: mpflex_wire::ResetCode) {
        let frame = Frame::Reset {
            seq: self.next_seq,
            stream,
            code,
        };
        self.push_sequenced(frame, TrafficClass::Bulk, None);
    }

    fn push_sequenced(&mut self, frame: Frame, class: TrafficClass, queued: Option<Instant>) {
        let seq = self.next_seq;
        debug_assert_eq!(frame.seq(), Some(seq));
        self.next_seq += frame.seq_span();
        let len = frame.encoded_len() as u64;
        let mut o = Outgoing::new(frame, class, queued);
        if let Some(stream) = o.frame.stream() {
            o.allowed = self.allowed(stream);
            o.sched = self.runs.get(&stream).copied();
        }
        self.outgoing.insert(seq, o);
        if class.is_urgent() {
            self.urgent_bytes += len;
            self.urgent.push_back(seq);
        } else {
            self.unsent_bytes += len;
            self.unsent.push_back(seq);
        }
    }
}
