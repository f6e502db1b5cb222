//! Many servers behind HAProxy (deploy/haproxy/, the configuration the repository ships):
//! every path of a session reaches the server that holds it; sessions spread evenly; a
//! server that dies or is drained loses its clients to the others within seconds, and
//! the others' clients see nothing; bad preambles are closed and counted; a routing
//! preamble gets no one into another client's session.

mod pool;
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use pool::*;
use support::in_ns;

/// 300 sessions of two paths each, through the balancer to three servers: each session
/// has both paths on one server, and each server holds the mean ± 20 %.
#[test]
fn every_path_of_a_session_reaches_its_server_and_sessions_spread_evenly() {
    let test = "every_path_of_a_session_reaches_its_server_and_sessions_spread_evenly";
    if !ready(test) {
        return;
    }
    const N: usize = 300;
    let pool = Pool::new(0, "");
    let started = Instant::now();
    let _sessions = run_sessions(&pool.topo.client_ns, &pool.client_toml(Via::Balancer, 0, 0), N);
    let deadline = Instant::now() + Duration::from_secs(40);
    let placed = loop {
        let p = pool.placement();
        let whole: usize = p.iter().map(|l| l.iter().filter(|(_, up)| *up == 2).count()).sum();
        if whole == N || Instant::now() > deadline {
            break p;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let counts: Vec<usize> = placed.iter().map(Vec::len).collect();
    eprintln!(
        "{N} sessions placed in {:.1} s; per server {counts:?}",
        started.elapsed().as_secs_f64()
    );
    // Every session whole on one server: N entries in all, each with both paths (a split
    // session would show as two entries of one path each, on two servers).
    let all: Vec<&(String, usize)> = placed.iter().flatten().collect();
    assert_eq!(all.len(), N, "sessions held by the servers: {counts:?}");
    let split: Vec<_> = all.iter().filter(|(_, up)| *up != 2).collect();
    assert!(
        split.is_empty(),
        "sessions without both paths on their server: {split:?}"
    );
    let mut ids: Vec<&str> = all.iter().map(|(s, _)| s.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), N, "a session appears on two servers");
    let mean = N as f64 / SERVERS as f64;
    for (i, &c) in counts.iter().enumerate() {
        let off = (c as f64 - mean).abs() / mean;
        assert!(
            off <= 0.2,
            "server {} holds {c} sessions, {:.0} % off the mean {mean:.0}",
            i + 1,
            off * 100.0
        );
    }
}

/// Client processes spread over the servers; one server is killed in the middle of a
/// transfer. Its clients carry a new transfer through another server within 3 s (the
/// transfer it cut is reset); the other clients, transferring all along, see no error.
#[test]
fn a_dead_servers_clients_move_to_another_within_3s_and_the_others_see_nothing() {
    let test = "a_dead_servers_clients_move_to_another_within_3s_and_the_others_see_nothing";
    if !ready(test) {
        return;
    }
    let mut pool = Pool::new(0, "");
    let clients: Vec<(u16, u16)> = (0..3).map(|i| (1101 + i, 9101 + i)).collect();
    for (i, &(socks, status)) in clients.iter().enumerate() {
        let t = pool.client_toml(Via::Balancer, socks, status);
        pool.spawn_client(&format!("client{i}"), &t);
        // One at a time, so least-connections sees each one's first path.
        pool.wait_placed(status, Duration::from_secs(10));
    }
    let placed: Vec<u16> = clients.iter().map(|&(_, st)| pool.server_of(st).unwrap()).collect();
    eprintln!("clients on servers {placed:?}");
    let victim = placed[0];
    let others: Vec<(u16, u16)> = clients
        .iter()
        .zip(&placed)
        .filter(|(_, &s)| s != victim)
        .map(|(c, _)| *c)
        .collect();
    assert!(
        !others.is_empty(),
        "least connections put every client on server {victim}"
    );
    let ns = pool.topo.client_ns.clone();

    // The other clients transfer without pause from before the kill to after the move.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let background: Vec<_> = others
        .iter()
        .map(|&(socks, _)| {
            let (ns, stop) = (ns.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut ok, mut errors) = (0, Vec::new());
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match fetch(&ns, socks, 1 << 20, Duration::from_secs(10)) {
                        Ok(_) => ok += 1,
                        Err(e) => errors.push(e),
                    }
                }
                (ok, errors)
            })
        })
        .collect();
    // A long transfer through the victim's client, cut by the kill.
    let victim_socks = clients[0].0;
    let cut = {
        let ns = ns.clone();
        std::thread::spawn(move || fetch(&ns, victim_socks, 1 << 30, Duration::from_secs(10)))
    };
    std::thread::sleep(Duration::from_millis(700));
    let mut dead = pool.signal_server(victim, libc::SIGKILL);
    let killed = Instant::now();
    let _ = dead.wait();
    let mut attempts = 0;
    let moved_after = loop {
        attempts += 1;
        if fetch(&ns, victim_socks, 64 * 1024, Duration::from_secs(2)).is_ok() {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "the victim's client carries nothing 10 s after the kill"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Some more time with the other clients transferring, after the move.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let cut = cut.join().unwrap();
    let now_on = pool.wait_placed(clients[0].1, Duration::from_secs(5));
    eprintln!(
        "server {victim} killed: its client carried a new transfer after {:.0} ms ({attempts} attempts), \
         now on server {now_on}; the cut transfer: {cut:?}",
        moved_after.as_secs_f64() * 1000.0
    );
    assert_ne!(now_on, victim);
    assert!(
        cut.is_err(),
        "the transfer through the dead server cannot have completed"
    );
    assert!(
        moved_after <= Duration::from_secs(3),
        "new transfers only after {moved_after:?}"
    );
    for (t, (socks, _)) in background.into_iter().zip(&others) {
        let (ok, errors) = t.join().unwrap();
        eprintln!(
            "client :{socks} (another server): {ok} transfers, {} errors",
            errors.len()
        );
        assert!(ok > 0, "client :{socks} transferred nothing");
        assert!(
            errors.is_empty(),
            "client :{socks} of another server saw errors: {errors:?}"
        );
    }
    let log = pool.log("client0");
    assert!(log.contains("opening a new session on another server"), "{log}");
}

/// SIGTERM with a grace period: the server takes no new path, lets the open transfer
/// finish, closes its sessions and exits 0; its client moves to another server at once.
#[test]
fn a_drained_server_finishes_open_streams_then_its_clients_move() {
    let test = "a_drained_server_finishes_open_streams_then_its_clients_move";
    if !ready(test) {
        return;
    }
    // 100 Mbit/s per link: a 16 MB transfer takes about 0.7 s.
    let mut pool = Pool::new(100, "drain_grace_secs = 10");
    let (socks, status) = (1201, 9201);
    let t = pool.client_toml(Via::Balancer, socks, status);
    pool.spawn_client("client", &t);
    let first = pool.wait_placed(status, Duration::from_secs(10));
    let ns = pool.topo.client_ns.clone();
    let transfer = std::thread::spawn(move || fetch(&ns, socks, 16 << 20, Duration::from_secs(20)));
    std::thread::sleep(Duration::from_millis(200));
    let mut drained = pool.signal_server(first, libc::SIGTERM);
    let t0 = Instant::now();
    let got = transfer.join().unwrap();
    assert_eq!(
        got,
        Ok(16 << 20),
        "the open transfer did not finish during the grace period"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let status_code = loop {
        if let Some(s) = drained.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "drained server still running 5 s after its last stream"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let exited = t0.elapsed();
    assert!(status_code.success(), "drained server exit status {status_code}");
    let log = pool.log(&format!("server{first}"));
    assert!(log.contains("drained: no stream open"), "{log}");
    // The client moved on the server's word (a Close), not after refusals.
    let moved = Instant::now();
    let mut ok = false;
    while moved.elapsed() < Duration::from_secs(3) && !ok {
        ok = fetch(&pool.topo.client_ns, socks, 64 * 1024, Duration::from_secs(2)).is_ok();
        if !ok {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(ok, "no transfer through another server within 3 s of the drain");
    let now_on = pool.wait_placed(status, Duration::from_secs(5));
    assert_ne!(now_on, first);
    let clog = pool.log("client");
    assert!(clog.contains("the server is going away (drained)"), "{clog}");
    eprintln!(
        "server {first} drained: exited {:.0} ms after SIGTERM, client moved to server {now_on} in {:.0} ms",
        exited.as_secs_f64() * 1000.0,
        moved.elapsed().as_secs_f64() * 1000.0
    );
}

/// Whether a connection to `addr` that sends `bytes` is closed with nothing sent back.
fn closed_silently(ns: &str, addr: std::net::SocketAddr, bytes: Vec<u8>) -> bool {
    in_ns(ns, move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(&bytes);
        let mut got = Vec::new();
        match s.read_to_end(&mut got) {
            Ok(_) => got.is_empty(),
            // A reset is a close too.
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset && got.is_empty(),
        }
    })
}

/// One raw path: preamble for `route`, Noise with `key`, Hello for `token`; the server's
/// join answer, or the error.
fn raw_join(
    ns: &str,
    addr: std::net::SocketAddr,
    route: mpflex_wire::Route,
    key: &str,
    server_pub: &str,
    token: [u8; 16],
) -> Result<mpflex_engine::join::JoinAck, String> {
    let key = mpflex::crypto::decode_key(key, "k").unwrap();
    let spub = mpflex::crypto::decode_key(server_pub, "k").unwrap();
    in_ns(ns, move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
            let t = mpflex::crypto::client_handshake(&mut s, &route.encode(), &key, &spub)
                .await
                .map_err(|e| format!("{e:#}"))?;
            let (ack, _) = mpflex::pathconn::join_as_client(&mut s, &t, token, 0)
                .await
                .map_err(|e| format!("{e:#}"))?;
            Ok(ack)
        })
    })
}

#[test]
fn bad_preambles_are_closed_and_counted_and_a_route_reaches_no_other_clients_session() {
    let test = "bad_preambles_are_closed_and_counted_and_a_route_reaches_no_other_clients_session";
    if !ready(test) {
        return;
    }
    let pool = Pool::new(0, "");
    let ns = pool.topo.client_ns.clone();
    let balancer: std::net::SocketAddr = format!("{}:{BALANCER_PORT}", pool.topo.server_addr(0)).parse().unwrap();
    let mut handshake = mpflex_wire::Route::from_id(9).encode().to_vec();
    handshake.extend_from_slice(&[0, 104]);
    handshake.extend_from_slice(&[7u8; 104]);
    // The balancer closes what is not a preamble, a preamble of another version, and a
    // server id it has no backend for.
    for (what, bytes) in [
        ("HTTP", b"GET / HTTP/1.0\r\n\r\n".to_vec()),
        (
            "a Noise handshake without preamble",
            [&[0u8, 104][..], &[7u8; 104]].concat(),
        ),
        ("preamble version 2", vec![0x6d, 2, 0, 1, 0, 0]),
        ("unknown server 9", handshake.clone()),
    ] {
        assert!(
            closed_silently(&ns, balancer, bytes),
            "balancer: {what} not closed silently"
        );
    }
    // A server reached directly closes them too, and counts them.
    let direct: std::net::SocketAddr = format!("{}:{}", pool.topo.server_addr(0), server_port(1))
        .parse()
        .unwrap();
    assert!(closed_silently(&ns, direct, b"GET / HTTP/1.0\r\n\r\n".to_vec()));
    assert!(closed_silently(&ns, direct, vec![0x6d, 7, 0, 1]));
    let mut to_2 = mpflex_wire::Route::from_id(2).encode().to_vec();
    to_2.extend_from_slice(&handshake[4..]);
    assert!(closed_silently(&ns, direct, to_2));
    let c = &pool.server_status(1)["counters"];
    assert_eq!(c["paths_refused_bad_preamble"], 2, "{c}");
    assert_eq!(c["paths_refused_misrouted"], 1, "{c}");

    // Two clients name the same server and, say, the same session token: each gets a
    // session of its own (sessions belong to a client key); a key the server does not
    // know gets nothing, whatever its preamble names.
    let token = [42u8; 16];
    let route = mpflex_wire::Route::Any;
    let a = raw_join(
        &ns,
        balancer,
        route,
        &pool.client_key.private,
        &pool.server_key.public,
        token,
    )
    .unwrap();
    assert!(a.fresh);
    let on = mpflex_wire::Route::from_id(a.server.id);
    let b = raw_join(
        &ns,
        balancer,
        on,
        &pool.other_key.private,
        &pool.server_key.public,
        token,
    )
    .unwrap();
    assert!(b.fresh, "the other client joined the first client's session");
    assert_eq!(b.server.id, a.server.id);
    let stranger = keygen();
    let c = raw_join(&ns, balancer, on, &stranger.private, &pool.server_key.public, token);
    assert!(c.is_err(), "an unknown key was answered: {c:?}");
    let sessions = pool.server_status(a.server.id)["sessions"].clone();
    let clients: Vec<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["client"].as_str())
        .collect();
    assert!(
        clients.contains(&"test") && clients.contains(&"other"),
        "sessions on server {}: {sessions}",
        a.server.id
    );
    // The servers still serve: a real client joins through the balancer.
    let mut pool = pool;
    let t = pool.client_toml(Via::Balancer, 1301, 9301);
    pool.spawn_client("client", &t);
    pool.wait_placed(9301, Duration::from_secs(10));
    assert_eq!(fetch(&ns, 1301, 1 << 20, Duration::from_secs(10)), Ok(1 << 20));
}

/// Servers with join addresses: the session's first path comes through the balancer, the
/// second goes straight to the server's join address; a path `server` listing a dead
/// address first still gets through on the next.
#[test]
fn later_paths_go_to_the_join_address_and_a_dead_first_address_is_passed_over() {
    let test = "later_paths_go_to_the_join_address_and_a_dead_first_address_is_passed_over";
    if !ready(test) {
        return;
    }
    let mut pool = Pool::new(0, "join_addr = \"{addr0}:{port}\"");
    let lbs: Vec<String> = (0..2)
        .map(|p| format!("{}:{BALANCER_PORT}", pool.topo.server_addr(p)))
        .collect();
    let lb = |p: usize| lbs[p].clone();
    // Port 9 on the server: nothing listens, the connection is refused.
    let dead = format!("{}:9", pool.topo.server_addr(0));
    let mut t = format!(
        "private_key = \"{}\"\nserver_public_key = \"{}\"\nsocks_listen = \"127.0.0.1:1501\"\n\
         status_listen = \"127.0.0.1:9501\"\n",
        pool.client_key.private, pool.server_key.public
    );
    for p in 0..2 {
        t += &format!(
            "[[paths]]\nname = \"p{p}\"\nserver = [\"{dead}\", \"{}\"]\nsource = \"{}\"\n",
            lb(p),
            pool.topo.client_addr(p)
        );
    }
    pool.spawn_client("client", &t);
    let id = pool.wait_placed(9501, Duration::from_secs(10));
    assert_eq!(
        fetch(&pool.topo.client_ns, 1501, 1 << 20, Duration::from_secs(10)),
        Ok(1 << 20)
    );
    let join = format!("{}:{}", pool.topo.server_addr(0), server_port(id));
    let log = pool.log("client");
    let ups: Vec<&str> = log.lines().filter(|l| l.contains("path up")).collect();
    assert!(
        ups.iter().any(|l| l.contains(&format!("server={join}"))),
        "no path went to the join address {join}: {ups:?}"
    );
    assert!(
        ups.iter()
            .any(|l| l.contains(&format!("server={}", lb(0))) || l.contains(&format!("server={}", lb(1)))),
        "no path came through the balancer: {ups:?}"
    );
}
