//! Runs systems side by side on one emulated topology and appends one JSON object per
//! measurement to a results file.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::emulator::Emulator;
use crate::link::Rate;
use crate::netns::Topology;
use crate::profile::Profile;
use crate::workload::Fields;

pub const TCP_PORT: u16 = 9000;
pub const MPTCP_PORT: u16 = 9001;
const SOCKS_PORT: u16 = 1080;
const MPFLEX_PORT: u16 = 7000;
const STATUS_PORT: u16 = 9190;

#[derive(Debug, Clone, PartialEq)]
pub enum System {
    /// Single-path TCP over path i.
    Tcp(usize),
    Mptcp,
    /// Static split over two single-path connections, best fraction kept.
    Oracle,
    Mpflex(String),
}

impl System {
    pub fn parse(s: &str, profile: &Profile) -> Result<System> {
        if let Some(p) = s.strip_prefix("tcp-") {
            let i = profile
                .paths
                .iter()
                .position(|x| x.name == p)
                .or_else(|| p.parse().ok())
                .with_context(|| format!("tcp-{p}: no such path in profile {}", profile.name))?;
            return Ok(System::Tcp(i));
        }
        if let Some(sched) = s.strip_prefix("mpflex:") {
            // `mpflex:<scheduler>+<key>=<value>...`: tuning settings for this system, so
            // that two settings can run side by side (e.g. `mpflex:dems-f+pacing=false`).
            let mut parts = sched.split('+');
            if parts.next().is_none_or(|n| n.is_empty()) {
                bail!("{s:?}: mpflex:<scheduler>[+<tuning key>=<value>...]");
            }
            for kv in parts {
                let ok = kv.split_once('=').is_some_and(|(k, v)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !v.is_empty()
                });
                if !ok {
                    bail!("{s:?}: {kv:?} is not <tuning key>=<value> (e.g. fresh_ssthresh=false)");
                }
            }
            return Ok(System::Mpflex(sched.to_string()));
        }
        match s {
            "mptcp" => Ok(System::Mptcp),
            "oracle" => Ok(System::Oracle),
            "mpflex" => Ok(System::Mpflex("minrtt".into())),
            _ => bail!("unknown system {s:?} (tcp-<path>, mptcp, oracle, mpflex:<scheduler>)"),
        }
    }

    pub fn label(&self, profile: &Profile) -> String {
        match self {
            System::Tcp(i) => format!("tcp-{}", profile.paths[*i].name),
            System::Mptcp => "mptcp".into(),
            System::Oracle => "oracle".into(),
            System::Mpflex(s) => format!("mpflex:{s}"),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub system: String,
    pub profile: String,
    pub workload: String,
    /// Sub-kind of the workload: `bulk` down/up, `shortflows` seq/par.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    pub mode: String,
    pub cc: String,
    pub size: u64,
    pub rep: usize,
    pub completion_ms: f64,
    pub goodput_mbit: f64,
    /// Oracle: the WiFi (path 0) share used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// mpflex: bytes the client received per path during this measurement (in `warm`
    /// mode including the warm-up transfer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_path: Option<Vec<u64>>,
    /// mpflex: payload bytes the client received more than once (redundant copies), same
    /// span as `bytes_per_path`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dup_bytes: Option<u64>,
    /// `net.ipv4.tcp_slow_start_after_idle` in the namespaces (the kernel default is on).
    pub idle_restart: bool,
    /// mpflex: whether this measurement ran on a client and server started for it (paths
    /// with no TCP history), or on a pair kept up for the whole block (`--keep-mpflex`;
    /// records without the field were made that way).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpflex_per_run: Option<bool>,
    /// `chunk`: fluid lower bound for this size: S / Σ down rates + smallest RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_ms: Option<f64>,
    /// Σ of the path rates in the workload's direction (`bulk`, `video`, `upload-ping`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_mbit: Option<f64>,
    /// `video`: the highest ladder rate the aggregate capacity carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_mbit: Option<f64>,
    /// What the workload client measured besides (see `workload`).
    #[serde(flatten)]
    pub extra: Fields,
}

/// The workloads `run` knows.
pub const WORKLOADS: [&str; 6] = ["chunk", "bulk", "shortflows", "video", "upload-ping", "handover"];

/// One measurement: completion (ms), the oracle's share, mpflex's bytes per path and
/// duplicate bytes, the workload client's fields.
type Measured = (f64, Option<f64>, Option<(Vec<u64>, u64)>, Fields);

pub struct RunConfig {
    pub profile: Profile,
    pub systems: Vec<System>,
    /// One of [`WORKLOADS`].
    pub workload: String,
    /// `bulk`: down and/or up; `shortflows`: seq and/or par.
    pub variants: Vec<String>,
    /// Length of `bulk`, `upload-ping` and `handover` runs, seconds of `video`.
    pub secs: f64,
    /// `handover`: the stream's rate.
    pub rate_kbit: u64,
    /// `handover`: the path taken down at a third of the run and back up at two thirds.
    pub handover_path: usize,
    pub sizes: Vec<u64>,
    pub modes: Vec<String>,
    pub ccs: Vec<String>,
    pub reps: usize,
    pub oracle_step: f64,
    pub out: PathBuf,
    pub mpflex_bin: PathBuf,
    /// Whether idle TCP connections restart from the initial window (sysctl, both hosts).
    pub idle_restart: bool,
    /// Keep each scheduler's mpflex pair up for the whole block (see [`run`]); else each
    /// measurement starts its own.
    pub keep_mpflex: bool,
}

struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn self_exe() -> PathBuf {
    std::env::current_exe().expect("own path")
}

fn spawn_in(ns: &str, args: &[&str], log: Option<&Path>) -> Result<Child> {
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

/// Starts mpflex server and client with `sched`; returns them and the client's status addr.
fn start_mpflex(
    topo: &Topology,
    bin: &Path,
    sched: &str,
    cc: &str,
    dir: &Path,
    k: u16,
    stop: &AtomicBool,
) -> Result<Procs> {
    let keygen = |_: ()| -> Result<(String, String)> {
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
    };
    // `<scheduler>[+<key>=<value>...]`: the rest are `[tuning]` settings for both ends
    // (checked by System::parse).
    let mut parts = sched.split('+');
    let sched = parts.next().unwrap_or(sched);
    let tuning: String = parts.map(|kv| format!("{kv}\n")).collect();
    let (sp, spub) = keygen(())?;
    let (cp, cpub) = keygen(())?;
    let (mport, sport, stport) = (MPFLEX_PORT + k, SOCKS_PORT + k, STATUS_PORT + k);
    let server = format!(
        "listen = [\"0.0.0.0:{mport}\"]\nprivate_key = \"{sp}\"\nscheduler = \"{sched}\"\n\
         [[clients]]\nname = \"lab\"\npublic_key = \"{cpub}\"\n[acl]\nallow_loopback = true\nallow_private = true\n[tuning]\ncongestion = \"{cc}\"\n{tuning}"
    );
    let mut client = format!(
        "private_key = \"{cp}\"\nserver_public_key = \"{spub}\"\nscheduler = \"{sched}\"\n\
         socks_listen = \"127.0.0.1:{sport}\"\nstatus_listen = \"127.0.0.1:{stport}\"\n"
    );
    for i in 0..topo.paths {
        client += &format!(
            "[[paths]]\nname = \"p{i}\"\nserver = \"{}:{mport}\"\nsource = \"{}\"\n",
            topo.server_addr(i),
            topo.client_addr(i)
        );
    }
    client += &format!("[tuning]\ncongestion = \"{cc}\"\n{tuning}");
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
    for _ in 0..100 {
        if stop.load(Ordering::SeqCst) {
            bail!("interrupted while mpflex ({sched}) started");
        }
        if let Ok(v) = mpflex_status(topo, bin, k) {
            let up = v["paths"]
                .as_array()
                .map_or(0, |a| a.iter().filter(|p| p["up"] == true).count());
            if up == topo.paths {
                return Ok(procs);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("mpflex paths did not come up; see {}", dir.display())
}

fn mpflex_status(topo: &Topology, bin: &Path, k: u16) -> Result<serde_json::Value> {
    let out = Command::new("ip")
        .args(["netns", "exec", &topo.client_ns])
        .arg(bin)
        .args(["status", "--json", "--addr", &format!("127.0.0.1:{}", STATUS_PORT + k)])
        .output()?;
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn path_counter(v: &serde_json::Value, key: &str) -> Vec<u64> {
    v["paths"]
        .as_array()
        .map(|a| a.iter().map(|p| p[key].as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

/// Per-path payload bytes in the workload's main direction, as the client counts them.
fn path_bytes(v: &serde_json::Value, upload: bool) -> Vec<u64> {
    path_counter(v, if upload { "bytes_sent" } else { "bytes_received" })
}

/// One chunk-client invocation in the client namespace; returns completion times (ms).
fn chunk_client(topo: &Topology, args: &[String]) -> Result<Vec<f64>> {
    let out = Command::new("ip")
        .args(["netns", "exec", &topo.client_ns])
        .arg(self_exe())
        .arg("chunk-client")
        .args(args)
        .output()?;
    if !out.status.success() {
        bail!(
            "chunk-client {:?}: {}",
            args,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse::<f64>().context("chunk-client output"))
        .collect()
}

/// Links count as quiet when at most [`QUIET_TRICKLE`] bytes crossed them in one
/// [`QUIET_WINDOW`]; a run waits for that at most [`QUIET_LIMIT`] before it starts.
const QUIET_WINDOW: Duration = Duration::from_millis(200);
const QUIET_TRICKLE: u64 = 6000;
const QUIET_LIMIT: Duration = Duration::from_secs(30);

pub fn run(cfg: &RunConfig, stop: &AtomicBool) -> Result<usize> {
    let topo = Topology::create(cfg.profile.paths.len(), 0)?;
    let emu = &Emulator::start(&topo, &cfg.profile, 1)?;
    let dir = std::env::temp_dir().join(&topo.name);
    std::fs::create_dir_all(&dir)?;
    topo.sysctl("net.ipv4.tcp_no_metrics_save=1")?;
    topo.sysctl(&format!(
        "net.ipv4.tcp_slow_start_after_idle={}",
        cfg.idle_restart as u8
    ))?;
    let exe = self_exe();
    let exe = exe.to_str().context("utf-8 path")?;
    let mut out = OpenOptions::new().create(true).append(true).open(&cfg.out)?;
    let rates: f64 = cfg.profile.paths.iter().filter_map(|p| p.down.bytes_per_sec()).sum();
    let min_rtt = cfg
        .profile
        .paths
        .iter()
        .map(|p| (p.down.delay + p.up.delay).as_secs_f64() * 1000.0)
        .fold(f64::INFINITY, f64::min);
    let chunk = cfg.workload == "chunk";
    // What one block of repetitions varies: chunk sizes, or the workload's variants.
    let items: Vec<(u64, Option<String>)> = if chunk {
        cfg.sizes.iter().map(|&s| (s, None)).collect()
    } else if cfg.variants.is_empty() {
        vec![(0, None)]
    } else {
        cfg.variants.iter().map(|v| (0, Some(v.clone()))).collect()
    };
    // Only chunk and shortflows have a meaningful warm mode.
    let modes: Vec<String> = if chunk || cfg.workload == "shortflows" {
        cfg.modes.clone()
    } else {
        vec!["fresh".into()]
    };
    let systems: Vec<&System> = cfg.systems.iter().filter(|s| chunk || **s != System::Oracle).collect();
    if systems.len() < cfg.systems.len() {
        eprintln!("oracle is a chunk baseline; left out of {}", cfg.workload);
    }
    let up_rates: f64 = cfg.profile.paths.iter().filter_map(|p| p.up.bytes_per_sec()).sum();
    let traced = cfg
        .profile
        .paths
        .iter()
        .any(|p| matches!(p.down.rate, Rate::Trace(_)) || matches!(p.up.rate, Rate::Trace(_)));
    let total = cfg.ccs.len() * items.len() * modes.len() * cfg.reps * systems.len();
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .unwrap()
            .progress_chars("=> "),
    );
    let mut written = 0;
    let srv0 = format!("{}:{TCP_PORT}", topo.server_addr(0));
    for cc in &cfg.ccs {
        // Non-initial namespaces may not choose every algorithm as their default (cubic
        // is restricted here), so the senders set it per socket as well: the chunk
        // servers, and mpflex's path connections through `tuning.congestion`.
        let _ = topo.sysctl(&format!("net.ipv4.tcp_congestion_control={cc}"));
        let _servers = Procs(vec![
            spawn_in(
                &topo.server_ns,
                &[
                    exe,
                    "chunk-server",
                    "--listen",
                    &format!("0.0.0.0:{TCP_PORT}"),
                    "--cc",
                    cc,
                ],
                None,
            )?,
            spawn_in(
                &topo.server_ns,
                &[
                    exe,
                    "chunk-server",
                    "--listen",
                    &format!("0.0.0.0:{MPTCP_PORT}"),
                    "--mptcp",
                    "--cc",
                    cc,
                ],
                None,
            )?,
        ]);
        std::thread::sleep(Duration::from_millis(300));
        // mpflex path connections are made after the sysctl, so they use `cc` too. Each
        // scheduler gets its own client/server pair and ports. By default a pair is started
        // for each measurement and stopped after it: a pair left idle while other systems
        // run sends keepalives (one a second per path) into links those systems fill, and a
        // keepalive lost there times out and cuts the path's ssthresh to 7 segments, which
        // its next transfers inherit (bw-grid:12.5x2.5, DEMS-F: WiFi stuck in congestion
        // avoidance at 20-26 segments of its 54-segment BDP, 1.3x the oracle). Baselines
        // open new connections for every measurement; so do mpflex's paths now.
        // `--keep-mpflex` keeps every pair up for the block.
        let mut mpflex: Vec<(String, u16, PathBuf, Option<Procs>)> = Vec::new();
        for s in &cfg.systems {
            if let System::Mpflex(sched) = s {
                let k = mpflex.len() as u16;
                // Logs of one profile, scheduler and cc each in their own directory (a family of
                // profiles runs in one topology directory).
                let sub = dir.join(crate::report::sanitize(&[&cfg.profile.name, sched, cc]));
                std::fs::create_dir_all(&sub)?;
                let procs = if cfg.keep_mpflex {
                    Some(start_mpflex(&topo, &cfg.mpflex_bin, sched, cc, &sub, k, stop)?)
                } else {
                    None
                };
                mpflex.push((sched.clone(), k, sub, procs));
            }
        }
        for (size, variant) in &items {
            let size = *size;
            for mode in &modes {
                // The oracle's best share (in steps) from the first repetition's sweep.
                let mut oracle_best: Option<usize> = None;
                for rep in 0..cfg.reps {
                    for sys in &systems {
                        if stop.load(Ordering::SeqCst) {
                            bar.abandon_with_message("interrupted");
                            return Ok(written);
                        }
                        let label = sys.label(&cfg.profile);
                        let what = match variant {
                            Some(v) => format!("{} {v}", cfg.workload),
                            None => human(size),
                        };
                        bar.set_message(format!("{cc} {mode} {what} {label}"));
                        // How the client reaches the server for this system.
                        let via: Vec<String> = match sys {
                            System::Tcp(i) => vec![
                                "--server".into(),
                                format!("{}:{TCP_PORT}", topo.server_addr(*i)),
                                "--bind".into(),
                                topo.client_addr(*i),
                            ],
                            System::Mptcp => vec![
                                "--server".into(),
                                format!("{}:{MPTCP_PORT}", topo.server_addr(0)),
                                "--mptcp".into(),
                            ],
                            System::Oracle => Vec::new(),
                            System::Mpflex(sched) => {
                                let k = mpflex.iter().find(|(s, ..)| s == sched).expect("configured").1;
                                vec![
                                    "--server".into(),
                                    format!("127.0.0.1:{TCP_PORT}"),
                                    "--socks".into(),
                                    format!("127.0.0.1:{}", SOCKS_PORT + k),
                                ]
                            }
                        };
                        let measure = |via: &[String]| -> Result<(f64, Fields)> {
                            // Start on quiet links: what the previous run left in flight
                            // would otherwise compete with this one.
                            let settle = emu.wait_quiet(QUIET_WINDOW, QUIET_TRICKLE, QUIET_LIMIT);
                            let mut settled = Fields::new();
                            if settle >= 2 * QUIET_WINDOW {
                                settled.insert("settle_ms".into(), (settle.as_millis() as u64).into());
                            }
                            // Every transfer meets the same stretch of a trace, not
                            // wherever the looped trace happens to be by then.
                            if traced {
                                emu.rewind_traces();
                                settled.insert("trace_rewound".into(), true.into());
                            }
                            if chunk {
                                let mut a = vec!["--size".to_string(), size.to_string(), "--mode".into(), mode.clone()];
                                a.extend_from_slice(via);
                                let times = chunk_client(&topo, &a)?;
                                let ms = *times.first().context("chunk-client printed no time")?;
                                // Warm mode: the warm-up's time, printed after the chunk's.
                                if let Some(w) = times.get(1) {
                                    settled.insert("warmup_ms".into(), (*w).into());
                                }
                                return Ok((ms, settled));
                            }
                            let mut a = vec![
                                "--workload".to_string(),
                                cfg.workload.clone(),
                                "--mode".into(),
                                mode.clone(),
                                "--secs".into(),
                                cfg.secs.to_string(),
                                "--rate-kbit".into(),
                                cfg.rate_kbit.to_string(),
                            ];
                            if let Some(v) = variant {
                                a.extend(["--variant".into(), v.clone()]);
                            }
                            a.extend_from_slice(via);
                            let mut f = if cfg.workload == "handover" {
                                handover_client(&topo, emu, &a, cfg.secs, cfg.handover_path)?
                            } else {
                                workload_client(&topo, &a)?
                            };
                            f.extend(settled);
                            let ms = f
                                .get("completion_ms")
                                .and_then(|v| v.as_f64())
                                .unwrap_or(cfg.secs * 1000.0);
                            Ok((ms, f))
                        };
                        let mut results: Vec<Measured> = Vec::new();
                        match sys {
                            System::Tcp(_) | System::Mptcp => {
                                let (ms, f) = measure(&via)?;
                                results.push((ms, None, None, f));
                            }
                            System::Oracle => {
                                // The completion time is the later of two transfers, one
                                // growing and one shrinking with p: a coarse sweep at twice
                                // the step, then the two neighbours of its best at one step.
                                let fine = (1.0 / cfg.oracle_step).round().max(1.0) as usize;
                                let coarse = (fine / 2).max(1);
                                let mut best: Option<(f64, f64)> = None;
                                // Later repetitions measure the first one's best share and
                                // its two neighbours.
                                let mut shares: Vec<usize> = match oracle_best {
                                    Some(b) => [b.checked_sub(1), Some(b), Some(b + 1)]
                                        .into_iter()
                                        .flatten()
                                        .filter(|&n| n <= fine)
                                        .collect(),
                                    None => (0..=coarse).map(|k| k * fine / coarse).collect(),
                                };
                                let refine = oracle_best.is_none();
                                let mut samples: Vec<serde_json::Value> = Vec::new();
                                let mut i = 0;
                                while i < shares.len() {
                                    // A sweep is many transfers: stop between them.
                                    if stop.load(Ordering::SeqCst) {
                                        bar.abandon_with_message("interrupted");
                                        return Ok(written);
                                    }
                                    let k = shares[i];
                                    i += 1;
                                    let p = k as f64 / fine as f64;
                                    let a = vec![
                                        "--server".into(),
                                        srv0.clone(),
                                        "--bind".into(),
                                        topo.client_addr(0),
                                        "--split-server".into(),
                                        format!("{}:{TCP_PORT}", topo.server_addr(1)),
                                        "--split-bind".into(),
                                        topo.client_addr(1),
                                        "--share".into(),
                                        p.to_string(),
                                    ];
                                    let (ms, f) = measure(&a)?;
                                    // [share, chunk ms, warm-up ms (warm mode)].
                                    samples.push(match f.get("warmup_ms") {
                                        Some(w) => serde_json::json!([p, ms, w]),
                                        None => serde_json::json!([p, ms]),
                                    });
                                    if best.is_none_or(|(b, _)| ms < b) {
                                        best = Some((ms, p));
                                    }
                                    if refine && i == coarse + 1 && fine > coarse {
                                        // Coarse sweep done: refine around its best.
                                        let b = (best.expect("measured").1 * fine as f64).round() as usize;
                                        for n in [b.checked_sub(1), Some(b + 1)].into_iter().flatten() {
                                            if n <= fine && !shares.contains(&n) {
                                                shares.push(n);
                                            }
                                        }
                                    }
                                }
                                let (ms, p) = best.expect("at least one share");
                                // Fixed from the first repetition on, so that every later one
                                // measures the same shares and each share has a median.
                                oracle_best.get_or_insert((p * fine as f64).round() as usize);
                                // Every transfer, for the report's best static share.
                                let mut f = Fields::new();
                                f.insert("oracle_shares".into(), samples.into());
                                results.push((ms, Some(p), None, f));
                            }
                            System::Mpflex(sched) => {
                                let (_, k, sub, kept) = mpflex.iter().find(|(s, ..)| s == sched).expect("configured");
                                let k = *k;
                                // Started here unless kept up for the block; stopped when
                                // this measurement is done (dropped at the end of the arm).
                                let _own = match kept {
                                    Some(_) => None,
                                    None => Some(start_mpflex(&topo, &cfg.mpflex_bin, sched, cc, sub, k, stop)?),
                                };
                                if cfg.workload == "handover" {
                                    // The previous run took a path down: start with all up.
                                    wait_paths_up(&topo, &cfg.mpflex_bin, k, Duration::from_secs(15));
                                }
                                let upload = matches!(
                                    (cfg.workload.as_str(), variant.as_deref()),
                                    ("bulk", Some("up")) | ("upload-ping", _)
                                );
                                let st = mpflex_status(&topo, &cfg.mpflex_bin, k)?;
                                let (before, dup_before) =
                                    (path_bytes(&st, upload), path_counter(&st, "duplicate_received"));
                                let (ms, f) = measure(&via)?;
                                let st = mpflex_status(&topo, &cfg.mpflex_bin, k)?;
                                let (after, dup_after) =
                                    (path_bytes(&st, upload), path_counter(&st, "duplicate_received"));
                                let delta = after
                                    .iter()
                                    .zip(before.iter().chain(std::iter::repeat(&0)))
                                    .map(|(a, b)| a.saturating_sub(*b))
                                    .collect();
                                let dup = dup_after.iter().sum::<u64>().saturating_sub(dup_before.iter().sum());
                                results.push((ms, None, Some((delta, dup)), f));
                            }
                        }
                        for (ms, p, bytes, mut extra) in results {
                            let capacity = match (cfg.workload.as_str(), variant.as_deref()) {
                                ("bulk", Some("up")) | ("upload-ping", _) => Some(up_rates * 8.0 / 1e6),
                                ("bulk", _) | ("video", _) | ("handover", _) => Some(rates * 8.0 / 1e6),
                                _ => None,
                            };
                            let goodput = match extra.remove("goodput_mbit").and_then(|v| v.as_f64()) {
                                Some(g) => g,
                                None if chunk => size as f64 * 8.0 / (ms / 1000.0) / 1e6,
                                None => {
                                    extra
                                        .get("bytes")
                                        .or_else(|| extra.get("received_bytes"))
                                        .and_then(|v| v.as_f64())
                                        .unwrap_or(0.0)
                                        * 8.0
                                        / (ms / 1000.0)
                                        / 1e6
                                }
                            };
                            extra.remove("completion_ms");
                            let size = if chunk {
                                size
                            } else {
                                extra.get("bytes").and_then(|v| v.as_u64()).unwrap_or(0)
                            };
                            let rec = Record {
                                system: label.clone(),
                                profile: cfg.profile.name.clone(),
                                workload: cfg.workload.clone(),
                                variant: variant.clone(),
                                mode: mode.clone(),
                                cc: cc.clone(),
                                size,
                                rep,
                                completion_ms: ms,
                                goodput_mbit: goodput,
                                p,
                                dup_bytes: bytes.as_ref().map(|b| b.1),
                                bytes_per_path: bytes.map(|b| b.0),
                                idle_restart: cfg.idle_restart,
                                mpflex_per_run: matches!(sys, System::Mpflex(_)).then_some(!cfg.keep_mpflex),
                                bound_ms: chunk.then(|| size as f64 / rates * 1000.0 + min_rtt),
                                ideal_mbit: (cfg.workload == "video")
                                    .then(|| crate::workload::ideal_bitrate(rates * 8.0 / 1e6)),
                                capacity_mbit: capacity,
                                extra,
                            };
                            writeln!(out, "{}", serde_json::to_string(&rec)?)?;
                            written += 1;
                        }
                        bar.inc(1);
                    }
                }
            }
        }
    }
    bar.finish_with_message("done");
    Ok(written)
}

/// One `workload-client` run in the client namespace; returns its JSON fields.
fn workload_client(topo: &Topology, args: &[String]) -> Result<Fields> {
    let child = workload_child(topo, args)?;
    workload_output(child, args)
}

fn workload_child(topo: &Topology, args: &[String]) -> Result<Child> {
    Ok(Command::new("ip")
        .args(["netns", "exec", &topo.client_ns])
        .arg(self_exe())
        .arg("workload-client")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?)
}

fn workload_output(child: Child, args: &[String]) -> Result<Fields> {
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "workload-client {:?}: {}",
            args,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("workload-client output")
}

/// `handover`: runs the client while `path` goes down at a third of the run and comes
/// back at two thirds.
fn handover_client(topo: &Topology, emu: &Emulator, args: &[String], secs: f64, path: usize) -> Result<Fields> {
    let child = workload_child(topo, args)?;
    let t0 = std::time::Instant::now();
    let down_at = t0 + Duration::from_secs_f64(secs / 3.0);
    let up_at = t0 + Duration::from_secs_f64(2.0 * secs / 3.0);
    std::thread::sleep(down_at.saturating_duration_since(std::time::Instant::now()));
    emu.set_path_up(path, false);
    std::thread::sleep(up_at.saturating_duration_since(std::time::Instant::now()));
    emu.set_path_up(path, true);
    workload_output(child, args)
}

/// Waits (up to `limit`) until every mpflex path is up again.
fn wait_paths_up(topo: &Topology, bin: &Path, k: u16, limit: Duration) {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if let Ok(v) = mpflex_status(topo, bin, k) {
            let up = v["paths"]
                .as_array()
                .map_or(0, |a| a.iter().filter(|p| p["up"] == true).count());
            if up == topo.paths {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn human(size: u64) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{} MB", size >> 20)
    } else if size >= 1 << 10 && size.is_multiple_of(1 << 10) {
        format!("{} KB", size >> 10)
    } else {
        format!("{size} B")
    }
}

pub fn parse_size(s: &str) -> Result<u64> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix(['K', 'k']) {
        (n, 1u64 << 10)
    } else if let Some(n) = s.strip_suffix(['M', 'm']) {
        (n, 1 << 20)
    } else {
        (s, 1)
    };
    Ok(num.parse::<u64>().with_context(|| format!("size {s:?}"))? * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systems_parse_with_and_without_tuning_settings() {
        let p = crate::profile::seed_default(70);
        assert_eq!(System::parse("mptcp", &p).unwrap(), System::Mptcp);
        assert_eq!(System::parse("tcp-lte", &p).unwrap(), System::Tcp(1));
        assert_eq!(System::parse("mpflex", &p).unwrap(), System::Mpflex("minrtt".into()));
        let s = System::parse("mpflex:dems-f+fresh_ssthresh=false+keepalive_ms=500", &p).unwrap();
        assert_eq!(s, System::Mpflex("dems-f+fresh_ssthresh=false+keepalive_ms=500".into()));
        assert_eq!(s.label(&p), "mpflex:dems-f+fresh_ssthresh=false+keepalive_ms=500");
        for bad in [
            "mpflex:",
            "mpflex:+pacing=false",
            "mpflex:ecf+pacing",
            "mpflex:ecf+=1",
            "mpflex:ecf+a b=1",
            "tcp-x",
            "quic",
        ] {
            let e = System::parse(bad, &p).unwrap_err().to_string();
            assert!(
                e.contains(bad.split('+').next().unwrap()) || e.contains("tcp-x"),
                "{bad}: {e}"
            );
        }
    }
}
