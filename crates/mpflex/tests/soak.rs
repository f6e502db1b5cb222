//! The soak (`scripts/soak.sh`; ignored by `cargo test`): a lab client and server under
//! [`STREAMS`] streams opening and closing continuously for `MPFLEX_SOAK_SECS` (an hour by
//! default), each uploading and downloading a random amount checked byte by byte, while
//! a random path's connection is killed every 10 to 30 s (it reconnects by itself). The
//! server's and the client's RSS are read every 2 s, each minute's median kept (60 over
//! the run): the mean of the last ten minutes stays within 5 % of that of minutes 10–20,
//! and not one byte is lost or altered.

mod support;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use support::exchange::{origin, origin_listener, slot, Tally};
use support::*;

/// Streams open at once, each closed after its exchange and opened again.
const STREAMS: usize = 1_000;
/// The soak's own origin, in the server namespace.
const PORT: u16 = 9_100;
const MAX_DOWN: u32 = 256 << 10;
const MAX_UP: u32 = 64 << 10;

/// How often RSS is read within each minute of the run.
const SAMPLE: Duration = Duration::from_secs(2);

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn mean(v: &[u64]) -> f64 {
    v.iter().sum::<u64>() as f64 / v.len().max(1) as f64
}

#[test]
#[ignore = "an hour long: scripts/soak.sh"]
fn soak_streams_and_path_kills_keep_memory_flat_and_every_byte() {
    if !ready("soak_streams_and_path_kills_keep_memory_flat_and_every_byte") {
        return;
    }
    let secs: u64 = std::env::var("MPFLEX_SOAK_SECS").map_or(3600, |s| s.parse().expect("MPFLEX_SOAK_SECS"));
    let streams: usize =
        std::env::var("MPFLEX_SOAK_STREAMS").map_or(STREAMS, |s| s.parse().expect("MPFLEX_SOAK_STREAMS"));
    support::hostile::raise_nofile();
    let lab = Lab::new(Options::default());
    let (sns, cns) = (lab.topo.server_ns.clone(), lab.topo.client_ns.clone());
    let l = in_ns(&sns, || origin_listener(PORT));
    std::thread::spawn(move || origin(l));
    let pids = [lab.server.as_ref().unwrap().id(), lab.client.as_ref().unwrap().id()];

    let (tally, stop) = (Arc::new(Tally::default()), Arc::new(AtomicBool::new(false)));
    let slots: Vec<_> = (0..streams)
        .map(|_| {
            let (proxy, dest, tally, stop) = (lab.socks(), lab.server_addr(0), tally.clone(), stop.clone());
            spawn_in_ns(&cns, move || slot(proxy, dest, PORT, (MAX_DOWN, MAX_UP), tally, stop))
        })
        .collect();

    let t0 = Instant::now();
    let every = Duration::from_secs(secs) / 60;
    let (mut rss, mut kills) = (Vec::new(), 0);
    let mut next_kill = t0 + Duration::from_secs(rand::thread_rng().gen_range(10..=30));
    while rss.len() < 60 {
        let due = t0 + every * (rss.len() as u32 + 1);
        // Each minute's RSS is the median of readings every `SAMPLE` through it: a single
        // reading lands on whatever burst of buffers a thousand streams hold at that
        // instant (tens of megabytes up or down), which says nothing of a leak.
        let mut minute: Vec<[u64; 2]> = Vec::new();
        let mut next_sample = Instant::now();
        while Instant::now() < due {
            if Instant::now() >= next_sample {
                minute.push(pids.map(rss_kib_of));
                next_sample += SAMPLE;
            }
            if Instant::now() >= next_kill {
                let p = rand::thread_rng().gen_range(0..2);
                let how = if rand::random() { Kill::Reset } else { Kill::ServerReset };
                kills += lab.kill_path(p, how) as u32;
                next_kill = Instant::now() + Duration::from_secs(rand::thread_rng().gen_range(10..=30));
            }
            std::thread::sleep(Duration::from_millis(200).min(due.saturating_duration_since(Instant::now())));
        }
        let sample = [0, 1].map(|i| median(minute.iter().map(|m| m[i]).collect()));
        eprintln!(
            "{:>5} s: server {} KiB, client {} KiB; {} exchanges, {:.1} MB, {} failed, {kills} paths killed",
            t0.elapsed().as_secs(),
            sample[0],
            sample[1],
            tally.exchanges.load(Ordering::Relaxed),
            tally.bytes.load(Ordering::Relaxed) as f64 / 1e6,
            tally.failed.load(Ordering::Relaxed)
        );
        rss.push(sample);
        for e in tally.errors.lock().unwrap().iter() {
            eprintln!("        failed: {e}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    for s in slots {
        s.join().unwrap();
    }
    let (exchanges, failed) = (
        tally.exchanges.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
    );
    for (i, who) in ["server", "client"].iter().enumerate() {
        let series: Vec<u64> = rss.iter().map(|s| s[i]).collect();
        let (early, late) = (mean(&series[10..20]), mean(&series[50..60]));
        eprintln!(
            "{who} RSS: samples 10–20 {:.1} MB, last 10 {:.1} MB ({:+.1} %)",
            early / 1024.0,
            late / 1024.0,
            (late / early - 1.0) * 100.0
        );
        assert!((late / early - 1.0).abs() <= 0.05, "{who} RSS not flat: {series:?}");
    }
    eprintln!("{exchanges} exchanges, {failed} failed, {kills} path connections killed");
    assert!(
        exchanges > streams as u64,
        "the soak moved little: {exchanges} exchanges"
    );
    assert!(kills > 0, "no path was killed");
    assert_eq!(failed, 0, "exchanges failed or arrived altered");
}
