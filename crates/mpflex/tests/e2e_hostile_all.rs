//! Every attack at once against one server, beside an honest client: a slowloris on the
//! path port from many source addresses, one client key in three processes holding all
//! the streams it can to a silent destination, a second key that grants unlimited credit
//! and never acknowledges, and a datagram flood through the first key's SOCKS5 UDP relay.
//! The server's memory grows by at most 256 MB over its idle value, the honest client's
//! 50 MB download (sha256 checked) keeps within 1.25 × its time alone and its requests'
//! 99th percentile within 1.5 × (both measured in the same test, without the attacks),
//! and the server keeps answering its status.

mod support;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::hostile::*;
use support::*;

/// The server's `RLIMIT_NOFILE`, as in `e2e_hostile_clients`: low, so the descriptor hog
/// reaches its key's share quickly.
const NOFILE: u64 = 4_096;
const HOG_PROCS: usize = 3;
const HOG_EACH: usize = 800;
const SILENT_PORT: u16 = 9_000;
const SINK_PORT: u16 = 9_001;
/// Slowloris: sources and connections held from each.
const SOURCES: usize = 20;
const PER_SOURCE: usize = 40;
/// Memory attacker: streams of 50 MB each.
const MEM_STREAMS: u32 = 20;
/// Datagram flood: small datagrams (a packet rate, not a bandwidth attack: the attackers
/// share the honest client's links here, as no server can help) at this rate.
const FLOOD_PER_SECOND: u64 = 20_000;
const SIZE: u64 = 50 << 20;
const RATE_MBIT: u32 = 100;
const PINGS: usize = 200;
const PING_BYTES: usize = 100;

/// The 99th percentile of [`PINGS`] small requests, one at a time on one kept-alive
/// stream through the honest client; ms.
fn ping_p99(lab: &Lab) -> f64 {
    let proxy = lab.socks();
    in_ns(&lab.topo.client_ns, move || {
        let mut s = socks_connect(proxy, "127.0.0.1", ORIGIN_PORT).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut ms: Vec<f64> = (0..PINGS + 5)
            .map(|_| {
                let t = Instant::now();
                s.write_all(format!("GET /bytes/{PING_BYTES} HTTP/1.1\r\nHost: o\r\n\r\n").as_bytes())
                    .unwrap();
                let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
                loop {
                    let n = s.read(&mut buf).expect("response");
                    assert!(n > 0, "the origin closed the request connection");
                    got.extend_from_slice(&buf[..n]);
                    let head = got.windows(4).position(|w| w == b"\r\n\r\n");
                    if head.is_some_and(|h| got.len() >= h + 4 + PING_BYTES) {
                        return t.elapsed().as_secs_f64() * 1000.0;
                    }
                }
            })
            .skip(5)
            .collect();
        ms.sort_by(f64::total_cmp);
        ms[ms.len() * 99 / 100]
    })
}

/// Floods `dest` through the SOCKS5 UDP relay behind `proxy` with 64-byte datagrams at
/// [`FLOOD_PER_SECOND`] until `stop`; the datagrams sent.
fn flood(proxy: SocketAddr, dest: SocketAddr, stop: Arc<AtomicBool>) -> u64 {
    let mut ctrl = TcpStream::connect(proxy).unwrap();
    ctrl.write_all(&[5, 1, 0]).unwrap();
    ctrl.read_exact(&mut [0u8; 2]).unwrap();
    ctrl.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
    let mut rep = [0u8; 10];
    ctrl.read_exact(&mut rep).unwrap();
    let relay = SocketAddr::from(([rep[4], rep[5], rep[6], rep[7]], u16::from_be_bytes([rep[8], rep[9]])));
    let SocketAddr::V4(d) = dest else { panic!("IPv4 sink") };
    let mut dgram = vec![0, 0, 0, 1];
    dgram.extend_from_slice(&d.ip().octets());
    dgram.extend_from_slice(&d.port().to_be_bytes());
    dgram.extend_from_slice(&[0x55; 64]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (t0, mut sent) = (Instant::now(), 0u64);
    while !stop.load(Ordering::Relaxed) {
        let due = (t0.elapsed().as_secs_f64() * FLOOD_PER_SECOND as f64) as u64;
        while sent < due {
            let _ = sock.send_to(&dgram, relay);
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    sent
}

/// Opens [`PER_SOURCE`] connections to `server` from each of `sources` and holds them,
/// half silent, half cut off inside the routing preamble; reopens those the server closed
/// until `stop`.
fn slowloris(server: SocketAddr, sources: Vec<IpAddr>, stop: Arc<AtomicBool>) -> u64 {
    let mut opened = 0;
    let mut held: Vec<TcpStream> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        held.retain(|s| {
            let (mut b, mut r) = ([0u8; 16], s);
            matches!(r.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        for (i, src) in sources.iter().enumerate() {
            for j in 0..PER_SOURCE.saturating_sub(held.len() / sources.len()) {
                let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
                sock.bind(&SocketAddr::new(*src, 0).into()).unwrap();
                if sock.connect(&server.into()).is_err() {
                    continue;
                }
                let mut s: TcpStream = sock.into();
                if (i + j) % 2 == 1 {
                    let _ = s.write_all(&mpflex_wire::Route::Any.encode()[..1]);
                }
                s.set_nonblocking(true).unwrap();
                held.push(s);
                opened += 1;
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    opened
}

#[test]
fn every_attack_at_once_leaves_the_honest_client_its_rate_and_latency() {
    let name = "every_attack_at_once_leaves_the_honest_client_its_rate_and_latency";
    if !ready(name) || !mpflex_netns::require_tools(name, &["prlimit"]) {
        return;
    }
    let nofile = raise_nofile();
    assert!(
        nofile as usize > HOG_PROCS * HOG_EACH + SOURCES * PER_SOURCE + 1_000,
        "RLIMIT_NOFILE {nofile} too low"
    );
    let (hog_priv, hog_pub) = keygen();
    let (mem_priv, mem_pub) = keygen();
    let lab = Lab::new(Options {
        rate_mbit: RATE_MBIT,
        server_toml: format!(
            "[[clients]]\nname = \"hog\"\npublic_key = \"{hog_pub}\"\n\
             [[clients]]\nname = \"memory\"\npublic_key = \"{mem_pub}\"\n"
        ),
        launch: Some(Box::new(|role: &str, cfg: &str| {
            let mut v = Vec::new();
            if role == "server" {
                v = vec![
                    "prlimit".to_string(),
                    format!("--nofile={NOFILE}:{NOFILE}"),
                    "--".into(),
                ];
            }
            v.extend([BIN, role, "--config", cfg].map(String::from));
            v
        })),
        ..Options::default()
    });
    let server_pid = lab.server.as_ref().unwrap().id();
    let (sns, cns) = (lab.topo.server_ns.clone(), lab.topo.client_ns.clone());
    let accepted = silent_destination(&sns, SILENT_PORT);
    let sink = in_ns(&sns, || UdpSocket::bind(("0.0.0.0", SINK_PORT)).unwrap());
    let sunk = Arc::new(AtomicU64::new(0));
    {
        let sunk = sunk.clone();
        std::thread::spawn(move || {
            let mut b = [0u8; 2048];
            while sink.recv(&mut b).is_ok() {
                sunk.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let dest = lab.server_addr(0);
    let server = lab.server_path_addr(0);
    let prefix = lab.client_addr(0).rsplit_once('.').unwrap().0.to_string();
    let sources: Vec<IpAddr> = (0..SOURCES)
        .map(|i| format!("{prefix}.{}", 100 + i).parse().unwrap())
        .collect();
    for s in &sources {
        let dev = lab.topo.client_dev(0);
        sh(&["ip", "-n", &cns, "addr", "add", &format!("{s}/24"), "dev", &dev]);
    }

    // Without the attacks: warm, then the honest client's times.
    best_download(&lab, SIZE, 1);
    let base_dl = best_download(&lab, SIZE, 2);
    let base_ping = ping_p99(&lab).min(ping_p99(&lab));
    let idle_kib = rss_kib_of(server_pid);

    // Every attack at once.
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..HOG_PROCS).map(|i| hostile_client(&lab, &hog_priv, i)).collect();
    let loris = {
        let (stop, sources) = (stop.clone(), sources.clone());
        spawn_in_ns(&cns, move || slowloris(server, sources, stop))
    };
    let read = Arc::new(AtomicU64::new(0));
    let memory = {
        let (read, stop) = (read.clone(), stop.clone());
        let keys = (key(&mem_priv), key(&lab.server_pub));
        spawn_in_ns(&cns, move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(never_acknowledge(server, keys, MEM_STREAMS, SIZE, read, stop))
        })
    };
    let flooder = {
        let (stop, proxy) = (stop.clone(), hogs[0].1);
        let to = SocketAddr::new(dest.parse().unwrap(), SINK_PORT);
        spawn_in_ns(&cns, move || flood(proxy, to, stop))
    };
    let holders: Vec<_> = hogs
        .iter()
        .map(|(_, p)| {
            let (p, dest) = (*p, dest.clone());
            spawn_in_ns(&cns, move || hold_streams(p, &dest, SILENT_PORT, HOG_EACH))
        })
        .collect();
    let held: Vec<Vec<TcpStream>> = holders.into_iter().map(|h| h.join().unwrap()).collect();
    let peak = Arc::new(AtomicU64::new(idle_kib));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib_of(server_pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    // The memory attacker fills its send buffer (32 MiB at the path's rate, some 3 s).
    std::thread::sleep(Duration::from_secs(4));

    let attacked_ping = ping_p99(&lab).min(ping_p99(&lab));
    let attacked_dl = best_download(&lab, SIZE, 2);
    let status = lab.server_status();
    let m = server_metrics(&lab);
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let opened = loris.join().unwrap();
    let flooded = flooder.join().unwrap();
    let attack = memory.join().unwrap();
    let grown_mb = peak.load(Ordering::Relaxed).saturating_sub(idle_kib) as f64 / 1024.0;
    let open: usize = held.iter().map(|h| open_count(h)).sum();
    eprintln!(
        "server RSS idle {:.1} MB, +{grown_mb:.1} MB at peak; slowloris {opened} connections; hog {open} streams \
         held ({} at the destination); memory attacker read {:.1} MB; flood {flooded} datagrams sent, {} arrived; \
         honest 50 MB {base_dl:.2} s alone, {attacked_dl:.2} s attacked; ping p99 {base_ping:.2} ms alone, \
         {attacked_ping:.2} ms attacked",
        idle_kib as f64 / 1024.0,
        accepted.load(Ordering::Relaxed),
        attack.read.load(Ordering::Relaxed) as f64 / 1e6,
        sunk.load(Ordering::Relaxed)
    );
    // Each attack ran: otherwise the test shows nothing.
    assert!(opened >= (SOURCES * PER_SOURCE) as u64, "slowloris opened {opened}");
    assert!(accepted.load(Ordering::Relaxed) >= 500, "the hog held little");
    assert!(
        attack.read.load(Ordering::Relaxed) > 16 << 20,
        "the memory attacker read little"
    );
    assert!(
        sunk.load(Ordering::Relaxed) > flooded / 10,
        "the flood did not reach the server"
    );
    assert!(
        status["sessions"].as_array().is_some_and(|s| s.len() > HOG_PROCS),
        "{status}"
    );
    assert!(metric(&m, "mpflex_limit_refused_total") > 0.0, "{m}");
    // The floors.
    assert!(
        grown_mb <= 256.0,
        "server RSS grew by {grown_mb:.1} MB under every attack"
    );
    assert!(
        attacked_dl <= 1.25 * base_dl,
        "honest 50 MB took {attacked_dl:.2} s under the attacks, {base_dl:.2} s alone"
    );
    assert!(
        attacked_ping <= 1.5 * base_ping,
        "honest requests' p99 {attacked_ping:.2} ms under the attacks, {base_ping:.2} ms alone"
    );
    assert_eq!(lab.paths_up(), 2);
    for (mut c, _) in hogs {
        let _ = c.kill();
        let _ = c.wait();
    }
}
