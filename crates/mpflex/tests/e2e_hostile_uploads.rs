//! After authentication: one client key, run by six `mpflex client` processes (six
//! sessions), uploads without end through SOCKS5 into destinations that accept and never
//! read. Every byte the server takes for them waits in its memory, so what bounds it is
//! the session credit the server grants: one budget over all the key's sessions
//! (`limits.receive_buffer_per_client`), not a window per session. The server's RSS grows
//! by at most 64 MB over idle, and an honest client of another key downloads 50 MB
//! (sha256 checked) in at most 1.25 × its time without the attack, measured in the same
//! test.

mod support;
use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::hostile::*;
use support::*;

/// Sessions of the hostile key (`limits.max_sessions_per_client` is 8) and streams each.
const HOSTILE: usize = 6;
const STREAMS_EACH: usize = 16;
/// The destinations' port, in the server's namespace.
const SINK_PORT: u16 = 9_001;
/// The honest download; the paths' rate, so the download is link-bound and the ratio
/// measures what the attack takes from the honest client, not the machine's noise.
const SIZE: u64 = 50 << 20;
const RATE_MBIT: u32 = 200;
/// How long the attack runs before the server's memory is read: at the paths' rate,
/// time to send several times the key's budget if nothing held it back.
const ATTACK: Duration = Duration::from_secs(10);

/// Opens a stream through `proxy` to the sink and writes into it until the write fails
/// (the test's end kills the proxy). Returns at once; the writing runs in a thread.
fn upload_forever(cns: &str, proxy: SocketAddr, dest: String) {
    spawn_in_ns(cns, move || {
        let Ok(mut s) = socks_connect(proxy, &dest, SINK_PORT) else {
            return;
        };
        let block = vec![0x5au8; 256 << 10];
        while s.write_all(&block).is_ok() {}
    });
}

#[test]
fn one_key_uploading_into_silent_destinations_holds_one_budget() {
    let name = "one_key_uploading_into_silent_destinations_holds_one_budget";
    if !ready(name) {
        return;
    }
    raise_nofile();
    let (hostile_priv, hostile_pub) = keygen();
    let lab = Lab::new(Options {
        rate_mbit: RATE_MBIT,
        server_toml: format!("[[clients]]\nname = \"hostile\"\npublic_key = \"{hostile_pub}\"\n"),
        ..Options::default()
    });
    let server_pid = lab.server.as_ref().unwrap().id();
    let (sns, cns) = (lab.topo.server_ns.clone(), lab.topo.client_ns.clone());
    silent_destination(&sns, SINK_PORT);
    let dest = lab.server_addr(0);

    // Without the attack.
    let base = best_download(&lab, SIZE, 2);
    let idle = rss_kib_of(server_pid);

    let hostile: Vec<_> = (0..HOSTILE).map(|i| hostile_client(&lab, &hostile_priv, i)).collect();
    for (_, proxy) in &hostile {
        for _ in 0..STREAMS_EACH {
            upload_forever(&cns, *proxy, dest.clone());
        }
    }
    let t0 = Instant::now();
    let mut peak = idle;
    while t0.elapsed() < ATTACK {
        peak = peak.max(rss_kib_of(server_pid));
        std::thread::sleep(Duration::from_millis(200));
    }
    let sessions = metric(&server_metrics(&lab), "mpflex_sessions");
    let attacked = best_download(&lab, SIZE, 1);
    peak = peak.max(rss_kib_of(server_pid));
    let grown_mb = (peak.saturating_sub(idle)) as f64 / 1024.0;
    eprintln!(
        "server RSS {:.1} MB idle, +{grown_mb:.1} MB at most under {HOSTILE} sessions × {STREAMS_EACH} uploads \
         ({sessions} sessions); honest 50 MB in {base:.2} s alone, {attacked:.2} s under the attack",
        idle as f64 / 1024.0
    );
    assert!(
        grown_mb <= 64.0,
        "the server grew by {grown_mb:.1} MB under one key's uploads (floor 64 MB)"
    );
    assert!(
        attacked <= 1.25 * base,
        "the honest download took {attacked:.2} s under the attack, {base:.2} s without"
    );
    for (mut child, _) in hostile {
        let _ = child.kill();
        let _ = child.wait();
    }
}
