use super::*;
use crate::harness::Pair;
use mpflex_wire::Frame;
use std::time::Duration;

/// Queue control off, for tests that hand the session a whole transfer at once: under
/// queue control the session takes no more than a second of the paths' rate ahead of
/// them (the bound on bytes ahead), and these tests are of what it does with the bytes.
fn whole_writes(c: &mut EngineConfig) {
    c.queue_target = Duration::ZERO;
}

/// The metrics' counts: each stream's bytes per path add up to what it carried on both
/// sides, scheduler decisions are counted, and a dead path's frames count as re-sent.
#[test]
fn streams_count_their_bytes_per_path_and_the_scheduler_its_decisions() {
    let mut pair = Pair::with("roundrobin", &[(10, 1000), (20, 1000)], whole_writes);
    let id = pair.open(&[1u8; 1000]);
    assert_eq!(pair.client.stream_send(id, Bytes::from(vec![2u8; 400_000])), 400_000);
    for _ in 0..400 {
        pair.step();
    }
    assert_eq!(pair.server_rx[&id].len(), 401_000);
    let sent = pair.client.stream_paths(id).expect("open stream").to_vec();
    let got = pair.server.stream_paths(id).expect("open stream").to_vec();
    assert_eq!(sent.iter().sum::<u64>(), 401_000, "{sent:?}");
    assert_eq!(got, sent, "each frame arrives on the path it went on");
    assert!(sent.iter().all(|&b| b > 0), "round robin uses both paths: {sent:?}");
    let c = pair.client.counters();
    assert!(c.decisions_send > 0, "{c:?}");
    assert_eq!(c.resent_lost, 0, "{c:?}");

    assert_eq!(pair.client.stream_send(id, Bytes::from(vec![3u8; 400_000])), 400_000);
    for _ in 0..3 {
        pair.step();
    }
    pair.kill(0);
    for _ in 0..2000 {
        pair.step();
        if pair.server_rx[&id].len() == 801_000 {
            break;
        }
    }
    assert_eq!(pair.server_rx[&id].len(), 801_000);
    assert!(pair.client.counters().resent_lost > 0, "{:?}", pair.client.counters());
}

/// A server that restarted knows nothing of the session: the client resets every
/// stream, forgets every frame (held bytes, per-path counts, ACK state) and the next
/// stream works with the new server from sequence zero.
#[test]
fn a_peer_that_lost_the_session_starts_everything_over() {
    let mut pair = Pair::with("minrtt", &[(10, 1000), (20, 1000)], whole_writes);
    let old = pair.open(&[1u8; 1000]);
    assert_eq!(pair.client.stream_send(old, Bytes::from(vec![2u8; 300_000])), 300_000);
    for _ in 0..30 {
        pair.step();
    }
    assert!(pair.client.held_bytes().0 > 0, "the upload is under way");
    // The server restarts: a new session there, and the client hears `fresh`.
    let now = pair.now;
    let mut cfg = EngineConfig::new(Role::Server);
    whole_writes(&mut cfg);
    pair.server = Session::new(cfg, mpflex_sched::by_name("minrtt").unwrap(), now);
    for p in 0..2 {
        pair.server.path_up(p, now);
    }
    assert!(pair.client.joined(true));
    let mut resets = Vec::new();
    while let Some(e) = pair.client.poll_event() {
        if let Event::StreamReset { stream, code } = e {
            resets.push((stream, code));
        }
    }
    assert_eq!(resets, vec![(old, ResetCode::PeerLostState)]);
    assert_eq!(pair.client.held_bytes(), (0, 0));
    assert!(!pair.client.has_history());
    assert!(pair.client.paths.iter().all(|p| p.held == 0 && p.dup.is_empty()));
    let new = pair.open(b"hello after the restart");
    for _ in 0..200 {
        pair.step();
    }
    assert_eq!(pair.server_rx[&new], b"hello after the restart");
    assert!(pair.client.has_history());
}

/// A client session (MinRTT) backlogged from `t0` to `t0` + 1.2 s.
fn backlogged_client(t0: Instant) -> Session {
    let mut s = Session::new(
        EngineConfig::new(Role::Client),
        mpflex_sched::by_name("minrtt").unwrap(),
        t0,
    );
    s.backlog_since = Some(t0);
    s.backlog_seen = Some(t0 + Duration::from_millis(1200));
    s
}

/// The bound on bytes ahead engages after a second of backlog and, once engaged, holds
/// through a pause shorter than a second; a backlog still building ends after 100 ms.
#[test]
fn a_sustained_backlog_survives_a_short_pause() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut s = backlogged_client(t0);
    assert!(s.backpressure_engaged(t0 + ms(1200)));
    assert!(
        s.backpressure_engaged(t0 + ms(1900)),
        "a 700 ms pause after a sustained backlog"
    );
    assert!(
        !s.backpressure_engaged(t0 + ms(2300)),
        "a pause of over a second ends it"
    );
    s.backlog_seen = Some(t0 + ms(500));
    assert!(!s.backlog_gap(t0 + ms(580)));
    assert!(s.backlog_gap(t0 + ms(620)), "a building backlog ends after 100 ms");
    assert!(!s.backpressure_engaged(t0 + ms(1000)));
}

/// A backlog sustained for a second is a bulk transfer held back only if a stream was
/// refused room lately and has not run dry since: a fixed-rate stream keeps bytes ahead at
/// every look but writes all it has, and a transfer whose last bytes were read is ending.
#[test]
fn only_a_refused_backlog_is_bulk_held_back() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut s = backlogged_client(t0);
    assert!(s.sustained_backlog(t0 + ms(1200)));
    assert!(!s.bulk_held(t0 + ms(1200)), "never refused");
    s.refused_at = Some(t0 + ms(1100));
    s.held.insert(1);
    assert!(s.bulk_held(t0 + ms(1200)));
    s.stream_source_dry(1);
    assert!(
        !s.bulk_held(t0 + ms(1200)),
        "its last bytes were read: the queue is the tail"
    );
    s.held.insert(1);
    s.backlog_seen = Some(t0 + ms(2500));
    assert!(!s.bulk_held(t0 + ms(2500)), "refused over a second ago");
}

/// A refusal under the loose bound on bytes ahead (no backlog of a second yet) says at once
/// that the application holds more than the session took, until its last bytes are read;
/// a refusal under the bound of a sustained backlog is `bulk_held`'s, not this.
#[test]
fn a_refusal_under_the_loose_bound_withholds_at_once() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut s = Session::new(
        EngineConfig::new(Role::Client),
        mpflex_sched::by_name("ecf").unwrap(),
        t0,
    );
    s.set_clock(t0 + ms(100));
    assert!(!s.backpressure_engaged(t0 + ms(100)));
    s.refuse(1);
    assert!(s.bulk_withheld(t0 + ms(100)), "withheld from the first refusal");
    assert!(!s.bulk_held(t0 + ms(100)), "not yet a sustained backlog");
    s.stream_source_dry(1);
    assert!(!s.bulk_withheld(t0 + ms(100)), "its last bytes were read");
    s.held.insert(1);
    assert!(!s.bulk_withheld(t0 + ms(1200)), "refused over a second ago");

    let mut s = backlogged_client(t0);
    s.set_clock(t0 + ms(1200));
    assert!(s.backpressure_engaged(t0 + ms(1200)));
    s.refuse(1);
    assert!(!s.bulk_withheld(t0 + ms(1200)), "the tight bound's refusal");
    assert!(s.bulk_held(t0 + ms(1200)));
}

/// The longest wait between deliveries of a stream of 2 KB every 10 ms when the link
/// of the path carrying it goes at 305 ms (`told`: the client's link watcher sees it; else it goes dark
/// unseen), when the server heard of it, and which path it was.
fn stream_across_a_lost_link(told: bool) -> (Pair, Duration, Option<Duration>, usize) {
    let mut pair = Pair::new("minrtt", &[(10, 1000), (10, 1000)]);
    let id = pair.open(b"get");
    for _ in 0..50 {
        pair.step();
    }
    let (chunk, chunks) = (2000, 100);
    let mut gone = None;
    let mut lost_at = None;
    let mut lost = 0;
    let mut last = None;
    let mut longest = Duration::ZERO;
    for ms in 0..3000 {
        if ms % 10 == 0 && ms / 10 < chunks {
            assert_eq!(pair.server.stream_send(id, Bytes::from(vec![7u8; chunk])), chunk);
        }
        if ms == 305 {
            // The path that carries the stream now (the server's scheduler's choice).
            let p = (0..2).max_by_key(|&p| pair.server.paths.get(p).unwrap().held).unwrap();
            assert!(pair.server.paths.get(p).unwrap().held > 0, "a path carries the stream");
            if told {
                pair.link_lost(p);
            } else {
                pair.blackhole(p);
            }
            lost = p;
            lost_at = Some(pair.now);
        }
        pair.tick();
        while let Some(e) = pair.server.poll_event() {
            if e == Event::PathGone(lost) {
                gone.get_or_insert(pair.now - lost_at.unwrap());
            }
        }
        pair.drain_apps();
        let got = pair.client_rx.get(&id).map_or(0, |b| b.len());
        if last.is_none_or(|(_, n)| got > n) {
            if let Some((t, _)) = last {
                longest = longest.max(pair.now - t);
            }
            last = Some((pair.now, got));
        }
        if got == chunk * chunks {
            break;
        }
    }
    assert_eq!(pair.client_rx[&id].len(), chunk * chunks, "nothing lost");
    (pair, longest, gone, lost)
}

/// A client whose link goes tells the server on the other path: the server takes the
/// path down and re-sends what it held one path delay later instead of after the
/// path's silence; a word about an older connection of the path is ignored.
#[test]
fn the_server_hears_of_a_lost_link_on_the_other_path() {
    let (_, unseen, _, _) = stream_across_a_lost_link(false);
    let (mut pair, longest, gone, p) = stream_across_a_lost_link(true);
    let gone = gone.expect("the server heard of it");
    eprintln!("longest gap: told {longest:?}, found from the silence {unseen:?}; heard after {gone:?}");
    assert!(
        gone <= Duration::from_millis(15),
        "one path delay (10 ms) and a turn: {gone:?}"
    );
    assert_eq!(pair.server.path_status(p), PathStatus::Down);
    assert!(
        longest + Duration::from_millis(80) < unseen,
        "told: {longest:?}, found from the silence: {unseen:?}"
    );

    // A new connection of the path; a late word about the old one changes nothing.
    pair.revive(p);
    for _ in 0..20 {
        pair.step();
    }
    let joins = pair.server.paths.get(p).unwrap().joins;
    assert_eq!(
        joins,
        pair.client.paths.get(p).unwrap().joins,
        "both ends count the joins"
    );
    pair.server.on_path_gone(p, joins - 1);
    assert_eq!(pair.server.path_status(p), PathStatus::Up);
    assert_eq!(pair.server.poll_event(), None);
}

/// A stream restricted to one path (its policy rule) goes only there, both ways: the
/// client's Open tells the server (with the stream's energy mode), which sends the downloads on that path too; another
/// stream still uses both.
#[test]
fn a_stream_restricted_to_a_path_uses_only_it_both_ways() {
    let mut pair = Pair::with("roundrobin", &[(10, 1000), (10, 1000)], whole_writes);
    let id = pair.client.open_stream(crate::harness::placeholder_addr());
    pair.client.set_stream_paths(id, 0b10);
    pair.client.set_stream_energy(id, Some(true));
    assert_eq!(pair.client.stream_send(id, Bytes::from(vec![1u8; 300_000])), 300_000);
    let free = pair.open(&[2u8; 1000]);
    assert_eq!(pair.client.stream_send(free, Bytes::from(vec![3u8; 300_000])), 300_000);
    for _ in 0..4000 {
        pair.step();
        if pair.server_rx.get(&id).map_or(0, Vec::len) == 300_000 {
            break;
        }
    }
    assert_eq!(pair.server_rx[&id].len(), 300_000);
    assert_eq!(pair.server.stream_allowed_paths(id), 0b10, "the Open carried the mask");
    assert_eq!(pair.server.stream_energy(id), Some(true), "and the energy mode");
    assert_eq!(pair.server.stream_send(id, Bytes::from(vec![4u8; 300_000])), 300_000);
    for _ in 0..4000 {
        pair.step();
        if pair.client_rx.get(&id).map_or(0, Vec::len) == 300_000 {
            break;
        }
    }
    assert_eq!(pair.client_rx[&id].len(), 300_000);
    let on = pair.client.stream_paths(id).expect("open").to_vec();
    assert_eq!(on[0], 0, "nothing of the stream on path 0: {on:?}");
    assert_eq!(on[1], 600_000, "{on:?}");
    let other = pair.client.stream_paths(free).expect("open").to_vec();
    assert!(other.iter().all(|&b| b > 0), "the other stream uses both: {other:?}");
}

/// A path's allowance (a data cap) bounds what each side hands it; with it spent the
/// other path carries the rest, and the server keeps to what the client granted it.
#[test]
fn allowances_bound_what_a_path_carries_each_way() {
    let mut pair = Pair::with("roundrobin", &[(10, 1000), (10, 1000)], whole_writes);
    let now = pair.now;
    pair.client.set_path_allowance(0, Some(100_000), now);
    let id = pair.open(&[1u8; 1000]);
    assert_eq!(
        pair.client.stream_send(id, Bytes::from(vec![2u8; 1_000_000])),
        1_000_000
    );
    for _ in 0..8000 {
        pair.step();
        if pair.server_rx.get(&id).map_or(0, Vec::len) == 1_001_000 {
            break;
        }
    }
    assert_eq!(pair.server_rx[&id].len(), 1_001_000);
    let up = pair.client.path_counters(0).expect("path").0.bytes_sent;
    assert!(up <= 100_000, "path 0 carried {up} > its allowance");
    assert!(up > 50_000, "path 0 carried its share until then: {up}");

    // Downloads: the server's count of path 0 may not pass what the client granted.
    let granted = pair.server.path_counters(0).expect("path").0.bytes_sent + 80_000;
    pair.client.grant_path_allowance(0, granted);
    for _ in 0..20 {
        pair.step();
    }
    assert_eq!(
        pair.server.stream_send(id, Bytes::from(vec![3u8; 1_000_000])),
        1_000_000
    );
    for _ in 0..8000 {
        pair.step();
        if pair.client_rx.get(&id).map_or(0, Vec::len) == 1_000_000 {
            break;
        }
    }
    assert_eq!(pair.client_rx[&id].len(), 1_000_000);
    let down = pair.server.path_counters(0).expect("path").0.bytes_sent;
    assert!(down <= granted, "the server sent {down} > {granted} on path 0");
}

/// A server session with path 0 up, and the first `Open` a client session with `kind`
/// set for its stream sends.
fn open_asking_for(kind: Option<SchedulerKind>) -> (Session, Frame) {
    let now = Instant::now();
    let mut server = Session::new(EngineConfig::new(Role::Server), SchedulerKind::MinRtt.build(), now);
    let mut client = Session::new(EngineConfig::new(Role::Client), SchedulerKind::MinRtt.build(), now);
    server.path_up(0, now);
    client.path_up(0, now);
    let id = client.open_stream(TargetAddr::Domain("example.org".into(), 80));
    client.set_stream_scheduler(id, kind);
    assert_eq!(client.stream_send(id, Bytes::from_static(b"hi")), 2);
    let mut out = Vec::new();
    client.poll_transmit(0, now, &mut out, 64 * 1024);
    let open = mpflex_wire::decode_all(Bytes::from(out))
        .unwrap()
        .into_iter()
        .find(|f| matches!(f, Frame::Open { .. }))
        .expect("an Open");
    (server, open)
}

/// The scheduler a client's stream runs is the one its Open asks the server for, by the
/// scheduler's wire number, and the server reads back that scheduler (or none).
#[test]
fn a_stream_asks_the_server_for_the_scheduler_it_runs() {
    for kind in SchedulerKind::ALL.map(Some).into_iter().chain([None]) {
        let (mut server, open) = open_asking_for(kind);
        let Frame::Open { scheduler, .. } = open else {
            unreachable!()
        };
        assert_eq!(scheduler, kind.map_or(0, SchedulerKind::wire), "{kind:?}");
        server.handle_frame(0, open, Instant::now()).unwrap();
        let asked = std::iter::from_fn(|| server.poll_event()).find_map(|e| match e {
            Event::StreamOpened { scheduler, .. } => Some(scheduler),
            _ => None,
        });
        assert_eq!(asked, Some(kind));
    }
}

/// A scheduler number no scheduler has is the peer's error, not a silent default.
#[test]
fn an_unknown_scheduler_number_is_a_protocol_error() {
    let (mut server, open) = open_asking_for(None);
    let Frame::Open {
        seq,
        stream,
        ts,
        paths,
        energy,
        addr,
        data,
        ..
    } = open
    else {
        unreachable!()
    };
    let open = Frame::Open {
        seq,
        stream,
        ts,
        paths,
        scheduler: 11,
        energy,
        addr,
        data,
    };
    assert_eq!(
        server.handle_frame(0, open, Instant::now()),
        Err(ProtocolError::UnknownScheduler(11))
    );
    assert_eq!(server.num_streams(), 0, "no stream was opened");
}

/// Control restated after a path change covers every stream whose reader opened its
/// window, though the server side never marked it connected (an engine user without a
/// dial to report), and still no stream whose destination is being dialled.
#[test]
fn a_read_streams_window_is_restated_without_a_connected_mark() {
    let mut pair = Pair::with("roundrobin", &[(10, 100_000)], whole_writes);
    let window = pair.server.cfg.stream_window;
    let read = pair.open(b"x");
    let waiting = pair.open(b"y");
    for _ in 0..2000 {
        // The client sends as much as its window for the stream lets it.
        pair.client.stream_send(read, Bytes::from(vec![7u8; 64 * 1024]));
        pair.step();
        if pair.server_rx.get(&read).map_or(0, Vec::len) as u64 > window {
            break;
        }
    }
    let got = pair.server_rx.get(&read).map_or(0, Vec::len);
    assert!(got as u64 > window, "the upload arrived: {got} of {}", window + 1);
    let s = &pair.server.streams[&read];
    assert!(!s.connected && s.rx_max > window, "read past its first window");
    assert!(!pair.server.streams[&waiting].connected);
    pair.server.windows_needed.clear();
    pair.server.restate_control();
    assert!(pair.server.windows_needed.contains(&read));
    assert!(
        !pair.server.windows_needed.contains(&waiting),
        "a stream never read nor connected gets no Window"
    );
}
