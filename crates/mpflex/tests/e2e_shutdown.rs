//! SIGTERM in the middle of a transfer: the client and the server exit promptly and
//! cleanly (status 0), and a restarted client gets a fresh session from the same server.

mod support;
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

fn wait_exit(child: &mut std::process::Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn sigterm_mid_transfer_exits_cleanly() {
    if !ready("sigterm_mid_transfer_exits_cleanly") {
        return;
    }
    let mut lab = Lab::new(Options {
        rate_mbit: 100,
        ..Default::default()
    });
    // A 200 MB download takes several seconds at 2 × 100 Mbit/s; stop the client in it.
    let mut curl = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.topo.client_ns,
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "--socks5-hostname",
        ])
        .arg(format!("127.0.0.1:{SOCKS_PORT}"))
        .arg(format!("http://127.0.0.1:{ORIGIN_PORT}/bytes/{}", 200u64 << 20))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let client = lab.client.as_mut().unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(client.id() as i32, libc::SIGTERM) };
    let status = wait_exit(client, Duration::from_secs(5)).expect("client did not exit within 5 s of SIGTERM");
    assert!(status.success(), "client exit status {status}");
    assert!(lab.log("client").contains("shutting down"));
    let _ = curl.kill();
    let _ = curl.wait();

    // The server noticed and still serves: a new client joins and transfers.
    let ccfg = lab.dir.join("client.toml");
    let log = std::fs::File::create(lab.dir.join("client2.log")).unwrap();
    lab.client = Some(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.topo.client_ns,
                BIN,
                "client",
                "--config",
                ccfg.to_str().unwrap(),
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    lab.wait_paths_up(2, Duration::from_secs(10));
    let (got, want) = lab.download(4 << 20);
    assert_eq!(got, want);

    let server = lab.server.as_mut().unwrap();
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let status = wait_exit(server, Duration::from_secs(5)).expect("server did not exit within 5 s of SIGTERM");
    assert!(status.success(), "server exit status {status}");
}
