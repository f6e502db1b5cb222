//! Runs systems side by side on one emulated topology and appends one JSON object per
//! measurement ([`Record`]) to a results file.
//!
//! Rule: the systems of a point take turns under the same conditions: each measurement
//! starts on quiet links, at the start of a trace, on new connections (mpflex: on a client
//! and server started for it, unless `--keep-mpflex`). The reason: the lab's results are
//! ratios between systems, and whatever one system leaves behind (queued bytes, a
//! trace's position, a path's TCP state) would bias the next one's measurement.

mod clients;
mod lan;
mod links;
mod mpflex;
mod oracle;
mod priced;
mod records;
mod system;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

pub use mpflex::describe as describe_mpflex;
pub use system::{parse_builds, System};

use crate::emulator::Emulator;
use crate::netns::Topology;
use crate::profile::Profile;
use crate::record::Build;
use crate::units::{human, sanitize};
use crate::workload::bulk::{Window, WINDOW};
use crate::workload::{chunk, outages, Fields, Spec, Workload};
use links::{link_fields, Links};
use mpflex::Procs;
use priced::Pricing;

pub const TCP_PORT: u16 = 9000;
pub const MPTCP_PORT: u16 = 9001;

pub struct RunConfig {
    pub profile: Profile,
    pub systems: Vec<System>,
    pub workload: Workload,
    /// The workload's variants to run (none: the workload has none).
    pub variants: Vec<String>,
    /// Length of a run, or seconds of `video`.
    pub secs: f64,
    /// `handover`: the stream's rate.
    pub rate_kbit: u64,
    /// `handover`: the path taken down at a third of the run and back up at two thirds
    /// (how: the variant's [`crate::workload::PathEvent`]).
    pub handover_path: usize,
    pub sizes: Vec<u64>,
    pub modes: Vec<String>,
    pub ccs: Vec<String>,
    pub reps: usize,
    pub oracle_step: f64,
    pub out: PathBuf,
    /// The mpflex binary of systems `mpflex:…`.
    pub mpflex_bin: PathBuf,
    /// Named mpflex binaries, of systems `mpflex@<name>:…`.
    pub builds: Vec<(String, PathBuf)>,
    /// Whether idle TCP connections restart from the initial window (sysctl, both hosts).
    pub idle_restart: bool,
    /// Keep each mpflex system's pair up for the whole block; else each measurement
    /// starts its own.
    pub keep_mpflex: bool,
}

impl RunConfig {
    /// Every mpflex system's binary exists.
    pub fn check_binaries(&self) -> Result<()> {
        for s in &self.systems {
            let System::Mpflex { build, .. } = s else {
                continue;
            };
            let bin = self.bin_of(build.as_deref())?;
            if !bin.exists() {
                match build {
                    None => anyhow::bail!(
                        "{} not found: build it (cargo build --release -p mpflex) or pass --mpflex",
                        bin.display()
                    ),
                    Some(b) => anyhow::bail!("--builds: {b}={} not found", bin.display()),
                }
            }
        }
        Ok(())
    }

    /// The binary of an mpflex system on `build` (none: the default one).
    pub fn bin_of(&self, build: Option<&str>) -> Result<&Path> {
        match build {
            None => Ok(&self.mpflex_bin),
            Some(b) => self
                .builds
                .iter()
                .find(|(n, _)| n == b)
                .map(|(_, p)| p.as_path())
                .with_context(|| format!("mpflex@{b}: no build {b:?} in --builds")),
        }
    }
}

/// One measurement: completion (ms), the oracle's share, mpflex's bytes per path and
/// duplicate bytes, the workload client's fields.
struct Measured {
    ms: f64,
    share: Option<f64>,
    mpflex: Option<(Vec<u64>, u64)>,
    extra: Fields,
}

/// Links count as quiet when at most [`QUIET_TRICKLE`] bytes crossed them in one
/// [`QUIET_WINDOW`]; a run waits for that at most [`QUIET_LIMIT`] before it starts.
const QUIET_WINDOW: Duration = Duration::from_millis(200);
const QUIET_TRICKLE: u64 = 6000;
const QUIET_LIMIT: Duration = Duration::from_secs(30);

/// Runs `cfg` on each of `profiles` in turn (a family: their paths must have the same
/// names); returns how many records it appended.
pub fn run_profiles(cfg: &mut RunConfig, profiles: Vec<Profile>, stop: &AtomicBool) -> Result<usize> {
    let Some(first) = profiles.first() else {
        return Ok(0);
    };
    if let Some(q) = profiles
        .iter()
        .find(|q| q.paths.iter().map(|x| &x.name).ne(first.paths.iter().map(|x| &x.name)))
    {
        anyhow::bail!(
            "--profile: {} and {} have different paths; run them separately",
            first.name,
            q.name
        );
    }
    let mut n = 0;
    for (i, p) in profiles.into_iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if i > 0 {
            eprintln!("profile {}", p.name);
        }
        cfg.profile = p;
        n += run(cfg, stop)?;
    }
    Ok(n)
}

/// Runs `cfg` on its profile; returns how many records it appended.
pub fn run(cfg: &RunConfig, stop: &AtomicBool) -> Result<usize> {
    let topo = Topology::create(cfg.profile.paths.len(), 0)?;
    let emu = Emulator::start(&topo, &cfg.profile, 1)?;
    let dir = std::env::temp_dir().join(&topo.name);
    std::fs::create_dir_all(&dir)?;
    topo.sysctl("net.ipv4.tcp_no_metrics_save=1")?;
    topo.sysctl(&format!(
        "net.ipv4.tcp_slow_start_after_idle={}",
        cfg.idle_restart as u8
    ))?;
    let plan = Plan::new(cfg);
    let lan = match cfg.workload.spec().transparent() {
        true => Some(lan::Lan::create(&topo)?),
        false => None,
    };
    let mut bench = Bench {
        cfg,
        topo: &topo,
        emu: &emu,
        dir,
        stop,
        out: OpenOptions::new().create(true).append(true).open(&cfg.out)?,
        links: Links::of(&cfg.profile),
        lan,
        builds: describe_builds(cfg)?,
        bar: progress_bar(cfg.ccs.len() * plan.items.len() * plan.modes.len() * cfg.reps * plan.systems.len()),
        written: 0,
    };
    for cc in &cfg.ccs {
        if bench.run_cc(&plan, cc)?.is_break() {
            bench.bar.abandon_with_message("interrupted");
            return Ok(bench.written);
        }
    }
    bench.bar.finish_with_message("done");
    Ok(bench.written)
}

fn progress_bar(total: usize) -> ProgressBar {
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .unwrap()
            .progress_chars("=> "),
    );
    bar
}

/// The builds the mpflex systems run on, described once: build name -> description.
fn describe_builds(cfg: &RunConfig) -> Result<BTreeMap<Option<String>, Build>> {
    let mut builds = BTreeMap::new();
    for s in &cfg.systems {
        if let System::Mpflex { build, .. } = s {
            if !builds.contains_key(build) {
                let d = mpflex::describe(build.as_deref(), cfg.bin_of(build.as_deref())?);
                builds.insert(build.clone(), d);
            }
        }
    }
    Ok(builds)
}

/// What one block of repetitions varies, and who runs.
struct Plan<'a> {
    /// Chunk sizes, or the workload's variants (size 0).
    items: Vec<(u64, Option<String>)>,
    modes: Vec<String>,
    systems: Vec<&'a System>,
}

impl<'a> Plan<'a> {
    fn new(cfg: &'a RunConfig) -> Plan<'a> {
        let spec = cfg.workload.spec();
        // The oracle splits a chunk over the first two paths: with more it bounds nothing.
        let two_paths = cfg.profile.paths.len() == 2;
        let items = if spec.chunks() {
            cfg.sizes.iter().map(|&s| (s, None)).collect()
        } else if cfg.variants.is_empty() {
            vec![(0, None)]
        } else {
            cfg.variants.iter().map(|v| (0, Some(v.clone()))).collect()
        };
        let modes = if spec.warm_mode() {
            cfg.modes.clone()
        } else {
            vec!["fresh".into()]
        };
        let systems: Vec<&System> = cfg
            .systems
            .iter()
            .filter(|s| (spec.chunks() && two_paths) || **s != System::Oracle)
            .filter(|s| !spec.datagrams() || **s != System::Mptcp)
            .collect();
        for (s, why) in [
            (System::Oracle, "oracle is a chunk baseline over two paths"),
            (System::Mptcp, "kernel MPTCP carries no UDP"),
        ] {
            if cfg.systems.contains(&s) && !systems.contains(&&s) {
                eprintln!("{why}; left out of {}", spec.name());
            }
        }
        Plan { items, modes, systems }
    }
}

/// One point of a block: what every system measures `reps` times.
struct Point<'p> {
    cc: &'p str,
    size: u64,
    variant: Option<&'p str>,
    mode: &'p str,
}

/// An mpflex system's client/server pair: its ports (`k`), log directory, and the
/// processes when kept up for the block.
struct Pair {
    system: System,
    k: u16,
    dir: PathBuf,
    kept: Option<Procs>,
}

struct Bench<'a> {
    cfg: &'a RunConfig,
    topo: &'a Topology,
    emu: &'a Emulator,
    /// The topology's scratch directory (mpflex configurations and logs).
    dir: PathBuf,
    stop: &'a AtomicBool,
    out: File,
    links: Links,
    /// The LAN host's namespace of a transparent workload.
    lan: Option<lan::Lan>,
    builds: BTreeMap<Option<String>, Build>,
    bar: ProgressBar,
    written: usize,
}

impl Bench<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn spec(&self) -> &'static dyn Spec {
        self.cfg.workload.spec()
    }

    /// The `handover` stream's rate: as configured, except that a link that joins mid-run
    /// (`appear`) is only worth using when the stream wants more than the other paths
    /// carry, so then it asks for every path's capacity together.
    /// A workload offered at the capacity gets Σ of the path rates in its direction.
    fn rate_kbit(&self, variant: Option<&str>) -> u64 {
        let capacity = |bytes_per_sec: f64| (bytes_per_sec * 8.0 / 1000.0) as u64;
        if self.spec().offers_capacity() {
            return capacity(match self.spec().upload(variant) {
                true => self.links.up,
                false => self.links.down,
            });
        }
        match self.spec().path_event(variant) {
            Some(crate::workload::PathEvent::Appear) => self.cfg.rate_kbit.max(capacity(self.links.down)),
            _ => self.cfg.rate_kbit,
        }
    }

    /// An mpflex pair's setup: the paths name their interfaces where the workload acts on
    /// links.
    fn setup<'a>(&self, sched: &'a str, cc: &'a str, k: u16, tun: bool) -> mpflex::Setup<'a> {
        mpflex::Setup {
            sched,
            cc,
            k,
            devices: self.spec().path_event(None).is_some()
                || self.cfg.variants.iter().any(|v| self.spec().acts_on_links(Some(v))),
            kinds: self
                .cfg
                .profile
                .paths
                .iter()
                .map(|p| crate::energy::kind_of(&p.name).name())
                .collect(),
            transparent: self.lan.is_some() && !tun,
            tun,
        }
    }

    /// Every point of the plan with congestion control `cc`.
    fn run_cc(&mut self, plan: &Plan, cc: &str) -> Result<ControlFlow<()>> {
        // Non-initial namespaces may not choose every algorithm as their default (cubic
        // is restricted here), so the senders set it per socket as well: the chunk
        // servers, and mpflex's path connections through `tuning.congestion`.
        let _ = self.topo.sysctl(&format!("net.ipv4.tcp_congestion_control={cc}"));
        let _servers = self.servers(cc)?;
        std::thread::sleep(Duration::from_millis(300));
        let pairs = self.pairs(cc)?;
        for (size, variant) in &plan.items {
            for mode in &plan.modes {
                let point = Point {
                    cc,
                    size: *size,
                    variant: variant.as_deref(),
                    mode,
                };
                if self.run_point(plan, &point, &pairs)?.is_break() {
                    return Ok(ControlFlow::Break(()));
                }
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The TCP and MPTCP servers, sending with `cc`.
    fn servers(&self, cc: &str) -> Result<Procs> {
        let exe = std::env::current_exe().context("own path")?;
        let exe = exe.to_str().context("utf-8 path")?;
        let server = |port: u16, mptcp: bool| {
            let listen = format!("0.0.0.0:{port}");
            let mut args = vec![exe, "chunk-server", "--listen", &listen];
            if mptcp {
                args.push("--mptcp");
            }
            args.extend(["--cc", cc]);
            mpflex::spawn_in(&self.topo.server_ns, &args, None)
        };
        let mut procs = Procs(vec![server(TCP_PORT, false)?, server(MPTCP_PORT, true)?]);
        if let Some(args) = self.spec().server_command() {
            procs.0.push(mpflex::spawn_in(&self.topo.server_ns, args, None)?);
        }
        if self.spec().h3_server() {
            let listen = std::net::SocketAddr::from(([0, 0, 0, 0], crate::workload::quic::PORT));
            let args = crate::workload::quic::server_args(listen)?;
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            procs.0.push(mpflex::spawn_in(&self.topo.server_ns, &args, None)?);
            self.wait_h3_server()?;
        }
        Ok(procs)
    }

    /// Waits until the HTTP/3 server answers a 1-byte request in its own namespace.
    fn wait_h3_server(&self) -> Result<()> {
        let local = std::net::SocketAddr::from(([127, 0, 0, 1], crate::workload::quic::PORT));
        let mut last = None;
        for _ in 0..20 {
            let via = crate::workload::Via::Tcp { bind: None };
            let got = crate::workload::quic::get_in(Some(&self.topo.server_ns), local, &via, 1, 1.0);
            match got {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(last.expect("tried")).context("the HTTP/3 server did not answer (MPFLEX_LAB_PYTHON with aioquic?)")
    }

    /// A client/server pair per mpflex system, with its own ports and log directory.
    /// mpflex path connections are made after the congestion control's sysctl, so they
    /// use `cc` too. By default a pair is started for each measurement and stopped after
    /// it, as the baselines open new connections for every measurement: a pair left idle
    /// while other systems run sends keepalives into links those systems fill, and one
    /// lost there cuts the path's ssthresh, which its next transfers inherit.
    /// `--keep-mpflex` keeps every pair up for the block.
    fn pairs(&self, cc: &str) -> Result<Vec<Pair>> {
        let mut pairs: Vec<Pair> = Vec::new();
        for s in &self.cfg.systems {
            let System::Mpflex { build, sched, tun } = s else {
                continue;
            };
            let k = pairs.len() as u16;
            // Logs of one profile, system and cc each in their own directory (a family
            // of profiles runs in one topology directory).
            let mut name = vec![self.cfg.profile.name.as_str()];
            name.extend(build.as_deref());
            name.extend([sched.as_str(), cc]);
            let dir = self.dir.join(sanitize(&name));
            std::fs::create_dir_all(&dir)?;
            let kept = if self.cfg.keep_mpflex {
                let bin = self.cfg.bin_of(build.as_deref())?;
                Some(mpflex::start(
                    self.topo,
                    bin,
                    &self.setup(sched, cc, k, *tun),
                    &dir,
                    self.stop,
                )?)
            } else {
                None
            };
            pairs.push(Pair {
                system: s.clone(),
                k,
                dir,
                kept,
            });
        }
        Ok(pairs)
    }

    /// Every repetition of every system at `point`, each measurement appended.
    fn run_point(&mut self, plan: &Plan, point: &Point, pairs: &[Pair]) -> Result<ControlFlow<()>> {
        // The oracle's best share (in steps) from the first repetition's sweep.
        let mut oracle_best: Option<usize> = None;
        for rep in 0..self.cfg.reps {
            for &sys in &plan.systems {
                if self.stopped() {
                    return Ok(ControlFlow::Break(()));
                }
                let label = sys.label(&self.cfg.profile);
                let what = match point.variant {
                    Some(v) => format!("{} {v}", self.spec().name()),
                    None => human(point.size),
                };
                self.bar
                    .set_message(format!("{} {} {what} {label}", point.cc, point.mode));
                // A repetition that could not measure (mpflex's paths never came up, or
                // the emulator stayed late) is recorded as failed, and the run goes on. One
                // whose emulator ran late is measured again: the figures of a link the
                // machine could not emulate on time are not the profile's.
                let mut attempt = 1;
                let rec = loop {
                    let m = match self.measure_system(sys, point, pairs, &mut oracle_best) {
                        Ok(ControlFlow::Continue(m)) => m,
                        Ok(ControlFlow::Break(())) => return Ok(ControlFlow::Break(())),
                        Err(e) if records::failed_repetition(&e) => break self.failed(point, sys, label, rep, &e),
                        Err(e) => return Err(e),
                    };
                    let Some((late_ms, link)) = records::emulator_late(&m.extra) else {
                        break self.record(point, sys, label, rep, m);
                    };
                    if attempt == records::LATE_ATTEMPTS {
                        let e = anyhow::Error::new(records::EmulatorLate {
                            late_ms,
                            link,
                            attempts: attempt,
                        });
                        break self.failed(point, sys, label, rep, &e);
                    }
                    self.bar.println(format!(
                        "{label}: the emulator ran {late_ms:.0} ms late on {link} (limit {} ms); measuring again",
                        records::LATE_LIMIT_MS
                    ));
                    attempt += 1;
                };
                writeln!(self.out, "{}", serde_json::to_string(&rec)?)?;
                self.written += 1;
                self.bar.inc(1);
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// One measurement of `sys` (the oracle: one repetition's sweep).
    fn measure_system(
        &self,
        sys: &System,
        point: &Point,
        pairs: &[Pair],
        oracle_best: &mut Option<usize>,
    ) -> Result<ControlFlow<(), Measured>> {
        let server = |i: usize, port: u16| format!("{}:{port}", self.topo.server_addr(i));
        let m = match sys {
            System::Tcp(i) => {
                let via = [
                    "--server".into(),
                    server(*i, TCP_PORT),
                    "--bind".into(),
                    self.topo.client_addr(*i),
                ];
                self.measure_plain(point, &via)?
            }
            System::Mptcp => {
                let via = ["--server".into(), server(0, MPTCP_PORT), "--mptcp".into()];
                self.measure_plain(point, &via)?
            }
            System::Oracle => {
                return oracle::sweep(self.cfg.oracle_step, oracle_best, self.stop, |p| {
                    let via = [
                        "--server".into(),
                        server(0, TCP_PORT),
                        "--bind".into(),
                        self.topo.client_addr(0),
                        "--split-server".into(),
                        server(1, TCP_PORT),
                        "--split-bind".into(),
                        self.topo.client_addr(1),
                        "--share".into(),
                        p.to_string(),
                    ];
                    self.measure(point, &via)
                });
            }
            System::Mpflex { build, sched, tun } => {
                let pair = pairs.iter().find(|p| p.system == *sys).expect("configured");
                self.measure_mpflex(point, pair, self.cfg.bin_of(build.as_deref())?, sched, *tun)?
            }
        };
        Ok(ControlFlow::Continue(m))
    }

    /// A baseline's measurement.
    fn measure_plain(&self, point: &Point, via: &[String]) -> Result<Measured> {
        let (ms, extra) = self.measure(point, via)?;
        Ok(Measured {
            ms,
            share: None,
            mpflex: None,
            extra,
        })
    }

    /// An mpflex system's measurement, with the bytes its client counted meanwhile.
    fn measure_mpflex(&self, point: &Point, pair: &Pair, bin: &Path, sched: &str, tun: bool) -> Result<Measured> {
        let k = pair.k;
        // Started here unless kept up for the block; stopped when this measurement is
        // done (dropped at the end). Its energy window opens before it starts, on quiet
        // links, so the paths' set-up is priced as the baselines' handshakes are
        // ([`priced`]).
        let (pricing, _own) = match pair.kept {
            Some(_) => (Pricing::Unpriced, None),
            None => {
                let settle = self.emu.wait_quiet(QUIET_WINDOW, QUIET_TRICKLE, QUIET_LIMIT);
                self.emu.clear_payload_logs();
                let setup = self.setup(sched, point.cc, k, tun);
                let procs = mpflex::start(self.topo, bin, &setup, &pair.dir, self.stop)?;
                (Pricing::BeforeSetup(settle), Some(procs))
            }
        };
        if self.spec().acts_on_links(point.variant) {
            // The previous run took a path down: start with all up.
            mpflex::wait_paths_up(self.topo, bin, k, Duration::from_secs(15));
        }
        let upload = self.spec().upload(point.variant);
        let status = mpflex::status(self.topo, bin, k)?;
        let (before, dup_before) = mpflex::counters(&status, upload);
        // No server session yet is no counts yet.
        let server_before = mpflex::server_status(self.topo, bin, k).unwrap_or_default();
        let watched_before = mpflex::supervision(&status, &server_before);
        let (ms, extra) = match &self.lan {
            // An application in the client's namespace reaches an address routed into
            // the TUN (a LAN host's workload too: the TUN carries its UDP as well).
            _ if tun => {
                let dst = mpflex::tun_destination(k);
                crate::netns::run(&[
                    "ip",
                    "-n",
                    &self.topo.server_ns,
                    "addr",
                    "replace",
                    &format!("{dst}/32"),
                    "dev",
                    "lo",
                ])?;
                let via = ["--server".into(), format!("{dst}:{TCP_PORT}")];
                self.measure_in(&self.topo.client_ns, point, &via, pricing)?
            }
            // The LAN host reaches the server's address, through the TPROXY ingress.
            Some(lan) => {
                lan.divert_to(k)?;
                let via = ["--server".into(), format!("{}:{TCP_PORT}", self.topo.server_addr(0))];
                self.measure_in(&lan.ns, point, &via, pricing)?
            }
            None => {
                let via = [
                    "--server".into(),
                    format!("127.0.0.1:{TCP_PORT}"),
                    "--socks".into(),
                    mpflex::socks_addr(k),
                ];
                self.measure_in(&self.topo.client_ns, point, &via, pricing)?
            }
        };
        let status = mpflex::status(self.topo, bin, k)?;
        let (after, dup_after) = mpflex::counters(&status, upload);
        let mut extra = extra;
        let server_after = mpflex::server_status(self.topo, bin, k).unwrap_or_default();
        let watched = mpflex::supervision(&status, &server_after);
        for (key, (after, before)) in ["suspicions", "demotions"]
            .into_iter()
            .zip(watched.iter().zip(&watched_before))
        {
            extra.insert(key.into(), mpflex::per_path_delta(after, before).into());
        }
        if self.spec().datagrams() {
            // The client's datagram counts (since the pair started, unless kept up): its
            // queue's drops when it sends, its reordering when it receives.
            extra.insert("mpflex_client_datagrams".into(), status["datagrams"].clone());
        }
        let delta = mpflex::per_path_delta(&after, &before);
        Ok(Measured {
            ms,
            share: None,
            mpflex: Some((delta, dup_after.saturating_sub(dup_before))),
            extra,
        })
    }

    /// One client run over `via` (its arguments for reaching the server): ms and fields.
    /// The system sets up its connections in the transfer, so its energy window opens
    /// there ([`priced`]).
    fn measure(&self, point: &Point, via: &[String]) -> Result<(f64, Fields)> {
        self.measure_in(&self.topo.client_ns, point, via, Pricing::AtTransfer)
    }

    /// [`Bench::measure`] with the client in namespace `ns`, energy priced as `pricing`.
    fn measure_in(&self, ns: &str, point: &Point, via: &[String], pricing: Pricing) -> Result<(f64, Fields)> {
        // Start on quiet links: what the previous run left in flight would otherwise
        // compete with this one.
        let settle = self
            .emu
            .wait_quiet(QUIET_WINDOW, QUIET_TRICKLE, QUIET_LIMIT)
            .max(pricing.settled_before());
        let mut settled = Fields::new();
        if settle >= 2 * QUIET_WINDOW {
            settled.insert("settle_ms".into(), (settle.as_millis() as u64).into());
        }
        // Every transfer meets the same stretch of a trace, not wherever the looped
        // trace happens to be by then.
        if self.links.traced {
            self.emu.rewind_traces();
            settled.insert("trace_rewound".into(), true.into());
        }
        if pricing.opens_at_transfer() {
            self.emu.clear_payload_logs();
        }
        let from_us = crate::units::unix_us();
        // The links' counts cover this transfer (a chunk's warm-up included), every system.
        self.emu.clear_run_stats();
        if self.spec().chunks() {
            let mut a = vec![
                "--size".into(),
                point.size.to_string(),
                "--mode".into(),
                point.mode.into(),
            ];
            a.extend_from_slice(via);
            let t = clients::chunk(self.topo, &a)?;
            settled.extend(link_fields(&self.emu.stats()));
            if let Some(w) = t.warmup_ms {
                settled.insert("warmup_ms".into(), w.into());
            }
            let down = self.emu.payload_logs(0);
            if down.iter().all(|l| !l.full) {
                let finish = chunk::path_finish_ms(&down, &t);
                settled.insert("path_finish_ms".into(), serde_json::to_value(finish)?);
            }
            priced::energy_fields(self.emu, &self.cfg.profile, pricing, &mut settled);
            return Ok((t.ms, settled));
        }
        let mut a = vec![
            "--workload".into(),
            self.spec().name().into(),
            "--mode".into(),
            point.mode.into(),
            "--secs".into(),
            self.cfg.secs.to_string(),
            "--rate-kbit".into(),
            self.rate_kbit(point.variant).to_string(),
        ];
        if let Some(v) = point.variant {
            a.extend(["--variant".into(), v.into()]);
        }
        a.extend_from_slice(via);
        let change = self.spec().path_event(point.variant).map(|event| clients::PathChange {
            emu: self.emu,
            // A link that joins is the last path: kernel MPTCP's connections start on the
            // first, which must be there when they do.
            path: match event {
                crate::workload::PathEvent::Appear => self.topo.paths - 1,
                _ => self.cfg.handover_path,
            },
            event,
        });
        let outages = self.spec().outages(point.variant);
        let mut f = if outages.is_empty() {
            clients::workload(self.topo, ns, &a, change, self.cfg.secs)?
        } else {
            let (mut f, dark) = clients::with_outages(ns, &a, self.emu, &outages)?;
            self.outage_windows(point, &dark, &mut f)?;
            f
        };
        priced::energy_fields(self.emu, &self.cfg.profile, pricing, &mut f);
        self.bound_goodput(point, from_us, &mut f)?;
        f.extend(settled);
        f.extend(link_fields(&self.emu.stats()));
        let ms = f
            .get("completion_ms")
            .and_then(|v| v.as_f64())
            .unwrap_or(self.cfg.secs * 1000.0);
        Ok((ms, f))
    }

    /// The survivors' goodput during each outage against their capacity
    /// ([`outages::window_fields`]), from the client's progress samples, which are then
    /// dropped (a run's worth of them).
    fn outage_windows(&self, point: &Point, dark: &[outages::Dark], f: &mut Fields) -> Result<()> {
        let samples: Vec<(u64, u64)> = match f.remove(outages::SAMPLES) {
            Some(v) => serde_json::from_value(v)?,
            None => Vec::new(),
        };
        let upload = self.spec().upload(point.variant);
        let logs = self.emu.payload_logs(upload as usize);
        let paths = &self.cfg.profile.paths;
        let rates: Vec<Option<f64>> = paths
            .iter()
            .map(|p| match upload {
                true => &p.up,
                false => &p.down,
            })
            .map(|l| l.bytes_per_sec().map(|b| b * 8.0 / 1000.0))
            .collect();
        let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
        f.extend(outages::window_fields(&samples, dark, Some(&logs), &rates, &names));
        Ok(())
    }

    /// A workload that reports a goodput window (`bulk` and the bulks of the ping
    /// workloads) gets goodput that cannot exceed what the links carried in it
    /// ([`Window::bounded_mbit`]); the client's in-order figure is kept as
    /// `inorder_mbit`, and the payload the links had delivered when the window opened as
    /// `arrived_at_window_bytes`.
    fn bound_goodput(&self, point: &Point, from_us: u64, f: &mut Fields) -> Result<()> {
        let Some(w) = f.get(WINDOW) else {
            return Ok(());
        };
        let w: Window = serde_json::from_value(w.clone())?;
        let logs = self.emu.payload_logs(self.spec().upload(point.variant) as usize);
        if logs.iter().any(|l| l.full) {
            return Ok(());
        }
        // From the transfer's start: the logs may hold the system's set-up before it.
        let arrived: u64 = logs.iter().map(|l| l.delivered_between(from_us, w.from_us)).sum();
        if let (Some(inorder), Some(bounded)) = (w.inorder_mbit(), w.bounded_mbit(arrived)) {
            f.insert("inorder_mbit".into(), inorder.into());
            f.insert("arrived_at_window_bytes".into(), arrived.into());
            f.insert("goodput_mbit".into(), bounded.into());
        }
        Ok(())
    }
}
