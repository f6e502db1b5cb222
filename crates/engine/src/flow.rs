//! Flow control, per stream and per session (credit-based, as in HTTP/2 and QUIC).
//!
//! The receiver grants each stream a window of bytes beyond what its application has
//! read, and the whole session a window over all streams; the sender never puts a byte
//! beyond either on a path. The session window bounds the receiver's memory whatever the
//! peer does (a peer that exceeds it is cut off), and the stream window keeps one slow
//! reader from filling the session window for everybody. Windows re-open once half is
//! used, so updates stay rare.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::class::Classifier;
use crate::ProtocolError;

/// A payload at least this long that a stream's application will take at once is kept
/// as the slice of the read buffer it arrived in; shorter ones are copied.
const KEEP_SLICE_FROM: usize = 8 * 1024;

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
    /// A `MaxData` with `rx_max` must go to the peer.
    pub update_needed: bool,
}

impl SessionFlow {
    pub fn new(window: u64) -> Self {
        SessionFlow {
            window,
            tx_used: 0,
            tx_max: window,
            rx_received: 0,
            rx_consumed: 0,
            rx_max: window,
            update_needed: false,
        }
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
    /// re-opened and the peer must hear of it.
    pub fn on_consumed(&mut self, n: u64) -> bool {
        self.rx_consumed += n;
        if self.rx_max - self.rx_consumed < self.window / 2 {
            self.rx_max = self.rx_consumed + self.window;
            self.update_needed = true;
            return true;
        }
        false
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

    /// Bytes waiting for the application.
    pub fn buffered(&self) -> usize {
        self.rx_buf.iter().map(Bytes::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_window_reopens_after_half_is_read() {
        let mut f = SessionFlow::new(100);
        f.on_received(60).unwrap();
        assert!(!f.on_consumed(49), "less than half used: no update");
        assert!(f.on_consumed(2));
        assert!(f.update_needed);
        assert_eq!(f.rx_max(), 151);
        assert_eq!(f.unread(), 9);
    }

    #[test]
    fn a_peer_beyond_the_session_window_is_an_error() {
        let mut f = SessionFlow::new(100);
        f.on_received(100).unwrap();
        assert_eq!(f.on_received(1), Err(ProtocolError::SessionWindow));
    }

    #[test]
    fn send_credit_is_taken_given_back_and_raised() {
        let mut f = SessionFlow::new(100);
        f.take(80);
        assert_eq!(f.send_room(), 20);
        f.give_back(30);
        assert_eq!(f.send_room(), 50);
        assert!(!f.raise(90), "a lower limit is ignored");
        assert!(f.raise(200));
        assert_eq!(f.send_room(), 150);
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
