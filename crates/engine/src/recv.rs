//! The receive side's reorder buffer (the assembler).
//!
//! Sequenced frames arrive on any path in any order. The session's cumulative sequence
//! (`rcv_next`) advances only over a gap-free prefix, which is what the data-ACK reports.
//! Streams, however, need not wait for each other: a frame that continues its own stream
//! (the stream's earlier bytes are all in) is handed to it at once, out of session order,
//! and leaves a marker that keeps its place in the sequence. So one stream's frame stuck
//! on a slow path delays only that stream (head-of-line blocking per stream, as in QUIC,
//! not per session as in MPTCP's single byte stream).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use mpflex_wire::Frame;

use crate::StreamId;

/// A sequenced frame in the reorder buffer.
#[derive(Debug)]
enum Arrived {
    /// Waits for the frames before it.
    Waiting(Frame),
    /// Already handed to its stream; only its place in the sequence is left.
    Delivered { span: u64 },
}

/// Most frames the buffer holds, whatever their size: empty frames (a `Fin`, a `Reset`)
/// cost memory too. An honest sender's frames behind a gap are the session window's
/// bytes cut into frames of kilobytes, far fewer than this.
const MAX_FRAMES: usize = 1 << 16;

/// What a waiting frame costs beyond its payload (the frame, its place in the sequence
/// map and in its stream's index), charged in [`Assembler::memory`].
pub(crate) const FRAME_COST: u64 = 160;

#[derive(Debug, Default)]
pub(crate) struct Assembler {
    rcv_next: u64,
    reorder: BTreeMap<u64, Arrived>,
    /// Payload bytes of waiting frames.
    payload: u64,
    /// Waiting frames a stream could take out of session order: per stream, the stream
    /// offset each starts at (a `Fin`'s is the stream's length) and its sequence number.
    waiting_at: HashMap<StreamId, BTreeMap<u64, u64>>,
    /// Frames handed to their stream ahead of the session's order.
    early_delivered: u64,
}

/// Where a frame continues its stream, if it can be delivered early.
fn stream_position(f: &Frame) -> Option<(StreamId, u64)> {
    match f {
        Frame::Data {
            stream, offset, data, ..
        } if !data.is_empty() => Some((*stream, *offset)),
        Frame::Fin { stream, offset, .. } => Some((*stream, *offset)),
        _ => None,
    }
}

impl Assembler {
    /// Every sequence number below this has arrived (the cumulative ACK).
    pub fn rcv_next(&self) -> u64 {
        self.rcv_next
    }

    /// Whether `seq` arrived before.
    pub fn is_duplicate(&self, seq: u64) -> bool {
        seq < self.rcv_next || self.reorder.contains_key(&seq)
    }

    /// Whether a frame at `seq` with `payload` bytes may wait: its payload fits below
    /// `limit` (the session window left), the buffer holds fewer than [`MAX_FRAMES`], and
    /// `seq` lies within what a sender bound by a `window`-byte session window could have
    /// sent past the gap (its bytes plus one per frame without payload). A frame beyond
    /// would sit behind a gap no honest sender leaves.
    pub fn fits(&self, seq: u64, payload: u64, limit: u64, window: u64) -> bool {
        let horizon = self.rcv_next.saturating_add(window).saturating_add(MAX_FRAMES as u64);
        self.payload + payload <= limit && self.reorder.len() < MAX_FRAMES && seq < horizon
    }

    /// Keeps `frame` until its stream or the sequence can take it. Only frames of a
    /// stream this side knows (`known`) are indexed for early delivery: a peer cannot
    /// make it build an index per made-up stream. The payload is copied into its own
    /// buffer: a slice would keep the whole read buffer it came in alive for as long as
    /// the frame waits.
    pub fn insert(&mut self, mut frame: Frame, known: bool) {
        let seq = frame.seq().expect("sequenced");
        if known {
            if let Some((stream, offset)) = stream_position(&frame) {
                self.waiting_at.entry(stream).or_default().insert(offset, seq);
            }
        }
        if let Frame::Open { data, .. } | Frame::Data { data, .. } = &mut frame {
            *data = Bytes::copy_from_slice(data);
        }
        self.payload += frame.payload_len() as u64;
        self.reorder.insert(seq, Arrived::Waiting(frame));
    }

    /// The memory the buffer accounts for: payload plus [`FRAME_COST`] per entry.
    pub fn memory(&self) -> u64 {
        self.payload + self.reorder.len() as u64 * FRAME_COST
    }

    /// Records that `frame` (just arrived) is delivered at once, out of order if need be.
    pub fn mark_delivered(&mut self, frame: &Frame) {
        let seq = frame.seq().expect("sequenced");
        if seq != self.rcv_next {
            self.early_delivered += 1;
        }
        self.reorder.insert(seq, Arrived::Delivered { span: frame.seq_span() });
    }

    /// The next frame in session order, if it is in; the sequence advances over it and
    /// over frames delivered early. Frames that start inside it overlap it: no sender of
    /// ours cuts a frame it has sent, so they can only come from a broken peer; they are
    /// dropped (their payload is added to `overlapped`) instead of sitting in the buffer.
    pub fn pop_in_order(&mut self, overlapped: &mut u64) -> Option<Frame> {
        while let Some(a) = self.reorder.remove(&self.rcv_next) {
            let f = match a {
                Arrived::Delivered { span } => {
                    self.rcv_next += span;
                    continue;
                }
                Arrived::Waiting(f) => f,
            };
            self.leave(&f);
            self.rcv_next += f.seq_span();
            while let Some(entry) = self.reorder.first_entry() {
                if *entry.key() >= self.rcv_next {
                    break;
                }
                if let Arrived::Waiting(g) = entry.remove() {
                    self.leave(&g);
                    *overlapped += g.payload_len() as u64;
                }
            }
            return Some(f);
        }
        None
    }

    /// The waiting frame that continues `stream` at `offset`, handed over ahead of the
    /// session's order.
    pub fn take_for_stream(&mut self, stream: StreamId, offset: u64) -> Option<Frame> {
        let index = self.waiting_at.get_mut(&stream)?;
        let seq = index.remove(&offset)?;
        if index.is_empty() {
            self.waiting_at.remove(&stream);
        }
        let Some(Arrived::Waiting(f)) = self.reorder.remove(&seq) else {
            unreachable!("indexed frames wait in the reorder buffer");
        };
        self.payload -= f.payload_len() as u64;
        self.reorder.insert(seq, Arrived::Delivered { span: f.seq_span() });
        self.early_delivered += 1;
        Some(f)
    }

    /// A waiting frame leaves the buffer: drop it from the payload count and the index.
    fn leave(&mut self, f: &Frame) {
        self.payload -= f.payload_len() as u64;
        let Some((stream, offset)) = stream_position(f) else {
            return;
        };
        if let Some(index) = self.waiting_at.get_mut(&stream) {
            if index.get(&offset) == f.seq().as_ref() {
                index.remove(&offset);
                if index.is_empty() {
                    self.waiting_at.remove(&stream);
                }
            }
        }
    }

    /// Whether frames wait behind a gap.
    pub fn has_gap(&self) -> bool {
        !self.reorder.is_empty()
    }

    /// Payload bytes waiting behind a gap.
    pub fn payload(&self) -> u64 {
        self.payload
    }

    /// Frames waiting behind a gap.
    pub fn waiting_frames(&self) -> usize {
        self.reorder
            .values()
            .filter(|a| matches!(a, Arrived::Waiting(_)))
            .count()
    }

    pub fn early_delivered(&self) -> u64 {
        self.early_delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(seq: u64, stream: StreamId, offset: u64, len: usize) -> Frame {
        Frame::Data {
            seq,
            stream,
            offset,
            ts: 0,
            data: Bytes::from(vec![0u8; len]),
        }
    }

    #[test]
    fn frames_leave_in_sequence_order_once_the_gap_fills() {
        let mut a = Assembler::default();
        let mut over = 0;
        a.insert(data(10, 1, 10, 10), true);
        assert!(a.pop_in_order(&mut over).is_none());
        assert_eq!(a.payload(), 10);
        a.insert(data(0, 1, 0, 10), true);
        assert_eq!(a.pop_in_order(&mut over).and_then(|f| f.seq()), Some(0));
        assert_eq!(a.pop_in_order(&mut over).and_then(|f| f.seq()), Some(10));
        assert_eq!((a.rcv_next(), a.payload(), over), (20, 0, 0));
        assert!(a.is_duplicate(5) && !a.is_duplicate(20));
    }

    #[test]
    fn a_stream_takes_its_next_frame_past_another_streams_gap() {
        let mut a = Assembler::default();
        let mut over = 0;
        // Stream 2's frame at sequence 10 waits behind stream 1's missing 0..10.
        a.insert(data(10, 2, 0, 5), true);
        let f = a.take_for_stream(2, 0).expect("stream 2 continues at offset 0");
        assert_eq!(f.seq(), Some(10));
        assert_eq!((a.early_delivered(), a.payload(), a.waiting_frames()), (1, 0, 0));
        a.insert(data(0, 1, 0, 10), true);
        assert_eq!(a.pop_in_order(&mut over).and_then(|f| f.seq()), Some(0));
        assert!(a.pop_in_order(&mut over).is_none(), "the marker is passed over");
        assert_eq!(a.rcv_next(), 15);
    }

    #[test]
    fn an_overlapping_frame_is_dropped_not_kept() {
        let mut a = Assembler::default();
        let mut over = 0;
        a.insert(data(5, 1, 5, 10), true);
        a.insert(data(0, 1, 0, 10), true);
        assert_eq!(a.pop_in_order(&mut over).and_then(|f| f.seq()), Some(0));
        assert_eq!(over, 10);
        assert!(!a.has_gap());
        assert_eq!(a.payload(), 0);
    }

    #[test]
    fn the_window_bounds_what_may_wait() {
        let mut a = Assembler::default();
        a.insert(data(10, 1, 10, 100), true);
        assert!(a.fits(200, 50, 150, 1000));
        assert!(!a.fits(200, 51, 150, 1000));
    }

    #[test]
    fn a_frame_beyond_the_window_cannot_wait() {
        let a = Assembler::default();
        let horizon = 1000 + MAX_FRAMES as u64;
        assert!(a.fits(horizon - 1, 0, 150, 1000));
        assert!(!a.fits(horizon, 0, 150, 1000));
        assert!(
            !a.fits(u64::MAX, 0, 150, 1000),
            "no overflow at the top of the sequence space"
        );
    }

    #[test]
    fn empty_frames_are_charged_and_counted() {
        let mut a = Assembler::default();
        for i in 0..MAX_FRAMES as u64 {
            assert!(a.fits(10 + i, 0, 0, 1 << 20), "frame {i} fits");
            a.insert(
                Frame::Fin {
                    seq: 10 + i,
                    stream: i as StreamId,
                    offset: 0,
                },
                false,
            );
        }
        assert!(
            !a.fits(10 + MAX_FRAMES as u64, 0, 0, 1 << 20),
            "the frame count is bounded"
        );
        assert_eq!(a.memory(), MAX_FRAMES as u64 * FRAME_COST);
        assert!(a.waiting_at.is_empty(), "no index for streams this side does not know");
    }

    #[test]
    fn a_waiting_payload_does_not_keep_its_read_buffer() {
        let mut a = Assembler::default();
        let read_buffer = Bytes::from(vec![7u8; 64 * 1024]);
        a.insert(
            Frame::Data {
                seq: 10,
                stream: 1,
                offset: 10,
                ts: 0,
                data: read_buffer.slice(100..110),
            },
            true,
        );
        let waiting = a.take_for_stream(1, 10).expect("indexed");
        let Frame::Data { data, .. } = waiting else {
            panic!("data")
        };
        assert_eq!(&data[..], &[7u8; 10]);
        assert!(
            read_buffer.is_unique(),
            "the slice was copied: the read buffer has no other owner"
        );
    }
}
