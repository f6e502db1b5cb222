//! The emulator against its configuration, measured with real TCP/UDP across namespaces:
//! RTT within 1 ms + 2%, constant-rate TCP goodput within 5%, trace replay within 5% of the
//! trace's mean, random loss within statistical tolerance, and ≥ 300 Mbit/s per path and
//! ≥ 500 Mbit/s in total. Needs root and iperf3; skipped (with a message) otherwise, a
//! failure under CI=true.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpflex_lab::emulator::{enter_ns, Emulator};
use mpflex_lab::link::{LinkParams, QueueLimit, Rate};
use mpflex_lab::netns::{require_root, require_tools, skip, Topology};
use mpflex_lab::profile::{seed_default, Action, Direction, Event, PathSpec, Profile};
use mpflex_lab::trace::Trace;

/// Measurements share two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());
static TAG: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// Root with iperf3 runs the tests; elsewhere they skip, and fail under CI=true.
fn ready(test: &str) -> bool {
    require_root(test) && require_tools(test, &["iperf3"])
}

fn lab(profile: &Profile) -> (Topology, Emulator) {
    let tag = TAG.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let topo = Topology::create(profile.paths.len(), tag).unwrap();
    let emu = Emulator::start(&topo, profile, 7).unwrap();
    (topo, emu)
}

/// Median TCP round-trip time of 1-byte exchanges on `path`.
fn tcp_rtt(topo: &Topology, path: usize) -> Duration {
    let (sns, cns) = (topo.server_ns.clone(), topo.client_ns.clone());
    let addr = format!("{}:7777", topo.server_addr(path));
    let bind = addr.clone();
    let server = std::thread::spawn(move || {
        enter_ns(&sns).unwrap();
        let l = TcpListener::bind(&bind).unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut b = [0u8; 1];
        while s.read_exact(&mut b).is_ok() {
            if s.write_all(&b).is_err() {
                break;
            }
        }
    });
    let rtts = std::thread::spawn(move || {
        enter_ns(&cns).unwrap();
        let mut s = loop {
            match TcpStream::connect(&addr) {
                Ok(s) => break s,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        s.set_nodelay(true).unwrap();
        let mut v = Vec::new();
        let mut b = [7u8; 1];
        for _ in 0..21 {
            let t = Instant::now();
            s.write_all(&b).unwrap();
            s.read_exact(&mut b).unwrap();
            v.push(t.elapsed());
            std::thread::sleep(Duration::from_millis(20));
        }
        v
    })
    .join()
    .unwrap();
    server.join().unwrap();
    let mut v = rtts;
    v.sort();
    v[v.len() / 2]
}

/// Runs iperf3 from the client namespace to `path`'s server address; returns the JSON.
fn iperf(topo: &Topology, path: usize, port: u16, args: &[&str]) -> serde_json::Value {
    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &topo.server_ns,
            "iperf3",
            "-s",
            "-1",
            "-p",
            &port.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &topo.client_ns,
            "iperf3",
            "-J",
            "-c",
            &topo.server_addr(path),
            "-p",
            &port.to_string(),
        ])
        .args(args)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 output: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Goodput (bit/s) over the intervals after the first `skip` seconds (slow start).
fn steady_goodput(j: &serde_json::Value, skip: f64) -> f64 {
    let iv = j["intervals"].as_array().expect("intervals");
    let (mut bytes, mut secs) = (0.0, 0.0);
    for i in iv {
        let s = &i["sum"];
        if s["start"].as_f64().unwrap() >= skip {
            bytes += s["bytes"].as_f64().unwrap();
            secs += s["seconds"].as_f64().unwrap();
        }
    }
    bytes * 8.0 / secs
}

#[test]
fn rtt_matches_configuration() {
    if !ready("rtt_matches_configuration") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let profile = seed_default(270);
    let (topo, _emu) = lab(&profile);
    for (path, want_ms) in [(0, 50.0), (1, 270.0)] {
        let rtt = tcp_rtt(&topo, path).as_secs_f64() * 1000.0;
        let tol = 1.0 + 0.02 * want_ms;
        eprintln!("path {path}: RTT {rtt:.2} ms, configured {want_ms} ms (tolerance {tol:.1} ms)");
        assert!(
            (rtt - want_ms).abs() <= tol,
            "path {path}: RTT {rtt:.2} ms vs {want_ms} ms"
        );
    }
}

#[test]
fn wait_quiet_returns_only_once_the_links_drained() {
    if !ready("wait_quiet_returns_only_once_the_links_drained") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let profile = seed_default(70);
    let (topo, emu) = lab(&profile);
    let window = Duration::from_millis(200);
    // Idle links: one window.
    let idle = emu.wait_quiet(window, 6000, Duration::from_secs(5));
    assert!(idle < 2 * window, "idle links took {idle:?}");
    // A download over LTE (500 ms buffer) that the server stops writing after 1.5 s: the
    // links are busy until the last queued byte has crossed.
    let (sns, cns) = (topo.server_ns.clone(), topo.client_ns.clone());
    let addr = format!("{}:7778", topo.server_addr(1));
    let bind = addr.clone();
    let server = std::thread::spawn(move || {
        enter_ns(&sns).unwrap();
        let l = TcpListener::bind(&bind).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let buf = vec![0u8; 64 * 1024];
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(1500) {
            if s.write_all(&buf).is_err() {
                break;
            }
        }
    });
    let client = std::thread::spawn(move || {
        enter_ns(&cns).unwrap();
        let mut s = loop {
            match TcpStream::connect(&addr) {
                Ok(s) => break s,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let mut buf = vec![0u8; 64 * 1024];
        let mut n = 0u64;
        while let Ok(k) = s.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        (Instant::now(), n)
    });
    std::thread::sleep(Duration::from_millis(500));
    let busy = emu.wait_quiet(window, 6000, Duration::from_secs(30));
    let quiet_at = Instant::now();
    let (done_at, bytes) = client.join().unwrap();
    server.join().unwrap();
    eprintln!(
        "waited {busy:?}; the download ({bytes} bytes) ended {:?} before",
        quiet_at.saturating_duration_since(done_at)
    );
    assert!(bytes > 500_000, "the download carried only {bytes} bytes");
    // Quiet is declared at most two windows after the last byte arrived, and not before.
    assert!(
        quiet_at + Duration::from_millis(50) >= done_at,
        "declared quiet while the download ran"
    );
    assert!(
        quiet_at <= done_at + 3 * window,
        "quiet declared {:?} after the end",
        quiet_at - done_at
    );
}

#[test]
fn constant_rate_goodput_within_5_percent() {
    if !ready("constant_rate_goodput_within_5_percent") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let profile = seed_default(70);
    let (topo, emu) = lab(&profile);
    for (path, kbit) in [(0usize, 7040.0), (1, 9185.0)] {
        let j = iperf(&topo, path, 5300 + path as u16, &["-R", "-t", "6"]);
        let g = steady_goodput(&j, 2.0) / 1000.0;
        eprintln!(
            "path {path}: steady TCP goodput {g:.0} kbit/s, configured {kbit} kbit/s ({:.3})",
            g / kbit
        );
        assert!((g / kbit - 1.0).abs() <= 0.05, "path {path}: {g:.0} vs {kbit} kbit/s");
    }
    let stats = emu.stats();
    assert!(
        stats.iter().flatten().all(|s| s.dropped_io == 0),
        "the emulator itself dropped frames: {stats:?}"
    );
}

#[test]
fn trace_replay_matches_trace_mean() {
    if !ready("trace_replay_matches_trace_mean") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A trace with bursts and gaps that repeats every 40 ms: mean 12 Mbit/s.
    let mut ms = Vec::new();
    for t in 1..=40u64 {
        let n = [0, 3, 1, 0, 2, 0, 4, 2][t as usize % 8];
        ms.extend(std::iter::repeat_n(t, n));
    }
    let trace = Trace::from_millis(ms).unwrap();
    let mean_kbit = trace.mean_kbit();
    let mut profile = seed_default(70);
    profile.paths.truncate(1);
    profile.paths[0] = PathSpec {
        name: "trace".into(),
        down: LinkParams {
            delay: Duration::from_millis(20),
            jitter: Duration::ZERO,
            rate: Rate::Trace(trace),
            loss: 0.0,
            queue: QueueLimit::Millis(200),
        },
        up: profile.paths[0].up.clone(),
    };
    let (topo, emu) = lab(&profile);
    let j = iperf(&topo, 0, 5310, &["-R", "-t", "6"]);
    let g = steady_goodput(&j, 2.0) / 1000.0;
    // Goodput excludes IP/TCP headers (52 of every 1500 bytes); the emulator's own count
    // of delivered IP bytes is the direct check.
    let stats = emu.stats();
    eprintln!(
        "trace mean {mean_kbit:.0} kbit/s; TCP goodput {g:.0} kbit/s ({:.3} of mean, header overhead ~0.965); \
         delivered {} packets",
        g / mean_kbit,
        stats[0][0].delivered
    );
    assert!(
        (g / (mean_kbit * 1448.0 / 1500.0) - 1.0).abs() <= 0.05,
        "{g:.0} vs {mean_kbit:.0}"
    );
}

#[test]
fn loss_rate_within_tolerance() {
    if !ready("loss_rate_within_tolerance") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut profile = seed_default(70);
    profile.paths.truncate(1);
    profile.paths[0].up.loss = 0.05;
    profile.paths[0].up.rate = Rate::Constant(50_000);
    let (topo, _emu) = lab(&profile);
    // 10 Mbit/s of 1000-byte UDP datagrams for 4 s: ~5000 packets.
    let j = iperf(&topo, 0, 5320, &["-u", "-b", "10M", "-l", "1000", "-t", "4"]);
    let sum = &j["end"]["sum"];
    let (lost, total) = (sum["lost_packets"].as_f64().unwrap(), sum["packets"].as_f64().unwrap());
    let p = lost / total;
    let sd = (0.05f64 * 0.95 / total).sqrt();
    eprintln!(
        "loss configured 5%, measured {:.2}% of {total} packets (4 sd = {:.2}%)",
        p * 100.0,
        4.0 * sd * 100.0
    );
    assert!((p - 0.05).abs() <= 4.0 * sd, "loss {p}");
}

#[test]
fn emulator_is_not_the_bottleneck() {
    if !ready("emulator_is_not_the_bottleneck") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fast = LinkParams {
        delay: Duration::from_millis(1),
        jitter: Duration::ZERO,
        rate: Rate::Unlimited,
        loss: 0.0,
        queue: QueueLimit::Bytes(4 << 20),
    };
    let mut profile = seed_default(70);
    for p in &mut profile.paths {
        p.down = fast.clone();
        p.up = fast.clone();
    }
    let (topo, emu) = lab(&profile);
    let runs: Vec<_> = (0..2)
        .map(|p| {
            let topo_c = topo.client_ns.clone();
            let topo_s = topo.server_ns.clone();
            let addr = topo.server_addr(p);
            std::thread::spawn(move || {
                let port = (5330 + p).to_string();
                let mut srv = Command::new("ip")
                    .args(["netns", "exec", &topo_s, "iperf3", "-s", "-1", "-p", &port])
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                std::thread::sleep(Duration::from_millis(300));
                let out = Command::new("ip")
                    .args([
                        "netns", "exec", &topo_c, "iperf3", "-J", "-R", "-t", "4", "-c", &addr, "-p", &port,
                    ])
                    .output()
                    .unwrap();
                let _ = srv.kill();
                let _ = srv.wait();
                let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                j["end"]["sum_received"]["bits_per_second"].as_f64().unwrap() / 1e6
            })
        })
        .collect();
    let mbit: Vec<f64> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    let total: f64 = mbit.iter().sum();
    let io: u64 = emu.stats().iter().flatten().map(|s| s.dropped_io).sum();
    eprintln!(
        "concurrent TCP through the emulator: {mbit:.0?} Mbit/s, total {total:.0} Mbit/s \
         ({io} frames dropped by the kernel before the emulator read them)"
    );
    assert!(mbit.iter().all(|&m| m >= 300.0), "{mbit:?}");
    assert!(total >= 500.0, "{total}");
}

/// Echo exchanges started at the given offsets from the emulator's start on `path`; returns
/// (offset actually started, round-trip time) per exchange.
fn timed_echoes(topo: &Topology, path: usize, start: Instant, at_ms: &[u64]) -> Vec<(Duration, Duration)> {
    let (sns, cns) = (topo.server_ns.clone(), topo.client_ns.clone());
    let addr = format!("{}:7778", topo.server_addr(path));
    let bind = addr.clone();
    let server = std::thread::spawn(move || {
        enter_ns(&sns).unwrap();
        let l = TcpListener::bind(&bind).unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut b = [0u8; 1];
        while s.read_exact(&mut b).is_ok() && s.write_all(&b).is_ok() {}
    });
    let at_ms = at_ms.to_vec();
    let got = std::thread::spawn(move || {
        enter_ns(&cns).unwrap();
        let mut s = loop {
            match TcpStream::connect(&addr) {
                Ok(s) => break s,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        s.set_nodelay(true).unwrap();
        let mut v = Vec::new();
        let mut b = [7u8; 1];
        for ms in at_ms {
            let due = start + Duration::from_millis(ms);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let t = Instant::now();
            s.write_all(&b).unwrap();
            s.read_exact(&mut b).unwrap();
            v.push((t - start, t.elapsed()));
        }
        v
    })
    .join()
    .unwrap();
    server.join().unwrap();
    got
}

#[test]
fn events_change_delay_and_take_the_link_down() {
    if !ready("events_change_delay_and_take_the_link_down") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut profile = seed_default(70);
    profile.paths.truncate(1);
    let p0 = &mut profile.paths[0];
    for d in [&mut p0.down, &mut p0.up] {
        d.delay = Duration::from_millis(10);
        d.rate = Rate::Constant(20_000);
    }
    let ev = |at, direction, action| Event {
        at: Duration::from_millis(at),
        path: 0,
        direction,
        action,
    };
    let change = |ms| Action::Change {
        rate_kbit: None,
        delay: Some(Duration::from_millis(ms)),
        loss: None,
    };
    // RTT 20 ms → 10 + 40 = 50 ms (down direction only) at 1.0 s; down at 1.8 s, up at 2.4 s.
    profile.events = vec![
        ev(1000, Direction::Down, change(40)),
        ev(1800, Direction::Both, Action::Down),
        ev(2400, Direction::Both, Action::Up),
    ];
    let (topo, emu) = lab(&profile);
    let got = timed_echoes(
        &topo,
        0,
        emu.start,
        &[
            300, 400, 500, 600, 700, 1200, 1300, 1400, 1500, 1600, 2000, 3000, 3100, 3200, 3300, 3400,
        ],
    );
    let report: Vec<String> = got
        .iter()
        .map(|(at, r)| format!("{}:{:.1}", at.as_millis(), r.as_secs_f64() * 1000.0))
        .collect();
    eprintln!("echoes (start ms: RTT ms): {}", report.join(" "));
    // Medians of five: one late wake-up on a busy 2-core machine must not decide.
    let median = |from: usize| {
        let mut v: Vec<f64> = got[from..from + 5].iter().map(|g| g.1.as_secs_f64() * 1000.0).collect();
        v.sort_by(f64::total_cmp);
        v[2]
    };
    let (before, after, back) = (median(0), median(5), median(11));
    eprintln!("median RTT before the change {before:.2} ms (20), after {after:.2} ms (50), after up {back:.2} ms (50)");
    assert!((before - 20.0).abs() <= 1.4, "before the change: {before}");
    assert!((after - 50.0).abs() <= 2.0, "after the change: {after}");
    assert!((back - 50.0).abs() <= 2.0, "after up: {back}");
    // Sent while the link was down: answered only after it came back up.
    let (at, r) = got[10];
    assert!(at + r >= Duration::from_millis(2400), "crossed a down link: {got:?}");
    let stats = emu.stats();
    assert!(stats[0][1].dropped_down >= 1, "{stats:?}");
}

/// The shared mahimahi traces, if this checkout sits next to them.
fn shared_trace(name: &str) -> Option<std::path::PathBuf> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces")
        .join(name);
    p.exists().then_some(p)
}

#[test]
fn real_trace_replay_delivers_its_opportunities() {
    if !ready("real_trace_replay_delivers_its_opportunities") {
        return;
    }
    let Some(file) = shared_trace("ATT-LTE-driving-2016.down") else {
        skip(
            "real_trace_replay_delivers_its_opportunities",
            "../shared/traces not found",
        );
        return;
    };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let trace = Trace::load(&file).unwrap();
    let mut profile = seed_default(70);
    profile.paths.truncate(1);
    // No delay downstream, so a frame leaves at its opportunity's time.
    profile.paths[0].down = LinkParams {
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        rate: Rate::Trace(trace.clone()),
        loss: 0.0,
        queue: QueueLimit::Millis(500),
    };
    let (topo, emu) = lab(&profile);
    // Keep the link backlogged: 40 Mbit/s of 1500-byte IP packets (each takes exactly one
    // opportunity) is above the trace's fastest 200 ms in this window (37 Mbit/s).
    let (sns, cns) = (topo.server_ns.clone(), topo.client_ns.clone());
    let (client, server) = (topo.client_addr(0), topo.server_addr(0));
    let until = emu.start + Duration::from_millis(6500);
    let dest = format!("{client}:7779");
    let sink = std::thread::spawn(move || {
        enter_ns(&cns).unwrap();
        let s = std::net::UdpSocket::bind(format!("{client}:7779")).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut b = [0u8; 2048];
        while Instant::now() < until + Duration::from_millis(300) {
            let _ = s.recv(&mut b);
        }
    });
    let source = std::thread::spawn(move || {
        enter_ns(&sns).unwrap();
        let s = std::net::UdpSocket::bind(format!("{server}:0")).unwrap();
        let payload = [0u8; 1472];
        let gap = Duration::from_secs_f64(1500.0 * 8.0 / 40e6);
        let mut next = Instant::now();
        while Instant::now() < until {
            // Sends in small bursts; the average is what matters to a 500 ms queue.
            for _ in 0..10 {
                let _ = s.send_to(&payload, &dest);
                next += gap;
            }
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    });
    let snapshot = |at_ms: u64| {
        std::thread::sleep((emu.start + Duration::from_millis(at_ms)).saturating_duration_since(Instant::now()));
        emu.stats()[0][0].clone()
    };
    let a = snapshot(2000);
    let b = snapshot(6000);
    source.join().unwrap();
    sink.join().unwrap();
    let want = trace.opportunities_between(Duration::from_millis(2000), Duration::from_millis(6000));
    let got = b.delivered - a.delivered;
    let ratio = got as f64 / want as f64;
    eprintln!(
        "ATT-LTE-driving-2016.down, 2-6 s: {got} packets delivered for {want} opportunities ({ratio:.3}); \
         {:.2} Mbit/s replayed; queue drops {} (backlogged)",
        got as f64 * 12_000.0 / 4.0 / 1e6,
        b.dropped_queue - a.dropped_queue
    );
    assert!(b.dropped_queue > a.dropped_queue, "the link was not backlogged");
    assert!((ratio - 1.0).abs() <= 0.05, "{got} vs {want}");
}

#[test]
fn emulator_adds_little_latency() {
    if !ready("emulator_adds_little_latency") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let direct = LinkParams {
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        rate: Rate::Unlimited,
        loss: 0.0,
        queue: QueueLimit::Bytes(1 << 20),
    };
    let mut profile = seed_default(70);
    profile.paths.truncate(1);
    profile.paths[0].down = direct.clone();
    profile.paths[0].up = direct;
    let (topo, _emu) = lab(&profile);
    let rtt = tcp_rtt(&topo, 0).as_secs_f64() * 1000.0;
    // Four forwarding hops' wake-ups (two per direction) and two AF_PACKET copies.
    eprintln!("TCP echo RTT through the emulator with no delay and no rate limit: {rtt:.3} ms");
    assert!(rtt < 1.0, "the emulator itself adds {rtt:.3} ms per round trip");
}
