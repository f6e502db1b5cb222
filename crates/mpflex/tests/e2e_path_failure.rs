//! Paths die in the middle of transfers — their TCP connection destroyed (reset, in the
//! client's or the server's kernel) or their link taken down (silence) — at random points,
//! on two paths and on three. Every transfer must still arrive byte-exact, every kill must
//! be noticed, and a path that comes back must carry traffic again.

mod support;
use std::time::{Duration, Instant};

use rand::Rng;
use support::*;

const KILLS: [Kill; 3] = [Kill::Reset, Kill::LinkDown, Kill::ServerReset];

/// How long a killed path may take to return: the longest pause between failed dials (30 s)
/// and a dial's own time.
const REDIAL_BOUND: Duration = Duration::from_secs(35);

/// Runs `transfer` `iterations` times, each time killing a random path (of `paths`) at a random point
/// of it (drawn from an undisturbed run's duration), with the kill flavours in turn.
/// `transfer` does only the transfer through mpflex and returns the sha256 of what
/// arrived, `want` is what should have: whether a kill landed during the transfer is
/// judged by when the transfer itself ended (a check of the origin's own bytes timed with
/// it made kills after the end count as mid-transfer, and held to the busy bound).
/// Returns how many kills landed while the transfer was running.
fn kill_during(
    lab: &Lab,
    paths: usize,
    what: &str,
    iterations: usize,
    want: &str,
    transfer: impl Fn() -> String + Sync,
) -> usize {
    // Calibrate, so (nearly) every kill lands inside a transfer.
    let t0 = Instant::now();
    let got = transfer();
    let clean = t0.elapsed();
    assert_eq!(got, want, "undisturbed {what} corrupted");
    eprintln!("undisturbed {what}: {clean:?}");

    let mut rng = rand::thread_rng();
    let mut landed = 0;
    for i in 0..iterations {
        let path = rng.gen_range(0..paths);
        let how = KILLS[i % KILLS.len()];
        let delay = clean.mul_f64(rng.gen_range(0.05..0.85));
        let failures_before = client_failures(lab);
        let start = Instant::now();
        let (got, took, (killed_at, found)) = std::thread::scope(|s| {
            let killer = s.spawn(|| {
                std::thread::sleep(delay);
                let at = start.elapsed();
                (at, lab.kill_path(path, how))
            });
            let r = transfer();
            let took = start.elapsed();
            (r, took, killer.join().unwrap())
        });
        let hit = found && killed_at < took;
        landed += hit as usize;
        eprintln!(
            "{what} {i}: path {path} {how:?} at {killed_at:?} ({}), took {took:?}",
            if hit { "mid-transfer" } else { "missed" }
        );
        assert_eq!(
            got, want,
            "{what} {i}: corrupted after killing path {path} ({how:?}) at {killed_at:?}"
        );
        if how == Kill::LinkDown {
            // Keep the link down until the client has declared the path dead (its
            // timeout), so every link-down kill exercises failure detection, not only
            // TCP's retransmission once the link is back. These paths name no interface
            // (the kernel's routing picks it), so the link's going is seen only as
            // silence: a kill during the transfer within the path timeout (1.5 s here) of
            // the transfer's end at the latest, one that missed it while the session idles
            // within the idle bound (`path_timeout + idle_keepalive - keepalive`, 26 s
            // here; docs/paths.md). A kill in the transfer's last path timeout may find
            // its path with nothing in flight (the other path carrying the tail): that
            // one is held to the idle bound too.
            let path_timeout = Duration::from_millis(Options::default().path_timeout_ms);
            let busy_after = took.saturating_sub(killed_at);
            let allowed = Duration::from_secs(if hit && busy_after >= path_timeout { 10 } else { 35 });
            let deadline = Instant::now() + allowed;
            while lab.client_status()["paths"][path]["up"] != false && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            assert_eq!(
                lab.client_status()["paths"][path]["up"],
                false,
                "{what} {i}: path {path}'s link is down but the client still calls it up after {allowed:?}"
            );
            lab.restore_path(path);
        }
        // The killed path comes back once its re-dial gets through. A dial that went out
        // before the route was restored fails (no route), and these paths name no
        // interface, so no link event re-aims it: it is dialled again after its backoff,
        // which kills in a row (connections that ended within 10 s) stretch to at most
        // 30 s (docs/paths.md, "Dialling through an outage").
        lab.wait_paths_up(paths, REDIAL_BOUND);
        if found {
            let failures = client_failures(lab);
            assert!(
                failures > failures_before,
                "{what} {i}: killing path {path} ({how:?}) was not counted as a failure ({failures_before} -> {failures})"
            );
        }
    }
    assert!(
        landed * 3 >= iterations * 2,
        "only {landed} of {iterations} kills hit a running {what}: the test tested little"
    );
    landed
}

#[test]
fn random_path_kills_during_downloads_lose_nothing_and_paths_return() {
    if !ready("random_path_kills_during_downloads_lose_nothing_and_paths_return") {
        return;
    }
    // 200 Mbit/s per path and direction, so a download lasts long enough to be hit.
    let lab = Lab::new(Options {
        scheduler: "roundrobin",
        rate_mbit: 200,
        ..Default::default()
    });
    let size: u64 = 20 << 20;
    let iterations = 12;
    let landed = kill_during(&lab, 2, "download", iterations, &lab.expected_sha256(size), || {
        lab.fetch(size)
    });

    // The paths are back: both must carry a fresh download.
    let before = lab.client_path_bytes();
    let (got, want) = lab.download(size);
    assert_eq!(got, want);
    let after = lab.client_path_bytes();
    for p in 0..2 {
        assert!(
            after[p] - before[p] > 1 << 20,
            "path {p} carried {} bytes after coming back",
            after[p] - before[p]
        );
    }
    let failures = client_failures(&lab);
    let resent = server_resent(&lab);
    eprintln!(
        "survived {iterations} random path kills ({landed} mid-transfer); client saw {failures} path \
         failures; server re-sent {resent} payload bytes"
    );
    assert!(failures >= landed as u64, "kills were not noticed: {failures}");
}

#[test]
fn random_path_kills_during_uploads_lose_nothing() {
    if !ready("random_path_kills_during_uploads_lose_nothing") {
        return;
    }
    let lab = Lab::new(Options {
        scheduler: "roundrobin",
        rate_mbit: 200,
        ..Default::default()
    });
    let (file, sha) = lab.prepare_upload(20 << 20);
    let landed = kill_during(&lab, 2, "upload", 6, &sha, || lab.upload_file(&file));
    // The client is the sender here: it is the one that must have re-sent.
    let resent: u64 = lab.client_status()["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["payload_resent"].as_u64().unwrap_or(0))
        .sum();
    eprintln!("survived 6 random path kills during uploads ({landed} mid-transfer); client re-sent {resent} bytes");
    let before = lab.client_path_bytes_sent();
    let (local, remote) = lab.upload(8 << 20);
    assert_eq!(local, remote);
    let after = lab.client_path_bytes_sent();
    for p in 0..2 {
        assert!(
            after[p] - before[p] > 1 << 20,
            "path {p} sent {} bytes after the kills",
            after[p] - before[p]
        );
    }
}

/// Three paths, one of them plugged in after the start (as a router's third WAN): kills on
/// any of them, downloads and uploads, lose nothing, and all three carry afterwards.
#[test]
fn random_path_kills_on_three_paths_lose_nothing() {
    if !ready("random_path_kills_on_three_paths_lose_nothing") {
        return;
    }
    let lab = Lab::new(Options {
        scheduler: "roundrobin",
        rate_mbit: 200,
        client_paths: Some(Box::new(|lab: &Lab| {
            (0..3)
                .map(|p| {
                    format!(
                        "[[paths]]\nname = \"p{}\"\nserver = \"{}:{SERVER_PORT}\"\nsource = \"{}\"\n",
                        p + 1,
                        lab.server_addr(p),
                        lab.client_addr(p)
                    )
                })
                .collect()
        })),
        ..Default::default()
    });
    lab.plug_path(2);
    lab.wait_paths_up(3, Duration::from_secs(15));
    let size: u64 = 30 << 20;
    let down = kill_during(
        &lab,
        3,
        "download on three paths",
        9,
        &lab.expected_sha256(size),
        || lab.fetch(size),
    );
    let (file, sha) = lab.prepare_upload(20 << 20);
    let up = kill_during(&lab, 3, "upload on three paths", 6, &sha, || lab.upload_file(&file));
    let before = (lab.client_path_bytes(), lab.client_path_bytes_sent());
    let (got, want) = lab.download(size);
    assert_eq!(got, want);
    let (local, remote) = lab.upload(8 << 20);
    assert_eq!(local, remote);
    let after = (lab.client_path_bytes(), lab.client_path_bytes_sent());
    for p in 0..3 {
        let (down_p, up_p) = (after.0[p] - before.0[p], after.1[p] - before.1[p]);
        assert!(
            down_p > 1 << 20 && up_p > 1 << 20,
            "path {p} carried {down_p} bytes down and {up_p} up after the kills"
        );
    }
    eprintln!("three paths survived 15 random kills ({down} during downloads, {up} during uploads)");
}

/// Path failures the client has counted, all paths together.
fn client_failures(lab: &Lab) -> u64 {
    lab.client_status()["paths"]
        .as_array()
        .expect("client status has no paths")
        .iter()
        .map(|p| p["failures"].as_u64().unwrap())
        .sum()
}

/// Payload bytes the server has re-sent, all sessions and paths together.
fn server_resent(lab: &Lab) -> u64 {
    lab.server_status()["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["paths"].as_array().cloned().unwrap_or_default())
        .map(|p| p["payload_resent"].as_u64().unwrap_or(0))
        .sum()
}
