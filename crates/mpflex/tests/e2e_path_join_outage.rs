//! A path dialled while its link is dark joins when the link comes back: the client lets
//! the kernel retransmit the SYN rather than giving up on the dial, says the path waits for
//! its link (not that a firewall is to blame), shows it so in the status, and the session
//! carries its data on the other path meanwhile (docs/paths.md).

mod support;
use std::time::{Duration, Instant};

use support::*;

/// How long path 1's link drops everything from the client's start: a cellular outage.
const OUTAGE: Duration = Duration::from_secs(5);
/// When the kernel sends a connection's SYNs, from the first: one second apart (RFC 6298
/// (2.1)'s initial timeout) for the first `linear` + 1 retransmissions (Linux's
/// `tcp_syn_linear_timeouts`; none on kernels without it), then doubling from two seconds
/// (RFC 6298 (5.5)).
fn syn_times(linear: u64) -> Vec<Duration> {
    let mut at = 0;
    let mut times = vec![0];
    for _ in 0..=linear {
        at += 1;
        times.push(at);
    }
    for k in 1..=5 {
        at += 1 << k;
        times.push(at);
    }
    times.into_iter().map(Duration::from_secs).collect()
}

/// `net.ipv4.tcp_syn_linear_timeouts` in namespace `ns` (0 where the kernel has none).
fn syn_linear_timeouts(ns: &str) -> u64 {
    in_ns(ns, || {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_syn_linear_timeouts")
    })
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(0)
}
/// Beside the kernel's next SYN after the link's return: the handshake and join, the
/// status poll, a loaded machine.
const MARGIN: Duration = Duration::from_millis(2500);

/// Drops (or, with `-D`, stops dropping) every packet path `p` brings to the server, in
/// the server's namespace: the link is dark, no reset or unreachable reaches the client.
fn dark(lab: &Lab, p: usize, op: &str) {
    let dev = lab.topo.server_dev(p);
    sh(&[
        "ip",
        "netns",
        "exec",
        &lab.topo.server_ns,
        "iptables",
        op,
        "INPUT",
        "-i",
        &dev,
        "-j",
        "DROP",
    ]);
}

/// The client's view of path `p`.
fn path(lab: &Lab, p: usize) -> serde_json::Value {
    lab.client_status()["paths"][p].clone()
}

#[test]
fn the_kernels_syn_schedule_is_modelled_as_it_spaces_them() {
    let s = |v: &[u64]| v.iter().map(|&x| Duration::from_secs(x)).collect::<Vec<_>>();
    // Classic doubling from one second; Linux with four linear timeouts (its default).
    assert_eq!(syn_times(0), s(&[0, 1, 3, 7, 15, 31, 63]));
    assert_eq!(syn_times(4), s(&[0, 1, 2, 3, 4, 5, 7, 11, 19, 35, 67]));
}

#[test]
fn a_path_dialled_into_an_outage_joins_when_the_link_returns() {
    let test = "a_path_dialled_into_an_outage_joins_when_the_link_returns";
    if !ready(test) || !mpflex_netns::require_tools(test, &["iptables"]) {
        return;
    }
    let mut lab = Lab::new(Options {
        defer_client: true,
        ..Options::default()
    });
    dark(&lab, 1, "-I");
    let started = Instant::now();
    lab.start_client("client.log", 1);

    // Meanwhile the other path carries the session.
    let (got, want) = lab.download(2 << 20);
    assert_eq!(got, want, "a download while path 1's link is dark");
    assert!(
        lab.client_path_bytes()[0] > 2 << 20,
        "path 0 did not carry the download"
    );
    let p1 = path(&lab, 1);
    assert_eq!(p1["up"], false, "path 1 is up through a dark link: {p1:#}");
    // Past the SYN's first retransmission, the status says what the path does.
    while started.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let p1 = path(&lab, 1);
    assert_eq!(p1["state"], "waiting for link", "{p1:#}");
    assert!(started.elapsed() < OUTAGE, "the checks outlasted the outage");

    std::thread::sleep(OUTAGE.saturating_sub(started.elapsed()));
    dark(&lab, 1, "-D");
    let back = started.elapsed();
    // The kernel's next SYN after the link's return carries the join.
    let next_syn = syn_times(syn_linear_timeouts(&lab.topo.client_ns))
        .into_iter()
        .find(|&s| s >= back)
        .expect("a SYN after the outage");
    let deadline = started + next_syn + MARGIN;
    while lab.paths_up() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let joined = started.elapsed();
    assert_eq!(
        lab.paths_up(),
        2,
        "path 1 did not join by the kernel's SYN at {next_syn:?} (+ {MARGIN:?}) after the link came back at \
         {back:?}; logs in {}",
        lab.dir.display()
    );
    eprintln!("link back at {back:?}, path 1 up by {joined:?} (the kernel's SYN at {next_syn:?})");

    // Both paths carry again.
    let (got, want) = lab.download(2 << 20);
    assert_eq!(got, want, "a download after path 1 joined");
    let log = lab.log("client");
    assert!(log.contains("waiting for the link"), "the wait is not said:\n{log}");
    assert_eq!(
        log.matches("waiting for the link").count(),
        1,
        "the wait is said more than once:\n{log}"
    );
    assert!(!log.contains("firewall"), "a dark link is blamed on a firewall:\n{log}");
    assert!(
        log.contains("the link is back"),
        "the join after the wait is not said:\n{log}"
    );
}
