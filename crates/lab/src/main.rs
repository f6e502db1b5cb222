//! `mpflex-lab`: emulated multi-link networks on one machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use mpflex_lab::emulator::Emulator;
use mpflex_lab::netns::Topology;
use mpflex_lab::profile::Profile;
use mpflex_lab::runner::{parse_builds, RunConfig, System};
use mpflex_lab::units::parse_size;
use mpflex_lab::workload::{self, chunk, ClientRun, Via, Workload};

#[derive(Parser)]
#[command(
    name = "mpflex-lab",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("MPFLEX_LAB_COMMIT"), ")"),
    about = "Emulated multi-link networks in namespaces, real systems over them"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build a topology for a profile and keep it up until Ctrl-C; run anything inside
    /// with `ip netns exec <name>-c …` / `<name>-s …`.
    Emu {
        /// seed-default, seed-default-270, seed-default-470, trace:<prefix>, or a TOML file.
        #[arg(long, default_value = "seed-default")]
        profile: String,
        /// Stop after this many seconds (default: run until Ctrl-C).
        #[arg(long)]
        seconds: Option<u64>,
    },
    /// Run systems side by side on a profile and append results (JSON lines).
    Run(RunArgs),
    /// Markdown tables from results files (median, p10-p90, ratios to mptcp and oracle;
    /// two-rate families such as bw-grid also as grids). A point (profile, workload,
    /// variant, cc, mode) found in several files is taken from the last one only.
    Report {
        #[arg(required = true, num_args = 1..)]
        results: Vec<std::path::PathBuf>,
        /// Also draw plots (SVG and PNG) into this directory; needs a TrueType font
        /// (/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf or MPFLEX_LAB_FONT).
        #[arg(long)]
        plots: Option<std::path::PathBuf>,
        /// Chunk completion transposed instead: one row per system, one column per mode
        /// and size, medians with their ratio to --baseline.
        #[arg(long)]
        by_system: bool,
        /// The system --by-system's ratios are against.
        #[arg(long, default_value = "mptcp", requires = "by_system")]
        baseline: String,
    },
    /// Run each seed claim's experiment as its paper ran it (its baseline, sizes, paths,
    /// repetitions) side by side on this build, and write the table of claims into
    /// docs/results.md (between its reproduce markers).
    Reproduce {
        /// A claim (dems, dems-grid, dems-finish, ecf, ecf-video, mpflex-file,
        /// mpflex-shortflows, txdelay, qcut, wearman, wearman-default, emptcp, emptcp-small)
        /// or all.
        claim: String,
        /// A reduced set (fewer profiles, sizes, repetitions; shorter uploads, a smaller
        /// on-off download): about 20 minutes.
        #[arg(long)]
        quick: bool,
        /// Where each run's results file goes (written anew); default
        /// lab-results/reproduce, or lab-results/reproduce-quick with --quick.
        #[arg(long)]
        out_dir: Option<std::path::PathBuf>,
        /// The Markdown file to write the section into (default with `all`:
        /// docs/results.md; with one claim the section is only printed).
        #[arg(long)]
        doc: Option<std::path::PathBuf>,
        /// The README whose summary markers get the claims' verdicts (default with
        /// `all`: README.md).
        #[arg(long)]
        readme: Option<std::path::PathBuf>,
        /// The mpflex binary (default: next to this one).
        #[arg(long)]
        mpflex: Option<std::path::PathBuf>,
        /// Do not run: judge the results files already in --out-dir and write the doc.
        #[arg(long, conflicts_with = "resume")]
        report_only: bool,
        /// Continue an earlier run in --out-dir on the same build (its ledger.tsv): the
        /// (run, profile) pairs it finished are kept, the rest run; a different build is
        /// refused. The full run takes hours: stop it (Ctrl-C) and resume later.
        #[arg(long)]
        resume: bool,
    },
    /// Run the energy-aware mode's floors (docs/energy.md: 16 MB on wifi-good,
    /// wifi-good-lte-bad and wifi-bad against kernel MPTCP and TCP over WiFi) on this build,
    /// judge them, and write their table into docs/energy.md (between its floors markers).
    Floors {
        /// 3 repetitions instead of 10.
        #[arg(long)]
        quick: bool,
        /// Where the results file goes (written anew); default lab-results/floors.
        #[arg(long, default_value = "lab-results/floors")]
        out_dir: std::path::PathBuf,
        /// The Markdown file whose floors section is rewritten.
        #[arg(long, default_value = "docs/energy.md")]
        doc: std::path::PathBuf,
        /// The mpflex binary (default: next to this one).
        #[arg(long)]
        mpflex: Option<std::path::PathBuf>,
        /// Do not run: judge the results file already in --out-dir and write the doc.
        #[arg(long)]
        report_only: bool,
    },
    /// (internal) Serve chunk requests.
    #[command(hide = true)]
    ChunkServer {
        #[arg(long)]
        listen: std::net::SocketAddr,
        #[arg(long)]
        mptcp: bool,
        #[arg(long)]
        cc: Option<String>,
    },
    /// (internal) Run one measurement of a workload other than chunk; prints JSON.
    #[command(hide = true)]
    WorkloadClient(WorkloadClientArgs),
    /// (internal) Time one chunk download; prints its times as JSON.
    #[command(hide = true)]
    ChunkClient(ChunkClientArgs),
}

/// How a client subcommand reaches the server.
#[derive(clap::Args)]
struct Target {
    #[arg(long)]
    server: std::net::SocketAddr,
    #[arg(long)]
    bind: Option<std::net::IpAddr>,
    #[arg(long)]
    mptcp: bool,
    #[arg(long)]
    socks: Option<std::net::SocketAddr>,
}

#[derive(clap::Args)]
struct WorkloadClientArgs {
    #[arg(long)]
    workload: String,
    #[arg(long)]
    variant: Option<String>,
    #[arg(long, default_value = "fresh")]
    mode: String,
    #[arg(long)]
    secs: f64,
    #[arg(long, default_value_t = 2000)]
    rate_kbit: u64,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args)]
struct ChunkClientArgs {
    #[command(flatten)]
    target: Target,
    #[arg(long)]
    size: u64,
    #[arg(long, default_value = "fresh")]
    mode: String,
    /// Oracle: second server/bind; `share` of the chunk goes to the first.
    #[arg(long)]
    split_server: Option<std::net::SocketAddr>,
    #[arg(long)]
    split_bind: Option<std::net::IpAddr>,
    #[arg(long, default_value_t = 1.0)]
    share: f64,
}

#[derive(clap::Args)]
struct RunArgs {
    /// A profile (seed-default, seed-default-270, seed-default-470, bw-grid:<w>x<l>,
    /// ecf-asym:<w>x<l>, trace:<prefix>, a TOML file), a family (seed-default-all,
    /// bw-grid, ecf-asym, ecf-asym-all, traces:<dir>) or a comma-separated list.
    #[arg(long, default_value = "seed-default")]
    profile: String,
    /// tcp-<path>, mptcp, oracle, mpflex:<scheduler>, mpflex@<build>:<scheduler>
    /// (comma-separated).
    #[arg(long, default_value = "tcp-wifi,tcp-lte,mptcp,oracle,mpflex:minrtt")]
    systems: String,
    /// chunk, bulk, shortflows, video, upload-ping, download-ping, web-under-upload,
    /// handover, outages, voip, quic or udp-bulk.
    #[arg(long, default_value = "chunk")]
    workload: String,
    /// bulk: down,up; shortflows: seq,par (default: both); video: buffer (the default,
    /// a buffer-based ABR) or rate (throughput-based); handover: blackhole (the default:
    /// the link goes dark), carrier (the client's interface loses carrier), degrade (5 s
    /// of falling rate and rising loss and delay, then dark), appear (the last path's link
    /// joins at 1/3 of the run); outages: down-1-0,down-0-1,up-1-0,up-0-1 (the default:
    /// all four; the paths in the order they go dark for 3 s, at 12 s and 24 s);
    /// udp-bulk: down,up (default), down-95,up-95.
    #[arg(long)]
    variants: Option<String>,
    /// Seconds per run of bulk (20), handover (30), outages (30), udp-bulk (30); seconds of the bulk of upload-ping and
    /// download-ping (20, after 2.5 s of idle pings); seconds of video played (120);
    /// web-under-upload ignores it (10 idle/loaded pairs per run).
    #[arg(long)]
    secs: Option<f64>,
    /// handover: the constant stream's rate, kbit/s.
    #[arg(long, default_value_t = 2000)]
    rate_kbit: u64,
    /// handover: the path (name or index) that goes down at 1/3 of the run and comes
    /// back at 2/3.
    #[arg(long, default_value = "0")]
    handover_path: String,
    /// Chunk sizes, e.g. 64K,256K,1M,4M,16M.
    #[arg(long, default_value = "256K,1M,4M")]
    sizes: String,
    /// fresh (new connection per chunk) and/or warm (established, ~1 s idle).
    #[arg(long, default_value = "fresh,warm")]
    modes: String,
    /// Congestion control in the namespaces: cubic and/or bbr.
    #[arg(long, default_value = "bbr")]
    cc: String,
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Resolution of the oracle's static-split sweep: shares at twice this step,
    /// then the two neighbours of the best at this step.
    #[arg(long, default_value_t = 0.05)]
    oracle_step: f64,
    #[arg(long, default_value = "lab-results/results.jsonl")]
    out: std::path::PathBuf,
    /// The mpflex binary of systems mpflex:<scheduler> (default: next to this one).
    #[arg(long)]
    mpflex: Option<std::path::PathBuf>,
    /// Other mpflex binaries, NAME=PATH (comma-separated), for systems
    /// mpflex@NAME:<scheduler>: two builds side by side in one run.
    #[arg(long, default_value = "")]
    builds: String,
    /// Whether idle TCP connections restart from the initial window
    /// (net.ipv4.tcp_slow_start_after_idle on both hosts, for every system).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    idle_restart: bool,
    /// Keep each scheduler's mpflex client and server up for the whole block instead
    /// of starting them for each measurement: paths then carry their TCP state
    /// (ssthresh) from run to run, and an idle system's keepalives cross links another
    /// system is loading.
    #[arg(long)]
    keep_mpflex: bool,
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("mpflex-lab: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    match &cli.cmd {
        Cmd::ChunkServer { listen, mptcp, cc } => return workload::serve(*listen, *mptcp, cc.as_deref()),
        Cmd::ChunkClient(args) => return chunk_client(args),
        Cmd::WorkloadClient(args) => return workload_client(args),
        Cmd::Report {
            results,
            plots,
            by_system,
            baseline,
        } => {
            if *by_system {
                print!("{}", mpflex_lab::report::by_system_files(results, baseline)?);
            } else {
                print!("{}", mpflex_lab::report::report_files(results)?);
            }
            if let Some(dir) = plots {
                for f in mpflex_lab::report::plots_files(results, dir)? {
                    eprintln!("wrote {}", f.display());
                }
            }
            return Ok(());
        }
        _ => {}
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst))?;
    }
    match cli.cmd {
        Cmd::Emu { profile, seconds } => emu(&profile, seconds, &stop),
        Cmd::Run(args) => run(args, &stop),
        Cmd::Reproduce {
            claim,
            quick,
            out_dir,
            doc,
            mpflex,
            report_only,
            readme,
            resume,
        } => {
            use mpflex_lab::reproduce;
            let claims = reproduce::select(&claim)?;
            let opts = reproduce::Options {
                quick,
                out_dir: out_dir.unwrap_or_else(|| {
                    if quick {
                        "lab-results/reproduce-quick".into()
                    } else {
                        "lab-results/reproduce".into()
                    }
                }),
                doc: doc.or_else(|| (claim == "all").then(|| "docs/results.md".into())),
                readme: readme.or_else(|| (claim == "all").then(|| "README.md".into())),
                mpflex_bin: mpflex.unwrap_or_else(|| std::env::current_exe().unwrap().with_file_name("mpflex")),
                report_only,
                resume,
            };
            let md = reproduce::reproduce(&claims, &claim, &opts, &stop)?;
            print!("{md}");
            Ok(())
        }
        Cmd::Floors {
            quick,
            out_dir,
            doc,
            mpflex,
            report_only,
        } => {
            let opts = mpflex_lab::floors::Options {
                quick,
                out_dir,
                doc: Some(doc),
                mpflex_bin: mpflex.unwrap_or_else(|| std::env::current_exe().unwrap().with_file_name("mpflex")),
                report_only,
            };
            print!("{}", mpflex_lab::floors::floors(&opts, &stop)?);
            Ok(())
        }
        _ => unreachable!("handled above"),
    }
}

/// `emu`: a topology up until Ctrl-C or `seconds`.
fn emu(profile: &str, seconds: Option<u64>, stop: &AtomicBool) -> Result<()> {
    let profile = Profile::resolve(profile)?;
    let topo = Topology::create(profile.paths.len(), 0)?;
    let _emu = Emulator::start(&topo, &profile, 1)?;
    println!(
        "profile {} on namespaces {}-c (client) / {}-s (server)",
        profile.name, topo.name, topo.name
    );
    for i in 0..topo.paths {
        println!(
            "  path {} ({}): client {} <-> server {}",
            i,
            profile.paths[i].name,
            topo.client_addr(i),
            topo.server_addr(i)
        );
    }
    println!("Ctrl-C to tear down");
    let deadline = seconds.map(|s| std::time::Instant::now() + Duration::from_secs(s));
    while !stop.load(Ordering::SeqCst) && deadline.is_none_or(|d| std::time::Instant::now() < d) {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// `run`: every profile of `--profile` in turn.
fn run(args: RunArgs, stop: &AtomicBool) -> Result<()> {
    let profiles = mpflex_lab::profile::expand(&args.profile)?;
    let out = args.out.clone();
    let mut cfg = run_config(args, profiles[0].clone())?;
    let n = mpflex_lab::runner::run_profiles(&mut cfg, profiles, stop)?;
    println!("{n} results appended to {}", out.display());
    Ok(())
}

/// The run's configuration from the command line, checked, on the first `profile`.
fn run_config(a: RunArgs, profile: Profile) -> Result<RunConfig> {
    let workload = Workload::parse(&a.workload)
        .with_context(|| format!("--workload {:?}: one of {}", a.workload, Workload::names()))?;
    let variants = workload.variants(a.variants.as_deref())?;
    let secs = a.secs.unwrap_or(workload.spec().default_secs());
    if !(secs > 0.0 && secs <= 3600.0) {
        bail!("--secs: between 0 and 3600");
    }
    if a.rate_kbit == 0 {
        bail!("--rate-kbit: must be positive");
    }
    for v in &variants {
        for o in workload.spec().outages(Some(v)) {
            if o.path >= profile.paths.len() {
                bail!("--variants {v}: {} has no path {}", profile.name, o.path);
            }
            if (o.at + o.length).as_secs_f64() >= secs {
                bail!("--secs {secs}: {v}'s outage of path {} ends after the run", o.path);
            }
        }
    }
    let handover_path = profile
        .paths
        .iter()
        .position(|p| p.name == a.handover_path)
        .or_else(|| {
            a.handover_path
                .parse()
                .ok()
                .filter(|&i: &usize| i < profile.paths.len())
        })
        .with_context(|| {
            format!(
                "--handover-path {:?}: no such path in {}",
                a.handover_path, profile.name
            )
        })?;
    let systems = a
        .systems
        .split(',')
        .map(|s| System::parse(s.trim(), &profile))
        .collect::<Result<Vec<_>>>()?;
    let sizes = a.sizes.split(',').map(parse_size).collect::<Result<Vec<_>>>()?;
    let list = |s: &str| s.split(',').map(|x| x.trim().to_string()).collect::<Vec<_>>();
    let modes = list(&a.modes);
    if let Some(m) = modes.iter().find(|m| *m != "fresh" && *m != "warm") {
        bail!("--modes: {m:?} is not fresh or warm");
    }
    if !(0.01..=0.5).contains(&a.oracle_step) {
        bail!("--oracle-step: between 0.01 and 0.5");
    }
    if let Some(d) = a.out.parent() {
        std::fs::create_dir_all(d)?;
    }
    let cfg = RunConfig {
        profile,
        systems,
        workload,
        variants,
        secs,
        rate_kbit: a.rate_kbit,
        handover_path,
        sizes,
        modes,
        ccs: list(&a.cc),
        reps: a.reps,
        oracle_step: a.oracle_step,
        out: a.out,
        mpflex_bin: a
            .mpflex
            .unwrap_or_else(|| std::env::current_exe().unwrap().with_file_name("mpflex")),
        builds: parse_builds(&a.builds)?,
        idle_restart: a.idle_restart,
        keep_mpflex: a.keep_mpflex,
    };
    cfg.check_binaries()?;
    Ok(cfg)
}

fn chunk_client(a: &ChunkClientArgs) -> Result<()> {
    let t = &a.target;
    let run = chunk::ChunkRun {
        server: t.server,
        via: Via::of(t.socks, t.mptcp, t.bind),
        size: a.size,
        warm: a.mode == "warm",
        split: a.split_server.map(|s| (s, Via::of(t.socks, t.mptcp, a.split_bind))),
        share: a.share,
    };
    println!("{}", serde_json::to_string(&chunk::client(&run)?)?);
    Ok(())
}

fn workload_client(a: &WorkloadClientArgs) -> Result<()> {
    let Some(w) = Workload::parse(&a.workload) else {
        bail!("unknown workload {:?}", a.workload);
    };
    let t = &a.target;
    let run = ClientRun {
        server: t.server,
        via: Via::of(t.socks, t.mptcp, t.bind),
        variant: a.variant.clone(),
        warm: a.mode == "warm",
        secs: a.secs,
        rate_kbit: a.rate_kbit,
    };
    let fields = w.spec().client(&run)?;
    println!("{}", serde_json::Value::Object(fields));
    Ok(())
}
