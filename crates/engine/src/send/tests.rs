use super::*;
use bytes::Bytes;
use mpflex_wire::TargetAddr;
use std::net::SocketAddr;

fn addr() -> TargetAddr {
    TargetAddr::Ip(SocketAddr::from(([127, 0, 0, 1], 80)))
}

fn sent_all(q: &mut SendQueue, path: usize, now: Instant) {
    q.promote(u64::MAX);
    while let Some(seq) = q.unsent_end(End::Head) {
        q.take_unsent(End::Head);
        q.book(seq, path, now, 0, None);
    }
}

#[test]
fn first_bytes_ride_in_the_staged_open() {
    let mut q = SendQueue::default();
    q.stage_open(1, addr(), Instant::now());
    q.stage_data(1, 0, Bytes::from(vec![1u8; 100]), 16 * 1024, Instant::now());
    q.promote(u64::MAX);
    let seq = q.unsent_end(End::Head).unwrap();
    match &q.get(seq).unwrap().frame {
        Frame::Open { data, .. } => assert_eq!(data.len(), 100),
        f => panic!("expected an Open with data, got {f:?}"),
    }
    assert_eq!(q.backlog().1, 1, "one frame, no separate Data");
    assert_eq!(q.next_seq(), 100, "one sequence number per payload byte");
}

#[test]
fn streams_are_sequenced_in_turn_and_only_ahead_of_the_paths() {
    let mut q = SendQueue::default();
    q.stage_data(1, 0, Bytes::from(vec![1u8; 64 * 1024]), 16 * 1024, Instant::now());
    q.stage_data(2, 0, Bytes::from(vec![2u8; 1000]), 16 * 1024, Instant::now());
    q.promote(SEQUENCE_AHEAD);
    assert_eq!(q.unsent.len(), 1, "one frame is sequenced ahead");
    q.promote(2 * SEQUENCE_AHEAD);
    let second = q.unsent[1];
    match &q.get(second).unwrap().frame {
        Frame::Data { stream, .. } => assert_eq!(*stream, 2, "the other stream's turn"),
        f => panic!("{f:?}"),
    }
}

#[test]
fn an_interactive_stream_is_sequenced_at_once_and_goes_before_queued_bulk_frames() {
    let t = Instant::now();
    let mut q = SendQueue::default();
    q.stage_data(1, 0, Bytes::from(vec![1u8; 64 * 1024]), 16 * 1024, t);
    q.promote(SEQUENCE_AHEAD);
    assert_eq!(q.urgent_front(), None);
    q.set_class(2, TrafficClass::Interactive);
    q.stage_data(2, 0, Bytes::from(vec![2u8; 1000]), 16 * 1024, t);
    q.promote(SEQUENCE_AHEAD);
    let seq = q.urgent_front().expect("the request is sequenced although bulk waits");
    assert!(matches!(q.get(seq).unwrap().frame, Frame::Data { stream: 2, .. }));
    assert_eq!(
        q.backlog().0,
        q.unsent_bytes + q.staged_bytes,
        "not in the schedulers' backlog"
    );
    q.take_urgent();
    q.book(seq, 0, t, 0, None);
    q.on_report(seq, t + std::time::Duration::from_millis(30));
    let s = q.latency.summaries();
    assert_eq!(
        (s[0].class, s[0].count, s[0].p50_ms),
        (TrafficClass::Interactive, 1, 32.0)
    );
    assert!(q.has_pending(), "the bulk frames are still unsent");
}

#[test]
fn frames_only_a_dead_path_held_are_queued_again_and_acks_release_them() {
    let now = Instant::now();
    let mut q = SendQueue::default();
    q.stage_data(1, 0, Bytes::from(vec![1u8; 3000]), 1000, Instant::now());
    sent_all(&mut q, 0, now);
    // Path 1 also holds the middle frame.
    q.book(1000, 1, now, 0, None);
    assert_eq!(q.lost_on(0), 2, "the middle frame is still on path 1");
    assert_eq!(q.next_retransmit(), Some(0));
    q.on_report(0, now);
    assert_eq!(q.next_retransmit(), Some(2000), "a reported frame needs no copy");
    let mut masks = Vec::new();
    q.on_ack(3000, now, |m| masks.push(m)).unwrap();
    assert_eq!(masks, vec![0, 2, 0]);
    assert_eq!(q.next_retransmit(), None);
    assert_eq!(q.held_bytes(), 0);
}

#[test]
fn an_ack_beyond_what_was_sent_is_a_protocol_error() {
    let mut q = SendQueue::default();
    q.stage_data(1, 0, Bytes::from(vec![1u8; 100]), 1000, Instant::now());
    q.promote(u64::MAX);
    assert!(matches!(
        q.on_ack(101, Instant::now(), |_| {}),
        Err(ProtocolError::AckBeyondSent { .. })
    ));
    assert!(
        matches!(
            q.on_ack(100, Instant::now(), |_| {}),
            Err(ProtocolError::AckBeyondSent { .. })
        ),
        "sequenced but never sent"
    );
}

#[test]
fn a_split_keeps_the_sequence_numbers_and_both_ends_work() {
    for end in [End::Head, End::Tail] {
        let mut q = SendQueue::default();
        q.stage_data(1, 0, Bytes::from(vec![1u8; 10_000]), 16 * 1024, Instant::now());
        q.promote(u64::MAX);
        let seq = q.unsent_end(end).unwrap();
        q.split_unsent(seq, end, 4000);
        let first = q.unsent_end(end).unwrap();
        let f = &q.get(first).unwrap().frame;
        assert!(f.encoded_len() <= 4000, "{end:?}: {}", f.encoded_len());
        let total: usize = q.outgoing.values().map(|o| o.frame.payload_len()).sum();
        assert_eq!(total, 10_000);
        let seqs: Vec<u64> = q.outgoing.keys().copied().collect();
        let second = q.get(seqs[1]).unwrap();
        assert_eq!(seqs[1], q.get(seqs[0]).unwrap().frame.payload_len() as u64);
        assert!(matches!(second.frame, Frame::Data { offset, .. } if offset == seqs[1]));
    }
}

#[test]
fn a_split_never_leaves_a_part_below_the_minimum() {
    let mut q = SendQueue::default();
    q.stage_data(1, 0, Bytes::from(vec![1u8; 1000]), 16 * 1024, Instant::now());
    q.promote(u64::MAX);
    q.split_unsent(0, End::Head, 300);
    assert_eq!(q.outgoing.len(), 1, "too small to split");
}

#[test]
fn unstaging_returns_the_payload_and_keeps_the_counts() {
    let mut q = SendQueue::default();
    q.stage_open(1, addr(), Instant::now());
    q.stage_data(1, 0, Bytes::from(vec![1u8; 40_000]), 16 * 1024, Instant::now());
    q.stage_fin(1, 40_000, Instant::now());
    q.promote(1);
    assert_eq!(q.unstage(1), 40_000 - 16 * 1024);
    assert_eq!(q.backlog().1, 1, "only the sequenced Open is left");
}
