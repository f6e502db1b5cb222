//! `tun.routes = "default"` with the real `mpflex client`: the host's traffic (IPv4 and
//! IPv6) goes into the TUN while the path connections keep leaving on their links, and
//! every exit — SIGTERM, SIGINT, and `kill -9` followed by a restart — leaves the host's
//! rules and routes exactly as they were. And `tun.lan`: a LAN behind the client gets
//! through the TUN what the host gets (downloads, uploads, DNS, pings).
//!
//! The server is reachable from the client only by its default routes (one per path, as
//! on a host with several uplinks; `Options::routed`), so a path socket without the mark
//! would itself be routed into the TUN: the paths staying up shows the mark works.

mod support;

use support::*;

const TUN: &str = "mpfh0";
/// The origin's IPv6 listener (the IPv4 one takes `ORIGIN_PORT` on every address).
const ORIGIN6_PORT: u16 = 8081;

/// The lab: paths to the server's service addresses (p1 over IPv4, p2 over IPv6) bound by
/// source only, the client not started; `[tun]` with `tun_keys`.
fn lab(tun_keys: &str) -> Lab {
    Lab::new(Options {
        routed: true,
        server_listen: "[::]:7000",
        defer_client: true,
        client_paths: Some(Box::new(|lab: &Lab| {
            format!(
                "[[paths]]\nname = \"p1\"\nserver = \"{}:{SERVER_PORT}\"\nsource = \"{}\"\n\
                 [[paths]]\nname = \"p2\"\nserver = \"[{}]:{SERVER_PORT}\"\nsource = \"{}\"\n",
                lab.service_addr(false),
                lab.client_addr(0),
                lab.service_addr(true),
                lab.addr6(1, false),
            )
        })),
        client_toml: format!("[tun]\nname = \"{TUN}\"\n{tun_keys}"),
        ..Options::default()
    })
}

/// Waits (at most 5 s) until no IPv6 address in the client's namespace is tentative: a
/// link-local address still in duplicate detection adds its routes later, which would
/// differ between snapshots through no doing of mpflex's.
fn settled(lab: &Lab) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let out = sh(&["ip", "-n", &lab.topo.client_ns, "-6", "addr", "show", "tentative"]);
        if out.trim().is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("IPv6 addresses still tentative after 5 s");
}

/// Everything the client's namespace routes by: rules and every table, both families.
fn snapshot(lab: &Lab) -> String {
    let mut out = String::new();
    for cmd in [
        "-4 rule show",
        "-6 rule show",
        "-4 route show table all",
        "-6 route show table all",
    ] {
        let mut args = vec!["ip", "-n", &lab.topo.client_ns];
        args.extend(cmd.split(' '));
        out += &format!("## ip {cmd}\n{}\n", sh(&args));
    }
    out
}

/// A "remote" IPv4 and IPv6 address on the server's loopback (no route to them in the
/// client's namespace but the default ones), with the origin on both.
fn remotes(lab: &Lab) -> (String, String, std::process::Child) {
    let net = lab.topo.net;
    let (v4, v6) = (format!("10.{net}.9.9"), format!("fd00:{net}:99::9"));
    for host in [format!("{v4}/32"), format!("{v6}/128")] {
        sh(&["ip", "-n", &lab.topo.server_ns, "addr", "add", &host, "dev", "lo"]);
    }
    let origin = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/origin.py");
    let origin6 = lab.spawn_in(
        &lab.topo.server_ns,
        &["python3", origin, "::", &ORIGIN6_PORT.to_string()],
        "origin6.log",
    );
    (v4, v6, origin6)
}

/// Downloads `n` bytes from the origin over each family from namespace `ns` (no proxy:
/// the host's routing decides) and checks their sha256.
fn downloads(lab: &Lab, ns: &str, v4: &str, v6: &str, n: u64) {
    let want = lab.expected_sha256(n);
    for url in [
        format!("http://{v4}:{ORIGIN_PORT}/bytes/{n}"),
        format!("http://[{v6}]:{ORIGIN6_PORT}/bytes/{n}"),
    ] {
        let got = run_in(ns, &format!("curl -sS --max-time 30 {url} | sha256sum | cut -c1-64"));
        assert_eq!(got, want, "{url} from {ns}; logs in {}", lab.dir.display());
    }
}

/// The device `ip route get` names for `dst` in the client's namespace (with `mark`).
fn dev_for(lab: &Lab, dst: &str, mark: Option<u32>) -> String {
    let m = mark.map(|m| m.to_string());
    let mut args = vec!["ip", "-n", &lab.topo.client_ns, "route", "get", dst];
    if let Some(m) = &m {
        args.extend(["mark", m.as_str()]);
    }
    let out = sh(&args);
    let mut words = out.split_whitespace();
    while let Some(w) = words.next() {
        if w == "dev" {
            return words.next().unwrap_or_default().to_string();
        }
    }
    panic!("no device in {out:?}")
}

#[test]
fn default_routes_carry_the_hosts_traffic_and_every_exit_restores_the_host() {
    let test = "default_routes_carry_the_hosts_traffic_and_every_exit_restores_the_host";
    if !ready(test) || !mpflex_netns::require_tools(test, &["sha256sum"]) {
        return;
    }
    let mut lab = lab("routes = \"default\"\n");
    let (v4, v6, _origin6) = remotes(&lab);
    settled(&lab);
    let before = snapshot(&lab);
    let client_ns = lab.topo.client_ns.clone();

    lab.start_client("client.log", 2);
    for svc in [lab.service_addr(false), lab.service_addr(true)] {
        assert_eq!(
            dev_for(&lab, &svc, None),
            TUN,
            "{svc}: the host's own traffic to the server goes into the TUN"
        );
        assert_eq!(
            dev_for(&lab, &svc, Some(mpflex::tun::routes::MARK)),
            lab.topo.client_dev(0),
            "{svc}: a path socket's leaves on its link"
        );
    }
    let paths0 = lab.client_path_bytes().iter().sum::<u64>();
    let n: u64 = 8 << 20;
    downloads(&lab, &client_ns, &v4, &v6, n);
    let status = lab.client_status();
    assert!(
        status["tun"]["tcp_accepted"].as_u64().unwrap_or(0) >= 2,
        "the downloads came through the TUN: {}",
        status["tun"]
    );
    assert!(
        lab.client_path_bytes().iter().sum::<u64>() - paths0 > 2 * n,
        "the session carried them"
    );
    assert_eq!(lab.paths_up(), 2, "the paths stayed up (none looped into the TUN)");
    assert!(lab.stop_client("TERM"), "a clean exit on SIGTERM");
    assert_eq!(snapshot(&lab), before, "SIGTERM left the host's routing as it was");

    lab.start_client("client2.log", 2);
    downloads(&lab, &client_ns, &v4, &v6, 1 << 20);
    assert!(lab.stop_client("INT"), "a clean exit on SIGINT");
    assert_eq!(snapshot(&lab), before, "SIGINT left the host's routing as it was");

    // A crash: the rules stay (pointing at an empty table: the host keeps its routes),
    // and the next start clears them before installing its own.
    lab.start_client("client3.log", 2);
    lab.stop_client("KILL");
    let after_crash = snapshot(&lab);
    assert_ne!(after_crash, before, "kill -9 leaves the rules behind");
    assert!(after_crash.contains("lookup 0x6d70") || after_crash.contains("lookup 28016"));
    lab.start_client("client4.log", 2);
    assert!(
        lab.log("client4").contains("an earlier mpflex left behind"),
        "the restart says it cleared what the crashed run left"
    );
    downloads(&lab, &client_ns, &v4, &v6, 1 << 20);
    assert!(lab.stop_client("TERM"));
    assert_eq!(
        snapshot(&lab),
        before,
        "kill -9, restart and stop left the host's routing as it was"
    );
}

/// Uploads `n` random bytes to the origin over each family from namespace `ns`; the origin
/// answers with the sha256 and length of what it received.
fn uploads(lab: &Lab, ns: &str, v4: &str, v6: &str, n: u64) {
    let file = lab.dir.join("upload.bin");
    let local = run_in(
        ns,
        &format!(
            "head -c {n} /dev/urandom | tee {} | sha256sum | cut -c1-64",
            file.display()
        ),
    );
    for url in [
        format!("http://{v4}:{ORIGIN_PORT}/upload"),
        format!("http://[{v6}]:{ORIGIN6_PORT}/upload"),
    ] {
        let got = run_in(
            ns,
            &format!(
                "curl -sS --max-time 60 -H 'Expect:' --data-binary @{} {url}",
                file.display()
            ),
        );
        assert_eq!(got, format!("{local} {n}"), "upload to {url} from {ns}");
    }
}

/// The LAN gets what the host itself gets through the TUN (e2e_tun's
/// `curl_dig_and_ping_through_the_tun_over_ipv4_and_ipv6`): 200 MB downloads and 50 MB
/// uploads with their sha256, 1,000 dig queries answered and pings, over both families,
/// all through the TUN; and exit leaves the host as it was.
#[test]
fn a_lan_behind_the_client_gets_what_the_host_gets_through_the_tun() {
    let test = "a_lan_behind_the_client_gets_what_the_host_gets_through_the_tun";
    if !ready(test) || !mpflex_netns::require_tools(test, &["sha256sum", "dig", "ping"]) {
        return;
    }
    let mut lab = lab("routes = \"default\"\nlan = [\"lan0\"]\n");
    let (v4, v6, _origin6) = remotes(&lab);
    dns::start_dns(&lab.topo.server_ns);
    // The server's ping sockets: its group (root's here) may open them.
    allow_ping_sockets(&lab.topo.server_ns);
    let lan = lan::lan_namespace(&lab);
    settled(&lab);
    let before = snapshot(&lab);
    lab.start_client("client.log", 2);
    downloads(&lab, &lan.0, &v4, &v6, 200 << 20);
    uploads(&lab, &lan.0, &v4, &v6, 50 << 20);
    for server in [&v4, &v6] {
        assert_eq!(
            dns::dig_answered(&lab, &lan.0, server, 1000, "lan"),
            "1000",
            "dig answers via {server} from the LAN"
        );
    }
    for (flag, dst) in [("-4", &v4), ("-6", &v6)] {
        let out = run_in(&lan.0, &format!("ping {flag} -n -c 3 -i 0.2 -W 2 {dst}"));
        assert!(out.contains("3 received"), "ping {dst} from the LAN: {out}");
    }
    let tun = &lab.client_status()["tun"];
    assert!(
        tun["tcp_accepted"].as_u64().unwrap_or(0) >= 4,
        "the LAN's transfers came through the TUN: {tun}"
    );
    assert!(tun["udp_in"].as_u64().unwrap_or(0) >= 2000, "the LAN's queries: {tun}");
    assert!(tun["echo_in"].as_u64().unwrap_or(0) >= 6, "the LAN's pings: {tun}");
    assert!(lab.stop_client("TERM"));
    assert_eq!(snapshot(&lab), before);
    let fwd = sh(&[
        "ip",
        "netns",
        "exec",
        &lab.topo.client_ns,
        "sysctl",
        "-n",
        "net.ipv4.ip_forward",
    ]);
    assert_eq!(fwd.trim(), "0", "forwarding restored on exit");
}
