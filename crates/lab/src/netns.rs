//! Namespaces and veth links of one lab topology, removed on drop (success, error, panic,
//! Ctrl-C via the caller's signal flag), and stale ones of dead runs removed at start.
//!
//! ```text
//!   ns <p>-c (client)        ns <p>-e (emulator)          ns <p>-s (server)
//!   c0 10.<n>.1.1 ─── veth ─── ec0 ══ link model ══ es0 ─── veth ─── s0 10.<n>.1.2
//!   c1 10.<n>.2.1 ─── veth ─── ec1 ══ link model ══ es1 ─── veth ─── s1 10.<n>.2.2
//! ```
//! The emulator bridges raw Ethernet frames (AF_PACKET) between `ec<i>` and `es<i>`, so
//! ARP and everything else crosses it too; offloads are off so frames are ≤ MTU.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

pub const PREFIX: &str = "mpfl-lab-";

pub fn run(args: &[&str]) -> Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run_quiet(args: &[&str]) {
    let _ = Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

pub fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Deletes namespaces of lab runs whose process is gone.
pub fn clean_stale() {
    let Ok(list) = run(&["ip", "netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid: u32 = rest.split('-').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            delete_ns(name);
        }
    }
}

fn delete_ns(name: &str) {
    if let Ok(pids) = run(&["ip", "netns", "pids", name]) {
        for pid in pids.split_whitespace() {
            run_quiet(&["kill", "-9", pid]);
        }
    }
    run_quiet(&["ip", "netns", "delete", name]);
}

pub struct Topology {
    pub name: String,
    pub client_ns: String,
    pub emu_ns: String,
    pub server_ns: String,
    pub paths: usize,
    /// Second octet of the addresses.
    pub net: u8,
}

impl Topology {
    /// Builds the namespaces and links. `tag` tells concurrent topologies of one process apart.
    pub fn create(paths: usize, tag: u32) -> Result<Topology> {
        if !is_root() {
            bail!("the lab needs root (network namespaces)");
        }
        clean_stale();
        let name = format!("{PREFIX}{}-{tag}", std::process::id());
        let net = 80 + ((std::process::id() + tag * 7) % 100) as u8;
        let t = Topology {
            client_ns: format!("{name}-c"),
            emu_ns: format!("{name}-e"),
            server_ns: format!("{name}-s"),
            name,
            paths,
            net,
        };
        // From here on Drop removes whatever was made.
        t.build().with_context(|| format!("building lab topology {}", t.name))?;
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

    fn build(&self) -> Result<()> {
        for ns in [&self.client_ns, &self.emu_ns, &self.server_ns] {
            run(&["ip", "netns", "add", ns])?;
            run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
            run(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ])?;
            run(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])?;
        }
        for i in 0..self.paths {
            let (c, ec, es, s) = (format!("c{i}"), format!("ec{i}"), format!("es{i}"), format!("s{i}"));
            run(&[
                "ip",
                "link",
                "add",
                &c,
                "netns",
                &self.client_ns,
                "type",
                "veth",
                "peer",
                "name",
                &ec,
                "netns",
                &self.emu_ns,
            ])?;
            run(&[
                "ip",
                "link",
                "add",
                &s,
                "netns",
                &self.server_ns,
                "type",
                "veth",
                "peer",
                "name",
                &es,
                "netns",
                &self.emu_ns,
            ])?;
            for (ns, dev) in [
                (&self.client_ns, &c),
                (&self.emu_ns, &ec),
                (&self.emu_ns, &es),
                (&self.server_ns, &s),
            ] {
                // Frames must be real, MTU-sized and checksummed: they are copied out and
                // back in by the emulator.
                run(&[
                    "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx",
                    "off", "rx", "off",
                ])?;
                run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
            }
            run(&["ip", "-n", &self.emu_ns, "link", "set", &ec, "promisc", "on"])?;
            run(&["ip", "-n", &self.emu_ns, "link", "set", &es, "promisc", "on"])?;
            run(&[
                "ip",
                "-n",
                &self.client_ns,
                "addr",
                "add",
                &format!("{}/24", self.client_addr(i)),
                "dev",
                &c,
            ])?;
            run(&[
                "ip",
                "-n",
                &self.server_ns,
                "addr",
                "add",
                &format!("{}/24", self.server_addr(i)),
                "dev",
                &s,
            ])?;
        }
        // MPTCP: the server announces its other addresses; each side allows a subflow per path.
        let n = self.paths.to_string();
        for ns in [&self.client_ns, &self.server_ns] {
            run(&[
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
            ])?;
        }
        for i in 1..self.paths {
            run(&[
                "ip",
                "-n",
                &self.server_ns,
                "mptcp",
                "endpoint",
                "add",
                &self.server_addr(i),
                "dev",
                &format!("s{i}"),
                "signal",
            ])?;
        }
        Ok(())
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
            run(&["ip", "netns", "exec", ns, "sysctl", "-qw", key_value])?;
        }
        Ok(())
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.client_ns, &self.server_ns, &self.emu_ns] {
            delete_ns(ns);
        }
    }
}
