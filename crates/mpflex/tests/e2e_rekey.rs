//! Record keys switch by volume and by time on both ends without a stall: with
//! `tuning.rekey_after_bytes` and `tuning.rekey_after_ms` set tiny on client and server
//! (the shipped 1 GiB and 2 minutes would need gigabytes or minutes to show a switch), a
//! download and an upload over two paths arrive byte-exact across dozens of key switches
//! in each direction, both ends count the switches the other made, and idle paths keep
//! switching by time alone. The download takes about as long as on a lab with the
//! shipped limits beside it.

mod support;
use std::time::{Duration, Instant};

use support::*;

/// Tiny limits: a key switch falls due after 256 KiB or 250 ms, and happens between two of
/// a path writer's batches (up to its socket's unsent limit, a megabyte): a 20 MB
/// transfer is some 20 to 80 switches.
const TINY: &str = "rekey_after_bytes = 262144\nrekey_after_ms = 250\n";
const DOWN: u64 = 20 << 20;
const UP: usize = 20 << 20;

/// (sent, received) key switches over a status's paths (the client's status lists its
/// paths at the top, the server's per session).
fn rekeys(status: &serde_json::Value) -> (u64, u64) {
    let paths = (status["paths"].as_array())
        .or(status["sessions"][0]["paths"].as_array())
        .cloned()
        .unwrap_or_default();
    let sum = |k: &str| paths.iter().map(|p| p[k].as_u64().unwrap_or(0)).sum();
    (sum("rekeys_sent"), sum("rekeys_received"))
}

fn timed_download(lab: &Lab) -> Duration {
    let t0 = Instant::now();
    let (got, want) = lab.download(DOWN);
    assert_eq!(got, want, "download corrupted");
    t0.elapsed()
}

#[test]
fn transfers_stay_intact_across_dozens_of_key_switches_both_ways() {
    if !ready("transfers_stay_intact_across_dozens_of_key_switches_both_ways") {
        return;
    }
    let shipped = {
        let lab = Lab::new(Options {
            scheduler: "roundrobin",
            ..Default::default()
        });
        timed_download(&lab);
        let t = timed_download(&lab).min(timed_download(&lab));
        assert_eq!(rekeys(&lab.server_status()), (0, 0), "the shipped limits switched keys");
        t
    };
    let lab = Lab::new(Options {
        scheduler: "roundrobin",
        client_toml: TINY.into(),
        server_toml: TINY.into(),
        ..Default::default()
    });
    timed_download(&lab);
    let tiny = timed_download(&lab).min(timed_download(&lab));
    let (local, remote) = lab.upload(UP);
    assert_eq!(local, remote, "upload corrupted");

    let (server, client) = (rekeys(&lab.server_status()), rekeys(&lab.client_status()));
    eprintln!("download {DOWN} B: {shipped:?} shipped limits, {tiny:?} tiny; key switches server {server:?}, client {client:?}");
    // 60 MB down, 20 MB up: a switch at least every megabyte or so, over both paths.
    assert!(server.0 >= 36, "server switched its key {} times", server.0);
    assert!(client.0 >= 18, "client switched its key {} times", client.0);
    // Each end follows the other's switches (counts read a moment apart may differ by the
    // switches of that moment: idle paths switch at every keepalive here).
    assert!(client.1.abs_diff(server.0) <= 6, "client {client:?}, server {server:?}");
    assert!(server.1.abs_diff(client.0) <= 6, "client {client:?}, server {server:?}");
    // No stall at a switch: under this load timings are noisy, so the bound is loose.
    assert!(
        tiny.as_secs_f64() <= 2.0 * shipped.as_secs_f64() + 0.5,
        "download took {tiny:?} across key switches, {shipped:?} without"
    );

    // Idle paths of a session holding a stream carry keepalives only (every 500 ms here):
    // the switches go on by time.
    let proxy = lab.socks();
    let held = in_ns(&lab.topo.client_ns, move || {
        socks_connect(proxy, "127.0.0.1", ORIGIN_PORT).unwrap()
    });
    std::thread::sleep(Duration::from_secs(3));
    drop(held);
    let later = rekeys(&lab.client_status());
    assert!(
        later.0 >= client.0 + 2,
        "no switch by time on idle paths: {client:?} then {later:?}"
    );
    let (got, want) = lab.download(1 << 20);
    assert_eq!(got, want, "download after idle switches corrupted");
}
