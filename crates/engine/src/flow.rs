//! Flow control, per stream and per session (credit-based, as in HTTP/2 and QUIC).
//!
//! The receiver grants each stream a window of bytes beyond what its application has
//! read, and the whole session a window over all streams; the sender never puts a byte
//! beyond either on a path. The session window bounds the receiver's memory whatever the
//! peer does (a peer that exceeds it is cut off), and the stream window keeps one slow
//! reader from filling the session window for everybody. Windows re-open once half is
//! used, so updates stay rare.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::class::Classifier;
use crate::ProtocolError;

/// A payload at least this long that a stream's application will take at once is kept
/// as the slice of the read buffer it arrived in; shorter ones are copied.
const KEEP_SLICE_FROM: usize = 8 * 1024;

/// Receive credit that several sessions share: a server gives one pool to each client
/// key, so the key's sessions together hold at most the pool's limit of payload their
/// peers may send beyond what applications took (in flight, out of order, or unread),
/// whatever the number of sessions. Each session keeps [`MIN_CREDIT`] whatever the pool
/// says, so none stalls for want of a share; the pool may exceed its limit by that much
/// per session.
#[derive(Debug)]
pub struct CreditPool {
    limit: u64,
    granted: AtomicU64,
}

/// Credit a session sharing a pool always keeps open: enough that its peer goes on
/// sending (and its consumption goes on reopening credit) while the pool is spent.
pub const MIN_CREDIT: u64 = mpflex_wire::INITIAL_SESSION_CREDIT;

impl CreditPool {
    pub fn new(limit: u64) -> Arc<CreditPool> {
        Arc::new(CreditPool {
            limit,
            granted: AtomicU64::new(0),
        })
    }

    /// Credit the pool's sessions hold now.
    pub fn granted(&self) -> u64 {
        self.granted.load(Ordering::Relaxed)
    }

    /// Takes up to `want` within the limit; what it took.
    fn take_up_to(&self, want: u64) -> u64 {
        let mut got = 0;
        let _ = self.granted.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |g| {
            got = want.min(self.limit.saturating_sub(g));
            Some(g + got)
        });
        got
    }

    /// Takes `n` whatever the limit (a session's [`MIN_CREDIT`]).
    fn force(&self, n: u64) {
        self.granted.fetch_add(n, Ordering::Relaxed);
    }

    fn release(&self, n: u64) {
        self.granted.fetch_sub(n, Ordering::Relaxed);
    }
}

/// The session-wide credit in both directions.
#[derive(Debug)]
pub(crate) struct SessionFlow {
    window: u64,
    /// Stream payload queued so far, and the peer's limit on it.
    tx_used: u64,
    tx_max: u64,
    /// Stream payload received, read by the applications, and our limit on it.
    rx_received: u64,
    rx_consumed: u64,
    rx_max: u64,
    /// Where credit beyond [`MIN_CREDIT`] comes from, if shared.
    pool: Option<Arc<CreditPool>>,
    /// A `MaxData` with `rx_max` must go to the peer.
    pub update_needed: bool,
}

impl Drop for SessionFlow {
    fn drop(&mut self) {
        if let Some(p) = &self.pool {
            p.release(self.rx_max - self.rx_consumed);
        }
    }
}

impl SessionFlow {
    /// Credit of `window` each way (the peer's, until its first `MaxData`, is the
    /// protocol's [`mpflex_wire::INITIAL_SESSION_CREDIT`]); with a `pool`, what the
    /// window asks beyond [`MIN_CREDIT`] comes from it. The peer hears of our credit at
    /// once (`update_needed`).
    pub fn new(window: u64, pool: Option<Arc<CreditPool>>) -> Self {
        // The peer may send the initial credit before it hears from us: ours is never less.
        let initial = mpflex_wire::INITIAL_SESSION_CREDIT;
        let window = window.max(initial);
        let rx_max = match &pool {
            None => window,
            Some(p) => {
                p.force(initial);
                initial + p.take_up_to(window - initial)
            }
        };
        SessionFlow {
            window,
            tx_used: 0,
            tx_max: initial,
            rx_received: 0,
            rx_consumed: 0,
            rx_max,
            pool,
            update_needed: true,
        }
    }

    /// The pool this session's receive credit comes from, if shared.
    pub fn pool(&self) -> Option<Arc<CreditPool>> {
        self.pool.clone()
    }

    /// Payload bytes the peer lets us queue now.
    pub fn send_room(&self) -> u64 {
        self.tx_max.saturating_sub(self.tx_used)
    }

    pub fn take(&mut self, n: u64) {
        self.tx_used += n;
    }

    /// Queued bytes that will never be sent (their stream was reset before they were
    /// sequenced) give their credit back.
    pub fn give_back(&mut self, n: u64) {
        self.tx_used -= n;
    }

    /// The peer raised the limit. True if it grew.
    pub fn raise(&mut self, max: u64) -> bool {
        let grew = max > self.tx_max;
        self.tx_max = self.tx_max.max(max);
        grew
    }

    /// Payload bytes the peer may still send beyond what was delivered to streams.
    pub fn receive_room(&self) -> u64 {
        self.rx_max.saturating_sub(self.rx_received)
    }

    /// `n` bytes were delivered to a stream.
    pub fn on_received(&mut self, n: u64) -> Result<(), ProtocolError> {
        self.rx_received += n;
        if self.rx_received > self.rx_max {
            return Err(ProtocolError::SessionWindow);
        }
        Ok(())
    }

    /// An application read `n` bytes (or they were discarded). True if the window
    /// re-opened and the peer must hear of it. Re-opens once less than half the window
    /// is left; with a pool, by what the pool lends (announced once it is worth a frame:
    /// an eighth of the window), and always back up to [`MIN_CREDIT`].
    pub fn on_consumed(&mut self, n: u64) -> bool {
        self.rx_consumed += n;
        // Consumed bytes leave the credit held: what is open is what is held.
        if let Some(pool) = &self.pool {
            pool.release(n);
        }
        let open = self.rx_max - self.rx_consumed;
        if open >= self.window / 2 {
            return false;
        }
        let want = self.window - open;
        let Some(pool) = &self.pool else {
            self.rx_max = self.rx_consumed + self.window;
            self.update_needed = true;
            return true;
        };
        let mut got = pool.take_up_to(want);
        let floor = MIN_CREDIT.saturating_sub(open + got);
        if got < self.window / 8 && floor == 0 {
            pool.release(got);
            return false;
        }
        pool.force(floor);
        got += floor;
        self.rx_max += got;
        self.update_needed = true;
        true
    }

    /// Delivered bytes no application has read yet.
    pub fn unread(&self) -> u64 {
        self.rx_received - self.rx_consumed
    }

    pub fn rx_max(&self) -> u64 {
        self.rx_max
    }
}

/// One stream's state: its credit in both directions and the bytes waiting for its
/// application.
#[derive(Debug)]
pub(crate) struct Stream {
    // Sending (local application -> peer).
    /// Stream bytes queued so far.
    pub tx_offset: u64,
    /// The peer lets us send up to this offset.
    pub tx_max: u64,
    /// Fin or Reset queued: the application will send no more.
    pub tx_done: bool,

    // Receiving (peer -> local application).
    rx_buf: VecDeque<Bytes>,
    /// Bytes delivered into `rx_buf` so far.
    pub rx_offset: u64,
    /// Bytes the application has read.
    rx_consumed: u64,
    /// Offset we last advertised to the peer.
    pub rx_max: u64,
    /// The peer half-closed; reported once `rx_buf` is drained.
    pub rx_fin: bool,
    /// The application has been told about the fin.
    pub rx_fin_read: bool,

    /// The stream's traffic class.
    pub class: Classifier,
    /// Stream bytes each path carried, both directions (for the status's path split).
    pub carried: Vec<u64>,
    /// Its policy's energy mode: `Some(true)` energy-aware, `Some(false)` off, `None`
    /// the session's.
    pub energy_aware: Option<bool>,
    /// (server) The destination is connected; (client) the server said so: its first
    /// `Window` for the stream (wire protocol 10) arrived.
    pub connected: bool,
}

/// What a stream's application gets from a read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StreamRead {
    Data(Bytes),
    Fin,
    Blocked,
    Done,
}

impl Stream {
    pub fn new(window: u64) -> Self {
        Stream {
            energy_aware: None,
            tx_offset: 0,
            tx_max: window,
            tx_done: false,
            rx_buf: VecDeque::new(),
            rx_offset: 0,
            rx_consumed: 0,
            rx_max: window,
            rx_fin: false,
            rx_fin_read: false,
            class: Classifier::default(),
            carried: Vec::new(),
            connected: false,
        }
    }

    /// `n` bytes of this stream went over or arrived on `path`.
    pub fn carried_on(&mut self, path: usize, n: u64) {
        if self.carried.len() <= path {
            self.carried.resize(path + 1, 0);
        }
        self.carried[path] += n;
    }

    /// Bytes the stream's own window lets us queue now.
    pub fn send_room(&self) -> u64 {
        if self.tx_done {
            0
        } else {
            self.tx_max - self.tx_offset
        }
    }

    /// Both directions finished: the stream can be forgotten.
    pub fn finished(&self) -> bool {
        self.tx_done && self.rx_fin_read
    }

    /// Bytes from the peer at the stream's end. True if the buffer was empty before (the
    /// application must be told).
    pub fn receive(&mut self, data: Bytes, id: crate::StreamId) -> Result<bool, ProtocolError> {
        let n = data.len() as u64;
        if self.rx_offset + n > self.rx_max {
            return Err(ProtocolError::FlowControl(id));
        }
        if n == 0 {
            return Ok(false);
        }
        self.rx_offset += n;
        let was_empty = self.rx_buf.is_empty();
        // A payload is a slice of the read buffer it arrived in, and keeps all of that
        // buffer alive while it waits. An application that keeps up takes it at once;
        // one that is behind (or a small payload) gets a copy, so what the stream holds
        // is what the session window counts.
        let data = if was_empty && data.len() >= KEEP_SLICE_FROM {
            data
        } else {
            Bytes::copy_from_slice(&data)
        };
        self.rx_buf.push_back(data);
        Ok(was_empty)
    }

    /// Takes up to `max` bytes for the application. With data, the flag says the window
    /// re-opened (a `Window` update must go to the peer).
    pub fn read(&mut self, max: usize, window: u64) -> (StreamRead, bool) {
        let Some(front) = self.rx_buf.front_mut() else {
            if self.rx_fin && !self.rx_fin_read {
                self.rx_fin_read = true;
                return (StreamRead::Fin, false);
            }
            let r = if self.rx_fin_read {
                StreamRead::Done
            } else {
                StreamRead::Blocked
            };
            return (r, false);
        };
        let chunk = if front.len() <= max {
            self.rx_buf.pop_front().expect("front exists")
        } else {
            front.split_to(max)
        };
        self.rx_consumed += chunk.len() as u64;
        let reopen = self.rx_max - self.rx_consumed < window / 2 && !self.rx_fin;
        if reopen {
            self.rx_max = self.rx_consumed + window;
        }
        (StreamRead::Data(chunk), reopen)
    }

    /// Takes every byte waiting for the application out of the stream.
    pub fn take_unread(&mut self) -> VecDeque<Bytes> {
        std::mem::take(&mut self.rx_buf)
    }

    /// Bytes waiting for the application.
    pub fn buffered(&self) -> usize {
        self.rx_buf.iter().map(Bytes::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn session_window_reopens_after_half_is_read() {
        let mut f = SessionFlow::new(4 * MIB, None);
        assert!(f.update_needed, "the peer hears of the window at once");
        f.update_needed = false;
        f.on_received(3 * MIB).unwrap();
        assert!(!f.on_consumed(2 * MIB - 1), "less than half used: no update");
        assert!(f.on_consumed(2));
        assert!(f.update_needed);
        assert_eq!(f.rx_max(), 6 * MIB + 1);
        assert_eq!(f.unread(), MIB - 1);
    }

    #[test]
    fn a_peer_beyond_the_session_window_is_an_error() {
        let mut f = SessionFlow::new(4 * MIB, None);
        f.on_received(4 * MIB).unwrap();
        assert_eq!(f.on_received(1), Err(ProtocolError::SessionWindow));
    }

    #[test]
    fn a_window_below_the_initial_credit_grants_the_initial_credit() {
        let f = SessionFlow::new(64 << 10, None);
        assert_eq!(f.rx_max(), mpflex_wire::INITIAL_SESSION_CREDIT);
    }

    #[test]
    fn send_credit_starts_at_the_protocols_initial_credit_and_is_raised() {
        let mut f = SessionFlow::new(64 * MIB, None);
        assert_eq!(f.send_room(), mpflex_wire::INITIAL_SESSION_CREDIT, "not our own window");
        f.take(MIB - 20);
        assert_eq!(f.send_room(), 20);
        f.give_back(30);
        assert_eq!(f.send_room(), 50);
        assert!(!f.raise(MIB - 1), "a lower limit is ignored");
        assert!(f.raise(2 * MIB));
        assert_eq!(f.send_room(), MIB + 50);
    }

    #[test]
    fn sessions_sharing_a_pool_hold_its_limit_and_each_keeps_its_minimum() {
        let pool = CreditPool::new(3 * MIB);
        let mut a = SessionFlow::new(4 * MIB, Some(pool.clone()));
        assert_eq!(a.rx_max(), 3 * MIB, "the pool's limit, not the window");
        let mut b = SessionFlow::new(4 * MIB, Some(pool.clone()));
        assert_eq!(b.rx_max(), MIN_CREDIT, "the pool is spent: the minimum");
        assert_eq!(pool.granted(), 4 * MIB);

        // a's application reads what came: its credit goes back to the pool and a takes
        // what the pool can lend (b holds its minimum).
        a.on_received(3 * MIB).unwrap();
        a.update_needed = false;
        assert!(a.on_consumed(3 * MIB));
        assert_eq!(a.rx_max(), 5 * MIB);
        assert_eq!(pool.granted(), 3 * MIB);

        // b is held at its minimum while a holds the rest, and keeps it as it reads.
        b.on_received(MIN_CREDIT).unwrap();
        assert!(b.on_consumed(MIN_CREDIT));
        assert_eq!(b.rx_max() - MIN_CREDIT, MIN_CREDIT, "the minimum open again");
        assert_eq!(pool.granted(), 3 * MIB);

        drop(a);
        assert_eq!(pool.granted(), MIN_CREDIT, "an ended session gives back what it held");
        drop(b);
        assert_eq!(pool.granted(), 0);
    }

    #[test]
    fn a_grant_too_small_to_announce_waits_in_the_pool() {
        let pool = CreditPool::new(5 * MIB);
        let mut a = SessionFlow::new(4 * MIB, Some(pool.clone()));
        let _b = SessionFlow::new(4 * MIB, Some(pool.clone()));
        assert_eq!((a.rx_max(), pool.granted()), (4 * MIB, 5 * MIB));
        a.on_received(3 * MIB).unwrap();
        a.update_needed = false;
        // A small read frees less than an eighth of the window: nothing announced, and
        // the pool keeps what it could not lend usefully.
        assert!(!a.on_consumed(64 << 10));
        assert!(!a.update_needed);
        assert_eq!(a.rx_max(), 4 * MIB);
        assert_eq!(pool.granted(), 5 * MIB - (64 << 10));
    }

    #[test]
    fn a_stream_reports_its_fin_once_after_its_data() {
        let mut s = Stream::new(100);
        assert!(s.receive(Bytes::from_static(b"abc"), 1).unwrap());
        assert!(!s.receive(Bytes::from_static(b"d"), 1).unwrap(), "not empty before");
        s.rx_fin = true;
        assert_eq!(s.read(2, 100).0, StreamRead::Data(Bytes::from_static(b"ab")));
        assert_eq!(s.read(10, 100).0, StreamRead::Data(Bytes::from_static(b"c")));
        assert_eq!(s.read(10, 100).0, StreamRead::Data(Bytes::from_static(b"d")));
        assert_eq!(s.read(10, 100).0, StreamRead::Fin);
        assert_eq!(s.read(10, 100).0, StreamRead::Done);
    }

    #[test]
    fn a_stream_window_is_enforced_and_reopened() {
        let mut s = Stream::new(10);
        assert_eq!(
            s.receive(Bytes::from(vec![0u8; 11]), 7),
            Err(ProtocolError::FlowControl(7))
        );
        s.receive(Bytes::from(vec![0u8; 10]), 7).unwrap();
        let (_, reopen) = s.read(6, 10);
        assert!(reopen);
        assert_eq!(s.rx_max, 16);
        assert_eq!(s.send_room(), 10);
        s.tx_done = true;
        assert_eq!(s.send_room(), 0);
    }
}
