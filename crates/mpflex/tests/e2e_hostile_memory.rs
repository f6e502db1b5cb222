//! An authenticated peer that ignores the protocol's obligations: with a valid client key
//! it grants unlimited credit (`MaxData` and every stream's `Window` of `u64::MAX`), opens
//! streams to an origin serving 50 MB each, reads its socket, pings to keep its path
//! alive, and never acknowledges anything. The server's memory grows by at most its send
//! buffer (the floor: 64 MB over idle), the session is given up after
//! `tuning.ack_timeout_ms` with a log line saying why, and an honest client of the same
//! server downloads 50 MB with the right hash meanwhile, at its usual speed.

mod support;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::hostile::*;
use support::*;

/// Streams the attacker opens, each asking the origin for 50 MB: ten times the send buffer.
const STREAMS: u32 = 20;
const EACH: u64 = 50_000_000;
/// The server's `tuning.ack_timeout_ms` here: shorter than the shipped 30 s so the test
/// sees the session given up within its run (the bound on memory does not depend on it).
const ACK_TIMEOUT_MS: u64 = 8_000;

/// Seconds curl takes to download 50 MB through the honest client, and whether the hash
/// was right.
fn timed_download(lab: &Lab) -> (f64, bool) {
    let t = Instant::now();
    let (got, want) = lab.download(EACH);
    (t.elapsed().as_secs_f64(), got == want)
}

#[test]
fn a_peer_that_never_acknowledges_holds_at_most_the_send_buffer() {
    if !ready("a_peer_that_never_acknowledges_holds_at_most_the_send_buffer") {
        return;
    }
    let lab = Lab::new(Options {
        // A rate the honest download's time can be compared at (50 MB in about two
        // seconds over both paths), not the veth's memory speed.
        rate_mbit: 100,
        // Lands in the lab server's [tuning] table.
        server_toml: format!("ack_timeout_ms = {ACK_TIMEOUT_MS}\n"),
        ..Options::default()
    });
    let server_pid = lab.server.as_ref().expect("server").id();
    let send_buffer = mpflex_engine::EngineConfig::new(mpflex_engine::Role::Server).send_buffer;

    // Warm: the honest client's first download sizes every buffer it will use.
    let (_, ok) = timed_download(&lab);
    assert!(ok, "honest download before the attack");
    let (alone, ok) = timed_download(&lab);
    assert!(ok);
    let idle_kib = rss_kib_of(server_pid);

    let keys = (key(&lab.client_key), key(&lab.server_pub));
    let server = lab.server_path_addr(0);
    let read = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let (read, stop) = (read.clone(), stop.clone());
        mpflex_netns::spawn_in_ns(&lab.topo.client_ns, move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(never_acknowledge(server, keys, STREAMS, EACH, read, stop))
        })
    };

    // The attacker's streams pull until the send buffer is full; the server's memory is
    // sampled throughout, and the honest client downloads beside it.
    let t0 = Instant::now();
    let mut peak_kib = idle_kib;
    let mut sample = || peak_kib = peak_kib.max(rss_kib_of(server_pid));
    // 32 MiB at the path's 100 Mbit/s take about 2.7 s.
    while t0.elapsed() < Duration::from_secs(4) {
        sample();
        std::thread::sleep(Duration::from_millis(100));
    }
    let (attacked, ok) = timed_download(&lab);
    assert!(ok, "the honest download's hash under the attack");
    while t0.elapsed() < Duration::from_millis(ACK_TIMEOUT_MS) + Duration::from_secs(6) && !attacker.is_finished() {
        sample();
        std::thread::sleep(Duration::from_millis(100));
    }
    sample();
    stop.store(true, Ordering::Relaxed);
    let attack = attacker.join().expect("attacker thread");
    let grown_mb = (peak_kib.saturating_sub(idle_kib)) as f64 / 1024.0;
    let read_mb = attack.read.load(Ordering::Relaxed) as f64 / 1e6;
    eprintln!(
        "server RSS idle {:.1} MB, peak {:.1} MB (+{grown_mb:.1} MB); attacker read {read_mb:.1} MB of {} MB asked; \
         closed after {:?}; honest 50 MB: {alone:.2} s alone, {attacked:.2} s under the attack",
        idle_kib as f64 / 1024.0,
        peak_kib as f64 / 1024.0,
        STREAMS as u64 * EACH / 1_000_000,
        attack.closed_after
    );
    assert!(
        read_mb > send_buffer as f64 / 1e6 / 2.0,
        "the attack never filled the send buffer (read {read_mb:.1} MB): it tested nothing"
    );
    assert!(
        read_mb < (STREAMS as u64 * EACH) as f64 / 1e6 / 4.0,
        "the server sent {read_mb:.1} MB to a peer that acknowledged nothing"
    );
    assert!(grown_mb <= 64.0, "server RSS grew by {grown_mb:.1} MB under the attack");
    let closed = attack.closed_after.expect("the server gave the session up");
    assert!(
        closed >= Duration::from_millis(ACK_TIMEOUT_MS) && closed <= Duration::from_millis(ACK_TIMEOUT_MS + 5_000),
        "given up after {closed:?} (ack_timeout_ms {ACK_TIMEOUT_MS})"
    );
    assert!(
        lab.log("server").contains("acknowledged nothing"),
        "the server's log says why it closed the session"
    );
    assert!(
        attacked <= 1.25 * alone,
        "honest 50 MB took {attacked:.2} s under the attack, {alone:.2} s alone"
    );
    // The server's status and the honest client are still there.
    assert!(lab.server_status().is_object(), "status answers");
    let (got, want) = lab.download(4 << 20);
    assert_eq!(got, want);
}
