//! A peer that breaks the protocol gets a typed error, and nothing it sends can make the
//! engine buffer without bound.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use mpflex_engine::{EngineConfig, Event, ProtocolError, Role, Session};
use mpflex_sched::MinRtt;
use mpflex_wire::{Frame, TargetAddr};

fn server() -> (Session, Instant) {
    let now = Instant::now();
    let mut s = Session::new(EngineConfig::new(Role::Server), Box::new(MinRtt), now);
    s.path_up(0, now);
    (s, now)
}

fn open(seq: u64, stream: u32, data: &'static [u8]) -> Frame {
    Frame::Open {
        seq,
        stream,
        ts: 0,
        addr: TargetAddr::Ip(SocketAddr::from(([10, 0, 0, 1], 80))),
        data: Bytes::from_static(data),
    }
}

#[test]
fn ack_beyond_what_was_sent() {
    let (mut s, now) = server();
    let err = s.handle_frame(0, Frame::Ack { cum: 5 }, now).unwrap_err();
    assert_eq!(err, ProtocolError::AckBeyondSent { cum: 5, next: 0 });
}

#[test]
fn duplicate_open_and_open_towards_client() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b"x"), now).unwrap();
    let events: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::StreamOpened { stream: 1, .. })),
        "{events:?}"
    );
    assert_eq!(
        s.handle_frame(0, open(1, 1, b""), now),
        Err(ProtocolError::DuplicateStream(1))
    );

    let mut c = Session::new(EngineConfig::new(Role::Client), Box::new(MinRtt), now);
    assert_eq!(
        c.handle_frame(0, open(0, 1, b""), now),
        Err(ProtocolError::UnexpectedOpen)
    );
}

/// Feeds Data frames of `chunk_len` bytes on stream 1, sequence numbers from `first_seq`,
/// until the engine refuses one or `give_up` bytes went in. Returns the result and the
/// bytes fed, the refused frame included.
fn feed_until_error(
    s: &mut Session,
    now: Instant,
    first_seq: u64,
    chunk_len: usize,
    give_up: usize,
) -> (Result<(), ProtocolError>, usize) {
    let chunk = Bytes::from(vec![0u8; chunk_len]);
    let (mut seq, mut fed) = (first_seq, 0);
    loop {
        let r = s.handle_frame(
            0,
            Frame::Data {
                seq,
                stream: 1,
                ts: 0,
                data: chunk.clone(),
            },
            now,
        );
        seq += chunk_len as u64;
        fed += chunk_len;
        if r.is_err() || fed > give_up {
            return (r, fed);
        }
    }
}

#[test]
fn stream_flow_control_violation() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b""), now).unwrap();
    let window = s.config().stream_window as usize;
    let chunk = 16 * 1024;
    let (res, sent) = feed_until_error(&mut s, now, 1, chunk, window + chunk);
    assert_eq!(res, Err(ProtocolError::FlowControl(1)));
    assert!(sent > window);
}

#[test]
fn reorder_buffer_is_bounded_by_the_session_window() {
    let (mut s, now) = server();
    // Frames far ahead of a gap that never fills.
    let limit = s.config().session_window as usize;
    let chunk = 60 * 1024;
    let (res, buffered) = feed_until_error(&mut s, now, 10, chunk, 2 * limit);
    assert_eq!(res, Err(ProtocolError::SessionWindow));
    assert!(buffered <= limit + chunk);
}

#[test]
fn hello_on_an_established_path_is_rejected() {
    let (mut s, now) = server();
    let err = s
        .handle_frame(
            0,
            Frame::Hello {
                version: 1,
                session: [0; 16],
                path: 0,
            },
            now,
        )
        .unwrap_err();
    assert_eq!(err, ProtocolError::Unexpected("Hello"));
}

#[test]
fn duplicates_are_counted_not_delivered() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b"abc"), now).unwrap();
    s.handle_frame(0, open(0, 1, b"abc"), now).unwrap();
    while s.poll_event().is_some() {}
    assert_eq!(s.stream_buffered(1), 3);
    assert_eq!(s.path_counters(0).unwrap().0.duplicate_received, 3);
}

/// A frame starting inside another (no mpflex sender makes one: it cuts only frames it has
/// not sent) is dropped once the frame it overlaps is delivered, not kept in the reorder
/// buffer for ever, and the stream gets each byte once.
#[test]
fn overlapping_frames_leave_nothing_behind() {
    let (mut s, now) = server();
    let data = |seq: u64, bytes: &'static [u8]| Frame::Data {
        seq,
        stream: 1,
        ts: 0,
        data: Bytes::from_static(bytes),
    };
    // Open takes sequence number 0; "abcdef" 1..7; an overlapping "defg" at 4 arrives first.
    s.handle_frame(0, open(0, 1, b""), now).unwrap();
    s.handle_frame(0, data(4, b"defg"), now).unwrap();
    assert_eq!(s.reorder_frames(), 1);
    s.handle_frame(0, data(1, b"abcdef"), now).unwrap();
    assert_eq!(s.reorder_frames(), 0);
    while s.poll_event().is_some() {}
    assert_eq!(s.stream_buffered(1), 6);
    assert_eq!(s.path_counters(0).unwrap().0.duplicate_received, 4);
}
