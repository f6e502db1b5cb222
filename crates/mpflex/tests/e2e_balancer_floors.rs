//! Measurements of the balancer setup (docs/balancer.md, "Measured"): benchmarks, not
//! unit tests, so they are ignored by default; they print what they measured and, with
//! `MPFLEX_RECORD=1`, append it to `lab-results/balancer-*.jsonl`, where the doc's
//! figures come from:
//!
//! ```sh
//! MPFLEX_RECORD=1 cargo test --release -p mpflex --test e2e_balancer_floors -- --ignored --nocapture --test-threads 1
//! ```

mod pool;
mod support;

use std::time::{Duration, Instant};

use pool::*;

/// Rate of each link in the throughput comparison, Mbit/s: the links, not the machine's
/// CPU, are the bottleneck, as they are for real clients.
const RATE_MBIT: u32 = 200;

/// The same downloads through the balancer and straight to the same server, alternated
/// in one run over the same rate-limited links; prints each and the ratio of the medians.
/// `MPFLEX_BALANCER_BUFFERS=no-sysctl` or `none` leaves out the balancer host's buffer
/// settings (the sysctl, or it and HAProxy's `tune.rcvbuf.server`), to measure what they
/// buy; unset, `tuned`, as deployed.
#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn throughput_through_the_balancer_against_direct() {
    let test = "throughput_through_the_balancer_against_direct";
    if !ready(test) {
        return;
    }
    const BYTES: u64 = 100 << 20;
    const ROUNDS: usize = 5;
    let buffers = match std::env::var("MPFLEX_BALANCER_BUFFERS").as_deref() {
        Err(_) | Ok("tuned") => Buffers::Tuned,
        Ok("no-sysctl") => Buffers::NoSysctl,
        Ok("none") => Buffers::None,
        Ok(other) => panic!("MPFLEX_BALANCER_BUFFERS={other}: tuned, no-sysctl or none"),
    };
    let mut pool = Pool::with_buffers(RATE_MBIT, "", buffers);
    let t = pool.client_toml(Via::Balancer, 1401, 9401);
    pool.spawn_client("balanced", &t);
    let id = pool.wait_placed(9401, Duration::from_secs(10));
    let t = pool.client_toml(Via::Direct(id), 1402, 9402);
    pool.spawn_client("direct", &t);
    assert_eq!(pool.wait_placed(9402, Duration::from_secs(10)), id);
    let ns = pool.topo.client_ns.clone();
    let rate = |socks: u16| {
        let t0 = Instant::now();
        let n = fetch(&ns, socks, BYTES, Duration::from_secs(30)).expect("download");
        n as f64 * 8.0 / t0.elapsed().as_secs_f64() / 1e6
    };
    // A first transfer each, not counted: both sessions' paths leave slow start.
    rate(1401);
    rate(1402);
    let (mut via, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        via.push(rate(1401));
        direct.push(rate(1402));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mv, md) = (median(&mut via), median(&mut direct));
    println!(
        "download {} MB, 2 links of {RATE_MBIT} Mbit/s, server {id}, buffers {}: through the balancer \
         {via:.0?} Mbit/s, direct {direct:.0?} Mbit/s; medians {mv:.0} / {md:.0} = {:.3}",
        BYTES >> 20,
        buffers.name(),
        mv / md
    );
    support::record(
        "balancer-throughput.jsonl",
        test,
        serde_json::json!({
            "buffers": buffers.name(),
            "link_mbit": RATE_MBIT,
            "links": 2,
            "mb": BYTES >> 20,
            "balancer_mbit": via,
            "direct_mbit": direct,
            "median_balancer_mbit": mv,
            "median_direct_mbit": md,
            "ratio": mv / md,
        }),
    );
}

/// One server behind the balancer (the other two stopped) holding 2,000 idle sessions of
/// two paths each, run by this process with the real client code: the server's resident
/// memory and its CPU time over 60 s of idleness — more than two keepalive intervals of
/// an idle session (`tuning.idle_keepalive_ms`, 25 s), whose keepalives come in bursts
/// here (the sessions start within seconds of each other), so a shorter window could miss
/// them all.
#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn one_server_holding_2000_idle_sessions() {
    let test = "one_server_holding_2000_idle_sessions";
    if !ready(test) {
        return;
    }
    const N: usize = 2000;
    // MPFLEX_KEEPALIVE_MS sets tuning.keepalive_ms on both ends (path timeout 3 × that),
    // MPFLEX_IDLE_KEEPALIVE_MS tuning.idle_keepalive_ms, to see what the keepalives cost;
    // unset, the defaults (1 s, and 25 s while a session carries nothing).
    let env_ms = |name: &str| std::env::var(name).ok().map(|ms| ms.parse::<u64>().unwrap());
    let mut tuning = String::new();
    if let Some(ms) = env_ms("MPFLEX_KEEPALIVE_MS") {
        tuning += &format!("keepalive_ms = {ms}\npath_timeout_ms = {}\n", 3 * ms);
    }
    if let Some(ms) = env_ms("MPFLEX_IDLE_KEEPALIVE_MS") {
        tuning += &format!("idle_keepalive_ms = {ms}\n");
    }
    if !tuning.is_empty() {
        tuning = format!("[tuning]\n{tuning}");
    }
    let mut pool = Pool::new(0, &tuning);
    for id in [2, 3] {
        let mut c = pool.signal_server(id, libc::SIGKILL);
        let _ = c.wait();
    }
    // The health checks take them out (two failures a second apart).
    std::thread::sleep(Duration::from_millis(2500));
    let pid = pool.servers[0].as_ref().unwrap().id();
    let rss_before = support::rss_kib_of(pid);
    let t0 = Instant::now();
    let client = pool.client_toml(Via::Balancer, 0, 0) + &tuning;
    let sessions = run_sessions(&pool.topo.client_ns, &client, N);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let p = pool.placement();
        let whole = p[0].iter().filter(|(_, up)| *up == 2).count();
        if whole == N {
            break;
        }
        assert!(Instant::now() < deadline, "only {whole} of {N} sessions up on server 1");
        std::thread::sleep(Duration::from_millis(500));
    }
    let setup = t0.elapsed();
    // Idle from here: only keepalives (every tuning.idle_keepalive_ms, 25 s by default).
    std::thread::sleep(Duration::from_secs(3));
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let window = Duration::from_secs(60);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let (c0, w0) = (cpu_ticks(pid), Instant::now());
    std::thread::sleep(window);
    let (c1, w1) = (cpu_ticks(pid), Instant::now());
    let cpu = (c1 - c0) as f64 / hz / (w1 - w0).as_secs_f64() * 100.0;
    let rss = support::rss_kib_of(pid);
    let sessions_held = pool.placement()[0].len();
    println!(
        "server 1: {sessions_held} sessions × 2 paths (up in {:.1} s), idle: RSS {:.0} MB ({:.0} MB before \
         the sessions), CPU {cpu:.2} % of a core over {} s; load average before: {}",
        setup.as_secs_f64(),
        rss as f64 / 1024.0,
        rss_before as f64 / 1024.0,
        window.as_secs(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let env: serde_json::Map<String, serde_json::Value> = ["MPFLEX_KEEPALIVE_MS", "MPFLEX_IDLE_KEEPALIVE_MS"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v.into())))
        .collect();
    support::record(
        "balancer-idle-2000.jsonl",
        test,
        serde_json::json!({
            "env": env,
            "window_s": window.as_secs(),
            "sessions": sessions_held,
            "paths": 2,
            "setup_s": (setup.as_secs_f64() * 10.0).round() / 10.0,
            "rss_mb": rss / 1024,
            "rss_before_mb": rss_before / 1024,
            "cpu_pct_core": (cpu * 100.0).round() / 100.0,
        }),
    );
    // MPFLEX_HOLD_SECS keeps the sessions up longer, for a profiler.
    if let Some(secs) = std::env::var("MPFLEX_HOLD_SECS").ok().and_then(|s| s.parse().ok()) {
        println!("holding for {secs} s; server pid {pid}");
        std::thread::sleep(Duration::from_secs(secs));
    }
    drop(sessions);
}
