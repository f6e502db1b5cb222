//! Engine tests on the shared harness: a client and a server session joined by N
//! simulated paths (kernel sockets with a window, links with delay and rate) and a virtual
//! clock, with paths that die mid-transfer. Deterministic and fast; no sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpflex_engine::harness::{Pair as Sim, PathSpec};
use mpflex_engine::{
    EngineConfig, PollTransmit, RecvResult, Role, Session, StreamId, TrafficClass, MIN_SPLIT, SEQUENCE_AHEAD,
};
use mpflex_sched::{by_name, Decision, End, PathSnapshot, QueueView, Scheduler};
use mpflex_wire::{decode_all, Frame, TargetAddr, MAX_RECORD, RECORD_OVERHEAD};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Queue control off, for tests that hand the session whole writes (a window, a chunk, a
/// body) and check what it does with them: under queue control the session takes no more
/// than a second of the paths' rate ahead of them (the bound on bytes ahead of the paths),
/// which refuses such writes in part.
fn whole_writes(c: &mut EngineConfig) {
    c.queue_target = Duration::ZERO;
}

/// Opens a stream carrying `first` as far as flow control takes it.
trait OpenWith {
    /// Returns the stream and what of `first` was not taken.
    fn open_with(&mut self, addr: TargetAddr, first: Bytes) -> (StreamId, Bytes);
}

impl OpenWith for Session {
    fn open_with(&mut self, addr: TargetAddr, first: Bytes) -> (StreamId, Bytes) {
        let id = self.open_stream(addr);
        let n = self.stream_send(id, first.clone());
        (id, first.slice(n..))
    }
}

fn snapshot(id: usize, rtt_ms: u64) -> PathSnapshot {
    PathSnapshot {
        id,
        srtt: Duration::from_millis(2 * rtt_ms),
        rttvar: Duration::from_millis(rtt_ms / 2),
        cwnd: 100,
        mss: 1448,
        ..Default::default()
    }
}

fn specs(paths: &[(u64, usize)]) -> Vec<PathSpec> {
    paths.iter().map(|&p| p.into()).collect()
}

fn addr() -> TargetAddr {
    TargetAddr::Ip(SocketAddr::from(([127, 0, 0, 1], 80)))
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = StdRng::seed_from_u64(seed);
    (0..len).map(|_| r.gen()).collect()
}

/// Sends `data` from the client on a new stream and `reply` back from the server, killing
/// paths according to `kills` (time in ms, path), and checks both arrive intact.
fn transfer(sched: &str, paths: &[(u64, usize)], size: usize, kills: &[(u64, usize, bool)]) -> Sim {
    transfer_with(sched, paths, size, kills, &[])
}

fn transfer_with(
    sched: &str,
    paths: &[(u64, usize)],
    size: usize,
    kills: &[(u64, usize, bool)],
    blackholes: &[(u64, usize)],
) -> Sim {
    let mut sim = Sim::new(sched, paths);
    let up = pattern(1, size);
    let down = pattern(2, size);
    let id = sim.client.open_with(addr(), Bytes::from(up[..100].to_vec())).0;
    let (mut up_off, mut down_off) = (100usize, 0usize);
    let mut up_fin = false;
    let mut down_fin = false;
    for ms in 0..120_000u64 {
        for &(t, p) in blackholes {
            if t == ms {
                sim.blackhole(p);
            }
        }
        for &(t, p, revive) in kills {
            if t == ms {
                if revive {
                    sim.revive(p)
                } else {
                    sim.kill(p)
                }
            }
        }
        if up_off < up.len() {
            up_off += sim.client.stream_send(id, Bytes::copy_from_slice(&up[up_off..]));
        } else if !up_fin {
            sim.client.stream_finish(id);
            up_fin = true;
        }
        if sim.server_rx.contains_key(&id) {
            if down_off < down.len() {
                down_off += sim.server.stream_send(id, Bytes::copy_from_slice(&down[down_off..]));
            } else if !down_fin {
                sim.server.stream_finish(id);
                down_fin = true;
            }
        }
        sim.step();
        if sim.client_fin.get(&id) == Some(&true) && sim.server_fin.get(&id) == Some(&true) {
            break;
        }
    }
    assert_eq!(sim.server_fin.get(&id), Some(&true), "upload did not finish");
    assert_eq!(sim.client_fin.get(&id), Some(&true), "download did not finish");
    assert!(sim.server_rx[&id] == up, "upload corrupted");
    assert!(sim.client_rx[&id] == down, "download corrupted");
    assert_eq!(sim.client.num_streams(), 0, "client stream not forgotten");
    assert_eq!(sim.server.num_streams(), 0, "server stream not forgotten");
    sim
}

#[test]
fn both_directions_intact_over_two_paths() {
    for kind in mpflex_sched::SchedulerKind::ALL {
        let sched = kind.name();
        let sim = transfer(sched, &[(25, 880), (35, 1150)], 2_000_000, &[]);
        let sent: Vec<u64> = (0..2)
            .map(|p| {
                let c = sim.server.path_counters(p).unwrap().0;
                c.payload_sent + c.payload_resent
            })
            .collect();
        if kind != mpflex_sched::SchedulerKind::MinRtt {
            assert!(
                sent.iter().all(|&b| b > 100_000),
                "{sched}: a path was unused: {sent:?}"
            );
        }
    }
}

#[test]
fn path_death_loses_nothing() {
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..40 {
        let t = rng.gen_range(1..1500);
        let p = rng.gen_range(0..2);
        transfer("roundrobin", &[(10, 2000), (20, 3000)], 3_000_000, &[(t, p, false)]);
        transfer(
            "minrtt",
            &[(10, 2000), (20, 3000)],
            3_000_000,
            &[(t, p, false), (t + 300, p, true)],
        );
    }
}

#[test]
fn revived_path_carries_traffic_again() {
    let sim = transfer(
        "roundrobin",
        &[(10, 1000), (10, 1000)],
        6_000_000,
        &[(100, 1, false), (400, 1, true)],
    );
    let (c, _) = sim.server.path_counters(1).unwrap();
    assert_eq!(c.failures, 1);
    assert!(
        c.payload_sent > 1_000_000,
        "revived path carried only {} bytes",
        c.payload_sent
    );
}

#[test]
fn all_paths_die_then_one_returns() {
    transfer(
        "minrtt",
        &[(10, 1000), (30, 1000)],
        1_000_000,
        &[(50, 0, false), (60, 1, false), (900, 1, true)],
    );
}

#[test]
fn redundant_survives_any_single_path_and_counts_copies() {
    let sim = transfer("redundant", &[(10, 1000), (40, 1000)], 1_000_000, &[(200, 0, false)]);
    let resent: u64 = (0..2)
        .map(|p| sim.server.path_counters(p).unwrap().0.payload_resent)
        .sum();
    assert!(resent > 0);
}

/// Runs until each end has heard the other's session credit (its first `MaxData`, sent
/// as soon as a path is up): beyond the protocol's initial megabyte, a test's first
/// write is taken whole.
fn credit_announced(sim: &mut Sim) {
    for _ in 0..200 {
        sim.step();
    }
}

#[test]
fn many_streams_all_complete() {
    let mut sim = Sim::new("minrtt", &[(5, 5000), (15, 5000)]);
    credit_announced(&mut sim);
    let mut ids = Vec::new();
    for i in 0..1000u64 {
        let data = pattern(i, 3000 + (i as usize % 7) * 1000);
        let id = sim.client.open_with(addr(), Bytes::from(data[..1000].to_vec())).0;
        assert_eq!(
            sim.client.stream_send(id, Bytes::copy_from_slice(&data[1000..])),
            data.len() - 1000
        );
        sim.client.stream_finish(id);
        ids.push((id, data));
    }
    for _ in 0..5000 {
        sim.step();
        // Echo back whatever arrived, and finish when the client did.
        for (id, data) in &ids {
            let got = sim.server_rx.get(id).map_or(0, Vec::len);
            if sim.server_fin.get(id) == Some(&true) && got == data.len() {
                sim.server_fin.insert(*id, false);
                sim.server.stream_send(*id, Bytes::copy_from_slice(data));
                sim.server.stream_finish(*id);
            }
        }
        if ids.iter().all(|(id, _)| sim.client_fin.get(id) == Some(&true)) {
            break;
        }
    }
    for (id, data) in &ids {
        assert_eq!(&sim.server_rx[id], data, "stream {id} upload");
        assert_eq!(&sim.client_rx[id], data, "stream {id} echo");
    }
    assert_eq!(sim.client.num_streams(), 0);
    assert_eq!(sim.server.num_streams(), 0);
    assert_eq!(sim.client.buffered_frames(), 0);
}

/// A stream opened while other streams have used up the session window must not put its
/// first bytes past the window (the peer would have to drop the whole session); what does
/// not fit is handed back and goes out once credit returns.
#[test]
fn opening_a_stream_with_the_session_window_used_up_stays_within_it() {
    // The smallest session window there is: the protocol's initial credit.
    const WINDOW: u64 = mpflex_wire::INITIAL_SESSION_CREDIT;
    let mut sim = Sim::with("minrtt", &[(20, 1000)], |c| {
        whole_writes(c);
        c.session_window = WINDOW
    });
    let up_a = pattern(3, 2 * WINDOW as usize);
    let a = sim.client.open_with(addr(), Bytes::from(up_a[..1000].to_vec())).0;
    let mut off_a = 1000;
    off_a += sim.client.stream_send(a, Bytes::copy_from_slice(&up_a[off_a..]));
    assert_eq!(off_a as u64, WINDOW, "stream a fills the session window");
    assert_eq!(sim.client.send_capacity(a), 0);
    // Stream b opens with 10 KB of first bytes and no credit left.
    let up_b = pattern(4, 10_000);
    let (b, rest) = sim.client.open_with(addr(), Bytes::from(up_b.clone()));
    assert_eq!(rest.len(), up_b.len(), "nothing may be queued past the window");
    let mut off_b = up_b.len() - rest.len();
    let (mut fin_a, mut fin_b) = (false, false);
    for _ in 0..60_000 {
        if off_b < up_b.len() {
            off_b += sim.client.stream_send(b, Bytes::copy_from_slice(&up_b[off_b..]));
        } else if !fin_b {
            sim.client.stream_finish(b);
            fin_b = true;
        }
        if off_a < up_a.len() {
            off_a += sim.client.stream_send(a, Bytes::copy_from_slice(&up_a[off_a..]));
        } else if !fin_a {
            sim.client.stream_finish(a);
            fin_a = true;
        }
        // A handle_frame error (the server seeing its window overrun) panics in step().
        sim.step();
        if sim.server_fin.get(&a) == Some(&true) && sim.server_fin.get(&b) == Some(&true) {
            break;
        }
    }
    assert_eq!(sim.server_fin.get(&b), Some(&true), "stream b did not finish");
    assert_eq!(sim.server_rx[&b], up_b, "stream b");
    assert_eq!(sim.server_rx[&a], up_a, "stream a");
}

#[test]
fn slow_reader_does_not_stall_other_streams() {
    // Stream A's application never reads; stream B must still complete.
    let mut sim = Sim::with("minrtt", &[(5, 5000)], whole_writes);
    let a = sim.client.open_with(addr(), Bytes::from_static(b"a")).0;
    let b = sim.client.open_with(addr(), Bytes::from_static(b"b")).0;
    for _ in 0..50 {
        sim.step();
    }
    let window = sim.server.config().stream_window as usize;
    let big = vec![7u8; window * 3];
    let accepted = sim.server.stream_send(a, Bytes::from(big));
    assert_eq!(accepted, window, "flow control must cap a stream at its window");
    let payload = pattern(9, 500_000);
    let mut off = 0;
    for _ in 0..3000 {
        if off < payload.len() {
            off += sim.server.stream_send(b, Bytes::copy_from_slice(&payload[off..]));
        }
        // Drain only stream B on the client (A's app is stuck).
        while let Some(_ev) = sim.client.poll_event() {}
        while let RecvResult::Data(d) = sim.client.stream_recv(b, 1 << 20) {
            sim.client_rx.entry(b).or_default().extend_from_slice(&d);
        }
        sim.step_no_drain();
        if sim.client_rx.get(&b).map_or(0, Vec::len) == payload.len() {
            break;
        }
    }
    assert_eq!(sim.client_rx[&b], payload);
    // A's window keeps arriving (B's frames were interleaved with it) and waits for its
    // reader: all of it, no more.
    for _ in 0..3000 {
        if sim.client.stream_buffered(a) == window {
            break;
        }
        sim.step_no_drain();
    }
    assert_eq!(sim.client.stream_buffered(a), window);
}

#[test]
fn a_small_stream_is_not_queued_behind_a_bulk_one() {
    // One 1 MB/s path, 10 ms each way. Stream A queues its whole window (4 MB, four
    // seconds of the path); then stream B sends one 1 KB request. B must arrive within a
    // few tens of milliseconds (it waits behind at most SEQUENCE_AHEAD of A's bytes), not
    // after A's backlog.
    let mut sim = Sim::with("minrtt", &[(10, 1000)], whole_writes);
    let a = sim.client.open_with(addr(), Bytes::from_static(b"a")).0;
    for _ in 0..50 {
        sim.step();
    }
    // The Open frame carried A's first byte.
    let window = sim.client.config().stream_window as usize;
    assert_eq!(
        sim.client.stream_send(a, Bytes::from(vec![1u8; window - 1])),
        window - 1
    );
    for _ in 0..200 {
        sim.step();
    }
    let sent_at = sim.now;
    let request = pattern(3, 1000);
    let b = sim.client.open_with(addr(), Bytes::from(request.clone())).0;
    let mut arrived = None;
    for _ in 0..5000 {
        sim.step();
        if sim.server_rx.get(&b).is_some_and(|r| r.len() == request.len()) {
            arrived = Some(sim.now - sent_at);
            break;
        }
    }
    let took = arrived.expect("B's request never arrived").as_millis();
    // SEQUENCE_AHEAD at 1 MB/s, plus 10 ms of delay and the record on the link (up to 64 KB:
    // this simulation hands a path a whole record at a time).
    assert!(took < 150, "B's 1 KB took {took} ms behind A's backlog");
    assert_eq!(sim.server_rx[&b], request);
    // A is still going: most of its window had not been sent when B overtook it.
    assert!(sim.server_rx[&a].len() < window / 2, "{}", sim.server_rx[&a].len());
    // ... and all of A arrives, in order.
    for _ in 0..10_000 {
        if sim.server_rx[&a].len() == window {
            break;
        }
        sim.step();
    }
    assert_eq!(sim.server_rx[&a].len(), window);
    assert!(sim.server_rx[&a][1..].iter().all(|&x| x == 1));
}

#[test]
fn resetting_a_stream_returns_its_unsent_bytes_to_the_session_window() {
    // A queues its whole window and is reset before most of it is sent: the bytes never
    // sent leave the session's count, so a later stream can use the whole window again.
    let mut sim = Sim::with("minrtt", &[(10, 1000)], |c| {
        whole_writes(c);
        c.session_window = c.stream_window
    });
    credit_announced(&mut sim);
    let a = sim.client.open_with(addr(), Bytes::new()).0;
    let window = sim.client.config().stream_window as usize;
    assert_eq!(sim.client.stream_send(a, Bytes::from(vec![1u8; window])), window);
    for _ in 0..20 {
        sim.step();
    }
    let sent = sim.client.path_counters(0).unwrap().0.payload_sent;
    sim.client.stream_reset(a, mpflex_wire::ResetCode::App);
    for _ in 0..3000 {
        sim.step();
    }
    let b = sim.client.open_with(addr(), Bytes::new()).0;
    // What A did send (and what was sequenced, at most SEQUENCE_AHEAD beyond it) the peer
    // discarded; it returns the credit only once half the window is used, so that much
    // is still counted. Nothing else may be.
    let got = sim.client.stream_send(b, Bytes::from(vec![2u8; window])) as u64;
    assert!(
        got >= window as u64 - sent - SEQUENCE_AHEAD,
        "the reset stream's unsent bytes still count against the session: {got} of {window} ({sent} sent)"
    );
}

#[test]
fn a_stream_the_peer_resets_stops_sending_its_backlog() {
    // The server queues a whole window on A (a download); the client resets A after a few
    // steps (the application went away). Once the reset arrives, the server sends no more
    // of A than it had already sequenced: the rest of the window must not use the links.
    let mut sim = Sim::with("minrtt", &[(10, 1000)], whole_writes);
    let a = sim.client.open_with(addr(), Bytes::new()).0;
    for _ in 0..50 {
        sim.step();
    }
    let window = sim.server.config().stream_window as usize;
    let queued = sim.server.stream_send(a, Bytes::from(vec![1u8; window]));
    assert_eq!(queued, window);
    for _ in 0..20 {
        sim.step();
    }
    sim.client.stream_reset(a, mpflex_wire::ResetCode::App);
    let sent_at_reset = sim.server.path_counters(0).unwrap().0.payload_sent;
    for _ in 0..20_000 {
        sim.step();
    }
    let after = sim.server.path_counters(0).unwrap().0.payload_sent - sent_at_reset;
    // The reset takes 10 ms to arrive (10 KB at 1 MB/s), plus what was sequenced ahead.
    assert!(
        after <= 2 * SEQUENCE_AHEAD + 64 * 1024,
        "{after} bytes of a reset stream sent after the reset (window {window})"
    );
    // The dropped bytes left the session's count: a new stream gets a whole window.
    let b = sim.client.open_with(addr(), Bytes::new()).0;
    for _ in 0..50 {
        sim.step();
    }
    assert_eq!(sim.server.stream_send(b, Bytes::from(vec![2u8; window])), window);
}

#[test]
fn silent_path_is_bypassed_before_its_timeout() {
    // 4 MB over two paths; path 1 goes dark at 300 ms without any reset. Its frames must be
    // re-sent on path 0 about an RTO after it stops making progress, long before the 5 s
    // path timeout and before the next keepalive.
    let sim = transfer_with("roundrobin", &[(10, 1000), (10, 1000)], 4_000_000, &[], &[(300, 1)]);
    let elapsed = sim.now.duration_since(sim.start).as_millis();
    let c = &sim.server.path_counters(1).unwrap().0;
    assert!(c.suspicions >= 1, "path 1 never suspected");
    assert_eq!(c.failures, 0, "suspicion must come before the timeout");
    assert!(elapsed < 5000, "took {elapsed} ms");
}

/// Downloads a `size`-byte chunk (queued at once by the server, as a web object or a video
/// segment is) on a fresh stream. With `warm`, a 300 KB transfer first gives the sender
/// one-way-delay feedback. Returns the chunk's completion time (request sent to last
/// byte read, ms), payload bytes sent more than once, and when each path last delivered
/// data (ms after the request).
fn chunk(sched: &str, paths: &[(u64, usize)], size: usize, warm: bool) -> (u64, u64, Vec<u64>) {
    // The fluid model DEMS's optimum is derived in: frames wait nowhere but on the link,
    // and each path's rate and delay are known from the start.
    let ideal: Vec<PathSpec> = specs(paths).into_iter().map(PathSpec::ideal).collect();
    let mut sim = Sim::custom(|| by_name(sched).unwrap(), &ideal, whole_writes);
    let n = paths.len();
    let fetch = |sim: &mut Sim, size: usize, seed: u64| {
        let body = pattern(seed, size);
        let t0 = sim.now;
        let id = sim.client.open_with(addr(), Bytes::from_static(b"GET")).0;
        let rx = |sim: &Sim, p: usize| sim.client.path_counters(p).unwrap().0.bytes_received;
        let mut prev: Vec<u64> = (0..n).map(|p| rx(sim, p)).collect();
        let mut last = vec![0u64; n];
        let mut queued = false;
        for _ in 0..60_000 {
            if !queued && sim.server_rx.contains_key(&id) {
                assert_eq!(sim.server.stream_send(id, Bytes::from(body.clone())), size);
                sim.server.stream_finish(id);
                queued = true;
            }
            sim.step();
            for (p, l) in last.iter_mut().enumerate() {
                let now_rx = rx(sim, p);
                if now_rx > prev[p] + 1000 {
                    *l = (sim.now - t0).as_millis() as u64;
                }
                prev[p] = now_rx;
            }
            if sim.client_fin.get(&id) == Some(&true) {
                break;
            }
        }
        assert_eq!(sim.client_rx[&id], body, "{sched}: chunk corrupted");
        ((sim.now - t0).as_millis() as u64, last)
    };
    if warm {
        fetch(&mut sim, 300_000, 1);
        for _ in 0..500 {
            sim.step();
        }
    }
    let resent = |sim: &Sim| -> u64 {
        (0..n)
            .map(|p| sim.server.path_counters(p).unwrap().0.payload_resent)
            .sum()
    };
    let dup_before = resent(&sim);
    let (t, last) = fetch(&mut sim, size, 2);
    (t, resent(&sim) - dup_before, last)
}

/// The seeds' WiFi (RTT 50 ms, 7.04 Mbit/s) and LTE inflated to RTT 270 ms (9.185 Mbit/s).
const SEED_270: [(u64, usize); 2] = [(25, 880), (135, 1148)];

/// DEMS on the seeds' 50/270 ms paths: both paths finish close together at the receiver,
/// the chunk completes before MinRTT's and within 5% of the optimum — the split where both
/// paths finish together, T = (S + r₁d₁ + r₂d₂)/(r₁ + r₂) after the request's one-way
/// trip — and DEMS-F's copies stay under 10%.
#[test]
fn dems_balances_completion_and_beats_minrtt() {
    let size = 1 << 20;
    let [(d1, r1), (d2, r2)] = SEED_270;
    let optimum = d1 as f64 + (size as f64 + (r1 as u64 * d1 + r2 as u64 * d2) as f64) / (r1 + r2) as f64;
    for warm in [false, true] {
        let (t_min, _, last_min) = chunk("minrtt", &SEED_270, size, warm);
        for sched in ["dems-b", "dems-s", "dems-f"] {
            let (t, dup, last) = chunk(sched, &SEED_270, size, warm);
            println!(
                "warm={warm} {sched}: {t} ms, {dup} B resent, last arrivals {last:?}; minrtt {t_min} ms {last_min:?}"
            );
            assert!(t < t_min, "{sched} (warm={warm}): {t} ms vs minrtt {t_min} ms");
            assert!(
                (t as f64) <= 1.05 * optimum,
                "{sched} (warm={warm}): {t} ms, optimum {optimum:.0} ms"
            );
            let gap = last[0].abs_diff(last[1]);
            assert!(
                gap <= 30,
                "{sched} (warm={warm}): paths finished {gap} ms apart {last:?}"
            );
            if sched == "dems-f" {
                assert!(dup < size as u64 / 10, "dems-f resent {dup} bytes");
            }
            if sched == "dems-b" {
                assert_eq!(dup, 0, "dems-b never resends");
            }
        }
    }
}

/// Smart reinjection: a path goes dark without either side noticing while it holds part
/// of a download. The receiver's buffer fills behind the gap; at 75% of the session window
/// it asks for the missing frames, which come over the live path. Without it the download
/// waits for the path to be suspected (no sign of life for max(3 × its minimum RTT,
/// 150 ms)), which here comes later: the fast path fills a 1 MB window in about 70 ms.
#[test]
fn stalled_gap_is_resent_before_the_path_is_suspected() {
    let run = |fraction: f64| {
        let mut sim = Sim::with("roundrobin", &[(10, 12_000), (10, 4000)], |c| {
            c.session_window = 1 << 20;
            c.stall_fraction = fraction;
        });
        let body = pattern(5, 8 << 20);
        let id = sim.client.open_with(addr(), Bytes::from_static(b"GET")).0;
        let mut off = 0;
        let t0 = sim.now;
        for ms in 0..20_000u64 {
            if ms == 300 {
                sim.blackhole(1);
            }
            if sim.server_rx.contains_key(&id) && off < body.len() {
                off += sim.server.stream_send(id, Bytes::copy_from_slice(&body[off..]));
                if off == body.len() {
                    sim.server.stream_finish(id);
                }
            }
            sim.step();
            if sim.client_fin.get(&id) == Some(&true) {
                break;
            }
        }
        assert_eq!(sim.client_rx[&id], body);
        let stalls: u64 = (0..2)
            .map(|p| sim.server.path_counters(p).unwrap().0.stall_reinjections)
            .sum();
        ((sim.now - t0).as_millis() as u64, stalls)
    };
    let (with, stalls) = run(0.75);
    let (without, none) = run(2.0);
    println!("smart reinjection: {with} ms ({stalls} gaps re-sent); without: {without} ms");
    assert!(stalls > 0 && none == 0);
    assert!(
        with <= without + 20,
        "{with} ms with smart reinjection, {without} ms without"
    );
    // 8 MB at 16 MB/s, a dark path at 300 ms: suspicion within
    // about 200 ms of it.
    assert!(without < 1200, "suspicion took too long: {without} ms");
}

/// Arrival reports act as selective acks: when a path dies, frames the peer reported as
/// received are not sent again, though the cumulative ack cannot cover them (an earlier
/// frame is still in flight on the other path).
#[test]
fn reported_frames_are_not_resent_when_their_path_dies() {
    let now = Instant::now();
    let cfg = |role| {
        let mut c = EngineConfig::new(role);
        whole_writes(&mut c);
        c
    };
    let mut client = Session::new(cfg(Role::Client), by_name("minrtt").unwrap(), now);
    let mut server = Session::new(cfg(Role::Server), by_name("minrtt").unwrap(), now);
    for s in [&mut client, &mut server] {
        for (p, rtt) in [(0, 10), (1, 20)] {
            s.path_up(p, now);
            s.set_path_stats(p, snapshot(p, rtt), now);
            s.set_path_ready(p, true);
        }
    }
    let deliver = |from: &mut Session, p: usize, to: &mut Session, max: usize| {
        let mut buf = Vec::new();
        if let PollTransmit::Sent(_) = from.poll_transmit(p, now, &mut buf, max) {
            for f in decode_all(Bytes::from(buf)).unwrap() {
                to.handle_frame(p, f, now).unwrap();
            }
        }
    };
    let id = client.open_with(addr(), Bytes::from_static(b"GET")).0;
    deliver(&mut client, 0, &mut server, MAX_RECORD);
    while server.poll_event().is_some() {}
    let body = pattern(3, 6 * 16_384);
    assert_eq!(server.stream_send(id, Bytes::from(body)), 6 * 16_384);
    // The first data frame goes on path 0 and stays in flight there.
    let mut first = Vec::new();
    assert!(matches!(
        server.poll_transmit(0, now, &mut first, 16_500),
        PollTransmit::Sent(_)
    ));
    // The other five go on path 1 and arrive; the client reports them.
    server.set_path_ready(0, false);
    for _ in 0..5 {
        deliver(&mut server, 1, &mut client, MAX_RECORD);
    }
    assert_eq!(client.reorder_frames(), 5);
    deliver(&mut client, 1, &mut server, MAX_RECORD);
    // Path 1 dies. Only frames the client did not report would need another copy: none.
    server.path_down(1);
    server.set_path_ready(0, true);
    let mut out = Vec::new();
    let _ = server.poll_transmit(0, now, &mut out, MAX_RECORD);
    let resent = server.path_counters(0).unwrap().0.payload_resent;
    assert_eq!(resent, 0, "frames the client reported were sent again");
    // The frame in flight on path 0 completes the download.
    for f in decode_all(Bytes::from(first)).unwrap() {
        client.handle_frame(0, f, now).unwrap();
    }
    assert_eq!(client.reorder_frames(), 0);
    let mut got = 0;
    while let RecvResult::Data(b) = client.stream_recv(id, 1 << 20) {
        got += b.len();
    }
    assert_eq!(got, 6 * 16_384);
}

/// Path 1 carries every new frame; path 0 only re-sends what path 1 holds, with or without
/// `sooner_only`.
struct CopyOnPathZero {
    sooner_only: bool,
}

impl Scheduler for CopyOnPathZero {
    fn name(&self) -> &'static str {
        "copy-on-path-zero"
    }

    fn reinjects(&self) -> bool {
        true
    }

    fn decide(&mut self, _: Instant, path: usize, _: &[PathSnapshot], q: &QueueView, budget: usize) -> Decision {
        match (path, q.bytes) {
            (1, 1..) => Decision::head(budget),
            (0, 0) => Decision::Reinject {
                end: End::Head,
                max_bytes: budget,
                max_age: None,
                sooner_only: self.sooner_only,
            },
            _ => Decision::Wait { until: None },
        }
    }
}

/// `sooner_only` copies a frame only when the copy would arrive first: over a path 10 ms
/// away, copies of what a 100 ms path carries arrive first and the download takes about
/// the fast path's time; over the 100 ms path, copies of what the 10 ms path carries would
/// arrive later, and none is sent (without the filter, half the download is).
#[test]
fn reinjection_copies_only_frames_the_copy_brings_sooner() {
    let run = |paths: [(u64, usize); 2], sooner_only: bool| {
        // The fluid model: the test's bound assumes frames wait nowhere but on the link.
        let ideal: Vec<PathSpec> = specs(&paths).into_iter().map(PathSpec::ideal).collect();
        let mut sim = Sim::custom(|| Box::new(CopyOnPathZero { sooner_only }), &ideal, whole_writes);
        let size = 400_000;
        let body = pattern(7, size);
        // A first transfer gives both paths delay estimates (path 0 from its copies, all
        // made then: without estimates every frame counts as sooner); the second counts.
        let mut times = Vec::new();
        let mut resent = 0;
        for round in 0..2 {
            resent = sim.server.path_counters(0).unwrap().0.payload_resent;
            let t0 = sim.now;
            let id = sim.client.open_with(addr(), Bytes::from_static(b"GET")).0;
            let mut queued = false;
            for _ in 0..20_000 {
                if !queued && sim.server_rx.contains_key(&id) {
                    sim.server.stream_send(id, Bytes::from(body.clone()));
                    sim.server.stream_finish(id);
                    queued = true;
                }
                sim.step();
                if sim.client_fin.get(&id) == Some(&true) {
                    break;
                }
            }
            assert_eq!(sim.client_rx[&id], body, "round {round}: corrupted");
            times.push((sim.now - t0).as_millis() as u64);
            for _ in 0..300 {
                sim.step();
            }
        }
        (times, sim.server.path_counters(0).unwrap().0.payload_resent - resent)
    };
    let slow_copier = [(100, 1000), (10, 1000)];
    let (t, resent) = run(slow_copier, true);
    println!("copier 100 ms, sooner only: {t:?} ms, {resent} B resent");
    assert_eq!(resent, 0, "copies that would arrive later were sent");
    let (_, all) = run(slow_copier, false);
    println!("copier 100 ms, every frame: {all} B resent");
    assert!(all > 100_000, "without the filter, copies are sent: {all}");
    let fast_copier = [(10, 1000), (100, 1000)];
    let (t, resent) = run(fast_copier, true);
    println!("copier 10 ms, sooner only: {t:?} ms, {resent} B resent");
    assert!(resent > 50_000, "copies that arrive sooner were not sent: {resent}");
    // Path 0 copies only once path 1 has taken the whole queue, near the end: the 100 ms
    // path alone takes 10 + 400 + 100 ms plus the request's way.
    assert!(t[1] < 500, "second transfer took {} ms", t[1]);
}

/// What the engine hands a path counts as unsent in that path's snapshot until the driver
/// reports the socket again: a decision on another path in the meantime must not take the
/// path for an empty one on statistics from before the hand-over.
#[test]
fn handed_bytes_count_as_unsent_until_the_next_report() {
    let now = Instant::now();
    let mut s = Session::new(EngineConfig::new(Role::Client), by_name("minrtt").unwrap(), now);
    s.path_up(0, now);
    s.set_path_stats(0, snapshot(0, 10), now);
    s.set_path_ready(0, true);
    s.open_with(addr(), Bytes::from(pattern(3, 40_000)));
    let mut buf = Vec::new();
    let PollTransmit::Sent(n) = s.poll_transmit(0, now, &mut buf, MAX_RECORD) else {
        panic!("nothing sent");
    };
    assert!(n > 30_000, "{n}");
    assert_eq!(s.path_counters(0).unwrap().1.notsent as usize, n + RECORD_OVERHEAD);
    s.set_path_stats(0, snapshot(0, 10), now);
    assert_eq!(s.path_counters(0).unwrap().1.notsent, 0);
}

/// Path 0 takes the queue from its head and path 1 from its tail, `limit` bytes a decision
/// (as a window-gated scheduler asks when a path has that much window room).
struct TwoEnds {
    limit: usize,
}

impl Scheduler for TwoEnds {
    fn name(&self) -> &'static str {
        "two-ends"
    }

    fn decide(&mut self, _: Instant, path: usize, _: &[PathSnapshot], q: &QueueView, _: usize) -> Decision {
        if q.bytes == 0 {
            return Decision::Wait { until: None };
        }
        Decision::Send {
            end: if path == 0 { End::Head } else { End::Tail },
            max_bytes: self.limit,
            duplicate: false,
            exact: true,
        }
    }
}

/// A decision's limit covers the whole record on the wire (control frames and the record's
/// overhead included), and a frame larger than what is left is split to the byte rather
/// than sent whole (bytes beyond a path's window wait a round trip in its socket); both
/// parts keep the frame's sequence numbers, so the receiver reassembles the stream
/// whatever order the parts arrive in, and its acknowledgements cover exactly what was
/// sent.
#[test]
fn frames_are_split_to_a_decisions_limit() {
    let now = Instant::now();
    let limit = 5000;
    let mut client = Session::new(EngineConfig::new(Role::Client), by_name("minrtt").unwrap(), now);
    let mut server = Session::new(EngineConfig::new(Role::Server), Box::new(TwoEnds { limit }), now);
    for s in [&mut client, &mut server] {
        for p in 0..2 {
            s.path_up(p, now);
            s.set_path_stats(p, snapshot(p, 10), now);
            s.set_path_ready(p, true);
        }
    }
    let id = client.open_with(addr(), Bytes::from_static(b"GET")).0;
    let mut buf = Vec::new();
    assert!(matches!(
        client.poll_transmit(0, now, &mut buf, MAX_RECORD),
        PollTransmit::Sent(_)
    ));
    for f in decode_all(Bytes::from(buf)).unwrap() {
        server.handle_frame(0, f, now).unwrap();
    }
    while server.poll_event().is_some() {}
    // Three full frames and a short one, as bulk (a response this small would otherwise
    // be interactive and go before any scheduler's decision).
    server.set_stream_class(id, Some(TrafficClass::Bulk));
    let size = 3 * 16_384 + 100;
    let body = pattern(11, size);
    assert_eq!(server.stream_send(id, Bytes::from(body.clone())), size);
    server.stream_finish(id);
    let mut records: [Vec<Bytes>; 2] = [Vec::new(), Vec::new()];
    let mut idle = 0;
    while idle < 2 {
        idle = 0;
        for (p, got) in records.iter_mut().enumerate() {
            let mut out = Vec::new();
            match server.poll_transmit(p, now, &mut out, MAX_RECORD) {
                PollTransmit::Sent(_) => got.push(Bytes::from(out)),
                _ => idle += 1,
            }
        }
    }
    // What each record takes on the wire: its frames (acknowledgements may ride in front
    // of the data) and the record's own overhead.
    let lens: Vec<Vec<usize>> = records
        .iter()
        .map(|r| r.iter().map(|b| b.len() + RECORD_OVERHEAD).collect())
        .collect();
    println!("record bytes on the wire, per path: {lens:?}");
    // Every record within the limit, most exactly at it; no part below MIN_SPLIT.
    let all: Vec<usize> = lens.concat();
    assert!(all.iter().all(|&n| n <= limit), "{lens:?}");
    assert!(all.iter().filter(|&&n| n == limit).count() >= 6, "{lens:?}");
    assert!(!records[1].is_empty(), "the tail end sent nothing");
    // The tail's records arrive first, then the head's.
    let mut frames = 0;
    for r in records[1].iter().chain(records[0].iter()) {
        for f in decode_all(r.clone()).unwrap() {
            if let Frame::Data { data, .. } = &f {
                frames += 1;
                assert!(
                    data.len() >= MIN_SPLIT || data.len() == 100,
                    "a {} byte part",
                    data.len()
                );
            }
            client.handle_frame(0, f, now).unwrap();
        }
    }
    assert!(frames > 4, "nothing was split: {frames} frames");
    assert_eq!(client.reorder_frames(), 0);
    let mut got = Vec::new();
    while let RecvResult::Data(b) = client.stream_recv(id, 1 << 20) {
        got.extend_from_slice(&b);
    }
    assert_eq!(got, body);
    // The client's cumulative acknowledgement covers everything, and nothing beyond it.
    let mut acks = Vec::new();
    let _ = client.poll_transmit(0, now, &mut acks, MAX_RECORD);
    for f in decode_all(Bytes::from(acks)).unwrap() {
        server.handle_frame(0, f, now).unwrap();
    }
}

#[test]
fn held_bytes_follow_the_data_from_queue_to_reader() {
    // What `held_bytes` reports is what the process keeps in memory for the session: the
    // sender's queue until the peer acknowledges it, then the receiver's buffer until its
    // application reads.
    const WINDOW: usize = 1 << 20;
    let mut sim = Sim::with("minrtt", &[(10, 5000), (20, 5000)], |c| {
        whole_writes(c);
        c.stream_window = WINDOW as u64;
        c.session_window = 2 * WINDOW as u64;
    });
    let a = sim.client.open_with(addr(), Bytes::from_static(b"a")).0;
    for _ in 0..50 {
        sim.step();
    }
    assert_eq!(sim.client.held_bytes(), (0, 0));
    assert_eq!(sim.server.held_bytes(), (0, 0));
    assert_eq!(sim.server.stream_send(a, Bytes::from(vec![3u8; 3 * WINDOW])), WINDOW);
    let (queued, _) = sim.server.held_bytes();
    // Payload plus at most a frame header per 16 KB frame.
    assert!(
        (WINDOW as u64..WINDOW as u64 + 64 * 64).contains(&queued),
        "held {queued} after queueing {WINDOW}"
    );
    for _ in 0..2000 {
        sim.step_no_drain();
        if sim.server.held_bytes().0 == 0 {
            break;
        }
    }
    assert_eq!(
        sim.server.held_bytes(),
        (0, 0),
        "acknowledged data still held by the sender"
    );
    assert_eq!(
        sim.client.held_bytes(),
        (0, WINDOW as u64),
        "the unread window is held by the receiver"
    );
    sim.step();
    assert_eq!(sim.client.held_bytes(), (0, 0), "read data still held");
    assert_eq!(sim.client_rx[&a].len(), WINDOW);
}

#[test]
fn a_stream_is_not_held_behind_another_streams_frames_on_a_slow_path() {
    // Paths of 10 ms and 300 ms each way, 1 MB/s each. Stream A uploads at the two paths'
    // capacity for 400 ms, then pauses: its last 300 ms of frames on the slow path are
    // still crossing it. Stream B opens with a 1 KB request and sends four more messages:
    // each must reach the server's application as fast as the 10 ms path carries it, not
    // after A's frames before it in the session's order (up to 300 ms later).
    let mut sim = Sim::new("minrtt", &[(10, 1000), (300, 1000)]);
    let a = sim.client.open_with(addr(), Bytes::from_static(b"a")).0;
    let bulk = pattern(4, 800_000);
    let mut off = 0;
    for _ in 0..400 {
        let n = (bulk.len() - off).min(2000);
        off += sim.client.stream_send(a, Bytes::copy_from_slice(&bulk[off..off + n]));
        sim.step();
    }
    assert_eq!(off, bulk.len());
    // A pauses: the fast path's socket sends what late binding had left unsent in it (up
    // to its low-water mark, about 10 ms of its rate), while A's frames on the slow path
    // are still crossing it. (A B written before that finds the fast path full, and
    // MinRTT, which does not wait for a faster path, sends it over the 300 ms one.)
    for _ in 0..100 {
        if sim.socket(0, true).info(sim.now).notsent_bytes == 0 {
            break;
        }
        sim.step();
    }
    assert_eq!(sim.socket(0, true).info(sim.now).notsent_bytes, 0);
    let before = sim.server.early_delivered();
    let b = sim.client.open_with(addr(), Bytes::from(pattern(5, 1000))).0;
    let mut took = Vec::new();
    let mut want = 1000;
    for i in 0..5 {
        if i > 0 {
            want += 100;
            assert_eq!(sim.client.stream_send(b, Bytes::from(vec![i as u8; 100])), 100);
        }
        let sent_at = sim.now;
        for _ in 0..1000 {
            sim.step();
            if sim.server_rx.get(&b).is_some_and(|r| r.len() == want) {
                break;
            }
        }
        assert_eq!(
            sim.server_rx.get(&b).map_or(0, Vec::len),
            want,
            "message {i} never arrived"
        );
        took.push((sim.now - sent_at).as_millis());
    }
    assert!(took.iter().all(|&t| t < 50), "B's messages took {took:?} ms");
    assert!(
        sim.server.early_delivered() > before,
        "nothing was delivered ahead of the session order"
    );
    // A's tail was still crossing the slow path meanwhile; all of it arrives, in order.
    assert!(
        sim.server_rx[&a].len() < bulk.len() + 1,
        "A had already arrived: the test shows nothing"
    );
    for _ in 0..2000 {
        sim.step();
        if sim.server_rx[&a].len() == bulk.len() + 1 {
            break;
        }
    }
    assert_eq!(&sim.server_rx[&a][1..], &bulk[..]);
}
