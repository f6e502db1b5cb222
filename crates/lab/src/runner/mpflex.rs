//! mpflex's client and server in the namespaces: configuration, start, status counters,
//! and what records say of the binary that ran.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::netns::Topology;
use crate::record::Build;

const SOCKS_PORT: u16 = 1080;
const MPFLEX_PORT: u16 = 7000;
const STATUS_PORT: u16 = 9190;

/// mpflex's `[tuning] pacing` when a system does not set it.
const DEFAULT_PACING: bool = true;

/// Child processes, killed and reaped when dropped.
pub struct Procs(pub Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `args` in namespace `ns`, its output appended to `log` (or discarded).
pub fn spawn_in(ns: &str, args: &[&str], log: Option<&Path>) -> Result<Child> {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(args);
    match log {
        Some(l) => {
            // Appended: a pair started for each measurement logs into the same file.
            let f = std::fs::OpenOptions::new().create(true).append(true).open(l)?;
            c.stdout(f.try_clone()?).stderr(f);
        }
        None => {
            c.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    Ok(c.spawn()?)
}

/// The SOCKS5 address of the `k`th mpflex pair's client.
pub fn socks_addr(k: u16) -> String {
    format!("127.0.0.1:{}", SOCKS_PORT + k)
}

/// A fresh key pair from `mpflex keygen`: (private, public).
fn keygen(bin: &Path) -> Result<(String, String)> {
    let out = Command::new(bin).arg("keygen").output().context("run mpflex keygen")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let get = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split('"').nth(1))
            .map(String::from)
    };
    Ok((
        get("private_key").context("keygen")?,
        get("public_key").context("keygen")?,
    ))
}

/// What one mpflex pair runs with.
pub struct Setup<'a> {
    /// `<scheduler>[+<key>=<value>...]`.
    pub sched: &'a str,
    pub cc: &'a str,
    /// The pair's number: its ports are offset by it.
    pub k: u16,
    /// Each path names its client interface (`device`) besides its address, so the client
    /// follows the link over netlink (carrier loss, an address that comes or goes), as a
    /// user's configuration would; off for the workloads that never touch a link, so a
    /// build from before `device` existed still runs them.
    pub devices: bool,
    /// Each path's kind for mpflex's energy model (`wifi`, `cellular`, `wired`), by the
    /// profile's path names ([`crate::energy::kind_of`]); written into the configuration
    /// only for the energy-aware system, so older builds run the others.
    pub kinds: Vec<&'static str>,
    /// The client listens for `TPROXY`-diverted TCP and UDP ([`super::lan`]'s ports
    /// for pair `k`), for a workload a LAN host runs through it.
    pub transparent: bool,
    /// The client runs a TUN device that [`tun_destination`] is routed into.
    pub tun: bool,
}

/// Where the workload of pair `k` of an `mpflex-tun` system connects: an address of the
/// server namespace's loopback (where the workload servers listen on every address),
/// routed in the client's namespace into pair `k`'s TUN by the client itself
/// (`tun.routes`), so an application that knows nothing of mpflex reaches it only
/// through the TUN. One per pair, as each pair has its own device.
pub fn tun_destination(k: u16) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(198, 18, 0, 10 + k as u8)
}

/// The system that runs mpflex's energy-aware mode (eMPTCP, docs/energy.md): MinRTT with
/// `energy_mode = "aware"` and each path's `kind`.
pub const EMPTCP: &str = "emptcp";

/// The server's and the client's configuration for pair `setup.k`.
fn configs(topo: &Topology, bin: &Path, setup: &Setup<'_>) -> Result<(String, String)> {
    let (sched, cc, k) = (setup.sched, setup.cc, setup.k);
    // `<scheduler>[+<key>=<value>...]`: the rest are `[tuning]` settings for both ends
    // (checked by System::parse).
    let mut parts = sched.split('+');
    let sched = parts.next().unwrap_or(sched);
    let (backup, tuning) = split_backup(parts);
    let energy_aware = sched == EMPTCP;
    let sched = if energy_aware { "minrtt" } else { sched };
    let (sp, spub) = keygen(bin)?;
    let (cp, cpub) = keygen(bin)?;
    let (mport, sport, stport) = (MPFLEX_PORT + k, SOCKS_PORT + k, STATUS_PORT + k);
    // The server's status answers in its own namespace (its paths' supervision counters).
    let server = format!(
        "listen = [\"0.0.0.0:{mport}\"]\nprivate_key = \"{sp}\"\nscheduler = \"{sched}\"\n\
         status_listen = \"127.0.0.1:{stport}\"\n\
         [[clients]]\nname = \"lab\"\npublic_key = \"{cpub}\"\n[acl]\nallow_loopback = true\nallow_private = true\n{own}[tuning]\ncongestion = \"{cc}\"\n{tuning}",
        // The TUN's destination is an address of the server's own (refused unless listed).
        own = if setup.tun {
            format!("allow_own = [\"{}/32\"]\n", tun_destination(k))
        } else {
            String::new()
        }
    );
    let mut client = format!(
        "private_key = \"{cp}\"\nserver_public_key = \"{spub}\"\nscheduler = \"{sched}\"\n\
         socks_listen = \"127.0.0.1:{sport}\"\nstatus_listen = \"127.0.0.1:{stport}\"\n"
    );
    if energy_aware {
        client += "energy_mode = \"aware\"\n";
    }
    if setup.transparent {
        client += &format!(
            "transparent_tproxy_listen = \"0.0.0.0:{}\"\ntransparent_udp_listen = \"0.0.0.0:{}\"\n",
            super::lan::TCP_PORT + k,
            super::lan::UDP_PORT + k
        );
    }
    if setup.tun {
        // The device's own /30 and name are the pair's: pairs may be up side by side.
        client += &format!(
            "[tun]\nname = \"mpflt{k}\"\nipv4 = \"10.233.{k}.1/30\"\nipv6 = \"\"\nroutes = [\"{}/32\"]\n",
            tun_destination(k)
        );
    }
    let addrs = |i| PathAddrs {
        server: format!("{}:{mport}", topo.server_addr(i)),
        source: topo.client_addr(i),
        device: topo.client_dev(i),
    };
    client += &client_paths(topo.paths, addrs, setup, &backup, energy_aware);
    client += &format!("[tuning]\ncongestion = \"{cc}\"\n{tuning}");
    Ok((server, client))
}

/// Where one path of the client's configuration goes: the server's address and port on
/// that path's link, the client's address on it and its interface.
struct PathAddrs {
    server: String,
    source: String,
    device: String,
}

/// The client's `[[paths]]`: one per link of the topology, each bound to its link's
/// address (and interface), so mpflex runs a path over every one of the profile's links,
/// as kernel MPTCP runs a subflow over each.
fn client_paths(
    n: usize,
    addrs: impl Fn(usize) -> PathAddrs,
    setup: &Setup<'_>,
    backup: &[usize],
    energy_aware: bool,
) -> String {
    let mut out = String::new();
    for i in 0..n {
        let a = addrs(i);
        out += &format!(
            "[[paths]]\nname = \"p{i}\"\nserver = \"{}\"\nsource = \"{}\"\n",
            a.server, a.source
        );
        if setup.devices {
            out += &format!("device = \"{}\"\n", a.device);
        }
        if backup.contains(&i) {
            out += "priority = \"backup\"\n";
        }
        if energy_aware {
            out += &format!("kind = \"{}\"\n", setup.kinds.get(i).copied().unwrap_or("wired"));
        }
    }
    out
}

/// Starts mpflex server and client (`bin`) as `setup` says, configuration
/// and logs in `dir`, and waits until every path is up.
pub fn start(topo: &Topology, bin: &Path, setup: &Setup<'_>, dir: &Path, stop: &AtomicBool) -> Result<Procs> {
    let k = setup.k;
    let (server, client) = configs(topo, bin, setup)?;
    std::fs::write(dir.join("server.toml"), server)?;
    std::fs::write(dir.join("client.toml"), client)?;
    let b = bin.to_str().context("utf-8 path")?;
    let s = spawn_in(
        &topo.server_ns,
        &[b, "server", "--config", dir.join("server.toml").to_str().unwrap()],
        Some(&dir.join("mpflex-server.log")),
    )?;
    std::thread::sleep(Duration::from_millis(300));
    let c = spawn_in(
        &topo.client_ns,
        &[b, "client", "--config", dir.join("client.toml").to_str().unwrap()],
        Some(&dir.join("mpflex-client.log")),
    )?;
    let procs = Procs(vec![s, c]);
    // Wait for every path to join (or a stop request: the processes go with `procs`).
    let until = Instant::now() + PATHS_UP_WITHIN;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            bail!("interrupted while mpflex ({}) started", setup.sched);
        }
        if paths_up(topo, bin, k) {
            return Ok(procs);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(PathsNotUp {
        within: PATHS_UP_WITHIN,
        dir: dir.display().to_string(),
    }
    .into())
}

/// How long mpflex's paths may take to join at the start: past the kernel's SYN
/// retransmissions of the first quarter minute (a second apart at first, then doubling,
/// RFC 6298 (5.5)), so a path dialled into a link outage that long still joins, as the
/// kernel's TCP and MPTCP would.
const PATHS_UP_WITHIN: Duration = Duration::from_secs(20);

/// mpflex's paths did not all join within [`PATHS_UP_WITHIN`] of its start: the
/// repetition fails (the runner records it as failed and goes on).
#[derive(Debug)]
pub struct PathsNotUp {
    pub within: Duration,
    /// Where the client's and the server's logs are.
    pub dir: String,
}

impl std::fmt::Display for PathsNotUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mpflex paths did not come up within {:?}; see {}",
            self.within, self.dir
        )
    }
}

impl std::error::Error for PathsNotUp {}

/// The `k`th pair's client status.
pub fn status(topo: &Topology, bin: &Path, k: u16) -> Result<serde_json::Value> {
    status_in(&topo.client_ns, bin, k)
}

/// The `k`th pair's server status (every session it holds).
pub fn server_status(topo: &Topology, bin: &Path, k: u16) -> Result<serde_json::Value> {
    status_in(&topo.server_ns, bin, k)
}

/// `mpflex status --json` of the `k`th pair's process in namespace `ns`.
fn status_in(ns: &str, bin: &Path, k: u16) -> Result<serde_json::Value> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin)
        .args(["status", "--json", "--addr", &format!("127.0.0.1:{}", STATUS_PORT + k)])
        .output()?;
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Per-path counts over a measurement: `after − before`, a path new since counting from 0.
pub fn per_path_delta(after: &[u64], before: &[u64]) -> Vec<u64> {
    after
        .iter()
        .zip(before.iter().chain(std::iter::repeat(&0)))
        .map(|(a, b)| a.saturating_sub(*b))
        .collect()
}

/// Per path, how often either end suspected it (`suspicions`: silent while holding data)
/// and demoted it (`demotions`: the proactive monitor's verdict), summed over the client's
/// session and the server's sessions: a path that flaps shows in these.
pub fn supervision(client: &serde_json::Value, server: &serde_json::Value) -> [Vec<u64>; 2] {
    let sessions = server["sessions"].as_array().map(Vec::as_slice).unwrap_or_default();
    ["suspicions", "demotions"].map(|key| {
        let mut sum = path_counter(client, key);
        for s in sessions {
            for (i, n) in path_counter(s, key).into_iter().enumerate() {
                if i >= sum.len() {
                    sum.resize(i + 1, 0);
                }
                sum[i] += n;
            }
        }
        sum
    })
}

/// Whether the `k`th pair's client has every path up.
fn paths_up(topo: &Topology, bin: &Path, k: u16) -> bool {
    status(topo, bin, k).is_ok_and(|v| {
        // A path the energy-aware mode holds back undialled is as ready as it will be.
        let up = v["paths"]
            .as_array()
            .map_or(0, |a| a.iter().filter(|p| p["up"] == true || p["held"] == true).count());
        up == topo.paths
    })
}

/// Waits (up to `limit`) until every mpflex path is up again.
pub fn wait_paths_up(topo: &Topology, bin: &Path, k: u16, limit: Duration) {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if paths_up(topo, bin, k) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A per-path counter of a status.
fn path_counter(v: &serde_json::Value, key: &str) -> Vec<u64> {
    v["paths"]
        .as_array()
        .map(|a| a.iter().map(|p| p[key].as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

/// Per-path payload bytes in the workload's main direction, as the client counts them,
/// and the payload that crossed the paths twice in either direction: the duplicates it
/// received (the server's copies) and the copies it sent (`payload_resent`: an upload's
/// reinjections and hedged requests, which only the server would see twice).
pub fn counters(v: &serde_json::Value, upload: bool) -> (Vec<u64>, u64) {
    let bytes = path_counter(v, if upload { "bytes_sent" } else { "bytes_received" });
    let twice = path_counter(v, "duplicate_received").iter().sum::<u64>()
        + path_counter(v, "payload_resent").iter().sum::<u64>();
    (bytes, twice)
}

/// What a record says of the binary at `bin`: its path, version and contents' hash.
pub fn describe(name: Option<&str>, bin: &Path) -> Build {
    let version = Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty());
    let id = std::fs::read(bin)
        .ok()
        .map(|b| format!("{}-{:016x}", b.len(), fnv1a(&b)));
    Build {
        name: name.map(String::from),
        path: std::fs::canonicalize(bin)
            .unwrap_or_else(|_| bin.to_path_buf())
            .display()
            .to_string(),
        version,
        id,
    }
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The settings after a system's scheduler: `backup=<path index>` (any number of them)
/// makes that path of the client a backup (`priority = "backup"`, the tiers of
/// docs/paths.md); the rest are `[tuning]` lines for both ends.
fn split_backup<'a>(parts: impl Iterator<Item = &'a str>) -> (Vec<usize>, String) {
    let mut backup = Vec::new();
    let mut tuning = String::new();
    for kv in parts {
        match kv.split_once('=').map(|(k, v)| (k, v.parse::<usize>())) {
            Some(("backup", Ok(i))) => backup.push(i),
            _ => tuning += &format!("{kv}\n"),
        }
    }
    (backup, tuning)
}

/// `pacing` as a system `<scheduler>[+<key>=<value>...]` runs it.
pub fn pacing(sched: &str) -> bool {
    sched
        .split('+')
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == "pacing")
        .filter_map(|(_, v)| v.parse().ok())
        .last()
        .unwrap_or(DEFAULT_PACING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supervision_counts_add_up_over_both_ends() {
        let client =
            serde_json::json!({"paths": [{"suspicions": 1, "demotions": 0}, {"suspicions": 0, "demotions": 2}]});
        let server = serde_json::json!({"sessions": [
            {"paths": [{"suspicions": 3, "demotions": 1}]},
            {"paths": [{"suspicions": 0, "demotions": 0}, {"suspicions": 5, "demotions": 0}, {"suspicions": 1}]},
        ]});
        assert_eq!(supervision(&client, &server), [vec![4, 5, 1], vec![1, 2, 0]]);
        let none = serde_json::Value::default();
        assert_eq!(supervision(&client, &none), [vec![1, 0], vec![0, 2]]);
    }

    /// Five links give five paths, each bound to its own link's addresses and interface,
    /// in the configuration's TOML; a backup and the energy kinds land on theirs.
    #[test]
    fn the_client_gets_a_path_per_link() {
        let setup = Setup {
            sched: "minrtt",
            cc: "cubic",
            k: 0,
            devices: true,
            kinds: vec!["wired", "wired", "wifi", "cellular", "cellular"],
            transparent: false,
            tun: false,
        };
        let addrs = |i: usize| PathAddrs {
            server: format!("10.80.{}.2:7000", i + 1),
            source: format!("10.80.{}.1", i + 1),
            device: format!("c{i}"),
        };
        let text = client_paths(5, addrs, &setup, &[4], true);
        let v: toml::Value = toml::from_str(&text).unwrap();
        let paths = v["paths"].as_array().unwrap();
        assert_eq!(paths.len(), 5);
        for (i, p) in paths.iter().enumerate() {
            assert_eq!(p["name"].as_str(), Some(format!("p{i}").as_str()));
            assert_eq!(p["server"].as_str(), Some(format!("10.80.{}.2:7000", i + 1).as_str()));
            assert_eq!(p["source"].as_str(), Some(format!("10.80.{}.1", i + 1).as_str()));
            assert_eq!(p["device"].as_str(), Some(format!("c{i}").as_str()));
            assert_eq!(p.get("priority").is_some(), i == 4, "path {i}");
            assert_eq!(p["kind"].as_str(), Some(setup.kinds[i]));
        }
    }

    #[test]
    fn backup_paths_are_not_tuning_keys() {
        let (backup, tuning) = split_backup("backup=1+pacing=false+backup=x".split('+'));
        assert_eq!(backup, vec![1]);
        assert_eq!(tuning, "pacing=false\nbackup=x\n");
    }

    #[test]
    fn pacing_from_the_tuning_settings() {
        assert!(pacing("minrtt"));
        assert!(!pacing("dems-f+pacing=false"));
        assert!(pacing("dems-f+fresh_ssthresh=false+pacing=true"));
    }

    #[test]
    fn builds_are_described() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let b = describe(Some("x"), Path::new("/no/such/mpflex"));
        assert_eq!(b.name.as_deref(), Some("x"));
        assert_eq!((b.version, b.id), (None, None));
    }
}
