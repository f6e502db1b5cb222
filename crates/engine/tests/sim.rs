//! A client and a server session joined by N simulated paths with a virtual clock:
//! per-direction delay, rate and loss-free FIFO delivery (the path is a TCP connection),
//! and paths that die mid-transfer. Deterministic and fast; no sockets.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpflex_engine::{EngineConfig, Event, PollTransmit, RecvResult, Role, Session};
use mpflex_sched::{by_name, PathSnapshot};
use mpflex_wire::{decode_all, TargetAddr, MAX_RECORD};
use rand::{rngs::StdRng, Rng, SeedableRng};

struct Link {
    delay: Duration,
    /// Bytes per millisecond.
    rate: usize,
    /// Records in flight: (arrival time, bytes).
    queue: VecDeque<(Instant, Vec<u8>)>,
    busy_until: Instant,
    up: bool,
}

struct Sim {
    start: Instant,
    now: Instant,
    client: Session,
    server: Session,
    /// links[path][0] = client->server, [1] = server->client.
    links: Vec<[Link; 2]>,
    /// Bytes each side's applications received, per stream.
    client_rx: HashMap<u32, Vec<u8>>,
    server_rx: HashMap<u32, Vec<u8>>,
    client_fin: HashMap<u32, bool>,
    server_fin: HashMap<u32, bool>,
}

impl Sim {
    fn new(sched: &str, paths: &[(u64, usize)]) -> Sim {
        let now = Instant::now();
        let mut client = Session::new(EngineConfig::new(Role::Client), by_name(sched).unwrap(), now);
        let mut server = Session::new(EngineConfig::new(Role::Server), by_name(sched).unwrap(), now);
        let mut links = Vec::new();
        for (i, &(delay_ms, rate)) in paths.iter().enumerate() {
            let mk = || Link {
                delay: Duration::from_millis(delay_ms),
                rate,
                queue: VecDeque::new(),
                busy_until: now,
                up: true,
            };
            links.push([mk(), mk()]);
            for s in [&mut client, &mut server] {
                s.path_up(i, now);
                s.set_path_stats(i, snapshot(i, delay_ms));
            }
        }
        Sim {
            start: now,
            now,
            client,
            server,
            links,
            client_rx: HashMap::new(),
            server_rx: HashMap::new(),
            client_fin: HashMap::new(),
            server_fin: HashMap::new(),
        }
    }

    fn kill(&mut self, path: usize) {
        for l in &mut self.links[path] {
            l.up = false;
            l.queue.clear();
        }
        self.client.path_down(path);
        self.server.path_down(path);
    }

    /// The path stops delivering anything, but neither side is told (a link that went
    /// dark without a reset).
    fn blackhole(&mut self, path: usize) {
        for l in &mut self.links[path] {
            l.up = false;
            l.queue.clear();
        }
    }

    fn revive(&mut self, path: usize) {
        for l in &mut self.links[path] {
            l.up = true;
            l.busy_until = self.now;
        }
        self.client.path_up(path, self.now);
        self.server.path_up(path, self.now);
    }

    /// One millisecond of virtual time; the applications read everything.
    fn step(&mut self) {
        self.tick();
        self.drain_apps();
    }

    /// One millisecond of virtual time; the client's applications read nothing.
    fn step_no_drain(&mut self) {
        self.tick();
        while self.server.poll_event().is_some() {}
    }

    fn tick(&mut self) {
        self.now += Duration::from_millis(1);
        let now = self.now;
        for dir in 0..2 {
            for p in 0..self.links.len() {
                // Transmit while the link's serialisation queue is short (late binding).
                let (sess, _) = if dir == 0 {
                    (&mut self.client, &mut self.server)
                } else {
                    (&mut self.server, &mut self.client)
                };
                loop {
                    let link = &self.links[p][dir];
                    if !link.up || link.busy_until > now + Duration::from_millis(2) {
                        sess.set_path_ready(p, false);
                        break;
                    }
                    sess.set_path_ready(p, true);
                    let mut buf = Vec::new();
                    match sess.poll_transmit(p, now, &mut buf, MAX_RECORD) {
                        PollTransmit::Sent(n) => {
                            let link = &mut self.links[p][dir];
                            let start = link.busy_until.max(now);
                            let ser = Duration::from_micros((n as u64 * 1000) / link.rate as u64);
                            link.busy_until = start + ser;
                            link.queue.push_back((link.busy_until + link.delay, buf));
                        }
                        PollTransmit::Wait { .. } => break,
                    }
                }
            }
            // Deliver arrivals.
            for p in 0..self.links.len() {
                while let Some((t, _)) = self.links[p][dir].queue.front() {
                    if *t > now {
                        break;
                    }
                    let (_, rec) = self.links[p][dir].queue.pop_front().unwrap();
                    let rx = if dir == 0 { &mut self.server } else { &mut self.client };
                    for f in decode_all(Bytes::from(rec)).unwrap() {
                        rx.handle_frame(p, f, now).unwrap();
                    }
                }
            }
        }
        for s in [&mut self.client, &mut self.server] {
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
        }
    }

    fn drain_apps(&mut self) {
        for (sess, rx, fin) in [
            (&mut self.client, &mut self.client_rx, &mut self.client_fin),
            (&mut self.server, &mut self.server_rx, &mut self.server_fin),
        ] {
            while let Some(ev) = sess.poll_event() {
                if let Event::StreamOpened { stream, .. } = ev {
                    rx.entry(stream).or_default();
                }
            }
            for id in sess.stream_ids() {
                loop {
                    match sess.stream_recv(id, 1 << 20) {
                        RecvResult::Data(b) => rx.entry(id).or_default().extend_from_slice(&b),
                        RecvResult::Fin => {
                            fin.insert(id, true);
                        }
                        RecvResult::Blocked | RecvResult::Gone => break,
                    }
                }
            }
        }
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
    let now = sim.now;
    let id = sim.client.open_stream(addr(), Bytes::from(up[..100].to_vec()), now);
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
        let now = sim.now;
        if up_off < up.len() {
            up_off += sim.client.stream_send(id, Bytes::copy_from_slice(&up[up_off..]), now);
        } else if !up_fin {
            sim.client.stream_finish(id);
            up_fin = true;
        }
        if sim.server_rx.contains_key(&id) {
            if down_off < down.len() {
                down_off += sim
                    .server
                    .stream_send(id, Bytes::copy_from_slice(&down[down_off..]), now);
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
    for sched in mpflex_sched::NAMES {
        let sim = transfer(sched, &[(25, 880), (35, 1150)], 2_000_000, &[]);
        let sent: Vec<u64> = (0..2)
            .map(|p| {
                let c = sim.server.path_counters(p).unwrap().0;
                c.payload_sent + c.payload_resent
            })
            .collect();
        if *sched != "minrtt" {
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

#[test]
fn many_streams_all_complete() {
    let mut sim = Sim::new("minrtt", &[(5, 5000), (15, 5000)]);
    let now = sim.now;
    let mut ids = Vec::new();
    for i in 0..1000u64 {
        let data = pattern(i, 3000 + (i as usize % 7) * 1000);
        let id = sim.client.open_stream(addr(), Bytes::from(data[..1000].to_vec()), now);
        assert_eq!(
            sim.client.stream_send(id, Bytes::copy_from_slice(&data[1000..]), now),
            data.len() - 1000
        );
        sim.client.stream_finish(id);
        ids.push((id, data));
    }
    for _ in 0..5000 {
        sim.step();
        // Echo back whatever arrived, and finish when the client did.
        let now = sim.now;
        for (id, data) in &ids {
            let got = sim.server_rx.get(id).map_or(0, Vec::len);
            if sim.server_fin.get(id) == Some(&true) && got == data.len() {
                sim.server_fin.insert(*id, false);
                sim.server.stream_send(*id, Bytes::copy_from_slice(data), now);
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

#[test]
fn slow_reader_does_not_stall_other_streams() {
    // Stream A's application never reads; stream B must still complete.
    let mut sim = Sim::new("minrtt", &[(5, 5000)]);
    let now = sim.now;
    let a = sim.client.open_stream(addr(), Bytes::from_static(b"a"), now);
    let b = sim.client.open_stream(addr(), Bytes::from_static(b"b"), now);
    for _ in 0..50 {
        sim.step();
    }
    let window = sim.server.config().stream_window as usize;
    let big = vec![7u8; window * 3];
    let accepted = sim.server.stream_send(a, Bytes::from(big), sim.now);
    assert_eq!(accepted, window, "flow control must cap a stream at its window");
    let payload = pattern(9, 500_000);
    let mut off = 0;
    for _ in 0..3000 {
        let now = sim.now;
        if off < payload.len() {
            off += sim.server.stream_send(b, Bytes::copy_from_slice(&payload[off..]), now);
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
    assert_eq!(sim.client.stream_buffered(a), window);
}

#[test]
fn silent_path_is_bypassed_before_its_timeout() {
    // 4 MB over two paths; path 1 goes dark at 300 ms without any reset. Its frames must be
    // re-sent on path 0 after about a keepalive, long before the 5 s path timeout.
    let sim = transfer_with("roundrobin", &[(10, 1000), (10, 1000)], 4_000_000, &[], &[(300, 1)]);
    let elapsed = sim.now.duration_since(sim.start).as_millis();
    let c = &sim.server.path_counters(1).unwrap().0;
    assert!(c.suspicions >= 1, "path 1 never suspected");
    assert_eq!(c.failures, 0, "suspicion must come before the timeout");
    assert!(elapsed < 5000, "took {elapsed} ms");
}
