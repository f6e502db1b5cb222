//! The measuring clients, run as `mpflex-lab` subcommands in the client namespace.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::emulator::Emulator;
use crate::netns::Topology;
use crate::workload::chunk::Timed;
use crate::workload::Fields;

fn self_exe() -> std::path::PathBuf {
    std::env::current_exe().expect("own path")
}

/// One chunk-client invocation; returns what it printed.
pub(super) fn chunk(topo: &Topology, args: &[String]) -> Result<Timed> {
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
    serde_json::from_slice(&out.stdout).context("chunk-client output")
}

/// One `workload-client` run; returns its JSON fields. With `path_down`, the emulator
/// takes that path down at a third of `secs` and back up at two thirds meanwhile.
pub(super) fn workload(
    topo: &Topology,
    args: &[String],
    path_down: Option<(&Emulator, usize)>,
    secs: f64,
) -> Result<Fields> {
    let child = workload_child(topo, args)?;
    if let Some((emu, path)) = path_down {
        let t0 = Instant::now();
        let down_at = t0 + Duration::from_secs_f64(secs / 3.0);
        let up_at = t0 + Duration::from_secs_f64(2.0 * secs / 3.0);
        std::thread::sleep(down_at.saturating_duration_since(Instant::now()));
        emu.set_path_up(path, false);
        std::thread::sleep(up_at.saturating_duration_since(Instant::now()));
        emu.set_path_up(path, true);
    }
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
