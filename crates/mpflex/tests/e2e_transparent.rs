//! Transparent mode: an application that knows nothing of proxies connects to a remote
//! address; iptables REDIRECT sends it to `mpflex client`, which reads the original
//! destination (SO_ORIGINAL_DST) and carries the connection to it.

mod support;
use std::process::Command;

use support::*;

#[test]
fn redirected_connection_reaches_its_original_destination() {
    let test = "redirected_connection_reaches_its_original_destination";
    if !ready(test) || !mpflex_netns::require_tools(test, &["iptables"]) {
        return;
    }
    let lab = Lab::new(Options::default());
    // A "remote" service address: on the server's loopback, routed nowhere in the client.
    let remote = format!("10.{}.9.9", lab.topo.net);
    lab.add_remote(&remote);
    lab.redirect_to_client(&remote, Some(ORIGIN_PORT));
    let n = 5 << 20;
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ip netns exec {} curl -sS --max-time 60 http://{remote}:{ORIGIN_PORT}/bytes/{n} | sha256sum",
            lab.topo.client_ns
        ))
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&out.stdout)[..64].to_string();
    let want = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.topo.server_ns,
            "curl",
            "-sS",
            &format!("http://127.0.0.1:{ORIGIN_PORT}/sha256/{n}"),
        ])
        .output()
        .unwrap();
    assert_eq!(
        got,
        String::from_utf8_lossy(&want.stdout).trim(),
        "redirected download corrupted"
    );
    // It really went through mpflex.
    let bytes: u64 = lab.client_path_bytes().iter().sum();
    assert!(bytes > n, "mpflex carried only {bytes} bytes");
}
