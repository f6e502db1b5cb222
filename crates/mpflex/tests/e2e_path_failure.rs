//! Paths die in the middle of downloads — their TCP connection destroyed (reset) or their
//! link taken down (silence) — at random points. Every download must still arrive
//! byte-exact, and a path that comes back must carry traffic again.

mod support;
use std::time::Duration;

use rand::Rng;
use support::*;

#[test]
fn random_path_kills_lose_nothing_and_paths_return() {
    if !require_root("random_path_kills_lose_nothing_and_paths_return") {
        return;
    }
    // 200 Mbit/s per path and direction, so a 16 MB download takes long enough to be hit.
    let lab = Lab::new(Options {
        scheduler: "roundrobin",
        rate_mbit: 200,
        ..Default::default()
    });
    let size = 16 << 20;
    let mut rng = rand::thread_rng();
    let iterations = 12;
    for i in 0..iterations {
        let path = rng.gen_range(0..2);
        let delay = Duration::from_millis(rng.gen_range(20..300));
        let by_link = i % 2 == 1;
        let killer = {
            let cns = lab.cns.clone();
            let src = lab.client_addr(path);
            let dev = format!("p{}c", path + 1);
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let cmd = if by_link {
                    format!("ip -n {cns} link set {dev} down")
                } else {
                    format!("ip netns exec {cns} ss -K src {src} dport = :{SERVER_PORT}")
                };
                std::process::Command::new("sh").arg("-c").arg(cmd).status().unwrap();
            })
        };
        let (got, want) = lab.download(size);
        killer.join().unwrap();
        assert_eq!(
            got,
            want,
            "iteration {i}: download corrupted after killing path {path} ({}) at {delay:?}",
            if by_link { "link down" } else { "socket reset" }
        );
        if by_link {
            lab.link_up(path);
        }
        lab.wait_paths_up(2, Duration::from_secs(15));
    }
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
    let s = lab.client_status();
    let failures: u64 = s["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["failures"].as_u64().unwrap())
        .sum();
    eprintln!("survived {iterations} random path kills; client saw {failures} path failures");
    assert!(failures >= iterations / 2, "kills were not noticed: {failures}");
}
