//! `mpflex-lab`: emulated multi-link networks on one machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};
use mpflex_lab::emulator::Emulator;
use mpflex_lab::netns::Topology;
use mpflex_lab::profile::Profile;

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
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("mpflex-lab: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
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
    }
}
