//! Idle sessions on the shared harness (virtual clock): a session that carries nothing
//! exchanges a keepalive per path every `idle_keepalive` (25 s) instead of every second,
//! a path that dies while it idles is still dropped within a bound (`path_timeout +
//! idle_keepalive - keepalive`, 29 s, after it died), and once a stream opens the first bytes leave at once and
//! a path that died meanwhile is dropped within `path_timeout`, as under load.

use std::time::{Duration, Instant};

use mpflex_engine::harness::Pair;
use mpflex_engine::{EngineConfig, PathStatus};

/// Two paths: 25 ms and 35 ms one way.
fn pair() -> Pair {
    Pair::new("minrtt", &[(25, 1000), (35, 1000)])
}

fn secs(pair: &Pair) -> f64 {
    (pair.now - pair.start).as_secs_f64()
}

/// Steps `pair` until `until` seconds after its start, calling `each` every millisecond.
fn run_until(pair: &mut Pair, until: f64, mut each: impl FnMut(&mut Pair)) {
    while secs(pair) < until {
        pair.step();
        each(pair);
    }
}

/// Instants (s) at which the client's path `p` handed the link anything, over 120 s.
fn client_sends(pair: &mut Pair, p: usize) -> Vec<f64> {
    let mut sent = pair.client.path_counters(p).unwrap().0.bytes_sent;
    let mut at = Vec::new();
    let end = secs(pair) + 120.0;
    run_until(pair, end, |pair| {
        let now = pair.client.path_counters(p).unwrap().0.bytes_sent;
        if now != sent {
            sent = now;
            at.push(secs(pair));
        }
    });
    at
}

/// With nothing to carry, each path sends a keepalive (or the answer to the peer's) once
/// per 25 s: 4 to 10 sends in 120 s, 25 s apart but for a keepalive and the answer to the
/// peer's (both sides keep the same clock here). A session with a stream open keeps the
/// one-second keepalives: 100 sends or more.
#[test]
fn an_idle_session_sends_a_keepalive_every_idle_interval() {
    let cfg = EngineConfig::new(mpflex_engine::Role::Client);
    assert_eq!(cfg.idle_keepalive(), Duration::from_secs(25));
    let mut idle = pair();
    for p in 0..2 {
        let at = client_sends(&mut idle, p);
        println!("idle, path {p}: client sends at {at:.3?} s");
        assert!((4..=10).contains(&at.len()), "path {p}: {} sends in 120 s", at.len());
        for w in at.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                gap < 0.1 || (24.99..25.1).contains(&gap),
                "path {p}: sends {gap:.3} s apart"
            );
        }
    }
    let mut busy = pair();
    busy.open(b"hello");
    for p in 0..2 {
        let n = client_sends(&mut busy, p).len();
        println!("carrying a stream, path {p}: {n} client sends in 120 s");
        assert!(n >= 100, "path {p}: only {n} sends in 120 s while carrying");
    }
}

/// A path that goes dark while the session idles (no reset: neither side is told) is
/// dropped by both sides within `path_timeout + idle_keepalive - keepalive` (29 s) of
/// going dark (it heard something before), and
/// not before `path_timeout` (5 s): the idle rule, not the carrying one. The other path
/// stays up.
#[test]
fn a_path_that_dies_while_idle_is_dropped_within_the_idle_bound() {
    let mut pair = pair();
    run_until(&mut pair, 40.0, |_| {});
    pair.blackhole(1);
    let dark = secs(&pair);
    let (mut client, mut server) = (None, None);
    run_until(&mut pair, 100.0, |pair| {
        if client.is_none() && pair.client.path_status(1) == PathStatus::Down {
            client = Some(secs(pair));
        }
        if server.is_none() && pair.server.path_status(1) == PathStatus::Down {
            server = Some(secs(pair));
        }
    });
    println!("dark at {dark} s; dropped by the client at {client:?} s, by the server at {server:?} s");
    for (side, at) in [("client", client), ("server", server)] {
        let after = at.unwrap_or_else(|| panic!("the {side} never dropped the dark path")) - dark;
        assert!(
            (5.0..=29.001).contains(&after),
            "{side}: dropped {after:.3} s after it went dark"
        );
    }
    assert_eq!(pair.client.path_status(0), PathStatus::Up);
    assert_eq!(pair.server.path_status(0), PathStatus::Up);
}

/// After 60 s of idleness a stream's first bytes arrive one path delay (25 ms) after it
/// opens, plus the harness's 1 ms steps: nothing waits for the paths to wake. A path that went dark
/// during the idleness (at 51 s, after the keepalives of 50 s) is dropped by the client
/// within `path_timeout` (5 s) of the stream opening — not at the idle bound (79 s) — and
/// the stream's bytes arrive all the same.
#[test]
fn a_stream_after_idleness_starts_at_once_and_finds_a_dead_path_within_the_path_timeout() {
    let first_bytes = |pair: &mut Pair| {
        let t0 = pair.now;
        let id = pair.open(b"GET / HTTP/1.1\r\n\r\n");
        while pair.server_rx.get(&id).is_none_or(|b| b.is_empty()) {
            assert!(pair.now - t0 < Duration::from_secs(5), "no bytes within 5 s");
            pair.step();
        }
        pair.now - t0
    };
    let mut healthy = pair();
    run_until(&mut healthy, 60.0, |_| {});
    let took = first_bytes(&mut healthy);
    println!("first bytes after 60 s idle: {took:?}");
    assert!(
        took <= Duration::from_millis(28),
        "first bytes after idleness took {took:?}"
    );

    let mut pair = pair();
    run_until(&mut pair, 51.0, |_| {});
    pair.blackhole(0);
    run_until(&mut pair, 60.0, |_| {});
    assert_eq!(pair.client.path_status(0), PathStatus::Up, "not dropped while idle yet");
    let opened = pair.now;
    let took = first_bytes(&mut pair);
    let mut dropped: Option<Instant> = None;
    run_until(&mut pair, 90.0, |pair| {
        if dropped.is_none() && pair.client.path_status(0) == PathStatus::Down {
            dropped = Some(pair.now);
        }
    });
    let dropped = dropped.expect("the dark path was never dropped") - opened;
    println!("a path dark since 51 s: the stream opened at 60 s got its first bytes after {took:?}; dropped {dropped:?} after the stream opened");
    assert!(
        dropped <= Duration::from_millis(5001),
        "dropped {dropped:?} after the stream opened"
    );
    assert_eq!(pair.client.path_status(1), PathStatus::Up);
}

/// Carrying data, nothing changes: a path that goes dark under a stream is dropped
/// `path_timeout` (5 s) after it last heard anything (the server's answers to its
/// keepalives, at most a second before it went dark).
#[test]
fn a_path_that_dies_under_load_is_dropped_after_the_path_timeout() {
    let mut pair = pair();
    let id = pair.open(b"x");
    let chunk = bytes::Bytes::from(vec![7u8; 4096]);
    let feed = |pair: &mut Pair| {
        if pair.client.send_capacity(id) > 0 {
            pair.client.stream_send(id, chunk.clone());
        }
    };
    let heard = |pair: &Pair| pair.client.path_counters(1).unwrap().0.bytes_received;
    let (mut received, mut last_heard) = (heard(&pair), 0.0);
    run_until(&mut pair, 10.0, |pair| {
        feed(pair);
        if heard(pair) != received {
            (received, last_heard) = (heard(pair), secs(pair));
        }
    });
    pair.blackhole(1);
    let dark = secs(&pair);
    let mut dropped = None;
    run_until(&mut pair, 20.0, |pair| {
        feed(pair);
        if dropped.is_none() && pair.client.path_status(1) == PathStatus::Down {
            dropped = Some(secs(pair));
        }
    });
    let dropped = dropped.expect("the dark path was never dropped");
    println!("under load: dark at {dark} s, last heard at {last_heard} s, dropped at {dropped} s");
    assert!(
        dark - last_heard <= 1.1,
        "path 1 heard nothing for {} s before",
        dark - last_heard
    );
    let after = dropped - last_heard;
    assert!(
        (5.0..=5.001).contains(&after),
        "dropped {after:.3} s after it last heard"
    );
}

/// A path that goes dark in the last moments of a download (the client's request is
/// done, the server's answer ends 200 ms later): the client sent the path only ACKs,
/// which nothing answers, and the session goes idle before any keepalive of its was due. Going idle asks every path for a word, so the
/// client drops the dark path `path_timeout` (5 s) after the stream closed — not at the
/// idle bound (29 s after it last heard), which the idle allowance alone would give.
#[test]
fn a_path_that_dies_as_the_session_goes_idle_is_dropped_after_the_path_timeout() {
    // Queue control off: the download is handed over whole, a chunk every 4 ms; under
    // queue control the bound on bytes ahead of the paths refuses part of a chunk once
    // the path went dark, and this is a test of the idle path's timeout.
    let mut pair = Pair::with("minrtt", &[(25, 1000), (35, 1000)], |c| c.queue_target = Duration::ZERO);
    let id = pair.open(b"GET / HTTP/1.1\r\n\r\n");
    // 1.5 MB/s: more than one path carries, less than both, so nothing queues up.
    let chunk = bytes::Bytes::from(vec![7u8; 6000]);
    let feed = |pair: &mut Pair| {
        let tick = (pair.now - pair.start).as_millis();
        if tick.is_multiple_of(4) && pair.server.stream_ids().contains(&id) {
            assert_eq!(pair.server.stream_send(id, chunk.clone()), chunk.len());
        }
    };
    run_until(&mut pair, 9.8, feed);
    pair.client.stream_finish(id);
    run_until(&mut pair, 10.0, feed);
    pair.blackhole(1);
    run_until(&mut pair, 10.2, feed);
    pair.server.stream_finish(id);
    let mut idle_at = None;
    let mut dropped = None;
    run_until(&mut pair, 45.0, |pair| {
        if idle_at.is_none() && pair.client.num_streams() == 0 {
            idle_at = Some(secs(pair));
        }
        if dropped.is_none() && pair.client.path_status(1) == PathStatus::Down {
            dropped = Some(secs(pair));
        }
    });
    let idle_at = idle_at.expect("the stream never closed");
    let dropped = dropped.expect("the dark path was never dropped");
    println!("dark at 10 s, the client idle at {idle_at:.3} s, dropped the dark path at {dropped:.3} s");
    assert!(idle_at < 15.0, "the stream closed only at {idle_at:.3} s");
    assert!(
        dropped - idle_at <= 5.001,
        "dropped {:.3} s after the session went idle",
        dropped - idle_at
    );
    assert_eq!(pair.client.path_status(0), PathStatus::Up);
}
