//! Every path of a session dies at once, and the connections that replace them are
//! killed too, some while they join: for a moment the session has no path at all. Or the
//! server stalls, so every path goes silent and the client probes each with a new
//! connection. Either way the streams in flight must wait it out and finish byte-exact:
//! a stream is never reset because paths came and went while the session lives
//! (docs/paths.md).

mod support;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use support::exchange::{origin, origin_listener, slot, Tally};
use support::*;

/// Exchanges in flight at once, each closed after its exchange and opened again.
const STREAMS: usize = 200;
const MAX_DOWN: u32 = 256 << 10;
const MAX_UP: u32 = 64 << 10;

/// [`STREAMS`] slots exchanging with an origin of their own, until finished.
struct Load {
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    slots: Vec<JoinHandle<()>>,
}

impl Load {
    /// Starts the origin on `port` in the server namespace and the slots in the
    /// client's, and waits until every slot has made an exchange or so.
    fn start(lab: &Lab, port: u16) -> Load {
        support::hostile::raise_nofile();
        let (sns, cns) = (lab.topo.server_ns.clone(), lab.topo.client_ns.clone());
        let l = in_ns(&sns, move || origin_listener(port));
        std::thread::spawn(move || origin(l));
        let (tally, stop) = (Arc::new(Tally::default()), Arc::new(AtomicBool::new(false)));
        let slots = (0..STREAMS)
            .map(|_| {
                let (proxy, dest, tally, stop) = (lab.socks(), lab.server_addr(0), tally.clone(), stop.clone());
                spawn_in_ns(&cns, move || slot(proxy, dest, port, (MAX_DOWN, MAX_UP), tally, stop))
            })
            .collect();
        let load = Load { tally, stop, slots };
        load.progress(0, Duration::from_secs(30));
        load
    }

    /// Waits (at most `within`) until [`STREAMS`] more exchanges than `since` completed.
    fn progress(&self, since: u64, within: Duration) {
        let deadline = Instant::now() + within;
        while self.tally.exchanges() < since + STREAMS as u64 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the slots; asserts that the exchanges went on and none failed.
    fn finish(self, at_least: u64) {
        self.stop.store(true, Ordering::Relaxed);
        for s in self.slots {
            s.join().unwrap();
        }
        let (exchanges, failed) = (self.tally.exchanges(), self.tally.failed());
        eprintln!(
            "{exchanges} exchanges ({:.1} MB), {failed} failed",
            self.tally.bytes.load(Ordering::Relaxed) as f64 / 1e6
        );
        assert!(exchanges >= at_least, "the exchanges did not go on: {exchanges}");
        assert_eq!(
            failed,
            0,
            "exchanges failed or arrived altered; the first: {:?}",
            self.tally.errors.lock().unwrap()
        );
    }
}

/// Path failures the client has counted, all paths together.
fn client_failures(lab: &Lab) -> u64 {
    lab.client_status()["paths"]
        .as_array()
        .expect("client status has no paths")
        .iter()
        .map(|p| p["failures"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn all_paths_killed_at_once_and_while_rejoining_lose_no_stream() {
    if !ready("all_paths_killed_at_once_and_while_rejoining_lose_no_stream") {
        return;
    }
    const ROUNDS: usize = 4;
    // How long each round keeps killing the paths' new connections as they come: the
    // client re-dials a connection that ended after 100, 200, 400 and 800 ms (a dial
    // that failed after a second or so), so several are killed, at any stage of their
    // handshake and join.
    const HAMMER: Duration = Duration::from_millis(1500);
    // How long the paths then live before the next round: longer than a connection must
    // last for the client's re-dial backoff to start again from its first step.
    const CALM: Duration = Duration::from_secs(11);
    let lab = Lab::new(Options::default());
    let load = Load::start(&lab, 9_101);
    let (mut at_once, mut rejoining) = (0, 0);
    for round in 0..ROUNDS {
        let before = load.tally.exchanges();
        // Both paths at once, one reset in the client's kernel and the other in the
        // server's (which of them alternates).
        let (a, b) = if round % 2 == 0 {
            (Kill::Reset, Kill::ServerReset)
        } else {
            (Kill::ServerReset, Kill::Reset)
        };
        let killed = std::thread::scope(|s| {
            let other = s.spawn(|| lab.kill_path(1, b));
            lab.kill_path(0, a) as usize + other.join().unwrap() as usize
        });
        at_once += killed;
        // Then every new connection of either path, as soon as it shows.
        let until = Instant::now() + HAMMER;
        let mut k = 0;
        while Instant::now() < until {
            let how = if k / 2 % 2 == 0 { Kill::Reset } else { Kill::ServerReset };
            rejoining += lab.kill_path(k % 2, how) as usize;
            k += 1;
        }
        lab.wait_paths_up(2, Duration::from_secs(15));
        let calm = Instant::now() + CALM;
        load.progress(before, Duration::from_secs(60));
        std::thread::sleep(calm.saturating_duration_since(Instant::now()));
        eprintln!(
            "round {round}: {killed} killed at once, {rejoining} replacements killed so far; {} exchanges, {} failed",
            load.tally.exchanges(),
            load.tally.failed()
        );
    }
    eprintln!("{at_once} paths killed at once, {rejoining} replacements killed");
    assert!(
        at_once >= ROUNDS,
        "the paths were not killed: {at_once} kills in {ROUNDS} rounds"
    );
    assert!(rejoining > 0, "no replacement connection was killed");
    load.finish((ROUNDS * STREAMS) as u64);
}

#[test]
fn a_stalled_server_loses_no_stream_while_its_paths_are_probed() {
    if !ready("a_stalled_server_loses_no_stream_while_its_paths_are_probed") {
        return;
    }
    const STALLS: usize = 12;
    let lab = Lab::new(Options::default());
    let load = Load::start(&lab, 9_102);
    let pid = lab.server.as_ref().unwrap().id().to_string();
    let failures = client_failures(&lab);
    for _ in 0..STALLS {
        // Long enough for the paths, silent while they hold data, to be probed; the
        // probes' joins are answered when the server runs again.
        sh(&["kill", "-STOP", &pid]);
        std::thread::sleep(Duration::from_millis(350));
        sh(&["kill", "-CONT", &pid]);
        std::thread::sleep(Duration::from_millis(700));
    }
    lab.wait_paths_up(2, Duration::from_secs(15));
    let lost = client_failures(&lab) - failures;
    eprintln!("{STALLS} server stalls: {lost} path connections lost");
    let before = load.tally.exchanges();
    load.progress(before, Duration::from_secs(60));
    load.finish(STREAMS as u64);
}
