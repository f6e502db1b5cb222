//! Data caps end to end, scaled down from the floor's 3 GB over a 1 GB cap to 150 MB over
//! a 40 MB cap (the mechanism does not depend on the size): the transfer moves to the
//! other path at the cap, the capped path's count passes the cap by at most 64 KB, and
//! the count survives a `kill -9` of the client.

mod support;
use std::time::Duration;

use support::*;

const CAP: u64 = 40_000_000;
const OVERSHOOT: u64 = 64 * 1024;

fn cap_of(lab: &Lab, path: &str) -> serde_json::Value {
    let s = lab.client_status();
    s["paths"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == path).cloned())
        .map(|p| p["cap"].clone())
        .unwrap_or(serde_json::Value::Null)
}

/// The client's `[[paths]]`: p1 secondary, p2 primary with the cap.
fn paths(lab: &Lab) -> String {
    format!(
        "[[paths]]\nname = \"p1\"\nserver = \"{}:{SERVER_PORT}\"\nsource = \"{}\"\npriority = \"secondary\"\n\
         [[paths]]\nname = \"p2\"\nserver = \"{}:{SERVER_PORT}\"\nsource = \"{}\"\n\
         metered = true\ncap = \"40 MB/day\"\nat_cap = \"backup\"\n",
        lab.server_addr(0),
        lab.client_addr(0),
        lab.server_addr(1),
        lab.client_addr(1),
    )
}

/// A fresh directory for a test's ledger.
fn state_dir(test: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mpfl-caps-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Downloads count too: the server stops sending on the capped path at what the client
/// granted it.
#[test]
fn a_download_hands_over_at_the_cap_too() {
    let test = "a_download_hands_over_at_the_cap_too";
    if !ready(test) {
        return;
    }
    let state = state_dir("download");
    let lab = Lab::new(Options {
        client_paths: Some(Box::new(paths)),
        // At a link's pace, so the cap is reached within the transfer: near the cap each
        // direction gets half of what is left per flush interval.
        rate_mbit: 200,
        client_root: format!(
            "state_file = \"{}\"\ncap_flush_ms = 100\n",
            state.join("ledger.db").display()
        ),
        ..Options::default()
    });
    let n = 150_000_000;
    let (got, want) = lab.download(n);
    assert_eq!(got, want);
    std::thread::sleep(Duration::from_millis(300));
    let c = cap_of(&lab, "p2");
    let received = lab.client_path_bytes();
    eprintln!("p2 cap: {c}; per-path bytes received {received:?}");
    let used = c["used"].as_u64().unwrap();
    assert!(used <= CAP + OVERSHOOT, "p2 passed its cap by {} bytes", used - CAP);
    assert!(used >= CAP - 200_000, "p2 stopped short of its cap: {used}");
    assert!(received[0] >= n - CAP, "p1 took over at the cap: {received:?}");
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn a_capped_path_hands_over_at_its_cap_and_its_count_survives_kill_9() {
    let test = "a_capped_path_hands_over_at_its_cap_and_its_count_survives_kill_9";
    if !ready(test) {
        return;
    }
    // p2 (primary, metered, capped) carries everything until its cap; then it is backup
    // and p1 (secondary) takes over.
    let state = state_dir("upload");
    let ledger = state.join("ledger.db");
    let lab = Lab::new(Options {
        client_paths: Some(Box::new(paths)),
        // At a link's pace, so the cap is reached within the transfer: near the cap each
        // direction gets half of what is left per flush interval.
        rate_mbit: 200,
        client_root: format!("state_file = \"{}\"\ncap_flush_ms = 100\n", ledger.display()),
        ..Options::default()
    });
    let mut lab = lab;
    let c = cap_of(&lab, "p2");
    assert_eq!(c["limit"], CAP, "{c}");
    assert_eq!(c["capped"], false);

    let n = 150_000_000;
    let (local, remote) = lab.upload(n);
    assert_eq!(local, remote, "the upload arrived whole");
    let c = cap_of(&lab, "p2");
    let used = c["used"].as_u64().unwrap();
    eprintln!("p2 cap: {c}; per-path bytes sent {:?}", lab.client_path_bytes_sent());
    assert_eq!(c["capped"], true, "{c}");
    assert!(used >= CAP - 100_000, "p2 stopped short of its cap: {used}");
    assert!(used <= CAP + OVERSHOOT, "p2 passed its cap by {} bytes", used - CAP);
    let sent = lab.client_path_bytes_sent();
    assert!(
        sent[0] as usize >= n - CAP as usize,
        "p1 took over at the cap: {sent:?}"
    );
    let tier = lab.client_status()["paths"][1]["tier_name"].clone();
    assert_eq!(tier, "backup", "at its cap p2 is a backup path");
    let metrics = lab.log("client"); // the log names the cap
    assert!(metrics.contains("path reached its data cap"), "{metrics}");

    // kill -9, a flush interval after the count stopped moving; a new client reads it back.
    std::thread::sleep(Duration::from_millis(500));
    let mut old = lab.client.take().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    let cfg = lab.dir.join("client.toml");
    let args = [BIN, "client", "--config", cfg.to_str().unwrap()];
    lab.client = Some(lab.spawn_in(&lab.topo.client_ns.clone(), &args, "client2.log"));
    lab.wait_paths_up(2, Duration::from_secs(10));
    let c2 = cap_of(&lab, "p2");
    eprintln!("after kill -9: {c2}");
    let used2 = c2["used"].as_u64().unwrap();
    assert!(used2 >= used, "the ledger lost {} bytes", used - used2);
    assert_eq!(c2["capped"], true, "still at its cap after the restart: {c2}");
    // And the restarted client keeps the capped path off the data.
    let before = lab.client_path_bytes_sent();
    let (local, remote) = lab.upload(8_000_000);
    assert_eq!(local, remote);
    let after = lab.client_path_bytes_sent();
    assert!(after[1] - before[1] < 128 * 1024, "{before:?} -> {after:?}");
    let _ = std::fs::remove_dir_all(&state);
}
