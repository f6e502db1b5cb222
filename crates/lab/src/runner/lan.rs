//! The router case for workloads mpflex carries through its transparent ingress
//! ([`crate::workload::Spec::transparent`]): a LAN namespace behind the client's, whose
//! TCP and UDP the client's namespace diverts with `TPROXY` (the nftables rules of
//! docs/transparent.md) to the measured mpflex pair's `transparent_tproxy_listen` and
//! `transparent_udp_listen`. The client's namespace does not forward, so what the LAN
//! host sends reaches the server through mpflex or not at all.

use anyhow::Result;

use crate::netns::{run, Topology};

/// The LAN side's address (the client's end of the LAN is `.1`).
pub const HOST: &str = "192.168.77.2";
/// The pair `k`'s TPROXY ports: TCP `TCP_PORT + k`, UDP `UDP_PORT + k` (apart from the
/// pairs' SOCKS5 ports, 1080 + k).
pub const TCP_PORT: u16 = 1180;
pub const UDP_PORT: u16 = 1280;

/// The LAN namespace, deleted when dropped.
pub struct Lan {
    pub ns: String,
    client_ns: String,
}

impl Lan {
    /// The LAN namespace behind `topo`'s client, with the policy routing `TPROXY` needs
    /// (mark 1 → table 100 → delivered locally); no rules yet ([`Lan::divert_to`]).
    pub fn create(topo: &Topology) -> Result<Lan> {
        let lan = Lan {
            ns: format!("{}-lan", topo.name),
            client_ns: topo.client_ns.clone(),
        };
        let (c, l) = (lan.client_ns.as_str(), lan.ns.as_str());
        run(&["ip", "netns", "add", l])?;
        run(&[
            "ip", "link", "add", "lan0", "netns", c, "type", "veth", "peer", "name", "eth0", "netns", l,
        ])?;
        run(&["ip", "-n", c, "addr", "add", "192.168.77.1/24", "dev", "lan0"])?;
        run(&["ip", "-n", l, "addr", "add", &format!("{HOST}/24"), "dev", "eth0"])?;
        for (ns, dev) in [(c, "lan0"), (l, "eth0"), (l, "lo")] {
            run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        }
        run(&["ip", "-n", l, "route", "add", "default", "via", "192.168.77.1"])?;
        run(&["ip", "netns", "exec", c, "sysctl", "-qw", "net.ipv4.ip_forward=0"])?;
        run(&["ip", "-n", c, "rule", "add", "fwmark", "1", "lookup", "100"])?;
        run(&[
            "ip",
            "-n",
            c,
            "route",
            "add",
            "local",
            "0.0.0.0/0",
            "dev",
            "lo",
            "table",
            "100",
        ])?;
        Ok(lan)
    }

    /// Diverts the LAN's TCP and UDP to mpflex pair `k`'s TPROXY listeners (replacing
    /// the rules of an earlier pair).
    pub fn divert_to(&self, k: u16) -> Result<()> {
        let c = self.client_ns.as_str();
        let nft = |rule: &str| -> Result<String> {
            let mut args = vec!["ip", "netns", "exec", c, "nft"];
            args.extend(rule.split(' '));
            run(&args)
        };
        let _ = nft("delete table ip mpflex");
        nft("add table ip mpflex")?;
        nft("add chain ip mpflex prerouting { type filter hook prerouting priority mangle ; }")?;
        nft("add rule ip mpflex prerouting iifname lan0 fib daddr type local accept")?;
        nft("add rule ip mpflex prerouting iifname lan0 meta l4proto tcp socket transparent 1 meta mark set 1 accept")?;
        nft(&format!(
            "add rule ip mpflex prerouting iifname lan0 meta l4proto tcp tproxy to :{} meta mark set 1 accept",
            TCP_PORT + k
        ))?;
        nft(&format!(
            "add rule ip mpflex prerouting iifname lan0 meta l4proto udp tproxy to :{} meta mark set 1 accept",
            UDP_PORT + k
        ))?;
        Ok(())
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "delete", &self.ns]);
    }
}
