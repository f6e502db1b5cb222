//! Hostile or broken peers: garbage on the path port, a client without credentials, a
//! replayed handshake, malformed frames from an authenticated peer, garbage on the SOCKS
//! port. Each gets nothing (or a clean close) and the server keeps serving the real client.

mod support;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use support::*;

/// Reads until EOF/error or timeout; returns what arrived and whether the peer closed.
fn drain(s: &mut TcpStream) -> (Vec<u8>, bool) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                return (got, false)
            }
            Err(_) => return (got, true),
        }
    }
}

fn key(s: &str) -> [u8; 32] {
    mpflex::crypto::decode_key(s, "test").unwrap()
}

/// A Noise handshake message as a real client would send it.
fn handshake_msg(client_priv: &[u8; 32], server_pub: &[u8; 32]) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let (cp, sp) = (*client_priv, *server_pub);
        let pre = mpflex_wire::Route::Any.encode();
        let t = tokio::spawn(async move { mpflex::crypto::client_handshake(&mut a, &pre, &cp, &sp).await });
        let mut got_pre = [0u8; mpflex_wire::ROUTE_LEN];
        tokio::io::AsyncReadExt::read_exact(&mut b, &mut got_pre).await.unwrap();
        let mut len = [0u8; 2];
        tokio::io::AsyncReadExt::read_exact(&mut b, &mut len).await.unwrap();
        let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
        tokio::io::AsyncReadExt::read_exact(&mut b, &mut msg).await.unwrap();
        drop(b);
        let _ = t.await;
        let mut out = got_pre.to_vec();
        out.extend_from_slice(&len);
        out.extend_from_slice(&msg);
        out
    })
}

#[test]
fn hostile_peers_get_nothing_and_service_continues() {
    if !ready("hostile_peers_get_nothing_and_service_continues") {
        return;
    }
    let lab = Lab::new(Options::default());
    let server: SocketAddr = lab.server_path_addr(0);
    let cns = lab.topo.client_ns.clone();
    let (client_priv, server_pub) = (key(&lab.client_key), key(&lab.server_pub));

    let report = in_ns(&cns, move || {
        let mut report = Vec::new();
        // 1. Garbage instead of a handshake.
        let mut s = TcpStream::connect(server).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        report.push(("garbage", drain(&mut s)));
        // 2. A wrong-length handshake prefix is refused at once.
        let mut s = TcpStream::connect(server).unwrap();
        s.write_all(&[0xff, 0xff, 1, 2, 3]).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Write);
        report.push(("truncated", drain(&mut s)));
        // 3. A well-formed handshake from a key the server does not know.
        let (stranger, _) = mpflex::crypto::generate_keypair();
        let mut s = TcpStream::connect(server).unwrap();
        s.write_all(&handshake_msg(&stranger, &server_pub)).unwrap();
        report.push(("unknown key", drain(&mut s)));
        // 4. A valid handshake from the real client's key, then the same bytes replayed.
        let msg = handshake_msg(&client_priv, &server_pub);
        let mut s = TcpStream::connect(server).unwrap();
        s.write_all(&msg).unwrap();
        let mut first = [0u8; 2];
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let answered = s.read_exact(&mut first).is_ok();
        drop(s);
        assert!(answered, "the original handshake should be answered");
        let mut s = TcpStream::connect(server).unwrap();
        s.write_all(&msg).unwrap();
        report.push(("replay", drain(&mut s)));
        report
    });
    for (what, (got, closed)) in &report {
        assert!(got.is_empty(), "{what}: server sent {} bytes", got.len());
        assert!(closed, "{what}: server kept the connection open");
    }
    // One source: its first failure is logged, the others (within the minute) counted.
    let log = lab.log("server");
    let lines = log
        .lines()
        .filter(|l| l.contains("further failures from this source"))
        .count();
    assert_eq!(lines, 1, "one log line for one source's failures:\n{log}");
    let m = hostile::server_metrics(&lab);
    assert_eq!(
        hostile::metric(&m, "mpflex_handshakes_failed_total"),
        4.0,
        "garbage, truncated, unknown key and replay each counted:\n{m}"
    );

    // 5. An authenticated peer sending a malformed frame loses only its own connection.
    // A record whose frame has an unknown type where Hello must be.
    let unknown = vec![0xee, 0, 0, 0, 1, 0];
    let (got, closed) = in_ns(&cns, move || {
        record_after_handshake(server, client_priv, server_pub, unknown)
    });
    assert!(
        closed,
        "malformed frame did not close the connection (got {} bytes)",
        got.len()
    );
    // 5b. So does a peer of another protocol version, with a log line that says so.
    let mut old = Vec::new();
    mpflex_wire::Frame::Hello {
        version: 1,
        session: [7; 16],
        path: 0,
    }
    .encode(&mut old);
    let (got, closed) = in_ns(&cns, move || {
        record_after_handshake(server, client_priv, server_pub, old)
    });
    assert!(
        closed && got.is_empty(),
        "version 1 Hello: got {} bytes, closed {closed}",
        got.len()
    );
    let log = lab.log("server");
    assert!(
        log.contains(&format!(
            "client speaks protocol version 1, this server {}",
            mpflex_wire::VERSION
        )),
        "version mismatch not reported:\n{log}"
    );

    // 6. Garbage on the SOCKS port.
    let socks = lab.socks();
    let (got, closed) = in_ns(&cns, move || {
        let mut s = TcpStream::connect(socks).unwrap();
        s.write_all(b"\x04\x01\x00\x50garbage").unwrap();
        drain(&mut s)
    });
    assert!(closed && got.is_empty(), "SOCKS garbage: got {got:?}, closed {closed}");

    // The real client was never disturbed.
    let (got, want) = lab.download(8 << 20);
    assert_eq!(got, want);
    assert_eq!(lab.paths_up(), 2);
}

/// Completes the handshake as the real client, sends one record of `plaintext` where the
/// Hello must be, and returns what the server answered and whether it closed the connection.
fn record_after_handshake(
    server: SocketAddr,
    client_priv: [u8; 32],
    server_pub: [u8; 32],
    plaintext: Vec<u8>,
) -> (Vec<u8>, bool) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(server).await.unwrap();
        let t = mpflex::crypto::client_handshake(&mut s, &mpflex_wire::Route::Any.encode(), &client_priv, &server_pub)
            .await
            .unwrap();
        let mut wire = Vec::new();
        let mut nonce = 0;
        mpflex::crypto::seal(&t, &mut nonce, &plaintext, &mut wire).unwrap();
        s.write_all(&wire).await.unwrap();
        let mut got = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
        (got, matches!(r, Ok(Ok(_)) | Ok(Err(_))))
    })
}

/// What a one-connection forwarder saw: the bytes the client sent (up to 64 KiB) and how
/// many bytes the server answered with.
#[derive(Default)]
struct Capture {
    from_client: Vec<u8>,
    from_server: usize,
}

/// A TCP forwarder on 127.0.0.1 in the caller's namespace: accepts one connection, joins
/// it to `upstream` and records the traffic. Returns its port.
fn forwarder(upstream: SocketAddr, cap: std::sync::Arc<std::sync::Mutex<Capture>>) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((down, _)) = l.accept() else { return };
        let Ok(up) = TcpStream::connect(upstream) else { return };
        let (mut d2, mut u2) = (down.try_clone().unwrap(), up.try_clone().unwrap());
        let c2 = cap.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while let Ok(n) = u2.read(&mut buf) {
                if n == 0 || d2.write_all(&buf[..n]).is_err() {
                    break;
                }
                c2.lock().unwrap().from_server += n;
            }
            let _ = d2.shutdown(std::net::Shutdown::Both);
        });
        let (mut down, mut up) = (down, up);
        let mut buf = [0u8; 16384];
        while let Ok(n) = down.read(&mut buf) {
            if n == 0 || up.write_all(&buf[..n]).is_err() {
                break;
            }
            let mut c = cap.lock().unwrap();
            let room = (64usize << 10).saturating_sub(c.from_client.len());
            c.from_client.extend_from_slice(&buf[..n.min(room)]);
        }
        let _ = up.shutdown(std::net::Shutdown::Both);
    });
    port
}

/// The real `mpflex client` binary's first bytes on a path, recorded by a forwarder and
/// replayed to the server: the original opened a session, the replay gets nothing.
#[test]
fn captured_handshake_of_the_real_client_replayed_gets_nothing() {
    if !ready("captured_handshake_of_the_real_client_replayed_gets_nothing") {
        return;
    }
    let lab = Lab::new(Options::default());
    let server = lab.server_path_addr(0);
    let cap = std::sync::Arc::new(std::sync::Mutex::new(Capture::default()));
    let port = {
        let cap = cap.clone();
        spawn_in_ns(&lab.topo.client_ns, move || forwarder(server, cap))
            .join()
            .unwrap()
    };
    // A second client process with the real client's key, its one path through the
    // forwarder.
    let cfg = lab.dir.join("capture-client.toml");
    std::fs::write(
        &cfg,
        format!(
            "private_key = \"{}\"\nserver_public_key = \"{}\"\nscheduler = \"minrtt\"\n\
             socks_listen = \"127.0.0.1:1090\"\nstatus_listen = \"127.0.0.1:9192\"\n\
             [[paths]]\nname = \"via-forwarder\"\nserver = \"127.0.0.1:{port}\"\n",
            lab.client_key, lab.server_pub
        ),
    )
    .unwrap();
    let mut capture_client = lab.spawn_in(
        &lab.topo.client_ns,
        &[BIN, "client", "--config", cfg.to_str().unwrap()],
        "capture-client.log",
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut up = false;
    while std::time::Instant::now() < deadline && !up {
        std::thread::sleep(Duration::from_millis(100));
        up = lab.status(&lab.topo.client_ns, 9192)["paths"][0]["up"] == true;
    }
    let _ = capture_client.kill();
    let _ = capture_client.wait();
    let (sent, answered) = {
        let c = cap.lock().unwrap();
        (c.from_client.clone(), c.from_server)
    };
    assert!(
        up,
        "the capture client's path never came up through the forwarder ({} bytes sent, {answered} answered):\n{}",
        sent.len(),
        lab.log("capture-client")
    );
    assert!(answered > 0, "the server never answered the original handshake");
    // The routing preamble, then the first handshake message with its length.
    let pre = mpflex_wire::ROUTE_LEN;
    assert!(sent.len() >= pre + 2, "nothing captured");
    let first_len = pre + 2 + u16::from_be_bytes([sent[pre], sent[pre + 1]]) as usize;
    assert!(
        sent.len() >= first_len,
        "captured {} bytes, first message is {first_len}",
        sent.len()
    );
    eprintln!(
        "captured {} bytes from the real client (first handshake message {first_len} bytes); server answered {answered}",
        sent.len()
    );
    let replays_before = lab.log("server").matches("replayed handshake").count();
    let failed = || hostile::metric(&hostile::server_metrics(&lab), "mpflex_handshakes_failed_total");
    let failed_before = failed();

    // Replay: the first message alone, and everything the client sent.
    let first = sent[..first_len].to_vec();
    let report = in_ns(&lab.topo.client_ns, move || {
        let mut report = Vec::new();
        for (what, bytes) in [("first message", &first), ("whole capture", &sent)] {
            let mut s = TcpStream::connect(server).unwrap();
            let _ = s.write_all(bytes);
            report.push((what, drain(&mut s)));
        }
        report
    });
    for (what, (got, closed)) in &report {
        assert!(got.is_empty(), "replayed {what}: server sent {} bytes", got.len());
        assert!(closed, "replayed {what}: server kept the connection open");
    }
    std::thread::sleep(Duration::from_millis(200));
    // Both counted; logged once (a source's failures reach the log once a minute).
    let replays = lab.log("server").matches("replayed handshake").count() - replays_before;
    assert_eq!(
        (replays_before + replays, failed() - failed_before),
        (1, 2.0),
        "the server did not recognise both replays:\n{}",
        lab.log("server")
    );

    // The real client was never disturbed.
    let (got, want) = lab.download(4 << 20);
    assert_eq!(got, want);
    assert_eq!(lab.paths_up(), 2);
}

/// Like `drain`, with a longer patience.
fn drain_for(s: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    s.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                return (got, false)
            }
            Err(_) => return (got, true),
        }
    }
}

/// While a download runs: hundreds of connections with random garbage on both path ports
/// and on the SOCKS port, plus silent connections that never say anything. Every one is
/// closed (the path port sends nothing back, silent ones go at the handshake timeout),
/// the download arrives intact and memory stays bounded.
#[test]
fn garbage_floods_and_silent_peers_do_not_disturb_a_transfer() {
    use rand::Rng;
    if !ready("garbage_floods_and_silent_peers_do_not_disturb_a_transfer") {
        return;
    }
    let lab = Lab::new(Options {
        rate_mbit: 100,
        ..Default::default()
    });
    let targets = [lab.server_path_addr(0), lab.server_path_addr(1)];
    let socks = lab.socks();
    const FLOOD: usize = 150;
    const SILENT: usize = 10;
    // Patience for silent peers: the server's 5 s deadline to join and the SOCKS
    // ingress's 10 s handshake timeout, plus slack for a loaded machine.
    let silent_patience = Duration::from_secs(16);

    let ((got, want), reports) = std::thread::scope(|scope| {
        let download = scope.spawn(|| lab.download(30 << 20));
        let conns = in_ns(&lab.topo.client_ns, move || {
            let mut rng = rand::thread_rng();
            let mut conns = Vec::new();
            for i in 0..FLOOD {
                let len = rng.gen_range(1..4096);
                let mut junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                // Path port, alternately handshake-shaped (right length prefix, random
                // contents) and plain noise.
                let mut path_junk = junk.clone();
                if i % 2 == 0 {
                    path_junk = [0u8, 106].iter().copied().chain((0..106).map(|_| rng.gen())).collect();
                }
                if let Ok(mut s) = TcpStream::connect(targets[i % 2]) {
                    let _ = s.write_all(&path_junk);
                    conns.push(("path port garbage", true, s, Duration::from_secs(12)));
                }
                // SOCKS port, alternately after a valid greeting.
                if i % 2 == 0 {
                    junk.splice(0..0, [5u8, 1, 0]);
                }
                if let Ok(mut s) = TcpStream::connect(socks) {
                    let _ = s.write_all(&junk);
                    conns.push(("SOCKS garbage", false, s, Duration::from_secs(12)));
                }
            }
            for i in 0..SILENT {
                conns.push((
                    "silent on a path port",
                    true,
                    TcpStream::connect(targets[i % 2]).unwrap(),
                    silent_patience,
                ));
                conns.push((
                    "silent on SOCKS",
                    false,
                    TcpStream::connect(socks).unwrap(),
                    silent_patience,
                ));
            }
            conns
        });
        let readers: Vec<_> = conns
            .into_iter()
            .map(|(what, silent_peer, mut s, patience)| {
                scope.spawn(move || {
                    let t = std::time::Instant::now();
                    let (got, closed) = drain_for(&mut s, patience);
                    (what, silent_peer, got.len(), closed, t.elapsed())
                })
            })
            .collect();
        let reports: Vec<_> = readers.into_iter().map(|h| h.join().unwrap()).collect();
        (download.join().unwrap(), reports)
    });
    assert_eq!(got, want, "the download was disturbed by the flood");
    let mut slowest = Duration::ZERO;
    for (what, path_port, sent, closed, after) in &reports {
        assert!(closed, "{what}: still open after {after:?}");
        if *path_port {
            assert_eq!(*sent, 0, "{what}: the server answered an unauthenticated peer");
        }
        slowest = slowest.max(*after);
    }
    eprintln!(
        "{} hostile connections all closed (slowest after {slowest:?}); download intact",
        reports.len()
    );
    assert_eq!(lab.paths_up(), 2);
    let rss = Lab::rss_kib(lab.server.as_ref().unwrap());
    assert!(rss < 300 * 1024, "server RSS {rss} KiB after the flood");
    let (got, want) = lab.download(4 << 20);
    assert_eq!(got, want, "no service after the flood");
}
