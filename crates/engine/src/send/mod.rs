//! The send side of a session: stream frames from staging to acknowledgement.
//!
//! A stream frame first waits in its stream's *staging* queue without a sequence number.
//! Staged frames are *sequenced* round-robin across streams only as far as the paths take
//! bytes ([`SEQUENCE_AHEAD`]), so a new stream's frame waits behind at most that much of
//! other streams' data, not behind the flow-control window of a bulk stream (MPFlex's
//! per-connection fairness inside one multiplexed session). A sequenced frame is
//! *outgoing* until the peer's cumulative data-ACK covers it: never sent (the unsent
//! queue), on one or more paths, or queued to go again because every path holding it died
//! (the retransmit set). Nothing is forgotten before the ACK, so a path that dies loses no
//! byte.

mod outgoing;
mod staging;
mod stream_policy;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use mpflex_sched::{End, SchedulerKind};
use mpflex_wire::Frame;

use crate::class::{ClassLatency, TrafficClass};
use crate::{ProtocolError, StreamId};

pub(crate) use outgoing::Outgoing;
use staging::Staged;

/// Sequenced, never-sent bytes the session keeps ahead of the paths (at least): stream
/// frames beyond it wait in their stream's staging queue and are sequenced round-robin
/// across streams as the paths take bytes. One full frame: a larger lead makes a small
/// request wait behind more of a bulk stream's bytes, while the schedulers see the whole
/// backlog either way (staged bytes count in their queue view). Two-ended schedulers
/// (DEMS) sequence everything before sending from the tail: their chunk is the backlog.
pub const SEQUENCE_AHEAD: u64 = 16 * 1024;

/// The smallest payload either part of a split frame carries (a scheduler's limit cutting
/// through a frame): a smaller part is not worth its header. Where the limit would leave
/// less behind, the part sent is cut that much shorter; where the limit allows less than
/// this, the whole frame goes when it is the decision's first, nothing otherwise.
pub const MIN_SPLIT: usize = 512;

/// A path mask that allows every path.
pub const ALL_PATHS: u64 = u64::MAX;

#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    next_seq: u64,
    /// Peer's cumulative ACK: every frame below it arrived.
    peer_cum: u64,
    outgoing: BTreeMap<u64, Outgoing>,
    /// Never sent, in sequence order.
    unsent: VecDeque<u64>,
    unsent_bytes: u64,
    /// Stream frames not sequenced yet, per stream in order, with their encoded length and
    /// when they were queued, and the streams that have some, in round-robin order.
    staged: HashMap<StreamId, VecDeque<(Staged, usize, Instant)>>,
    staged_order: VecDeque<StreamId>,
    staged_bytes: u64,
    staged_frames: usize,
    /// Since when sent frames have waited for the peer's acknowledgement without any
    /// progress (the last new cumulative ACK, or the first send after all was acked).
    ack_clock: Option<Instant>,
    /// Sent on paths that died; to be sent again on any path, lowest first.
    retransmit: BTreeSet<u64>,
    /// Streams whose class is not bulk ([`TrafficClass::is_urgent`]), with the class.
    urgent_streams: HashMap<StreamId, TrafficClass>,
    /// Never-sent frames of urgent streams, in sequence order: they go before any unsent
    /// bulk frame and are not the schedulers' to place (see [`crate::class`]).
    urgent: VecDeque<u64>,
    urgent_bytes: u64,
    /// Streams restricted to some paths (policy rules), with their path masks; the
    /// others may use every path.
    allowed: HashMap<StreamId, u64>,
    /// The scheduler each stream asks the peer for (see [`Frame::Open`]), where set.
    schedulers: HashMap<StreamId, SchedulerKind>,
    /// Each stream's energy mode for its Open (see [`Frame::Open`]), where set.
    energy: HashMap<StreamId, u8>,
    /// The scheduler that places each stream's frames on this side, where it is not the
    /// session's.
    runs: HashMap<StreamId, SchedulerKind>,
    /// Application-to-peer latency per class.
    pub latency: ClassLatency,
}

impl SendQueue {
    #[cfg(test)]
    /// The next never-sent frame of an urgent stream.
    pub fn urgent_front(&self) -> Option<u64> {
        self.urgent.front().copied()
    }

    /// The first never-sent urgent frame `path` may carry.
    pub fn urgent_front_for(&self, path: usize) -> Option<u64> {
        self.urgent
            .iter()
            .copied()
            .find(|seq| self.outgoing.get(seq).is_some_and(|o| o.allowed_on(path)))
    }

    /// Removes urgent frame `seq` from the urgent queue (it is being sent).
    pub fn take_urgent_seq(&mut self, seq: u64) {
        let pos = self
            .urgent
            .iter()
            .position(|&s| s == seq)
            .expect("an urgent frame to take");
        self.urgent.remove(pos);
        let o = self.outgoing.get_mut(&seq).expect("urgent frames are outgoing");
        o.sent = true;
        self.urgent_bytes -= o.frame.encoded_len() as u64;
    }

    /// Encoded bytes of never-sent urgent frames.
    pub fn urgent_bytes(&self) -> u64 {
        self.urgent_bytes
    }

    #[cfg(test)]
    /// Removes the front of the urgent queue (it is being sent).
    pub fn take_urgent(&mut self) {
        let seq = self.urgent.pop_front().expect("an urgent frame to take");
        let o = self.outgoing.get_mut(&seq).expect("urgent frames are outgoing");
        o.sent = true;
        self.urgent_bytes -= o.frame.encoded_len() as u64;
    }

    /// The peer acknowledged everything below `cum`. `on_acked` sees the path mask of each
    /// frame this releases.
    pub fn on_ack(&mut self, cum: u64, now: Instant, mut on_acked: impl FnMut(u64)) -> Result<(), ProtocolError> {
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
        for (seq, mut out) in acked {
            on_acked(out.on_paths);
            out.arrived(now, &mut self.latency);
            if !out.sent {
                // Cannot be acknowledged before it was sent: the peer lies.
                return Err(ProtocolError::AckBeyondSent { cum, next: seq });
            }
        }
        self.retransmit = self.retransmit.split_off(&cum);
        // Progress: the clock restarts while sent frames still wait (a frame sent later,
        // after all were acknowledged, starts it again).
        self.ack_clock = self.outgoing.values().next().filter(|o| o.sent).map(|_| now);
        Ok(())
    }

    /// Since when sent frames have waited for an acknowledgement that makes progress.
    pub fn ack_waiting_since(&self) -> Option<Instant> {
        self.ack_clock
    }

    /// The time no path was up does not count against the peer.
    pub fn restart_ack_clock(&mut self, now: Instant) {
        if let Some(t) = &mut self.ack_clock {
            *t = now;
        }
    }

    /// The peer reported the arrival of `seq`: no further copy is needed.
    pub fn on_report(&mut self, seq: u64, now: Instant) {
        if let Some(o) = self.outgoing.get_mut(&seq) {
            if o.sent && !o.received {
                o.received = true;
                o.arrived(now, &mut self.latency);
                self.retransmit.remove(&seq);
            }
        }
    }

    /// Treats every copy `path` holds as lost: frames no other path holds are queued for
    /// re-sending. Returns how many were.
    pub fn lost_on(&mut self, path: usize) -> usize {
        let bit = 1u64 << path;
        let mut n = 0;
        for (&seq, out) in self.outgoing.iter_mut() {
            if out.on_paths & bit != 0 {
                out.on_paths &= !bit;
                if out.orphaned() {
                    self.retransmit.insert(seq);
                    n += 1;
                }
            }
        }
        n
    }

    /// The frames `path` holds a copy of that the peer has not reported, in order.
    pub fn unreported_on(&self, path: usize) -> Vec<u64> {
        let bit = 1u64 << path;
        self.outgoing
            .iter()
            .filter(|(_, o)| o.on_paths & bit != 0 && !o.received)
            .map(|(&seq, _)| seq)
            .collect()
    }

    /// Whether `path` holds a copy of a frame the peer has not reported.
    pub fn holds_unreported(&self, path: usize) -> bool {
        let bit = 1u64 << path;
        self.outgoing.values().any(|o| o.on_paths & bit != 0 && !o.received)
    }

    pub fn get(&self, seq: u64) -> Option<&Outgoing> {
        self.outgoing.get(&seq)
    }

    /// Marks `seq` hedged: a copy of it is queued on a second path.
    pub fn mark_hedged(&mut self, seq: u64) {
        if let Some(o) = self.outgoing.get_mut(&seq) {
            o.hedged = true;
        }
    }

    /// Outgoing frames from the lowest sequence number up (`Head`) or down (`Tail`).
    pub fn iter_from(&self, end: End) -> Box<dyn Iterator<Item = (&u64, &Outgoing)> + '_> {
        match end {
            End::Head => Box::new(self.outgoing.iter()),
            End::Tail => Box::new(self.outgoing.iter().rev()),
        }
    }

    #[cfg(test)]
    /// The lowest frame queued for re-sending that still needs it; stale entries are
    /// dropped on the way.
    pub fn next_retransmit(&mut self) -> Option<u64> {
        while let Some(&seq) = self.retransmit.first() {
            if self.outgoing.get(&seq).is_some_and(Outgoing::orphaned) {
                return Some(seq);
            }
            self.retransmit.pop_first();
        }
        None
    }

    /// The lowest frame queued for re-sending that still needs it and `path` may carry.
    pub fn next_retransmit_for(&mut self, path: usize) -> Option<u64> {
        let mut stale = Vec::new();
        let mut found = None;
        for &seq in &self.retransmit {
            match self.outgoing.get(&seq) {
                Some(o) if o.orphaned() => {
                    if o.allowed_on(path) {
                        found = Some(seq);
                        break;
                    }
                }
                _ => stale.push(seq),
            }
        }
        for seq in stale {
            self.retransmit.remove(&seq);
        }
        found
    }

    pub fn retransmitted(&mut self, seq: u64) {
        self.retransmit.remove(&seq);
    }

    /// The never-sent frame a send from `end` takes next.
    pub fn unsent_end(&self, end: End) -> Option<u64> {
        match end {
            End::Head => self.unsent.front().copied(),
            End::Tail => self.unsent.back().copied(),
        }
    }

    /// The never-sent frame nearest `end` that `path` may carry.
    pub fn unsent_end_for(&self, end: End, path: usize) -> Option<u64> {
        if self.allowed.is_empty() {
            return self.unsent_end(end);
        }
        let ok = |seq: &u64| self.outgoing.get(seq).is_some_and(|o| o.allowed_on(path));
        match end {
            End::Head => self.unsent.iter().copied().find(ok),
            End::Tail => self.unsent.iter().rev().copied().find(ok),
        }
    }

    /// Removes never-sent frame `seq` from the unsent queue (it is being sent).
    pub fn take_unsent_seq(&mut self, seq: u64) {
        let pos = self
            .unsent
            .iter()
            .position(|&s| s == seq)
            .expect("an unsent frame to take");
        self.unsent.remove(pos);
        let o = self.outgoing.get_mut(&seq).expect("unsent frames are outgoing");
        o.sent = true;
        self.unsent_bytes -= o.frame.encoded_len() as u64;
    }

    #[cfg(test)]
    /// Removes the frame at `end` from the unsent queue (it is being sent).
    pub fn take_unsent(&mut self, end: End) {
        let seq = match end {
            End::Head => self.unsent.pop_front(),
            End::Tail => self.unsent.pop_back(),
        };
        let o = self
            .outgoing
            .get_mut(&seq.expect("a frame to take"))
            .expect("unsent frames are outgoing");
        o.sent = true;
        self.unsent_bytes -= o.frame.encoded_len() as u64;
    }

    /// Splits the never-sent Data frame `seq` (at the `end` of the unsent queue) so that the
    /// part at that end takes at most `room` bytes on the wire; both parts keep the frame's
    /// sequence numbers between them (a frame takes one per payload byte), so the peer
    /// sees two ordinary frames. Neither part carries less than [`MIN_SPLIT`] payload bytes
    /// (the part sent is cut shorter if need be); other frames are never split.
    /// Returns the frame at `end` after the split (`seq` itself if nothing was cut).
    pub fn split_unsent(&mut self, seq: u64, end: End, room: usize) -> u64 {
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
            return seq;
        };
        // Leave at least MIN_SPLIT behind: a few hundred bytes short of the limit cost
        // nothing, a few hundred beyond it may cost a round trip.
        let part = room.saturating_sub(header).min(data.len().saturating_sub(MIN_SPLIT));
        if part < MIN_SPLIT {
            return seq;
        }
        // Head: this frame keeps the first `part` bytes; tail: the new frame takes the last.
        let keep = match end {
            End::Head => part,
            End::Tail => data.len() - part,
        };
        let rest = data.split_off(keep);
        let second = seq + keep as u64;
        let frame = Frame::Data {
            seq: second,
            stream: *stream,
            offset: *offset + keep as u64,
            ts: *ts,
            data: rest,
        };
        let (class, queued, allowed, sched) = (o.class, o.queued, o.allowed, o.sched);
        let mut second_out = Outgoing::new(frame, class, queued);
        second_out.allowed = allowed;
        second_out.sched = sched;
        self.outgoing.insert(second, second_out);
        self.unsent_bytes += header as u64;
        let pos = self
            .unsent
            .iter()
            .position(|&s| s == seq)
            .expect("an unsent frame to split");
        self.unsent.insert(pos + 1, second);
        match end {
            End::Head => seq,
            End::Tail => second,
        }
    }

    /// Books a copy of `seq` handed to `path` at `now`, stamped `ts`, expected at the peer
    /// at `eta_us` (if known). Returns the frame to encode.
    pub fn book(&mut self, seq: u64, path: usize, now: Instant, ts: u32, eta_us: Option<i64>) -> &Frame {
        let o = self.outgoing.get_mut(&seq).expect("outgoing frame");
        if let Some(e) = eta_us {
            o.eta_us = Some(o.eta_us.map_or(e, |x| x.min(e)));
        }
        o.frame.set_ts(ts);
        o.on_paths |= 1 << path;
        o.last_sent = Some(now);
        self.ack_clock.get_or_insert(now);
        &o.frame
    }

    /// Never-sent bytes (sequenced or staged, encoded) and frames.
    pub fn backlog(&self) -> (u64, usize) {
        (
            self.unsent_bytes + self.staged_bytes,
            self.unsent.len() + self.staged_frames,
        )
    }

    pub fn outgoing_is_empty(&self) -> bool {
        self.outgoing.is_empty()
    }

    pub fn outgoing_len(&self) -> usize {
        self.outgoing.len()
    }

    /// Anything never sent or to be sent again.
    pub fn has_pending(&self) -> bool {
        !self.unsent.is_empty() || !self.urgent.is_empty() || self.staged_frames > 0 || !self.retransmit.is_empty()
    }

    /// Bytes held until the peer acknowledges them: sequenced and unacknowledged (by
    /// sequence span) plus staged (encoded).
    pub fn held_bytes(&self) -> u64 {
        (self.next_seq - self.peer_cum) + self.staged_bytes
    }

    /// Whether anything was ever sequenced.
    pub fn has_history(&self) -> bool {
        self.next_seq > 0
    }

    #[cfg(test)]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
}

#[cfg(test)]
mod tests;
