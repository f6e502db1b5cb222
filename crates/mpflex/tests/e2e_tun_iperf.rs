//! `iperf3` through the TUN against `iperf3` through TPROXY, on seed-default's emulated
//! WiFi and LTE links: one session with both ingresses, an iperf3 server in the server's
//! namespace (a fresh one-off server for each run: a persistent one closes and re-opens
//! its listener after every test, and resets or refuses a connection that comes then), and the client namespace's own iperf3 reaching it at one address routed
//! into the TUN and at another diverted by TPROXY rules (docs/transparent.md's local
//! application form: marked in OUTPUT, rerouted through `lo`, diverted in PREROUTING).
//! The two take turns, so the machine's load falls on both alike, and their medians are
//! compared, downloading (`-R`) and uploading: TCP through the TUN at ≥ 0.95 × TPROXY's
//! rate, `iperf3 -u` at ≥ 0.9 × the rate TPROXY delivers (the floors of docs/tun.md). Over
//! IPv4 from the client's own namespace; over IPv6 in the router case: a LAN namespace
//! behind the client (`tun.lan`, `tun.routes = "default"`), whose iperf3 reaches one
//! address through the TUN and another that the client diverts by TPROXY as it arrives on
//! the LAN (docs/transparent.md's router form), to the same floors. (Either test runs the
//! other's case with its arguments swapped.)

mod support;
use std::process::Command;

use support::lan::{lan_namespace, script_in, LanHost, TCP_TPROXY_PORT, UDP_TPROXY_PORT};
use support::*;

const TUN: &str = "mpfi0";
const IPERF_PORT: u16 = 5201;
/// Seconds of each measured run; a TCP run's first [`OMIT_S`] (slow start) is left out.
/// (A UDP run leaves out nothing: iperf3 miscounts UDP loss across `--omit`.)
const SECS: u32 = 4;
const OMIT_S: u32 = 1;
/// Measured turns each ingress takes: a median of three outlasts one run a load spike
/// spoilt.
const ROUNDS: usize = 3;

/// The lab; `lan`: a router's configuration (every route into the TUN, the LAN behind
/// `lan0` too; the client starts once the LAN exists).
fn lab(lan: bool) -> Lab {
    let routes = if lan {
        "routes = \"default\"\nlan = [\"lan0\"]\n"
    } else {
        ""
    };
    Lab::new(Options {
        links: Some(mpflex_lab::profile::seed_default(70)),
        client_root: format!(
            "transparent_tproxy_listen = \"[::]:{TCP_TPROXY_PORT}\"\n\
             transparent_udp_listen = \"[::]:{UDP_TPROXY_PORT}\"\n"
        ),
        client_toml: format!(
            "[tun]\nname = \"{TUN}\"\nipv4 = \"10.233.0.1/30\"\nipv6 = \"fd00:6d70:666c::1/126\"\n{routes}"
        ),
        defer_client: lan,
        ..Options::default()
    })
}

/// The router form of TPROXY for `tproxy`: TCP and UDP to it arriving on the LAN are
/// diverted to the listeners; the policy rule that delivers them locally comes before the
/// TUN's rules (preference 100), or `tun.routes = "default"` would send them on into the
/// TUN.
fn lan_tproxy(lab: &Lab, tproxy: &str, v6: bool) -> LanHost {
    let lan = lan_namespace(lab);
    let (family, ip, any) = family(v6);
    script_in(
        &lab.topo.client_ns,
        &format!(
            "nft add table {family} router
nft add chain {family} router prerouting '{{ type filter hook prerouting priority mangle ; }}'
nft add rule {family} router prerouting iifname lan0 {family} daddr {tproxy} meta l4proto tcp tproxy to :{TCP_TPROXY_PORT} meta mark set 1 accept
nft add rule {family} router prerouting iifname lan0 {family} daddr {tproxy} meta l4proto udp tproxy to :{UDP_TPROXY_PORT} meta mark set 1 accept
ip {ip} rule add pref 100 fwmark 1 lookup 100
ip {ip} route add local {any} dev lo table 100"
        ),
    );
    lan
}

/// nftables' family, `ip`'s family flag and the whole address space, of IPv6 or IPv4.
fn family(v6: bool) -> (&'static str, &'static str, &'static str) {
    if v6 {
        ("ip6", "-6", "::/0")
    } else {
        ("ip", "-4", "0.0.0.0/0")
    }
}

/// Two addresses on the server's loopback, both routed into the TUN in the client's
/// namespace; the second's TCP and UDP are then marked in OUTPUT and so diverted to the
/// TPROXY listeners before they reach the TUN. (TUN address, TPROXY address.) For a
/// `lan`, only the addresses: the TUN's own routes carry both, `lan_tproxy` diverts.
fn destinations(lab: &Lab, v6: bool, lan: bool) -> (String, String) {
    let net = lab.topo.net;
    let (tun, tproxy, len) = if v6 {
        (format!("fd00:{net}:99::9"), format!("fd00:{net}:99::10"), 128)
    } else {
        (format!("10.{net}.9.9"), format!("10.{net}.9.10"), 32)
    };
    for a in [&tun, &tproxy] {
        let host = format!("{a}/{len}");
        sh(&["ip", "-n", &lab.topo.server_ns, "addr", "add", &host, "dev", "lo"]);
        if !lan {
            sh(&["ip", "-n", &lab.topo.client_ns, "route", "add", &host, "dev", TUN]);
        }
    }
    if lan {
        // `tun.routes = "default"` sends both into the TUN; `lan_tproxy` diverts one.
        return (tun, tproxy);
    }
    let (family, ip, any) = family(v6);
    script_in(
        &lab.topo.client_ns,
        &format!(
            "nft add table {family} local
nft add chain {family} local output '{{ type route hook output priority mangle ; }}'
nft add rule {family} local output {family} daddr {tproxy} meta l4proto {{ tcp, udp }} meta mark set 1
nft add chain {family} local prerouting '{{ type filter hook prerouting priority mangle ; }}'
nft add rule {family} local prerouting iifname lo meta mark 1 meta l4proto tcp tproxy to :{TCP_TPROXY_PORT} accept
nft add rule {family} local prerouting iifname lo meta mark 1 meta l4proto udp tproxy to :{UDP_TPROXY_PORT} accept
ip {ip} rule add fwmark 1 lookup 100
ip {ip} route add local {any} dev lo table 100"
        ),
    );
    (tun, tproxy)
}

/// One iperf3 run of `secs` from the client's namespace to `dst`, downloading (`down`,
/// `-R`) or uploading; `udp`: at `kbit` kbit/s. (Mbit/s the receiver got, percent of
/// datagrams lost.)
fn iperf(lab: &Lab, ns: &str, dst: &str, udp: Option<u64>, secs: u32, down: bool) -> (f64, f64) {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, "iperf3", "-c", dst]);
    cmd.args(["-p", &IPERF_PORT.to_string(), "-J"]);
    if down {
        cmd.arg("-R");
    }
    cmd.args(["-t", &secs.to_string()]);
    match udp {
        // 1200-byte datagrams fit a path's frame whichever ingress carries them.
        Some(kbit) => cmd.args(["-u", "-b", &format!("{kbit}K"), "-l", "1200"]),
        None => cmd.args(["-O", &OMIT_S.to_string()]),
    };
    let mut server = iperf_server(lab);
    let out = cmd.output().expect("iperf3");
    // The one-off server exits once its test is over (and is killed if it has not then,
    // the client having failed).
    let t = std::time::Instant::now();
    while matches!(server.0.try_wait(), Ok(None)) && t.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "iperf3 to {dst} printed no JSON ({e}): {} {}; logs in {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            lab.dir.display()
        )
    });
    if let Some(e) = v["error"].as_str() {
        panic!("iperf3 to {dst}: {e}; logs in {}", lab.dir.display());
    }
    let got = &v["end"]["sum_received"];
    (
        got["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6,
        got["lost_percent"].as_f64().unwrap_or(0.0),
    )
}

/// A one-off iperf3 server in the server's namespace, listening once this returns.
fn iperf_server(lab: &Lab) -> KillOnDrop {
    let server = KillOnDrop(lab.spawn_in(
        &lab.topo.server_ns,
        &["iperf3", "-s", "-1", "-p", &IPERF_PORT.to_string()],
        "iperf3-server.log",
    ));
    let t = std::time::Instant::now();
    let port = format!(":{IPERF_PORT}");
    loop {
        let listening = mpflex_netns::command(&lab.topo.server_ns, "ss")
            .args(["-H", "-l", "-t", "-n", "sport", "=", &port])
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false);
        if listening {
            return server;
        }
        assert!(t.elapsed().as_secs() < 10, "iperf3 -s never listened");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The TUN's counters of streams and datagrams it took in.
fn tun_in(lab: &Lab) -> (u64, u64) {
    let t = &lab.client_status()["tun"];
    (
        t["tcp_accepted"].as_u64().unwrap_or(0),
        t["udp_in"].as_u64().unwrap_or(0),
    )
}

/// `from_lan`: iperf3 runs in a LAN namespace behind the client, else in the client's.
fn tun_against_tproxy(test: &str, v6: bool, from_lan: bool) {
    if !ready(test) || !mpflex_netns::require_tools(test, &["iperf3", "nft"]) {
        return;
    }
    let mut lab = lab(from_lan);
    let (tun, tproxy) = destinations(&lab, v6, from_lan);
    let lan = from_lan.then(|| lan_tproxy(&lab, &tproxy, v6));
    if from_lan {
        lab.start_client("client.log", 2);
    }
    let ns = lan.as_ref().map_or(lab.topo.client_ns.clone(), |l| l.0.clone());
    let at = Where { ns: &ns, lan: from_lan };
    let profile = mpflex_lab::profile::seed_default(70);
    let kbit = |down: bool| -> u64 {
        profile
            .paths
            .iter()
            .map(|p| match if down { &p.down.rate } else { &p.up.rate } {
                mpflex_lab::link::Rate::Constant(k) => *k,
                _ => unreachable!("seed-default's rates are constant"),
            })
            .sum()
    };
    // A first, unmeasured run each way warms the paths up (their congestion windows).
    iperf(&lab, at.ns, &tun, None, 2, true);
    iperf(&lab, at.ns, &tproxy, None, 2, true);
    for down in [true, false] {
        // UDP offered at 0.8 of the paths' summed capacity that way.
        compare(&lab, at, &tun, &tproxy, v6, down, kbit(down) * 8 / 10);
    }
}

/// Where iperf3 runs: its namespace, and whether that is the LAN's.
#[derive(Clone, Copy)]
struct Where<'a> {
    ns: &'a str,
    lan: bool,
}

/// The two ingresses in turns, one direction: TCP, then UDP at `udp_kbit`; the turns
/// alternate which goes first, so neither always follows the other. Asserts the floors.
fn compare(lab: &Lab, at: Where, tun: &str, tproxy: &str, v6: bool, down: bool, udp_kbit: u64) {
    let family = match (v6, at.lan) {
        (false, false) => "IPv4",
        (true, false) => "IPv6",
        (false, true) => "IPv4 from the LAN",
        (true, true) => "IPv6 from the LAN",
    };
    let way = if down { "download (-R)" } else { "upload" };
    let mut tcp = (Vec::new(), Vec::new());
    let mut udp = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for via_tun in [round % 2 == 0, round % 2 == 1] {
            let dst = if via_tun { tun } else { tproxy };
            let before = tun_in(lab);
            let t = iperf(lab, at.ns, dst, None, SECS, down);
            let u = iperf(lab, at.ns, dst, Some(udp_kbit), SECS, down);
            let after = tun_in(lab);
            let ingress = if via_tun { "TUN" } else { "TPROXY" };
            eprintln!(
                "{family} {way} {ingress}: TCP {:.2} Mbit/s; UDP at {udp_kbit} kbit/s: {:.2} Mbit/s received, {:.2} % lost",
                t.0, u.0, u.1
            );
            if via_tun {
                assert!(after.0 > before.0 && after.1 > before.1, "the TUN carried {dst}");
                tcp.0.push(t.0);
                udp.0.push(u);
            } else {
                assert_eq!(after, before, "TPROXY, not the TUN, carried {dst}");
                tcp.1.push(t.0);
                udp.1.push(u);
            }
        }
    }
    let (tcp_tun, tcp_tproxy) = (median(tcp.0), median(tcp.1));
    let rate = |v: &[(f64, f64)]| median(v.iter().map(|u| u.0).collect());
    let loss = |v: &[(f64, f64)]| median(v.iter().map(|u| u.1).collect());
    let (udp_tun, udp_tproxy) = (rate(&udp.0), rate(&udp.1));
    eprintln!(
        "{family} seed-default, iperf3 {way} {SECS} s, medians of {ROUNDS}: TCP TUN {tcp_tun:.2} / TPROXY {tcp_tproxy:.2} Mbit/s = {:.3}; \
         UDP at {udp_kbit} kbit/s TUN {udp_tun:.2} ({:.2} % lost) / TPROXY {udp_tproxy:.2} ({:.2} % lost) = {:.3}",
        tcp_tun / tcp_tproxy,
        loss(&udp.0),
        loss(&udp.1),
        udp_tun / udp_tproxy
    );
    assert!(
        tcp_tproxy > 1.0 && udp_tproxy > 1.0,
        "{way}: TPROXY itself carried nearly nothing"
    );
    assert!(
        tcp_tun >= 0.95 * tcp_tproxy,
        "{family} {way} TCP: the TUN at {:.3} of TPROXY's rate; logs in {}",
        tcp_tun / tcp_tproxy,
        lab.dir.display()
    );
    assert!(
        udp_tun >= 0.9 * udp_tproxy,
        "{family} {way} UDP: the TUN delivered {:.3} of TPROXY's rate",
        udp_tun / udp_tproxy
    );
}

#[test]
fn iperf3_through_the_tun_against_tproxy_over_ipv4() {
    tun_against_tproxy("iperf3_through_the_tun_against_tproxy_over_ipv4", false, false);
}

/// IPv6 from a LAN: the host's own IPv6 takes the same ingress code as its IPv4 (and
/// e2e_tun_host carries it), so one test a family keeps the suite's time.
#[test]
fn iperf3_from_a_lan_through_the_tun_against_tproxy_over_ipv6() {
    tun_against_tproxy("iperf3_from_a_lan_through_the_tun_against_tproxy_over_ipv6", true, true);
}
