use super::*;

fn arrived(path: usize, seq: u16, data: Bytes, at: Instant) -> reorder::Arrived {
    reorder::Arrived { path, seq, data, at }
}

fn addr() -> TargetAddr {
    TargetAddr::Ip("10.0.0.1:53".parse().unwrap())
}

/// The first copy of each `seq` is delivered and the second not, in either order and
/// across the 16-bit wrap; a copy older than the window is dropped.
#[test]
fn dedup_keeps_the_first_copy() {
    let mut d = Datagrams::new(16);
    let id = d.open(addr());
    for seq in [65534u16, 65535, 0, 1] {
        assert!(d.on_receive(id, seq, true, 10));
    }
    assert!(!d.on_receive(id, 65535, true, 10));
    assert!(!d.on_receive(id, 1, true, 10));
    assert!(d.on_receive(id, 3, true, 10));
    assert!(d.on_receive(id, 2, true, 10), "a late first copy still counts");
    assert!(!d.on_receive(id, 2, true, 10));
    assert!(d.on_receive(id, 200, true, 10));
    assert!(!d.on_receive(id, 3, true, 10), "beyond the window");
    // Datagrams sent once are never taken for copies.
    assert!(d.on_receive(id, 3, false, 10));
    assert!(d.on_receive(id, 3, false, 10));
    assert_eq!(d.counters.duplicates, 4);
    assert_eq!(d.counters.received, 9);
    assert!(!d.on_receive(99, 0, false, 10));
    assert_eq!(d.counters.dropped_unknown_flow, 1);
}

/// A flow whose class changes numbers each class on its own, so the receiver's
/// reordering of its bulk datagrams never waits for a number a realtime one took; a
/// realtime datagram is numbered when queued, a bulk one when a path takes it, so the
/// bulk datagrams the full queue drops leave no gap.
#[test]
fn each_class_is_numbered_on_its_own() {
    use DatagramClass::*;
    let t0 = Instant::now();
    let mut d = Datagrams::new(4);
    let id = d.open(addr());
    for (i, c) in [Bulk, Realtime, Bulk, Realtime, Realtime, Bulk].into_iter().enumerate() {
        d.pin(id, Some(c));
        assert_eq!(d.push(id, Bytes::from(vec![0u8; 100]), t0), Some(c), "{i}");
    }
    // Room for 4: the two oldest (bulk, realtime 0) went.
    assert_eq!(d.counters.dropped_queue_full, 2);
    let queued: Vec<(DatagramClass, u16)> = d.queue.iter().map(|q| (q.class, q.seq)).collect();
    assert_eq!(queued, [(Bulk, 0), (Realtime, 1), (Realtime, 2), (Bulk, 0)]);
    // The paths take the bulk ones: numbered 0 and 1, the dropped one had no number.
    let mut sent = Vec::new();
    for q in queued.iter().filter(|q| q.0 == Bulk) {
        let _ = q;
        sent.push(d.bulk_seq(id));
        d.bulk_sent(id);
    }
    assert_eq!(sent, [0, 1]);
    // The receiver: the bulk ones come out at once, nothing held, no gap.
    let mut rx = Datagrams::new(64);
    let rid = rx.open(addr());
    let mut out = Vec::new();
    for (c, seq) in [(Realtime, 1), (Bulk, 0), (Realtime, 2), (Bulk, 1)] {
        assert!(rx.on_receive(rid, seq, c == Realtime, 100));
        if c == Bulk {
            rx.reorder(rid, arrived(0, seq, Bytes::from_static(b"x"), t0), 0b1, &mut out);
        }
    }
    assert_eq!(out.len(), 2);
    assert_eq!(rx.release_at(GAP_WAIT_MAX), None, "nothing held");
    assert_eq!((rx.counters.gaps, rx.counters.late), (0, 0));
}

/// Bulk datagrams come out in the order the paths took them: a gap holds those behind
/// it until it fills; it is given up at once when every up path has delivered a later
/// number (a path is a FIFO: what it took before that has come), when the only path
/// that could carry it goes down, or after the wait; a datagram later than that is
/// delivered anyway and counted late; the order survives the 16-bit wrap.
#[test]
fn bulk_datagrams_are_put_back_in_order() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let w = ms(100);
    let both = 0b11;
    let mut d = Datagrams::new(16);
    let id = d.open(addr());
    let mut out = Vec::new();
    let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
    let got = |out: &mut Vec<(FlowId, Bytes)>| -> Vec<String> {
        out.drain(..)
            .map(|(_, x)| String::from_utf8(x.to_vec()).unwrap())
            .collect()
    };
    d.reorder(id, arrived(0, 65534, b("a"), t0), both, &mut out);
    d.reorder(id, arrived(0, 0, b("c"), t0), both, &mut out);
    d.reorder(id, arrived(0, 1, b("d"), t0), both, &mut out);
    assert_eq!(got(&mut out), ["a"], "path 1 may carry 65535: it carried nothing yet");
    assert_eq!(d.release_at(w), Some(t0 + w));
    d.reorder(id, arrived(1, 65535, b("b"), t0 + ms(30)), both, &mut out);
    assert_eq!(got(&mut out), ["b", "c", "d"]);
    assert_eq!(d.release_at(w), None);
    // 2 is missing; path 0 delivered up to 1, so it may still bring 2.
    d.reorder(id, arrived(1, 3, b("f"), t0 + ms(40)), both, &mut out);
    d.release(t0 + ms(139), w, &mut out);
    assert!(out.is_empty(), "still within the wait");
    // Path 0 delivers 4: both paths are past 2, which no path can bring any more.
    d.reorder(id, arrived(0, 4, b("g"), t0 + ms(41)), both, &mut out);
    assert_eq!(got(&mut out), ["f", "g"]);
    assert_eq!(d.counters.gaps, 1);
    d.reorder(id, arrived(0, 2, b("e"), t0 + ms(50)), both, &mut out);
    assert_eq!(got(&mut out), ["e"]);
    assert_eq!(d.counters.late, 1);
    // 5 is missing and path 1 (at 3) may bring it: held for the wait, no longer.
    d.reorder(id, arrived(0, 6, b("i"), t0 + ms(60)), both, &mut out);
    d.release(t0 + ms(159), w, &mut out);
    assert!(out.is_empty());
    assert_eq!(d.release_at(w), Some(t0 + ms(160)));
    d.release(t0 + ms(160), w, &mut out);
    assert_eq!(got(&mut out), ["i"]);
    assert_eq!(d.counters.gaps, 2);
    // 7 is missing and only path 1 could bring it; path 1 goes down.
    d.reorder(id, arrived(0, 8, b("k"), t0 + ms(170)), both, &mut out);
    assert!(out.is_empty());
    d.path_down_rx(1, both, &mut out);
    assert_eq!(got(&mut out), ["k"]);
    assert_eq!(d.counters.gaps, 3);
    // With path 1 down, path 0 alone decides: its gaps are lost at once.
    d.reorder(id, arrived(0, 10, b("m"), t0 + ms(180)), 0b01, &mut out);
    assert_eq!(got(&mut out), ["m"]);
    assert_eq!(d.counters.gaps, 4);
    assert_eq!(placement_slack(Duration::ZERO), REORDER_MIN);
    assert_eq!(placement_slack(ms(20)), ms(12));
    assert_eq!(placement_slack(ms(500)), REORDER_MAX);
    assert_eq!(gap_wait(ms(70)), ms(140));
    assert_eq!(gap_wait(ms(900)), GAP_WAIT_MAX);
}

/// A flow holds at most [`reorder::HOLD_MAX`] datagrams behind a gap: beyond, it stops
/// waiting, and memory stays bounded.
#[test]
fn a_gap_holds_a_bounded_number() {
    let t0 = Instant::now();
    let mut d = Datagrams::new(16);
    let id = d.open(addr());
    let mut out = Vec::new();
    d.reorder(id, arrived(0, 0, Bytes::from_static(b"0"), t0), 0b11, &mut out);
    for seq in 2..(reorder::HOLD_MAX as u16 + 3) {
        d.reorder(id, arrived(0, seq, Bytes::from_static(b"x"), t0), 0b11, &mut out);
    }
    assert_eq!(d.counters.gaps, 1);
    assert_eq!(out.len(), reorder::HOLD_MAX + 2);
    assert_eq!(d.release_at(GAP_WAIT_MAX), None);
}

/// A flood from one flow fills the queue: its own oldest datagrams go, the other
/// flow's stay.
#[test]
fn a_flood_drops_its_own_datagrams() {
    let t0 = Instant::now();
    let mut d = Datagrams::new(10);
    let call = d.open(addr());
    let flood = d.open(addr());
    d.push(call, Bytes::from_static(b"voice 0"), t0);
    for _ in 0..50 {
        d.push(flood, Bytes::from(vec![0; 1000]), t0);
    }
    d.push(call, Bytes::from_static(b"voice 1"), t0);
    assert_eq!(d.counters.dropped_queue_full, 42);
    let calls = d.queue.iter().filter(|q| q.flow == call).count();
    assert_eq!(calls, 2, "the call's datagrams stay");
    assert_eq!(d.queued(), (10, 8 * 1000 + 14));
    d.expire(t0 + MAX_WAIT);
    assert_eq!(d.queued(), (0, 0));
    assert_eq!(d.counters.dropped_expired, 10);
}

/// Small datagrams at a voice rate are realtime; large ones, or small ones at a high
/// rate, bulk; a pinned class wins.
#[test]
fn classes_follow_size_and_rate() {
    let t0 = Instant::now();
    let mut d = Datagrams::new(100_000);
    let voice = d.open(addr());
    let flood = d.open(addr());
    for i in 0..200u32 {
        let t = t0 + Duration::from_millis(20 * i as u64);
        assert_eq!(
            d.push(voice, Bytes::from(vec![0; 160]), t),
            Some(DatagramClass::Realtime)
        );
    }
    assert_eq!(
        d.push(voice, Bytes::from(vec![0; 1200]), t0 + Duration::from_secs(5)),
        Some(DatagramClass::Bulk)
    );
    let mut last = None;
    for i in 0..2000u64 {
        last = d.push(flood, Bytes::from(vec![0; 400]), t0 + Duration::from_micros(100 * i));
    }
    assert_eq!(last, Some(DatagramClass::Bulk), "400-byte datagrams at 4 MB/s");
    d.pin(flood, Some(DatagramClass::Realtime));
    assert_eq!(
        d.push(flood, Bytes::from(vec![0; 400]), t0 + Duration::from_millis(200)),
        Some(DatagramClass::Realtime)
    );
}
