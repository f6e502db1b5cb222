//! Network namespaces for mpflex's lab and tests: a single throw-away namespace
//! ([`Netns`]) or a client/server topology joined by veth paths, optionally through an
//! emulator namespace ([`Topology`]); all removed with their processes on drop, and those
//! of dead processes removed by the next one ([`clean_stale`]). [`skip`] and the
//! `require_*` helpers let a test that cannot run here say so, and fail under CI.

mod ns;
mod skip;
mod topology;

use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

pub use ns::{clean_stale, enter, in_ns, ns_path, spawn_in_ns, try_enter, Netns, PREFIX};
pub use skip::{require, require_root, require_tools, skip};
pub use topology::{Layout, Topology};

/// Runs a program to completion; its stdout, or an error carrying its stderr.
pub fn run(args: &[&str]) -> Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} (is it installed?)", args[0]))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a program and ignores how it went (cleanup of what may already be gone).
fn run_quiet(args: &[&str]) {
    let _ = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `ip netns exec <ns> <program>`, to add arguments and spawn.
pub fn command(ns: &str, program: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, program]);
    c
}

/// `ip netns exec <ns> <args…>` to completion, as [`run`].
pub fn exec(ns: &str, args: &[&str]) -> Result<String> {
    run(&[&["ip", "netns", "exec", ns][..], args].concat())
}

pub fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `program` is an executable file in a directory of `PATH`.
pub fn have_command(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(program)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}
