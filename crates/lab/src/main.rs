//! `mpflex-lab`: emulated multi-link networks on one machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use mpflex_lab::emulator::Emulator;
use mpflex_lab::netns::Topology;
use mpflex_lab::profile::Profile;
use mpflex_lab::runner::{parse_size, RunConfig, System};
use mpflex_lab::workload::{self, Via};

#[derive(Parser)]
#[command(
    name = "mpflex-lab",
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
    Run {
        /// A profile (seed-default, seed-default-270, seed-default-470, bw-grid:<w>x<l>,
        /// ecf-asym:<w>x<l>, trace:<prefix>, a TOML file), a family (seed-default-all,
        /// bw-grid, ecf-asym, ecf-asym-all, traces:<dir>) or a comma-separated list.
        #[arg(long, default_value = "seed-default")]
        profile: String,
        /// tcp-<path>, mptcp, oracle, mpflex:<scheduler> (comma-separated).
        #[arg(long, default_value = "tcp-wifi,tcp-lte,mptcp,oracle,mpflex:minrtt")]
        systems: String,
        /// chunk, bulk, shortflows, video, upload-ping or handover.
        #[arg(long, default_value = "chunk")]
        workload: String,
        /// bulk: down,up; shortflows: seq,par (default: both); video: buffer (the default,
        /// a buffer-based ABR) or rate (throughput-based).
        #[arg(long)]
        variants: Option<String>,
        /// Seconds per run of bulk (20), upload-ping (20), handover (30); seconds of video
        /// played (120).
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
        /// The mpflex binary (default: next to this one).
        #[arg(long)]
        mpflex: Option<std::path::PathBuf>,
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
    },
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
    WorkloadClient {
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
        #[arg(long)]
        server: std::net::SocketAddr,
        #[arg(long)]
        bind: Option<std::net::IpAddr>,
        #[arg(long)]
        mptcp: bool,
        #[arg(long)]
        socks: Option<std::net::SocketAddr>,
    },
    /// (internal) Time one chunk download; prints milliseconds.
    #[command(hide = true)]
    ChunkClient {
        #[arg(long)]
        server: std::net::SocketAddr,
        #[arg(long)]
        bind: Option<std::net::IpAddr>,
        #[arg(long)]
        mptcp: bool,
        #[arg(long)]
        socks: Option<std::net::SocketAddr>,
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
    },
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
        Cmd::ChunkClient { .. } => return chunk_client(&cli.cmd),
        Cmd::WorkloadClient { .. } => return workload_client(&cli.cmd),
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
        Cmd::Emu { profile, seconds } => {
            let profile = Profile::resolve(&profile)?;
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
        Cmd::Run {
            profile,
            systems,
            workload,
            variants,
            secs,
            rate_kbit,
            handover_path,
            sizes,
            modes,
            cc,
            reps,
            oracle_step,
            out,
            mpflex,
            idle_restart,
            keep_mpflex,
        } => {
            if !mpflex_lab::runner::WORKLOADS.contains(&workload.as_str()) {
                anyhow::bail!(
                    "--workload {workload:?}: one of {}",
                    mpflex_lab::runner::WORKLOADS.join(", ")
                );
            }
            // The variants a workload has, and those run unless asked (video: the
            // buffer-based ABR of ECF's evaluation).
            let (allowed, default): (&[&str], &[&str]) = match workload.as_str() {
                "bulk" => (&["down", "up"], &["down", "up"]),
                "shortflows" => (&["seq", "par"], &["seq", "par"]),
                "video" => (&["buffer", "rate"], &["buffer"]),
                _ => (&[], &[]),
            };
            let variants: Vec<String> = match variants {
                Some(v) => v.split(',').map(|x| x.trim().to_string()).collect(),
                None => default.iter().map(|s| s.to_string()).collect(),
            };
            if let Some(v) = variants.iter().find(|v| !allowed.contains(&v.as_str())) {
                anyhow::bail!("--variants: {v:?} is not one of {allowed:?} for {workload}");
            }
            let secs = secs.unwrap_or(match workload.as_str() {
                "video" => 120.0,
                "handover" => 30.0,
                _ => 20.0,
            });
            if !(secs > 0.0 && secs <= 3600.0) {
                anyhow::bail!("--secs: between 0 and 3600");
            }
            if rate_kbit == 0 {
                anyhow::bail!("--rate-kbit: must be positive");
            }
            let profiles = mpflex_lab::profile::expand(&profile)?;
            let profile = profiles[0].clone();
            if let Some(q) = profiles.iter().find(|q| {
                q.paths
                    .iter()
                    .map(|x| &x.name)
                    .ne(profile.paths.iter().map(|x| &x.name))
            }) {
                anyhow::bail!(
                    "--profile: {} and {} have different paths; run them separately",
                    profile.name,
                    q.name
                );
            }
            let handover_path = profile
                .paths
                .iter()
                .position(|p| p.name == handover_path)
                .or_else(|| handover_path.parse().ok().filter(|&i: &usize| i < profile.paths.len()))
                .with_context(|| format!("--handover-path {handover_path:?}: no such path in {}", profile.name))?;
            let systems = systems
                .split(',')
                .map(|s| System::parse(s.trim(), &profile))
                .collect::<Result<Vec<_>>>()?;
            let sizes = sizes.split(',').map(parse_size).collect::<Result<Vec<_>>>()?;
            let list = |s: &str| s.split(',').map(|x| x.trim().to_string()).collect::<Vec<_>>();
            let modes = list(&modes);
            if let Some(m) = modes.iter().find(|m| *m != "fresh" && *m != "warm") {
                anyhow::bail!("--modes: {m:?} is not fresh or warm");
            }
            if !(0.01..=0.5).contains(&oracle_step) {
                anyhow::bail!("--oracle-step: between 0.01 and 0.5");
            }
            if let Some(d) = out.parent() {
                std::fs::create_dir_all(d)?;
            }
            let mpflex_bin = mpflex.unwrap_or_else(|| std::env::current_exe().unwrap().with_file_name("mpflex"));
            if systems.iter().any(|s| matches!(s, System::Mpflex(_))) && !mpflex_bin.exists() {
                anyhow::bail!(
                    "{} not found: build it (cargo build --release -p mpflex) or pass --mpflex",
                    mpflex_bin.display()
                );
            }
            let mut cfg = RunConfig {
                profile,
                systems,
                workload,
                variants,
                secs,
                rate_kbit,
                handover_path,
                sizes,
                modes,
                ccs: list(&cc),
                reps,
                oracle_step,
                out: out.clone(),
                mpflex_bin,
                idle_restart,
                keep_mpflex,
            };
            let mut n = 0;
            for (i, p) in profiles.into_iter().enumerate() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                if i > 0 {
                    eprintln!("profile {}", p.name);
                }
                cfg.profile = p;
                n += mpflex_lab::runner::run(&cfg, &stop)?;
            }
            println!("{n} results appended to {}", out.display());
            Ok(())
        }
        _ => unreachable!("handled above"),
    }
}

/// Bytes a `warm` chunk measurement transfers on its connections first (then ~1 s idle).
const WARM_UP_BYTES: u64 = 1 << 20;

fn chunk_client(cmd: &Cmd) -> Result<()> {
    let Cmd::ChunkClient {
        server,
        bind,
        mptcp,
        socks,
        size,
        mode,
        split_server,
        split_bind,
        share,
    } = cmd
    else {
        unreachable!()
    };
    let via = |bind: Option<std::net::IpAddr>| match (socks, mptcp) {
        (Some(p), _) => Via::Socks(*p),
        (None, true) => Via::Mptcp,
        (None, false) => Via::Tcp {
            bind: bind.map(|b| std::net::SocketAddr::new(b, 0)),
        },
    };
    let warm = mode == "warm";
    // The parts: (server, via, bytes, warm-up bytes). The warm-up is 1 MB in all, split
    // like the chunk: every system warms its paths with the same megabyte (a split that
    // warmed each connection with a whole megabyte would give each path the window of a
    // transfer twice the size the others had).
    let (first, second) = workload::split(*size, *share);
    let (warm_first, warm_second) = workload::split(WARM_UP_BYTES, *share);
    let mut parts = vec![(*server, via(*bind), first, warm_first)];
    if let Some(s2) = split_server {
        parts.push((*s2, via(*split_bind), second, warm_second));
    }
    parts.retain(|p| p.2 > 0);
    let mut conns = Vec::new();
    // Warm mode: the connections warm up side by side (as one multipath connection's
    // paths do), and the time until the last has its share is printed after the chunk's.
    let mut warm_up_ms = None;
    if warm {
        let t = std::time::Instant::now();
        conns = std::thread::scope(|sc| {
            let hs: Vec<_> = parts
                .iter()
                .map(|(srv, v, _, warm_bytes)| {
                    sc.spawn(move || -> Result<Option<std::net::TcpStream>> {
                        let mut c = workload::connect(*srv, v)?;
                        if *warm_bytes > 0 {
                            workload::request(&mut c, *warm_bytes)?;
                        }
                        Ok(Some(c))
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().map_err(|_| anyhow::anyhow!("worker panicked"))?)
                .collect::<Result<Vec<_>>>()
        })?;
        warm_up_ms = Some(t.elapsed().as_secs_f64() * 1000.0);
        std::thread::sleep(Duration::from_secs(1));
    } else {
        conns.extend(parts.iter().map(|_| None));
    }
    let t = std::time::Instant::now();
    std::thread::scope(|sc| -> Result<()> {
        let hs: Vec<_> = parts
            .iter()
            .zip(conns.iter_mut())
            .map(|((srv, v, bytes, _), c)| sc.spawn(move || workload::timed(*srv, v, *bytes, c.as_mut())))
            .collect();
        for h in hs {
            h.join().map_err(|_| anyhow::anyhow!("worker panicked"))??;
        }
        Ok(())
    })?;
    match warm_up_ms {
        Some(w) => println!("{:.3} {w:.3}", t.elapsed().as_secs_f64() * 1000.0),
        None => println!("{:.3}", t.elapsed().as_secs_f64() * 1000.0),
    }
    Ok(())
}

fn workload_client(cmd: &Cmd) -> Result<()> {
    let Cmd::WorkloadClient {
        workload,
        variant,
        mode,
        secs,
        rate_kbit,
        server,
        bind,
        mptcp,
        socks,
    } = cmd
    else {
        unreachable!()
    };
    let via = match (socks, mptcp) {
        (Some(p), _) => Via::Socks(*p),
        (None, true) => Via::Mptcp,
        (None, false) => Via::Tcp {
            bind: bind.map(|b| std::net::SocketAddr::new(b, 0)),
        },
    };
    let v = variant.as_deref();
    let fields = match workload.as_str() {
        "bulk" if v == Some("up") => workload::bulk_up(*server, &via, *secs)?,
        "bulk" => workload::bulk_down(*server, &via, *secs)?,
        "shortflows" => workload::shortflows(*server, &via, v == Some("par"), mode == "warm")?,
        "video" => {
            let abr = if v == Some("rate") {
                workload::Abr::Rate
            } else {
                workload::Abr::Buffer
            };
            workload::video(*server, &via, *secs, abr)?
        }
        "upload-ping" => workload::upload_ping(*server, &via, *secs)?,
        "handover" => workload::handover(*server, &via, *secs, *rate_kbit)?,
        other => anyhow::bail!("unknown workload {other:?}"),
    };
    println!("{}", serde_json::Value::Object(fields));
    Ok(())
}
