//! Transparent TCP by `TPROXY`, the router case: a host on a LAN behind the client's
//! namespace fetches from an HTTP origin's IPv4 and IPv6 addresses with curl; the rules
//! of docs/transparent.md (nftables in one test, iptables in the other) divert its
//! connections to `transparent_tproxy_listen`, whose accepted sockets carry the address
//! the host asked for, and mpflex carries them. The client's namespace does not forward,
//! so nothing reaches the origin around mpflex. A connection to a destination the
//! server's ACL denies is reset and counted on both sides. A LAN host's connection has no
//! owner on the client: `listeners = ["tproxy"]` matches it, `uids` does not; the client
//! namespace's own application, diverted through `lo`, has one.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::lan::{doc_block, lan_namespace, script_in, Tool, TCP_TPROXY_PORT};
use support::*;

/// The IPv6 origin's port (the harness's origin listens on IPv4 only).
const ORIGIN6_PORT: u16 = 8086;
/// The server's ACL denies this port.
const DENIED_PORT: u16 = 8099;

const RULES: &str = r#"
[[rules]]
name = "root-apps"
uids = [0]
paths = ["p1"]

[[rules]]
name = "lan"
listeners = ["tproxy"]
paths = ["p2"]
"#;

/// A child killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The lab, and the IPv6 origin it runs besides the harness's.
fn tproxy_lab() -> (Lab, Killed) {
    let lab = Lab::new(Options {
        routed: true,
        client_root: format!("transparent_tproxy_listen = \"[::]:{TCP_TPROXY_PORT}\"\n"),
        server_acl: format!("deny_ports = [{DENIED_PORT}]\n"),
        client_toml: RULES.into(),
        ..Default::default()
    });
    let origin = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/origin.py");
    let port = ORIGIN6_PORT.to_string();
    let origin6 = Killed(lab.spawn_in(&lab.topo.server_ns, &["python3", origin, "::", &port], "origin6.log"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = format!("http://[::1]:{ORIGIN6_PORT}/sha256/1");
    while Command::new("ip")
        .args(["netns", "exec", &lab.topo.server_ns, "curl", "-sSf", "-g", &url])
        .output()
        .map_or(true, |o| !o.status.success())
    {
        assert!(Instant::now() < deadline, "the IPv6 origin did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    (lab, origin6)
}

/// sha256 of `url` fetched with curl in namespace `ns`, or how curl failed (with its
/// exit code: 56 is a reset while receiving, 52 an empty reply).
fn fetch(ns: &str, url: &str) -> Result<String, String> {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; ip netns exec {ns} curl -sS -g --max-time 60 '{url}' | sha256sum"
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && stdout.len() >= 64 {
        Ok(stdout[..64].to_string())
    } else {
        Err(format!(
            "{} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn streams_refused(status: &serde_json::Value) -> u64 {
    let s = match &status["streams_refused"] {
        serde_json::Value::Null => &status["sessions"][0]["streams_refused"],
        v => v,
    };
    s.as_u64().unwrap_or(0)
}

/// Downloads over IPv4 and IPv6 from the LAN host through `tool`'s rules (docs/
/// transparent.md's blocks, as written), then a denied destination; then the undo blocks.
fn lan_fetches(test: &str, tool: Tool) {
    let (tools, rules): (&[&str], _) = match tool {
        Tool::Nft => (&["nft"], "router, TPROXY: nftables"),
        Tool::Iptables => (&["iptables", "ip6tables"], "router, TPROXY: iptables"),
    };
    if !ready(test) || !mpflex_netns::require_tools(test, tools) {
        return;
    }
    let (lab, _origin6) = tproxy_lab();
    let lan = lan_namespace(&lab);
    let c = lab.topo.client_ns.clone();
    let routing = "router, TPROXY: policy routing";
    script_in(&c, &doc_block("transparent.md", rules));
    script_in(&c, &doc_block("transparent.md", routing));
    let forwarding = sh(&[
        "ip",
        "netns",
        "exec",
        &lab.topo.client_ns,
        "sysctl",
        "-n",
        "net.ipv4.ip_forward",
        "net.ipv6.conf.all.forwarding",
    ]);
    assert_eq!(
        forwarding.split_whitespace().collect::<Vec<_>>(),
        ["0", "0"],
        "the client forwards"
    );
    let n: u64 = 3 << 20;
    let want = lab.expected_sha256(n);
    let v4 = format!("http://{}:{ORIGIN_PORT}/bytes/{n}", lab.service_addr(false));
    let v6 = format!("http://[{}]:{ORIGIN6_PORT}/bytes/{n}", lab.service_addr(true));
    for url in [&v4, &v6] {
        let before = lab.client_path_bytes();
        assert_eq!(fetch(&lan.0, url), Ok(want.clone()), "{url} through TPROXY");
        let d = bytes_since(&lab, &before);
        // The "lan" rule keeps it on p2: the LAN host has no owner here, so "root-apps"
        // (uid 0, which every process of this test is) does not match it.
        assert!(d[1] >= n && d[0] < 64 << 10, "{url}: per-path bytes {d:?}");
    }
    let hits = &lab.client_status()["rule_hits"];
    assert_eq!(hits["lan"], 2, "{hits}");
    assert!(hits["root-apps"].is_null(), "{hits}");

    // A denied destination: the connection is accepted (TPROXY answers for the origin),
    // then reset when the server refuses the stream; both sides count it.
    let denied = format!("http://{}:{DENIED_PORT}/bytes/10", lab.service_addr(false));
    let e = fetch(&lan.0, &denied).expect_err("the denied destination answered");
    assert!(e.contains("56") || e.contains("52") || e.contains("reset"), "{e}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while streams_refused(&lab.client_status()) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        streams_refused(&lab.client_status()),
        1,
        "client: {}",
        lab.client_status()
    );
    assert_eq!(streams_refused(&lab.server_status()), 1);
    assert!(lab.log("client").contains("refused by the server's [acl]"));
    // The other connections keep working after it.
    assert_eq!(
        fetch(&lan.0, &v4.replace(&n.to_string(), "1000")),
        Ok(lab.expected_sha256(1000))
    );
}

#[test]
fn tproxy_tcp_from_a_lan_host_with_nftables() {
    lan_fetches("tproxy_tcp_from_a_lan_host_with_nftables", Tool::Nft);
}

#[test]
fn tproxy_tcp_from_a_lan_host_with_iptables() {
    lan_fetches("tproxy_tcp_from_a_lan_host_with_iptables", Tool::Iptables);
}

/// The router's own application through the TPROXY listener: its packets to one address
/// are marked in OUTPUT, rerouted through `lo` and diverted in PREROUTING. Its socket is
/// in the client's namespace, so the owner lookup finds it and the `uids = [0]` rule
/// matches (and puts the download on p1), as it would for `REDIRECT`.
#[test]
fn tproxy_tcp_from_a_local_application_has_its_owner() {
    let test = "tproxy_tcp_from_a_local_application_has_its_owner";
    if !ready(test) || !mpflex_netns::require_tools(test, &["nft"]) {
        return;
    }
    let (lab, _origin6) = tproxy_lab();
    let c = lab.topo.client_ns.clone();
    let remote = lab.service_addr(false);
    script_in(
        &c,
        &format!(
            "nft add table ip local
nft add chain ip local output '{{ type route hook output priority mangle ; }}'
nft add rule ip local output ip daddr {remote} meta l4proto tcp meta mark set 1
nft add chain ip local prerouting '{{ type filter hook prerouting priority mangle ; }}'
nft add rule ip local prerouting iifname lo meta mark 1 meta l4proto tcp tproxy to :{TCP_TPROXY_PORT} accept
ip rule add fwmark 1 lookup 100
ip route add local 0.0.0.0/0 dev lo table 100"
        ),
    );
    let n: u64 = 2 << 20;
    let before = lab.client_path_bytes();
    let url = format!("http://{remote}:{ORIGIN_PORT}/bytes/{n}");
    assert_eq!(fetch(&c, &url), Ok(lab.expected_sha256(n)), "{url} through TPROXY");
    let d = bytes_since(&lab, &before);
    assert!(d[0] >= n && d[1] < 64 << 10, "per-path bytes {d:?}");
    let hits = &lab.client_status()["rule_hits"];
    assert_eq!(hits["root-apps"], 1, "{hits}");
}

/// The bytes each client path received since `before` (a [`Lab::client_path_bytes`]).
fn bytes_since(lab: &Lab, before: &[u64]) -> Vec<u64> {
    lab.client_path_bytes().iter().zip(before).map(|(a, b)| a - b).collect()
}
