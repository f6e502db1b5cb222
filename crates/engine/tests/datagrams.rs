//! Datagram flows on the engine harness (simulated paths, virtual clock): realtime copies
//! over two paths survive a path going dark, the second copy is dropped and counted, a
//! full queue drops its oldest, bulk datagrams split by path rate, datagrams go before
//! bulk stream bytes and are never re-sent after a path dies.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use mpflex_engine::harness::{Pair, PathSpec};
use mpflex_engine::{DatagramClass, FlowId};
use mpflex_wire::{FlowCloseCode, TargetAddr};

fn dest() -> TargetAddr {
    TargetAddr::Ip("192.0.2.1:5004".parse().unwrap())
}

/// A datagram of `len` bytes whose first four carry `i`.
fn numbered(i: u32, len: usize) -> Bytes {
    let mut v = vec![0u8; len];
    v[..4].copy_from_slice(&i.to_be_bytes());
    Bytes::from(v)
}

/// How many times each number arrived at the server on `flow`.
fn arrivals(pair: &Pair, flow: FlowId) -> HashMap<u32, usize> {
    let mut seen = HashMap::new();
    for (f, d, _) in &pair.server_datagrams {
        if *f == flow {
            *seen.entry(u32::from_be_bytes([d[0], d[1], d[2], d[3]])).or_default() += 1;
        }
    }
    seen
}

/// A voice-like flow (160 bytes every 20 ms for 3 s) over a 10 ms and a 20 ms path; the
/// faster path goes dark after a second, with no reset. Every datagram arrives exactly
/// once: those the dark path swallowed arrived as their copy on the other one, and the
/// server dropped and counted the second copies of the rest.
#[test]
fn realtime_copies_survive_a_blackholed_path() {
    let mut pair = Pair::new("minrtt", &[(10, 1000), (20, 1000)]);
    for _ in 0..200 {
        pair.step();
    }
    let flow = pair.client.open_flow(dest()).unwrap();
    let n = 150u32;
    for i in 0..n {
        if i == 50 {
            pair.blackhole(0);
        }
        let class = pair.client.send_datagram(flow, numbered(i, 160));
        assert_eq!(class, Some(DatagramClass::Realtime));
        for _ in 0..20 {
            pair.step();
        }
    }
    for _ in 0..500 {
        pair.step();
    }
    assert_eq!(pair.server_flows.get(&flow), Some(&dest()));
    let seen = arrivals(&pair, flow);
    let missing: Vec<u32> = (0..n).filter(|i| !seen.contains_key(i)).collect();
    assert!(missing.is_empty(), "lost {missing:?}");
    assert!(seen.values().all(|&c| c == 1), "a copy was delivered twice");
    let rx = pair.server.datagram_counters();
    let tx = pair.client.datagram_counters();
    assert_eq!(rx.received, n as u64);
    assert!(rx.duplicates >= 40, "second copies before the blackhole: {rx:?}");
    assert!(tx.copies >= 50, "{tx:?}");
    assert_eq!(
        tx.sent,
        tx.copies + n as u64,
        "each datagram once plus its copies: {tx:?}"
    );
    // Copies went on the second path while both carried, so it carried every datagram.
    let on1 = pair.client.path_counters(1).unwrap().0.datagrams_sent;
    assert_eq!(on1, n as u64);
}

/// With room for 8, 20 datagrams queued at once leave the last 8: the 12 oldest are
/// dropped and counted, and what remains arrives.
#[test]
fn a_full_queue_drops_the_oldest_and_counts() {
    let mut pair = Pair::with("minrtt", &[(10, 1000)], |c| c.datagram_queue = 8);
    for _ in 0..50 {
        pair.step();
    }
    let flow = pair.client.open_flow(dest()).unwrap();
    for i in 0..20 {
        assert!(pair.client.send_datagram(flow, numbered(i, 100)).is_some());
    }
    assert_eq!(pair.client.datagram_counters().dropped_queue_full, 12);
    assert_eq!(pair.client.datagrams_queued().0, 8);
    for _ in 0..100 {
        pair.step();
    }
    let mut got: Vec<u32> = arrivals(&pair, flow).into_keys().collect();
    got.sort_unstable();
    assert_eq!(got, (12..20).collect::<Vec<_>>());
}

/// Bulk datagrams (1200 bytes at 2 MB/s) over a 1 MB/s and a 3 MB/s path: both carry,
/// the faster more, none is copied, and nearly all arrive.
#[test]
fn bulk_datagrams_split_by_path_rate() {
    let mut pair = Pair::new("minrtt", &[(10, 1000), (10, 3000)]);
    for _ in 0..200 {
        pair.step();
    }
    let flow = pair.client.open_flow(dest()).unwrap();
    let mut n = 0u32;
    for _ in 0..1000 {
        for _ in 0..2 {
            // Larger than any realtime datagram.
            assert_eq!(
                pair.client.send_datagram(flow, numbered(n, 1000)),
                Some(DatagramClass::Bulk)
            );
            n += 1;
        }
        pair.step();
    }
    for _ in 0..500 {
        pair.step();
    }
    let per: Vec<u64> = (0..2)
        .map(|p| pair.client.path_counters(p).unwrap().0.datagrams_sent)
        .collect();
    let tx = pair.client.datagram_counters().clone();
    assert_eq!(tx.copies, 0, "{tx:?}");
    assert!(per[0] > tx.sent / 10, "the slower path carries its share too: {per:?}");
    assert!(per[1] > per[0], "the faster path carries more: {per:?}");
    let got = arrivals(&pair, flow).len() as u64;
    assert!(got * 100 >= n as u64 * 99, "{got} of {n} arrived: {tx:?}");
}

/// A bulk upload fills the only path for seconds; a datagram queued in the middle of it
/// arrives within a few round trips, not behind the upload.
#[test]
fn datagrams_go_before_bulk_stream_bytes() {
    // Queue control off: the upload is handed over whole, so it is still going when the
    // datagram comes (queue control's part: `realtime_datagrams_engage_queue_control`).
    let mut pair = Pair::with("minrtt", &[(10, 1000)], |c| c.queue_target = Duration::ZERO);
    let id = pair.open(&[1u8; 1000]);
    // The server's first `MaxData` raises the session's credit beyond the protocol's
    // initial megabyte.
    for _ in 0..50 {
        pair.step();
    }
    assert_eq!(
        pair.client.stream_send(id, Bytes::from(vec![2u8; 3_000_000])),
        3_000_000
    );
    for _ in 0..500 {
        pair.step();
    }
    let flow = pair.client.open_flow(dest()).unwrap();
    let sent_at = pair.now;
    pair.client.send_datagram(flow, numbered(7, 100));
    for _ in 0..2000 {
        pair.step();
        if !pair.server_datagrams.is_empty() {
            break;
        }
    }
    let (_, _, at) = pair.server_datagrams.first().expect("the datagram arrived");
    let waited = *at - sent_at;
    let left = 3_001_000 - pair.server_rx[&id].len();
    assert!(left > 500_000, "the upload was still going ({left} bytes left)");
    assert!(
        waited < Duration::from_millis(300),
        "waited {waited:?} behind the upload"
    );
}

/// Datagrams a path took are lost with it: when a path dies mid-flow nothing is re-sent
/// (sent counts each bulk datagram once), and the flow goes on over the other path.
#[test]
fn datagrams_are_never_resent_after_a_path_dies() {
    let mut pair = Pair::new("minrtt", &[(10, 1000), (10, 1000)]);
    for _ in 0..200 {
        pair.step();
    }
    let flow = pair.client.open_flow(dest()).unwrap();
    pair.client.set_flow_class(flow, Some(DatagramClass::Bulk));
    for i in 0..400u32 {
        if i == 200 {
            pair.kill(0);
        }
        pair.client.send_datagram(flow, numbered(i, 1000));
        pair.step();
    }
    for _ in 0..300 {
        pair.step();
    }
    let tx = pair.client.datagram_counters().clone();
    assert_eq!(tx.copies, 0);
    assert!(tx.sent <= 400, "{tx:?}");
    let seen = arrivals(&pair, flow);
    assert!(
        (300..400).all(|i| seen.contains_key(&i)),
        "after the failure, all arrive"
    );
    assert_eq!(pair.client.counters().resent_lost, 0);
}

/// A flow the server refuses is closed on the client with the reason, counted on both
/// sides, and sends nothing more; datagrams for it that still arrive are counted.
#[test]
fn a_refused_flow_is_closed_with_its_reason() {
    let mut pair = Pair::new("minrtt", &[(10, 1000), (20, 1000)]);
    let flow = pair.client.open_flow(dest()).unwrap();
    pair.client.send_datagram(flow, numbered(0, 50));
    for _ in 0..100 {
        pair.step();
    }
    assert!(pair.server_flows.contains_key(&flow));
    pair.server.close_flow(flow, FlowCloseCode::Refused);
    for _ in 0..100 {
        pair.step();
    }
    assert!(pair.flow_closes.contains(&(true, flow, FlowCloseCode::Refused)));
    assert_eq!(pair.client.datagram_counters().flows_refused, 1);
    assert_eq!(pair.server.datagram_counters().flows_refused, 1);
    assert_eq!(pair.client.send_datagram(flow, numbered(1, 50)), None);
    assert_eq!(pair.client.num_flows(), 0);
}

/// Bad datagram input is counted, never fatal to the session: a datagram for a flow never
/// opened is dropped; flows beyond `max_flows` are refused with `TOO_MANY` while the
/// others go on; only a server's `FlowOpen` to a client breaks the protocol.
#[test]
fn bad_datagram_input_is_counted_not_fatal() {
    let mut pair = Pair::with("minrtt", &[(10, 1000)], |c| {
        c.max_flows = if c.role == mpflex_engine::Role::Server { 2 } else { 3 }
    });
    let now = pair.now;
    let stray = mpflex_wire::Frame::Datagram {
        flow: 4242,
        seq: 0,
        copied: false,
        data: Bytes::from_static(b"stray"),
    };
    pair.server.handle_frame(0, stray, now).unwrap();
    assert_eq!(pair.server.datagram_counters().dropped_unknown_flow, 1);

    let flows: Vec<FlowId> = (0..3).map(|_| pair.client.open_flow(dest()).unwrap()).collect();
    // The client opens no more than its own limit.
    assert_eq!(pair.client.open_flow(dest()), None);
    for (i, &f) in flows.iter().enumerate() {
        pair.client.send_datagram(f, numbered(i as u32, 40));
    }
    for _ in 0..100 {
        pair.step();
    }
    assert_eq!(pair.server.num_flows(), 2);
    assert_eq!(pair.server.datagram_counters().flows_refused, 1);
    assert!(pair.flow_closes.contains(&(true, flows[2], FlowCloseCode::TooMany)));
    for &f in &flows[..2] {
        assert!(pair.client.send_datagram(f, numbered(9, 40)).is_some());
    }
    for _ in 0..100 {
        pair.step();
    }
    assert_eq!(arrivals(&pair, flows[0]).len(), 2);
    assert_eq!(arrivals(&pair, flows[1]).len(), 2);

    let open = mpflex_wire::Frame::FlowOpen { flow: 1, addr: dest() };
    assert!(pair.client.handle_frame(0, open, now).is_err());
}

/// Bulk datagrams split over a 10 ms and a 30 ms path arrive out of order; the receiver
/// puts them back in order within its window (adapted to the reordering it sees), so
/// once it has adapted almost none reaches the application behind a later one, and every
/// datagram the client sent arrives.
#[test]
fn bulk_datagrams_split_over_unequal_paths_arrive_in_order() {
    let mut pair = Pair::new("minrtt", &[(10, 1000), (30, 3000)]);
    for _ in 0..300 {
        pair.step();
    }
    let flow = pair.client.open_flow(dest()).unwrap();
    let n = 4000u32;
    let mut i = 0;
    while i < n {
        for _ in 0..3 {
            pair.client.send_datagram(flow, numbered(i, 1000));
            i += 1;
        }
        pair.step();
    }
    for _ in 0..500 {
        pair.step();
    }
    let order: Vec<u32> = pair
        .server_datagrams
        .iter()
        .map(|(_, d, _)| u32::from_be_bytes([d[0], d[1], d[2], d[3]]))
        .collect();
    let per: Vec<u64> = (0..2)
        .map(|p| pair.client.path_counters(p).unwrap().0.datagrams_sent)
        .collect();
    let tx = pair.client.datagram_counters().clone();
    let rx = pair.server.datagram_counters().clone();
    assert!(per.iter().all(|&c| c > 500), "both paths carry: {per:?}");
    assert_eq!(
        order.len() as u64,
        tx.sent,
        "every datagram sent arrives: {tx:?} {rx:?}"
    );
    // Delivered behind a later one, in the first and the second half of the flow.
    let mut max = None;
    let mut behind = [0u32; 2];
    for &x in &order {
        if max.is_some_and(|m| x < m) {
            behind[(x >= n / 2) as usize] += 1;
        }
        max = max.max(Some(x));
    }
    assert!(
        behind[0] * 100 <= n / 2 * 10,
        "while adapting: {behind:?}, {rx:?}, {per:?}"
    );
    assert!(behind[1] * 100 <= n / 2, "once adapted: {behind:?}, {rx:?}, {per:?}");
}

/// A call beside a bulk upload on one path, queue control on (20 ms target): realtime
/// datagrams engage it as interactive streams do, so the upload's queue in the path's
/// socket stays short and each voice datagram arrives within the path's delay and a few
/// tens of milliseconds.
#[test]
fn realtime_datagrams_engage_queue_control() {
    let mut pair = Pair::new("minrtt", &[(10, 1000)]);
    let id = pair.open(&[1u8; 1000]);
    // The application writes as the session takes it (the bound on bytes ahead of the
    // paths), one millisecond at a time.
    let mut unsent = 4_000_000usize;
    let feed = |pair: &mut Pair, unsent: &mut usize| {
        let n = (pair.client.send_capacity(id) as usize).min(*unsent);
        if n > 0 {
            *unsent -= pair.client.stream_send(id, Bytes::from(vec![2u8; n]));
        }
        pair.step();
    };
    for _ in 0..1000 {
        feed(&mut pair, &mut unsent);
    }
    let flow = pair.client.open_flow(dest()).unwrap();
    let mut sent_at = Vec::new();
    for i in 0..100u32 {
        sent_at.push(pair.now);
        pair.client.send_datagram(flow, numbered(i, 160));
        for _ in 0..20 {
            feed(&mut pair, &mut unsent);
        }
    }
    for _ in 0..200 {
        feed(&mut pair, &mut unsent);
    }
    let left = 4_001_000 - pair.server_rx[&id].len();
    assert!(left > 0, "the upload was still going");
    let mut delays: Vec<Duration> = pair
        .server_datagrams
        .iter()
        .map(|(_, d, at)| *at - sent_at[u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize])
        .collect();
    assert_eq!(delays.len(), 100);
    delays.sort();
    let p99 = delays[98];
    eprintln!("voice beside an upload: p50 {:?} p99 {:?}", delays[50], p99);
    assert!(p99 <= Duration::from_millis(60), "p99 {p99:?}");
}

/// A QUIC-like bulk flow (1,200-byte datagrams at 13.4 Mbit/s) over two paths whose
/// one-way delays differ by 10 ms (seed-default's WiFi and LTE: 25 ms at 7 Mbit/s, 35 ms
/// at 9.2 Mbit/s), one of them losing 1 % of its segments: the datagrams reach the
/// application in the order they were sent, none lost, none given up, none late — the
/// paths' reordering and a lossy path's retransmissions show as delay, never as the
/// gaps QUIC reads as loss (RFC 9002 §6.1.1: three packets behind the newest).
#[test]
fn a_bulk_flow_arrives_in_order_over_paths_of_different_delay() {
    let wifi = PathSpec {
        loss: 0.01,
        ..(25, 880).into()
    };
    let lte: PathSpec = (35, 1150).into();
    let mut pair = Pair::custom(|| mpflex_sched::by_name("minrtt").unwrap(), &[wifi, lte], |_| {});
    for _ in 0..200 {
        pair.step();
    }
    let flow = pair.client.open_flow(dest()).unwrap();
    pair.client.set_flow_class(flow, Some(DatagramClass::Bulk));
    let n = 4200u32;
    for i in 0..n {
        pair.client.send_datagram(flow, numbered(i, 1200));
        // Seven datagrams every five milliseconds: 1,680 bytes per ms.
        if i % 7 == 6 {
            for _ in 0..5 {
                pair.step();
            }
        }
    }
    for _ in 0..2000 {
        pair.step();
    }
    let order: Vec<u32> = pair
        .server_datagrams
        .iter()
        .filter(|(f, _, _)| *f == flow)
        .map(|(_, d, _)| u32::from_be_bytes([d[0], d[1], d[2], d[3]]))
        .collect();
    let rx = pair.server.datagram_counters().clone();
    let tx = pair.client.datagram_counters().clone();
    let per: Vec<u64> = (0..2)
        .map(|p| pair.client.path_counters(p).unwrap().0.datagrams_sent)
        .collect();
    assert!(per.iter().all(|&p| p > u64::from(n) / 5), "both paths carry: {per:?}");
    assert_eq!((rx.gaps, rx.late), (0, 0), "{rx:?}");
    let delivered = order.len() as u64;
    assert_eq!(
        delivered + tx.dropped_queue_full + tx.dropped_expired,
        u64::from(n),
        "{tx:?}"
    );
    assert!(order.windows(2).all(|w| w[0] < w[1]), "out of order");
    // What a path takes of the flow in a row shares a frame (`Datagrams`): all the
    // paths' bytes — records, keepalives, the flow's opening included — come to less
    // per datagram than a frame of its own would cost in headers alone (12 bytes).
    let wire: u64 = (0..2).map(|p| pair.client.path_counters(p).unwrap().0.bytes_sent).sum();
    let per_datagram = (wire - tx.sent_bytes) as f64 / tx.sent as f64;
    println!("{per_datagram:.2} bytes on the paths per datagram beyond its payload");
    assert!(per_datagram < 12.0, "{per_datagram:.2} bytes of overhead per datagram");
}
