//! The measuring clients, run as `mpflex-lab` subcommands in the client namespace.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::emulator::Emulator;
use crate::link::{LinkParams, Rate};
use crate::netns::Topology;
use crate::units::unix_us;
use crate::workload::chunk::Timed;
use crate::workload::outages::{Dark, Outage};
use crate::workload::{Fields, PathEvent};

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

/// A path failing during a run: which, how, on which emulator.
pub(super) struct PathChange<'a> {
    pub emu: &'a Emulator,
    pub path: usize,
    pub event: PathEvent,
}

/// How long `Degrade` takes to walk out of coverage before the outage.
const DEGRADE_RAMP: Duration = Duration::from_secs(5);
/// How often the degrading link's parameters change.
const DEGRADE_STEP: Duration = Duration::from_millis(250);

/// One `workload-client` run in namespace `ns` (the client's, or a LAN host's behind it);
/// returns its JSON fields. With `change`, the path fails at a third of `secs` and comes
/// back at two thirds meanwhile, as its event says.
pub(super) fn workload(
    topo: &Topology,
    ns: &str,
    args: &[String],
    change: Option<PathChange<'_>>,
    secs: f64,
) -> Result<Fields> {
    if let Some(c) = change.as_ref().filter(|c| c.event == PathEvent::Appear) {
        return appear(topo, args, c, secs);
    }
    let child = workload_child(ns, args)?;
    if let Some(c) = change {
        let t0 = Instant::now();
        let down_at = t0 + Duration::from_secs_f64(secs / 3.0);
        let up_at = t0 + Duration::from_secs_f64(2.0 * secs / 3.0);
        let sleep_until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));
        let original: Vec<LinkParams> = c.emu.links[c.path]
            .iter()
            .map(|l| l.update(|m| m.params().clone()))
            .collect();
        if c.event == PathEvent::Degrade {
            let start = down_at.checked_sub(DEGRADE_RAMP).unwrap_or(t0).max(t0);
            let ramp = down_at - start;
            let mut at = start;
            while at < down_at {
                sleep_until(at);
                let f = (at - start).as_secs_f64() / ramp.as_secs_f64().max(1e-9);
                for (l, p) in c.emu.links[c.path].iter().zip(&original) {
                    l.update(|m| m.set_params(degraded(p, f)));
                }
                at += DEGRADE_STEP;
            }
        }
        sleep_until(down_at);
        set_path(topo, &c, false)?;
        sleep_until(up_at);
        for (l, p) in c.emu.links[c.path].iter().zip(original) {
            l.update(|m| m.set_params(p));
        }
        set_path(topo, &c, true)?;
    }
    workload_output(child, args)
}

/// A link `f` of the way (0 to 1) out of coverage: its rate down to 7 % (a constant rate;
/// a trace keeps its own), its loss up to 10 %, its one-way delay up by 50 ms.
fn degraded(p: &LinkParams, f: f64) -> LinkParams {
    let rate = match &p.rate {
        Rate::Constant(kbit) => Rate::Constant(((*kbit as f64) * (1.0 - 0.93 * f)).max(1.0) as u64),
        other => other.clone(),
    };
    LinkParams {
        delay: p.delay + Duration::from_secs_f64(0.050 * f),
        rate,
        loss: p.loss + (0.10 - p.loss).max(0.0) * f,
        ..p.clone()
    }
}

/// How often `appear` looks at the new path's link for data.
const APPEAR_POLL: Duration = Duration::from_millis(2);
/// Full-size packets the new path's downlink must deliver to count as carrying data (a
/// handshake's packets are smaller than [`crate::link::SMALL_PACKET`]).
const APPEAR_PACKETS: u64 = 3;

/// `appear`: the path's client interface loses its address before the run and gets it
/// back at a third of it; records `appear_ms`, from the address to the path's downlink
/// delivering data. For kernel MPTCP the address comes with a `subflow fullmesh` endpoint,
/// as a path manager daemon (mptcpd) adds one when an interface gets an address (fullmesh:
/// a subflow to the server address announced for that link, not only to the first one);
/// it is removed after the run.
fn appear(topo: &Topology, args: &[String], c: &PathChange<'_>, secs: f64) -> Result<Fields> {
    let dev = topo.client_dev(c.path);
    let addr = topo.client_addr(c.path);
    let cidr = format!("{addr}/24");
    let ns = &topo.client_ns;
    crate::netns::run(&["ip", "-n", ns, "addr", "del", &cidr, "dev", &dev])?;
    // Let the client see it go before the stream starts.
    std::thread::sleep(Duration::from_millis(300));
    let child = workload_child(&topo.client_ns, args)?;
    let data = |emu: &Emulator| {
        let s = &emu.stats()[c.path][0];
        s.delivered - s.small
    };
    std::thread::sleep(Duration::from_secs_f64(secs / 3.0));
    let before = data(c.emu);
    let at = Instant::now();
    crate::netns::run(&["ip", "-n", ns, "addr", "add", &cidr, "dev", &dev])?;
    let endpoint = crate::netns::run(&[
        "ip", "-n", ns, "mptcp", "endpoint", "add", &addr, "dev", &dev, "subflow", "fullmesh",
    ]);
    let limit = at + Duration::from_secs_f64(secs / 3.0);
    let mut appear_ms = None;
    while Instant::now() < limit {
        if data(c.emu) >= before + APPEAR_PACKETS {
            appear_ms = Some(at.elapsed().as_secs_f64() * 1000.0);
            break;
        }
        std::thread::sleep(APPEAR_POLL);
    }
    let out = workload_output(child, args);
    if endpoint.is_ok() {
        crate::netns::run(&["ip", "-n", ns, "mptcp", "endpoint", "flush"])?;
    }
    let mut f = out?;
    f.insert("appear_ms".into(), appear_ms.into());
    Ok(f)
}

/// One `workload-client` run in namespace `ns` during which the emulator takes each
/// outage's path dark at its time after the client started and brings it back after its
/// length; returns the client's fields and when each path was dark (µs since the Unix
/// epoch).
pub(super) fn with_outages(
    ns: &str,
    args: &[String],
    emu: &Emulator,
    outages: &[Outage],
) -> Result<(Fields, Vec<Dark>)> {
    let child = workload_child(ns, args)?;
    let t0 = Instant::now();
    let sleep_until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));
    let mut dark = Vec::new();
    for o in outages {
        sleep_until(t0 + o.at);
        emu.set_path_up(o.path, false);
        let from_us = unix_us();
        sleep_until(t0 + o.at + o.length);
        emu.set_path_up(o.path, true);
        dark.push(Dark {
            path: o.path,
            from_us,
            to_us: unix_us(),
        });
    }
    Ok((workload_output(child, args)?, dark))
}

/// Takes the changed path down or brings it back, as its event does it.
fn set_path(topo: &Topology, c: &PathChange<'_>, up: bool) -> Result<()> {
    match c.event {
        PathEvent::Blackhole | PathEvent::Degrade | PathEvent::Appear => c.emu.set_path_up(c.path, up),
        PathEvent::Carrier => {
            let dev = topo.client_dev(c.path);
            let state = if up { "up" } else { "down" };
            crate::netns::run(&["ip", "-n", &topo.client_ns, "link", "set", &dev, state])?;
        }
    }
    Ok(())
}

fn workload_child(ns: &str, args: &[String]) -> Result<Child> {
    Ok(Command::new("ip")
        .args(["netns", "exec", ns])
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::QueueLimit;

    /// Walking out of coverage: the rate falls to 7 %, the loss rises to 10 % and the
    /// one-way delay by 50 ms; halfway, halfway; a trace keeps its rate.
    #[test]
    fn a_degrading_link_walks_to_its_worst() {
        let p = LinkParams {
            delay: Duration::from_millis(25),
            jitter: Duration::ZERO,
            rate: Rate::Constant(7040),
            loss: 0.0,
            queue: QueueLimit::Millis(50),
        };
        assert_eq!(degraded(&p, 0.0), p);
        let half = degraded(&p, 0.5);
        assert_eq!(half.rate, Rate::Constant(3766));
        assert_eq!(half.delay, Duration::from_millis(50));
        assert!((half.loss - 0.05).abs() < 1e-9);
        let worst = degraded(&p, 1.0);
        assert_eq!(worst.rate, Rate::Constant(492));
        assert_eq!(worst.delay, Duration::from_millis(75));
        assert!((worst.loss - 0.10).abs() < 1e-9);
        assert_eq!(worst.queue, p.queue);
    }
}
