//! The router case: a LAN namespace behind the client's (192.168.77.0/24, fd77::/64, the
//! client's end `lan0`), whose traffic the client's namespace diverts to mpflex with the
//! rules of docs/transparent.md and docs/udp.md. The client's namespace does not forward
//! packets, so nothing the LAN host sends gets around mpflex.

use super::{sh, Lab, TRANSPARENT_PORT};

/// Where `TPROXY` rules send UDP (`transparent_udp_listen`).
pub const UDP_TPROXY_PORT: u16 = 1082;
/// Where `TPROXY` rules send TCP (`transparent_tproxy_listen`).
pub const TCP_TPROXY_PORT: u16 = 1083;

/// What the client's namespace diverts from the LAN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divert {
    /// UDP by `TPROXY` to [`UDP_TPROXY_PORT`].
    UdpTproxy,
    /// TCP by `REDIRECT` (nat table) to `transparent_listen`.
    TcpRedirect,
    /// TCP by `TPROXY` to [`TCP_TPROXY_PORT`].
    TcpTproxy,
}

/// Which tool writes the rules (both forms are documented).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Nft,
    Iptables,
}

/// The LAN namespace, deleted with the value.
pub struct LanHost(pub String);

impl Drop for LanHost {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

/// Builds the LAN behind `lab`'s client and its rules (`divert`, written with `tool`),
/// and the policy routing `TPROXY` needs (mark 1 → table 100 → local delivery).
pub fn lan_behind_client(lab: &Lab, divert: &[Divert], tool: Tool) -> LanHost {
    let lan = lan_namespace(lab);
    let c = lab.topo.client_ns.clone();
    let run = |line: &str| {
        let mut v = vec!["ip", "netns", "exec", &c];
        v.extend(line.split(' '));
        sh(&v);
    };
    match tool {
        Tool::Nft => nft_rules(divert, &run),
        Tool::Iptables => iptables_rules(divert, &run),
    }
    for (v, any) in [("-4", "0.0.0.0/0"), ("-6", "::/0")] {
        sh(&["ip", "-n", &c, v, "rule", "add", "fwmark", "1", "lookup", "100"]);
        sh(&[
            "ip", "-n", &c, v, "route", "add", "local", any, "dev", "lo", "table", "100",
        ]);
    }
    lan
}

/// The LAN behind `lab`'s client, its rules and routing left to the caller.
pub fn lan_namespace(lab: &Lab) -> LanHost {
    let c = lab.topo.client_ns.clone();
    let lan = LanHost(format!("{}-lan", lab.topo.name));
    let l = lan.0.clone();
    sh(&["ip", "netns", "add", &l]);
    sh(&[
        "ip", "link", "add", "lan0", "netns", &c, "type", "veth", "peer", "name", "eth0", "netns", &l,
    ]);
    for (ns, dev, v4, v6) in [
        (&c, "lan0", "192.168.77.1/24", "fd77::1/64"),
        (&l, "eth0", "192.168.77.2/24", "fd77::2/64"),
    ] {
        sh(&["ip", "-n", ns, "addr", "add", v4, "dev", dev]);
        sh(&["ip", "-n", ns, "-6", "addr", "add", v6, "dev", dev, "nodad"]);
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
    }
    sh(&["ip", "-n", &l, "link", "set", "lo", "up"]);
    sh(&["ip", "-n", &l, "route", "add", "default", "via", "192.168.77.1"]);
    sh(&["ip", "-n", &l, "-6", "route", "add", "default", "via", "fd77::1"]);
    lan
}

/// The shell block of `docs/<doc>` whose first line is `# <title>`.
pub fn doc_block(doc: &str, title: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/");
    let text = std::fs::read_to_string(format!("{path}{doc}")).unwrap();
    let start = text
        .find(&format!("```sh\n# {title}\n"))
        .unwrap_or_else(|| panic!("docs/{doc} has no block `# {title}`"));
    let body = &text[start + "```sh\n".len()..];
    body[..body.find("\n```").unwrap()].to_string()
}

/// Runs a shell script as root in namespace `ns` (bash, stopping at the first error).
pub fn script_in(ns: &str, script: &str) {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "bash", "-euo", "pipefail", "-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "in {ns}:\n{script}\nfailed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// docs/transparent.md's nftables rules, one table per family.
fn nft_rules(divert: &[Divert], run: &dyn Fn(&str)) {
    for family in ["ip", "ip6"] {
        run(&format!("nft add table {family} mpflex"));
        run(&format!(
            "nft add chain {family} mpflex prerouting {{ type filter hook prerouting priority mangle ; }}"
        ));
        // The router's own addresses are not diverted (a LAN host reaching the router).
        run(&format!(
            "nft add rule {family} mpflex prerouting iifname lan0 fib daddr type local accept"
        ));
        if divert.contains(&Divert::TcpTproxy) {
            run(&format!(
                "nft add rule {family} mpflex prerouting iifname lan0 meta l4proto tcp socket transparent 1 meta mark set 1 accept"
            ));
            run(&format!(
                "nft add rule {family} mpflex prerouting iifname lan0 meta l4proto tcp tproxy to :{TCP_TPROXY_PORT} meta mark set 1 accept"
            ));
        }
        if divert.contains(&Divert::UdpTproxy) {
            run(&format!(
                "nft add rule {family} mpflex prerouting iifname lan0 meta l4proto udp tproxy to :{UDP_TPROXY_PORT} meta mark set 1 accept"
            ));
        }
        if divert.contains(&Divert::TcpRedirect) {
            run(&format!(
                "nft add chain {family} mpflex nat {{ type nat hook prerouting priority dstnat ; }}"
            ));
            run(&format!(
                "nft add rule {family} mpflex nat iifname lan0 meta l4proto tcp redirect to :{TRANSPARENT_PORT}"
            ));
        }
    }
}

/// docs/transparent.md's iptables rules, the same for `ip6tables`.
fn iptables_rules(divert: &[Divert], run: &dyn Fn(&str)) {
    for cmd in ["iptables", "ip6tables"] {
        let m = format!("{cmd} -t mangle");
        run(&format!("{m} -N MPFLEX"));
        run(&format!("{m} -A PREROUTING -i lan0 -j MPFLEX"));
        run(&format!("{m} -A MPFLEX -m addrtype --dst-type LOCAL -j RETURN"));
        if divert.contains(&Divert::TcpTproxy) {
            run(&format!(
                "{m} -A MPFLEX -p tcp -m socket --transparent -j MARK --set-mark 1"
            ));
            run(&format!("{m} -A MPFLEX -p tcp -m socket --transparent -j ACCEPT"));
            run(&format!(
                "{m} -A MPFLEX -p tcp -j TPROXY --on-port {TCP_TPROXY_PORT} --tproxy-mark 1"
            ));
        }
        if divert.contains(&Divert::UdpTproxy) {
            run(&format!(
                "{m} -A MPFLEX -p udp -j TPROXY --on-port {UDP_TPROXY_PORT} --tproxy-mark 1"
            ));
        }
        if divert.contains(&Divert::TcpRedirect) {
            run(&format!(
                "{cmd} -t nat -A PREROUTING -i lan0 -p tcp -j REDIRECT --to-ports {TRANSPARENT_PORT}"
            ));
        }
    }
}
