//! Resets as the kernel's TCP has them: bytes that came before a peer's reset still reach
//! the application, then the reset; an application that aborts its connection has what it
//! gave sent first; and bytes no application will read give their credit back, so resets
//! cannot shrink the session window for good.

mod peer;
use bytes::Bytes;
use mpflex_engine::{EngineConfig, Event, RecvResult, Role, Session};
use mpflex_wire::{Frame, ResetCode};
use peer::{open, server, transmitted};

fn reset(seq: u64, stream: u32) -> Frame {
    Frame::Reset {
        seq,
        stream,
        code: ResetCode::App,
    }
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn bytes_before_a_peer_reset_reach_the_application_then_the_reset() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b"hello"), now).unwrap();
    s.handle_frame(0, reset(5, 1), now).unwrap();
    assert!(
        events(&mut s).iter().any(|e| matches!(
            e,
            Event::StreamReset {
                stream: 1,
                code: ResetCode::App
            }
        )),
        "the reset is announced at once"
    );
    assert!(!s.stream_exists(1), "nothing more is sent on a reset stream");
    assert_eq!(s.stream_buffered(1), 5);
    assert_eq!(s.stream_take(1, 3), RecvResult::Data(Bytes::from_static(b"hel")));
    assert_eq!(s.stream_take(1, 3), RecvResult::Data(Bytes::from_static(b"lo")));
    assert_eq!(s.stream_take(1, 3), RecvResult::Gone);
    // Taken bytes stay charged until the application has them.
    assert_eq!(s.held_bytes().1, 5);
    s.stream_delivered(5);
    assert_eq!(s.held_bytes().1, 0);
}

#[test]
fn a_peer_reset_with_nothing_unread_is_gone_at_once() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b"hello"), now).unwrap();
    assert_eq!(s.stream_recv(1, 100), RecvResult::Data(Bytes::from_static(b"hello")));
    s.handle_frame(0, reset(5, 1), now).unwrap();
    assert_eq!(s.stream_take(1, 100), RecvResult::Gone);
    assert_eq!(s.held_bytes().1, 0);
}

/// The application went away with bytes of a peer-reset stream unread: they are dropped
/// and their credit is back.
#[test]
fn a_local_reset_drops_what_a_peer_reset_left_unread() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b"hello"), now).unwrap();
    s.handle_frame(0, reset(5, 1), now).unwrap();
    s.stream_reset(1, ResetCode::App);
    assert_eq!(s.held_bytes().1, 0);
    assert_eq!(s.stream_take(1, 100), RecvResult::Gone);
}

/// Streams whose applications reset them unread, one after another, carry many session
/// windows in all: each reset gives its bytes' credit back (kept, they would shrink the
/// window until the peer could send nothing).
#[test]
fn resets_with_unread_bytes_do_not_shrink_the_session_window() {
    let (mut s, now) = server();
    let cfg = EngineConfig::new(Role::Server);
    let per_stream = cfg.stream_window as usize;
    let streams = 3 * cfg.session_window as usize / per_stream;
    let data = vec![7u8; per_stream];
    let mut seq = 0;
    for id in 1..=streams as u32 {
        let f = open(seq, id, &data);
        seq += f.seq_span();
        s.handle_frame(0, f, now)
            .unwrap_or_else(|e| panic!("stream {id} of {streams}: {e}"));
        s.stream_reset(id, ResetCode::App);
    }
    assert_eq!(s.held_bytes().1, 0);
}

/// The application's connection failed (it sent an RST): its bytes the session had taken
/// go to the peer before the reset; a reset for any other reason drops them.
#[test]
fn an_application_abort_sends_what_it_gave_before_the_reset() {
    for abort in [true, false] {
        let (mut s, now) = server();
        s.handle_frame(0, open(0, 1, b""), now).unwrap();
        s.stream_connected(1);
        let _ = transmitted(&mut s, 0, now);
        let reply = Bytes::from(vec![1u8; 100_000]);
        assert_eq!(s.stream_send(1, reply.clone()), reply.len());
        if abort {
            s.stream_abort(1, ResetCode::App);
        } else {
            s.stream_reset(1, ResetCode::App);
        }
        let frames = transmitted(&mut s, 0, now);
        let sent: usize = frames
            .iter()
            .map(|f| match f {
                Frame::Data { stream: 1, data, .. } => data.len(),
                _ => 0,
            })
            .sum();
        let last = frames.iter().rposition(|f| matches!(f, Frame::Reset { stream: 1, .. }));
        let last_data = frames.iter().rposition(|f| matches!(f, Frame::Data { stream: 1, .. }));
        assert!(last.is_some(), "abort {abort}: no reset in {} frames", frames.len());
        if abort {
            assert_eq!(sent, reply.len(), "every byte the application gave is sent");
            assert!(last_data < last, "the reset comes after the bytes");
        } else {
            assert!(
                sent < reply.len(),
                "a reset drops what was not yet sequenced ({sent} sent)"
            );
        }
    }
}
