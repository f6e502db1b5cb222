//! A client and a server namespace joined by veth paths, directly or through an emulator
//! namespace:
//!
//! ```text
//!   ns <g>-c (client)        ns <g>-e (emulator)          ns <g>-s (server)
//!   c0 10.<n>.1.1 ─── veth ─── ec0 ══ link model ══ es0 ─── veth ─── s0 10.<n>.1.2
//!   c1 10.<n>.2.1 ─── veth ─── ec1 ══ link model ══ es1 ─── veth ─── s1 10.<n>.2.2
//!
//!   without an emulator:     c<i> 10.<n>.<i+1>.1 ─── veth ─── s<i> 10.<n>.<i+1>.2
//! ```
//! With an emulator, the caller bridges raw Ethernet frames (AF_PACKET) between `ec<i>` and
//! `es<i>`, so ARP and everything else crosses it too; offloads are off so frames are ≤ MTU.

use anyhow::{Context, Result};

use crate::ns::Group;
use crate::{exec, run};

/// What a [`Topology`] consists of.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Names are `mpfl-<kind>-<pid>-<tag>-{c,e,s}`; one word.
    pub kind: &'static str,
    pub paths: usize,
    /// An emulator namespace between client and server (see the module doc).
    pub emulator: bool,
    /// IPv6 on in the namespaces; off, only IPv4 traffic crosses the links.
    pub ipv6: bool,
    /// MPTCP limits for a subflow per path, and the server announcing its other addresses.
    pub mptcp: bool,
}

impl Layout {
    /// The lab's: emulated paths, IPv4 only, ready for MPTCP.
    pub fn lab(paths: usize) -> Layout {
        Layout {
            kind: "lab",
            paths,
            emulator: true,
            ipv6: false,
            mptcp: true,
        }
    }
}

/// The kernel's limit on MPTCP subflows and accepted addresses (`MPTCP_PM_ADDR_MAX`).
pub const MPTCP_MAX: usize = 8;

pub struct Topology {
    pub name: String,
    pub client_ns: String,
    /// Empty without an emulator.
    pub emu_ns: String,
    pub server_ns: String,
    pub paths: usize,
    /// Second octet of the addresses.
    pub net: u8,
    layout: Layout,
    /// Holds the namespaces; dropping it deletes them.
    _group: Group,
}

impl Topology {
    /// The lab's topology ([`Layout::lab`]). `tag` tells concurrent topologies of one
    /// process apart.
    pub fn create(paths: usize, tag: u32) -> Result<Topology> {
        Topology::with(Layout::lab(paths), tag)
    }

    /// Builds the namespaces and links of `layout`. `tag` tells concurrent topologies of
    /// one kind in one process apart.
    pub fn with(layout: Layout, tag: u32) -> Result<Topology> {
        let roles: &[&str] = if layout.emulator { &["c", "e", "s"] } else { &["c", "s"] };
        let group = Group::create(layout.kind, tag, roles)?;
        let net = 80 + ((std::process::id() + tag * 7) % 100) as u8;
        let t = Topology {
            name: group.name.clone(),
            client_ns: group.ns(0).to_string(),
            emu_ns: if layout.emulator {
                group.ns(1).to_string()
            } else {
                String::new()
            },
            server_ns: group.ns(roles.len() - 1).to_string(),
            paths: layout.paths,
            net,
            layout,
            _group: group,
        };
        // Drop removes whatever was made if this fails.
        t.build().with_context(|| format!("building topology {}", t.name))?;
        Ok(t)
    }

    pub fn client_addr(&self, path: usize) -> String {
        format!("10.{}.{}.1", self.net, path + 1)
    }

    pub fn server_addr(&self, path: usize) -> String {
        format!("10.{}.{}.2", self.net, path + 1)
    }

    pub fn client_dev(&self, path: usize) -> String {
        format!("c{path}")
    }

    pub fn server_dev(&self, path: usize) -> String {
        format!("s{path}")
    }

    fn build(&self) -> Result<()> {
        if !self.layout.ipv6 {
            let namespaces = [&self.client_ns, &self.emu_ns, &self.server_ns];
            for ns in namespaces.into_iter().filter(|ns| !ns.is_empty()) {
                exec(ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
                exec(ns, &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])?;
            }
        }
        for i in 0..self.paths {
            let (c, s) = (self.client_dev(i), self.server_dev(i));
            if self.layout.emulator {
                let (ec, es) = (format!("ec{i}"), format!("es{i}"));
                veth(&c, &self.client_ns, &ec, &self.emu_ns)?;
                veth(&s, &self.server_ns, &es, &self.emu_ns)?;
                for (ns, dev) in [
                    (&self.client_ns, &c),
                    (&self.emu_ns, &ec),
                    (&self.emu_ns, &es),
                    (&self.server_ns, &s),
                ] {
                    // Frames must be real, MTU-sized and checksummed: they are copied out
                    // and back in by the emulator.
                    exec(
                        ns,
                        &[
                            "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off",
                        ],
                    )?;
                    run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
                }
                run(&["ip", "-n", &self.emu_ns, "link", "set", &ec, "promisc", "on"])?;
                run(&["ip", "-n", &self.emu_ns, "link", "set", &es, "promisc", "on"])?;
            } else {
                veth(&c, &self.client_ns, &s, &self.server_ns)?;
            }
            let client_cidr = format!("{}/24", self.client_addr(i));
            run(&["ip", "-n", &self.client_ns, "addr", "add", &client_cidr, "dev", &c])?;
            let server_cidr = format!("{}/24", self.server_addr(i));
            run(&["ip", "-n", &self.server_ns, "addr", "add", &server_cidr, "dev", &s])?;
            if !self.layout.emulator {
                run(&["ip", "-n", &self.client_ns, "link", "set", &c, "up"])?;
                run(&["ip", "-n", &self.server_ns, "link", "set", &s, "up"])?;
            }
        }
        if self.layout.mptcp {
            self.enable_mptcp()?;
        }
        Ok(())
    }

    /// The server announces its other addresses; each side allows a subflow per path.
    fn enable_mptcp(&self) -> Result<()> {
        for cmd in self.mptcp_commands() {
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            run(&args)?;
        }
        Ok(())
    }

    /// The `ip mptcp` commands that ready kernel MPTCP for a subflow on every path: both
    /// ends accept up to one subflow and one announced address per path (the first path's
    /// subflow is the connection's own, so N − 1 would do; the spare one lets a path whose
    /// address comes back join while its old subflow is still being torn down), and the
    /// server announces the address of every path but the first (`signal`), so the
    /// client's in-kernel path manager opens a subflow to each, routed over that path's
    /// link. The kernel allows at most 8 of each (`MPTCP_PM_ADDR_MAX`).
    pub fn mptcp_commands(&self) -> Vec<Vec<String>> {
        let n = self.paths.min(MPTCP_MAX).to_string();
        let mut cmds = Vec::new();
        for ns in [&self.client_ns, &self.server_ns] {
            cmds.push(
                [
                    "ip",
                    "-n",
                    ns,
                    "mptcp",
                    "limits",
                    "set",
                    "subflows",
                    &n,
                    "add_addr_accepted",
                    &n,
                ]
                .map(String::from)
                .to_vec(),
            );
        }
        for i in 1..self.paths {
            let (addr, dev) = (self.server_addr(i), self.server_dev(i));
            cmds.push(
                [
                    "ip",
                    "-n",
                    &self.server_ns,
                    "mptcp",
                    "endpoint",
                    "add",
                    &addr,
                    "dev",
                    &dev,
                    "signal",
                ]
                .map(String::from)
                .to_vec(),
            );
        }
        cmds
    }

    /// `ip netns exec <client ns>` prefix.
    pub fn in_client(&self) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.client_ns.clone()]
    }

    pub fn in_server(&self) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.server_ns.clone()]
    }

    /// Sets a sysctl in the client and server namespaces.
    pub fn sysctl(&self, key_value: &str) -> Result<()> {
        for ns in [&self.client_ns, &self.server_ns] {
            exec(ns, &["sysctl", "-qw", key_value])?;
        }
        Ok(())
    }
}

/// A veth pair: `a` in namespace `a_ns`, its peer `b` in `b_ns`.
fn veth(a: &str, a_ns: &str, b: &str, b_ns: &str) -> Result<()> {
    run(&[
        "ip", "link", "add", a, "netns", a_ns, "type", "veth", "peer", "name", b, "netns", b_ns,
    ])?;
    Ok(())
}
