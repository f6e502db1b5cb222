//! The receiver's order of one bulk flow.
//!
//! The sender numbers a bulk datagram when a path takes it, and a path is one TCP
//! connection: it delivers what it took, in the order it took it, or dies. So a number
//! missing here is in flight on a path that has not yet delivered anything numbered
//! after it — or lost with a path that died. Datagrams behind the gap are held until
//! it fills, and the gap is given up at once when every path that could still carry it
//! has delivered something after it (the path that took it is down), or after a time
//! bound for the one case no signal shows: a path gone silent that nobody declared dead
//! yet. The application then sees the paths' reordering as delay, never as loss: QUIC
//! takes a packet three behind the newest as lost (RFC 9002 §6.1.1) and halves its
//! window for it, and two paths whose delays differ by tens of milliseconds reorder
//! hundreds of packets at a few Mbit/s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Most datagrams one flow holds while waiting for a missing one; beyond, it stops
/// waiting: 4096 of QUIC's 1,200–1,500-byte packets are about 5 MB, 200 ms of 200 Mbit/s.
pub const HOLD_MAX: usize = 4096;

/// What [`Order::arrive`] did with a datagram, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Delivered or held in order.
    InOrder,
    /// Came after the receiver gave up waiting for it; delivered out of order.
    Late,
}

/// A bulk datagram as it arrived: on which path, its number, payload and time.
#[derive(Debug)]
pub struct Arrived {
    pub path: usize,
    pub seq: u16,
    pub data: Bytes,
    pub at: Instant,
}

/// One bulk flow's receive order. Numbers are the wire's 16-bit `seq`, unwrapped here to
/// 64 bits relative to the next expected, so the held datagrams sort in order across
/// the wrap.
#[derive(Debug, Default)]
pub struct Order {
    /// The number expected next; `None` before the first datagram.
    next: Option<u64>,
    /// Datagrams after a gap, with when each arrived.
    held: BTreeMap<u64, (Bytes, Instant)>,
    /// When the longest-held datagram arrived (`None`: nothing held).
    since: Option<Instant>,
    /// The highest number each path (by index) delivered on its current connection.
    high: Vec<Option<u64>>,
}

impl Order {
    /// The 64-bit number of `seq`, near the next expected; `None` if it would be before
    /// the first number this flow ever had.
    fn unwrap(&self, seq: u16) -> Option<u64> {
        let Some(next) = self.next else {
            return Some(u64::from(seq));
        };
        let d = i64::from(seq.wrapping_sub(next as u16) as i16);
        u64::try_from(next as i64 + d).ok()
    }

    /// A datagram arrived; what is in order now goes to `out`. `up` has
    /// a bit for each path that is up (and may still deliver what it took).
    pub fn arrive(&mut self, a: Arrived, up: u64, out: &mut Vec<Bytes>) -> (Arrival, u64) {
        let Arrived {
            path,
            seq,
            data,
            at: now,
        } = a;
        let Some(n) = self.unwrap(seq) else {
            out.push(data);
            return (Arrival::Late, 0);
        };
        if self.high.len() <= path {
            self.high.resize(path + 1, None);
        }
        let h = &mut self.high[path];
        *h = Some(h.map_or(n, |h| h.max(n)));
        let next = *self.next.get_or_insert(n);
        if n < next {
            out.push(data);
            return (Arrival::Late, 0);
        }
        if n == next {
            out.push(data);
            self.next = Some(n + 1);
        } else if self.held.insert(n, (data, now)).is_none() {
            self.since.get_or_insert(now);
        }
        self.drain(out);
        let mut gaps = 0;
        if self.held.len() > HOLD_MAX {
            gaps += self.skip(out);
        }
        gaps += self.skip_lost(up, out);
        (Arrival::InOrder, gaps)
    }

    /// `path`'s connection is gone: what it took and did not deliver will never come.
    /// Returns the gaps given up for it.
    pub fn path_down(&mut self, path: usize, up: u64, out: &mut Vec<Bytes>) -> u64 {
        if let Some(h) = self.high.get_mut(path) {
            *h = None;
        }
        self.skip_lost(up & !(1 << path), out)
    }

    /// Gives up the gap where a datagram has been held `wait`; returns the gaps given up.
    pub fn release(&mut self, now: Instant, wait: Duration, out: &mut Vec<Bytes>) -> u64 {
        let mut gaps = 0;
        while self.since.is_some_and(|t| now.saturating_duration_since(t) >= wait) {
            gaps += self.skip(out);
        }
        gaps
    }

    /// When the longest-held datagram's wait of `wait` ends.
    pub fn release_at(&self, wait: Duration) -> Option<Instant> {
        self.since.map(|t| t + wait)
    }

    /// Delivers the held datagrams that continue the order.
    fn drain(&mut self, out: &mut Vec<Bytes>) {
        let Some(mut next) = self.next else { return };
        let mut moved = false;
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() != next {
                break;
            }
            out.push(entry.remove().0);
            next += 1;
            moved = true;
        }
        self.next = Some(next);
        if moved {
            // The wait starts again with what still waits.
            self.since = self.held.values().map(|(_, t)| *t).min();
        }
    }

    /// Stops waiting for the gap before the first held datagram; 1 if there was one.
    fn skip(&mut self, out: &mut Vec<Bytes>) -> u64 {
        let Some((&first, _)) = self.held.first_key_value() else {
            self.since = None;
            return 0;
        };
        self.next = Some(first);
        self.drain(out);
        1
    }

    /// Gives up each gap that no path can fill any more: every path in `up` has
    /// delivered a number after it (a path is a FIFO, so what it took before that number
    /// has arrived), or no path is up at all.
    fn skip_lost(&mut self, up: u64, out: &mut Vec<Bytes>) -> u64 {
        let mut gaps = 0;
        while let (Some(next), Some((&first, _))) = (self.next, self.held.first_key_value()) {
            debug_assert!(first > next, "held datagrams come after a gap");
            let mut bound = u64::MAX;
            for p in (0..64).filter(|p| up & (1 << p) != 0) {
                match self.high.get(p).copied().flatten() {
                    Some(h) => bound = bound.min(h),
                    // It may be carrying the missing one as its first.
                    None => return gaps,
                }
            }
            if bound <= next {
                return gaps;
            }
            gaps += self.skip(out);
        }
        gaps
    }
}
