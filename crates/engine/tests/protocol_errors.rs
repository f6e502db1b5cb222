//! A peer that breaks the protocol gets a typed error, and nothing it sends can make the
//! engine buffer without bound.

mod peer;
use std::time::Instant;

use bytes::Bytes;
use mpflex_engine::harness::Pair;
use mpflex_engine::{EngineConfig, Event, ProtocolError, RecvResult, Role, Session, Tier};
use mpflex_sched::MinRtt;
use mpflex_wire::Frame;
use peer::{open, server, transmitted};

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

/// A path's tier is the client's to say: the server takes it (and schedules by it), a
/// client that hears one has a broken peer.
#[test]
fn only_a_client_names_a_paths_tier() {
    let (mut s, now) = server();
    s.handle_frame(0, Frame::Tier { tier: Tier::Backup }, now).unwrap();
    assert_eq!(s.path_tier(0), Tier::Backup);
    let mut c = Session::new(EngineConfig::new(Role::Client), Box::new(MinRtt), now);
    c.path_up(0, now);
    assert_eq!(
        c.handle_frame(0, Frame::Tier { tier: Tier::Primary }, now),
        Err(ProtocolError::Unexpected("Tier"))
    );
}

/// Every tier name a configuration or status may use gives, on the server, the tier the
/// client runs the path in: the client's word travels as the tier's wire number.
#[test]
fn every_tier_name_reaches_the_server_as_the_tier_the_client_runs() {
    for name in Tier::accepted_names() {
        let tier: Tier = name.parse().unwrap();
        let mut pair = Pair::new("minrtt", &[(10, 1000)]);
        let now = pair.now;
        pair.client.set_path_tier(0, tier, now);
        for _ in 0..100 {
            pair.step();
        }
        assert_eq!(pair.client.path_tier(0), tier, "{name}");
        assert_eq!(pair.server.path_tier(0), tier, "{name}: the server's tier");
    }
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
                offset: seq - first_seq,
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
        offset: seq - 1,
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

fn data(seq: u64, stream: u32, offset: u64, bytes: &'static [u8]) -> Frame {
    Frame::Data {
        seq,
        stream,
        offset,
        ts: 0,
        data: Bytes::from_static(bytes),
    }
}

/// A stream takes its frames as soon as its own earlier bytes are in, while another
/// stream's frame before them in the session is still missing; the session's sequence
/// (its acknowledgements) still waits for the gap, and nothing is delivered twice when the
/// gap fills. Fins follow the same rule.
#[test]
fn a_stream_is_not_held_behind_another_streams_gap() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b""), now).unwrap();
    s.handle_frame(0, open(1, 2, b""), now).unwrap();
    // Stream 1 "abc" at 2..5 is missing; stream 2 "xy" at 5..7 and its Fin at 7 arrive.
    s.handle_frame(0, data(5, 2, 0, b"xy"), now).unwrap();
    s.handle_frame(
        0,
        Frame::Fin {
            seq: 7,
            stream: 2,
            offset: 2,
        },
        now,
    )
    .unwrap();
    while s.poll_event().is_some() {}
    assert_eq!(s.stream_recv(2, 100), RecvResult::Data(Bytes::from_static(b"xy")));
    assert_eq!(s.stream_recv(2, 100), RecvResult::Fin);
    assert_eq!(s.stream_recv(1, 100), RecvResult::Blocked);
    assert_eq!(s.early_delivered(), 2);
    assert_eq!(s.reorder_frames(), 0, "frames handed over early are not waiting");
    // Stream 1's own order still holds: "def" (offset 3) waits for "abc".
    s.handle_frame(0, data(8, 1, 3, b"def"), now).unwrap();
    assert_eq!(s.reorder_frames(), 1);
    assert_eq!(s.stream_recv(1, 100), RecvResult::Blocked);
    s.handle_frame(0, data(2, 1, 0, b"abc"), now).unwrap();
    assert_eq!(s.reorder_frames(), 0);
    let mut got = Vec::new();
    while let RecvResult::Data(b) = s.stream_recv(1, 100) {
        got.extend_from_slice(&b);
    }
    assert_eq!(got, b"abcdef");
    assert_eq!(
        s.stream_recv(2, 100),
        RecvResult::Gone,
        "stream 2's end is reported once"
    );
    // The session sequence is whole up to 11: a repeat of stream 2's frame is a duplicate.
    s.handle_frame(0, data(5, 2, 0, b"xy"), now).unwrap();
    assert_eq!(s.path_counters(0).unwrap().0.duplicate_received, 2);
    assert_eq!(s.held_bytes().1, 0);
}

#[test]
fn stream_bytes_out_of_place_are_refused() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b""), now).unwrap();
    // In session order, but leaving a hole in the stream.
    assert_eq!(
        s.handle_frame(0, data(1, 1, 5, b"abc"), now),
        Err(ProtocolError::StreamOffset(1))
    );
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b"abc"), now).unwrap();
    // A Fin claiming a length the stream does not have.
    assert_eq!(
        s.handle_frame(
            0,
            Frame::Fin {
                seq: 3,
                stream: 1,
                offset: 2
            },
            now
        ),
        Err(ProtocolError::StreamOffset(1))
    );
}

/// A peer that grants unlimited credit and never acknowledges gets at most the send
/// buffer's worth of this side's memory; its acknowledgement lets the stream go on.
#[test]
fn credit_from_the_peer_does_not_bound_what_this_side_keeps() {
    let (mut s, now) = server();
    s.handle_frame(0, open(0, 1, b""), now).unwrap();
    s.handle_frame(0, Frame::MaxData { max: u64::MAX }, now).unwrap();
    s.handle_frame(
        0,
        Frame::Window {
            stream: 1,
            max: u64::MAX,
        },
        now,
    )
    .unwrap();
    while s.poll_event().is_some() {}
    let budget = s.config().send_buffer;
    let chunk = Bytes::from(vec![1u8; 256 * 1024]);
    let mut taken = 0u64;
    for _ in 0..4 * (budget / chunk.len() as u64) {
        taken += s.stream_send(1, chunk.clone()) as u64;
        transmitted(&mut s, 0, now);
    }
    let (held, _) = s.held_bytes();
    assert!(taken >= budget * 9 / 10, "the buffer fills: {taken} of {budget}");
    assert!(held <= budget, "held {held} > send_buffer {budget}");
    assert!(
        s.buffered_bytes() <= budget + 64 * 1024,
        "account {}",
        s.buffered_bytes()
    );
    assert_eq!(s.stream_send(1, chunk.clone()), 0, "nothing more is taken");
    // The peer acknowledges what it got: the stream may send again.
    s.handle_frame(0, Frame::Ack { cum: held }, now).ok();
    let writable = std::iter::from_fn(|| s.poll_event()).any(|e| matches!(e, Event::StreamWritable(1)));
    assert!(
        writable || s.stream_send(1, chunk) > 0,
        "room after the acknowledgement"
    );
}

/// A peer that keeps its path alive (pings) but acknowledges nothing is given up after
/// `ack_timeout`, with a Close to tell it why; time with no path up does not count.
#[test]
fn a_peer_that_never_acknowledges_is_given_up() {
    let (mut s, t0) = server();
    s.handle_frame(0, open(0, 1, b""), t0).unwrap();
    s.stream_send(1, Bytes::from_static(b"response"));
    assert!(transmitted(&mut s, 0, t0)
        .iter()
        .any(|f| matches!(f, Frame::Data { .. } | Frame::Open { .. })));
    let timeout = s.config().ack_timeout;
    let mut gave_up_at = None;
    let step = std::time::Duration::from_millis(500);
    let mut t = t0;
    while t < t0 + timeout * 2 && gave_up_at.is_none() {
        t += step;
        s.handle_frame(0, Frame::Ping { id: 1 }, t).unwrap();
        if s.poll_timeout().is_some_and(|d| d <= t) {
            s.handle_timeout(t);
        }
        while let Some(e) = s.poll_event() {
            if matches!(
                e,
                Event::GaveUp {
                    code: mpflex_wire::CloseCode::NoProgress
                }
            ) {
                gave_up_at = Some(t);
            }
        }
    }
    let at = gave_up_at.expect("given up");
    assert!(at >= t0 + timeout && at <= t0 + timeout + step, "{:?}", at - t0);
    assert!(transmitted(&mut s, 0, at).iter().any(|f| matches!(
        f,
        Frame::Close {
            code: mpflex_wire::CloseCode::NoProgress
        }
    )));

    // The same peer with its only path down for twice the timeout: not given up.
    let (mut s, t0) = server();
    s.handle_frame(0, open(0, 1, b""), t0).unwrap();
    s.stream_send(1, Bytes::from_static(b"response"));
    transmitted(&mut s, 0, t0);
    s.path_down(0);
    let later = t0 + timeout * 2;
    assert!(s.poll_timeout().is_none_or(|d| d > t0), "no deadline while dark");
    s.handle_timeout(later);
    assert!(!std::iter::from_fn(|| s.poll_event()).any(|e| matches!(e, Event::GaveUp { .. })));
}

/// Pings answered faster than the path is written do not grow its control queue.
#[test]
fn pongs_waiting_to_be_sent_are_capped() {
    let (mut s, now) = server();
    for id in 0..10_000 {
        s.handle_frame(0, Frame::Ping { id }, now).unwrap();
    }
    let pongs = transmitted(&mut s, 0, now)
        .iter()
        .filter(|f| matches!(f, Frame::Pong { .. }))
        .count();
    assert!((1..=4).contains(&pongs), "{pongs} pongs queued");
}

/// Empty sequenced frames far ahead of a gap are counted and bounded, and a frame
/// beyond any window is refused outright.
#[test]
fn empty_frames_ahead_of_a_gap_are_bounded() {
    let (mut s, now) = server();
    let mut refused = None;
    for i in 0..200_000u64 {
        let r = s.handle_frame(
            0,
            Frame::Reset {
                seq: 10 + i,
                stream: 1_000 + i as u32,
                code: mpflex_wire::ResetCode::App,
            },
            now,
        );
        if r.is_err() {
            refused = Some(i);
            break;
        }
    }
    let n = refused.expect("the buffer refuses at some point");
    assert!(n <= 1 << 16, "{n} empty frames kept");
    assert!(s.buffered_bytes() <= (1 << 16) * 200, "account {}", s.buffered_bytes());
    let (mut s, now) = server();
    assert_eq!(
        s.handle_frame(
            0,
            Frame::Fin {
                seq: u64::MAX / 2,
                stream: 1,
                offset: 0
            },
            now
        ),
        Err(ProtocolError::SessionWindow)
    );
}
