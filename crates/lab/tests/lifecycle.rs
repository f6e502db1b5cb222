//! Namespaces and processes go away on success, panic, SIGINT/SIGTERM of `mpflex-lab emu`,
//! and a killed run's leftovers are removed by the next run. Needs root; skipped otherwise,
//! a failure under CI=true.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mpflex_lab::netns::{require_root, Topology};

/// Tags of this test binary; the accuracy tests use small ones in their own process.
static TAG: AtomicU32 = AtomicU32::new(100);

fn namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn exists(ns: &str) -> bool {
    namespaces().iter().any(|n| n == ns)
}

fn root(test: &str) -> bool {
    require_root(test)
}

#[test]
fn drop_and_panic_remove_the_namespaces() {
    if !root("drop_and_panic_remove_the_namespaces") {
        return;
    }
    let t = Topology::create(2, TAG.fetch_add(1, Ordering::SeqCst)).unwrap();
    let names = [t.client_ns.clone(), t.emu_ns.clone(), t.server_ns.clone()];
    assert!(names.iter().all(|n| exists(n)));
    drop(t);
    assert!(names.iter().all(|n| !exists(n)), "left after drop: {:?}", namespaces());

    let tag = TAG.fetch_add(1, Ordering::SeqCst);
    let r = std::panic::catch_unwind(|| {
        let _t = Topology::create(1, tag).unwrap();
        panic!("a test failing half-way");
    });
    assert!(r.is_err());
    let leftover: Vec<_> = namespaces()
        .into_iter()
        .filter(|n| n.contains(&format!("-{}-{tag}-", std::process::id())))
        .collect();
    assert!(leftover.is_empty(), "left after panic: {leftover:?}");
}

#[test]
fn a_killed_runs_namespaces_are_removed_by_the_next_run() {
    if !root("a_killed_runs_namespaces_are_removed_by_the_next_run") {
        return;
    }
    // A pid that is certainly gone: a child that has exited and been reaped.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale: Vec<String> = ["c", "e", "s"]
        .iter()
        .map(|s| format!("mpfl-lab-{dead}-0-{s}"))
        .collect();
    for ns in &stale {
        let st = Command::new("ip").args(["netns", "add", ns]).status().unwrap();
        assert!(st.success());
    }
    // A process left running inside, as a killed runner leaves its servers.
    let mut sleeper = Command::new("ip")
        .args(["netns", "exec", &stale[2], "sleep", "60"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = Topology::create(1, TAG.fetch_add(1, Ordering::SeqCst)).unwrap();
    assert!(
        stale.iter().all(|n| !exists(n)),
        "stale namespaces survived: {:?}",
        namespaces()
    );
    // Its process was killed, not orphaned.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if sleeper.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "process in the stale namespace still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Our own, live topology was not touched by the sweep of another "run".
    mpflex_lab::netns::clean_stale();
    assert!(exists(&t.client_ns));
}

/// Starts `mpflex-lab emu`, waits for the topology, sends `signal`, checks it is all gone.
fn emu_stops_cleanly_on(signal: i32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mpflex-lab"))
        .args(["emu", "--profile", "seed-default"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut topology = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.split("on namespaces ").nth(1) {
            topology = rest.split("-c ").next().map(str::to_string);
        }
        if line.contains("Ctrl-C") {
            break;
        }
    }
    let topology = topology.expect("emu printed its namespaces");
    let ours = || -> Vec<String> {
        namespaces()
            .into_iter()
            .filter(|n| n.starts_with(&format!("{topology}-")))
            .collect()
    };
    assert_eq!(ours().len(), 3, "{:?}", namespaces());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, signal) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("emu did not stop within 10 s of signal {signal}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "emu exited with {status}");
    assert!(ours().is_empty(), "left after signal {signal}: {:?}", ours());
}

#[test]
fn emu_cleans_up_on_sigint_and_sigterm() {
    if !root("emu_cleans_up_on_sigint_and_sigterm") {
        return;
    }
    emu_stops_cleanly_on(libc::SIGINT);
    emu_stops_cleanly_on(libc::SIGTERM);
}

#[test]
fn emu_rejects_an_unknown_profile_with_a_usable_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_mpflex-lab"))
        .args(["emu", "--profile", "no-such-profile"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown profile") && err.contains("seed-default"), "{err}");
}
