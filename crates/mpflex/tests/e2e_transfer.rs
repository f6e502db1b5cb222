//! A real client (curl) through `mpflex client` + `mpflex server` over two namespace
//! paths: large downloads and uploads arrive byte-exact, and both paths carry bytes.

mod support;
use support::*;

#[test]
fn download_100mb_and_upload_50mb_over_two_paths() {
    if !ready("download_100mb_and_upload_50mb_over_two_paths") {
        return;
    }
    let lab = Lab::new(Options {
        scheduler: "roundrobin",
        ..Default::default()
    });
    let (got, want) = lab.download(100 << 20);
    assert_eq!(want.len(), 64, "origin sha: {want:?}");
    assert_eq!(got, want, "100 MB download corrupted");
    let per_path = lab.client_path_bytes();
    assert_eq!(per_path.len(), 2);
    assert!(
        per_path.iter().all(|&b| b > 10 << 20),
        "a path carried too little: {per_path:?}"
    );

    let (local, remote) = lab.upload(50 << 20);
    assert_eq!(local, remote, "50 MB upload corrupted");
    let s = lab.server_status();
    let paths = s["sessions"][0]["paths"].as_array().unwrap().clone();
    let up: Vec<u64> = paths.iter().map(|p| p["bytes_received"].as_u64().unwrap()).collect();
    assert!(up.iter().all(|&b| b > 5 << 20), "upload used one path only: {up:?}");
}

#[test]
fn minrtt_and_redundant_transfer_intact() {
    if !ready("minrtt_and_redundant_transfer_intact") {
        return;
    }
    for sched in ["minrtt", "redundant"] {
        let lab = Lab::new(Options {
            scheduler: sched,
            ..Default::default()
        });
        let (got, want) = lab.download(20 << 20);
        assert_eq!(got, want, "{sched}: download corrupted");
        let (local, remote) = lab.upload(10 << 20);
        assert_eq!(local, remote, "{sched}: upload corrupted");
    }
}
