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
        .with_context(|| format!("cannot run {} (installed? the lab needs iproute2 and ethtool)", args[0]))?;
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

/// Where each live topology holds an exclusive `flock`; the kernel drops it when the
/// owner dies however it dies, so a lock we can take marks a stale lab.
const LOCK_DIR: &str = "/run/mpflex-lab";

fn lock_path(topology: &str) -> std::path::PathBuf {
    Path::new(LOCK_DIR).join(format!("{topology}.lock"))
}

/// Opens and exclusively locks `path` without waiting; `None` if another process holds it.
fn try_lock(path: &Path) -> Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open lock file {}", path.display()))?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(Some(f))
    } else {
        Ok(None)
    }
}

/// Whether the lab topology `name` (`mpfl-lab-<pid>-<tag>`) belongs to a live run.
fn owner_alive(name: &str) -> bool {
    let lock = lock_path(name);
    if lock.exists() {
        // Held by a live owner, or free because the owner died.
        return !matches!(try_lock(&lock), Ok(Some(_)));
    }
    // Without a lock file (a run that died before taking it): the pid in the name.
    let pid: u32 = name
        .strip_prefix(PREFIX)
        .and_then(|r| r.split('-').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists()
}

/// Deletes the namespaces (and their processes) of lab runs that are gone: killed with
/// SIGKILL, crashed, or their machine's power cut before `Drop` could run.
pub fn clean_stale() {
    let Ok(list) = run(&["ip", "netns", "list"]) else {
        return;
    };
    let mut checked: Vec<(String, bool)> = Vec::new();
    for line in list.lines() {
        let ns = line.split_whitespace().next().unwrap_or("");
        if !ns.starts_with(PREFIX) {
            continue;
        }
        // <topology>-c / -e / -s
        let topology = ns.rsplit_once('-').map_or(ns, |(t, _)| t).to_string();
        let alive = match checked.iter().find(|(t, _)| *t == topology) {
            Some((_, a)) => *a,
            None => {
                let a = owner_alive(&topology);
                checked.push((topology.clone(), a));
                a
            }
        };
        if !alive {
            delete_ns(ns);
        }
    }
    for (topology, alive) in checked {
        if !alive {
            let _ = std::fs::remove_file(lock_path(&topology));
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
    /// Held while the topology exists (see `LOCK_DIR`).
    lock: Option<std::fs::File>,
}

impl Topology {
    /// Builds the namespaces and links. `tag` tells concurrent topologies of one process apart.
    pub fn create(paths: usize, tag: u32) -> Result<Topology> {
        if !is_root() {
            bail!("the lab needs root (network namespaces)");
        }
        clean_stale();
        let name = format!("{PREFIX}{}-{tag}", std::process::id());
        std::fs::create_dir_all(LOCK_DIR).with_context(|| format!("cannot create {LOCK_DIR}"))?;
        let lock = try_lock(&lock_path(&name))?.with_context(|| format!("lab topology {name} is in use already"))?;
        // Same name as ours but unlocked: left over by an earlier process with our pid.
        for suffix in ["c", "e", "s"] {
            let ns = format!("{name}-{suffix}");
            if Path::new("/run/netns").join(&ns).exists() {
                delete_ns(&ns);
            }
        }
        let net = 80 + ((std::process::id() + tag * 7) % 100) as u8;
        let t = Topology {
            client_ns: format!("{name}-c"),
            emu_ns: format!("{name}-e"),
            server_ns: format!("{name}-s"),
            name,
            paths,
            net,
            lock: Some(lock),
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
        if self.lock.take().is_some() {
            let _ = std::fs::remove_file(lock_path(&self.name));
        }
    }
}
