//! Link hints on the shared harness (virtual clock): a path the link layer hints weak (a
//! WiFi signal fading, read from nl80211 by the driver) takes no new stream bytes while
//! the other path carries them, takes them again once the hint clears, and does not
//! ping-pong under hints that alternate within the hold.
//!
//! The workload: the client uploads 1000-byte messages, one every 4 ms (2 Mbit/s), over
//! a WiFi-like path (RTT 50 ms, 7 Mbit/s) and an LTE-like one (RTT 70 ms, 9.2 Mbit/s);
//! minRTT puts nearly all of it on WiFi while WiFi is healthy.

use std::time::Duration;

use bytes::Bytes;
use mpflex_engine::harness::{placeholder_addr, Pair, PathSpec};
use mpflex_engine::{LinkHint, PathState};

const MESSAGE: usize = 1000;
const EVERY_MS: u64 = 4;
const WIFI: usize = 0;
const LTE: usize = 1;

fn specs() -> [PathSpec; 2] {
    [(25, 880).into(), (35, 1150).into()]
}

/// New stream bytes the client sent on `path` so far (first copies only).
fn sent(sim: &Pair, path: usize) -> u64 {
    sim.client.path_counters(path).unwrap().0.payload_sent
}

/// Uploads until `to_ms`, calling `at(sim, ms)` every millisecond before the step.
/// Returns the bytes the server received.
fn upload(to_ms: u64, mut at: impl FnMut(&mut Pair, u64)) -> (Pair, usize, usize) {
    let mut sim = Pair::custom(
        || mpflex_sched::by_name("minrtt").unwrap(),
        &specs(),
        |c| c.link_hint_hold = Duration::from_secs(3),
    );
    let id = sim.client.open_stream(placeholder_addr());
    let mut total = 0;
    for ms in 0..to_ms {
        at(&mut sim, ms);
        if ms % EVERY_MS == 0 {
            let n = sim.client.stream_send(id, Bytes::from(vec![ms as u8; MESSAGE]));
            assert_eq!(n, MESSAGE, "flow control never holds a 2 Mbit/s stream back");
            total += n;
        }
        sim.step();
    }
    // Let what is in flight arrive.
    for _ in 0..2000 {
        sim.step();
    }
    let got = sim.server_rx.values().map(Vec::len).sum();
    (sim, total, got)
}

/// The (WiFi, LTE) byte counts at 3 s (the hint), 3.5 s, 8 s (the hint clears) and 11 s:
/// healthy WiFi carries the `what` first, the weak path takes no new byte while the hint
/// holds, LTE carries meanwhile, and WiFi carries again once it clears.
fn check_marks(label: &str, what: &str, marks: &[(u64, u64)]) {
    let [before, settled, cleared, after] = marks[..] else {
        panic!("{marks:?}")
    };
    println!("{label} (wifi, lte) at 3 s {before:?}, 3.5 s {settled:?}, 8 s {cleared:?}, 11 s {after:?}");
    assert!(
        before.0 > 4 * before.1,
        "healthy WiFi carries the {what} first: {before:?}"
    );
    assert_eq!(cleared.0, settled.0, "no new byte on the weak path in 4.5 s");
    assert!(
        cleared.1 - settled.1 >= 1_000_000,
        "LTE carries meanwhile: {settled:?} → {cleared:?}"
    );
    assert!(
        after.0 - cleared.0 >= 500_000,
        "WiFi carries again after the hint clears: {cleared:?} → {after:?}"
    );
}

#[test]
fn a_path_hinted_weak_takes_no_new_bytes_until_the_hint_clears() {
    let mut marks = Vec::new();
    let (sim, total, got) = upload(12_000, |sim, ms| {
        let now = sim.now;
        match ms {
            3000 => {
                marks.push((sent(sim, WIFI), sent(sim, LTE)));
                sim.client.set_link_hint(WIFI, Some(LinkHint::Weak), now);
                assert_eq!(sim.client.path_state(WIFI), PathState::Degraded);
                assert_eq!(sim.client.path_state(LTE), PathState::Active);
            }
            // Half a second for what was already on its way.
            3500 => marks.push((sent(sim, WIFI), sent(sim, LTE))),
            8000 => {
                marks.push((sent(sim, WIFI), sent(sim, LTE)));
                assert!(sim.client.path_hinted_weak(WIFI));
                assert_eq!(sim.client.path_state(WIFI), PathState::Degraded);
                // The last weak hint was 5 s ago, beyond the hold: released at once.
                sim.client.set_link_hint(WIFI, None, now);
                assert!(!sim.client.path_hinted_weak(WIFI));
                assert_eq!(sim.client.path_state(WIFI), PathState::Active);
            }
            11_000 => marks.push((sent(sim, WIFI), sent(sim, LTE))),
            _ => {}
        }
    });
    assert_eq!(got, total, "every byte arrives");
    check_marks("payload", "stream", &marks);
    assert_eq!(sim.client.path_counters(WIFI).unwrap().0.demotions, 1);
}

#[test]
fn hints_alternating_within_the_hold_do_not_make_the_path_ping_pong() {
    let mut states = Vec::new();
    let mut wifi_at = Vec::new();
    let (_, total, got) = upload(14_000, |sim, ms| {
        let now = sim.now;
        // Weak, clear, weak, clear … every 500 ms from 2 s to 6.5 s: the last weak hint
        // comes at 6 s, so the release waits for 9 s.
        if (2000..=6500).contains(&ms) && ms % 500 == 0 {
            let hint = (ms % 1000 == 0).then_some(LinkHint::Weak);
            sim.client.set_link_hint(WIFI, hint, now);
        }
        if (2001..9000).contains(&ms) {
            states.push(sim.client.path_state(WIFI));
        }
        if ms == 2500 || ms == 8990 {
            wifi_at.push(sent(sim, WIFI));
        }
        if ms == 9010 {
            assert_eq!(
                sim.client.path_state(WIFI),
                PathState::Active,
                "released when the hold ended"
            );
        }
    });
    assert_eq!(got, total, "every byte arrives");
    assert!(
        states.iter().all(|&s| s == PathState::Degraded),
        "degraded throughout, never back to active: {:?}",
        states.iter().find(|&&s| s != PathState::Degraded)
    );
    assert_eq!(wifi_at[0], wifi_at[1], "no new byte on WiFi between 2.5 s and 9 s");
}

/// The server cannot read the client's WiFi signal: the client announces a path hinted
/// weak as a backup (a `Tier` frame on the path), so a download leaves it too. The
/// server streams 2 Mbit/s to the client; from the hint until it clears the server hands
/// WiFi no new byte (after the half second the announcement and what was in flight
/// take), LTE carries the stream, and WiFi carries again once the hint is gone.
#[test]
fn a_download_leaves_a_path_the_client_hinted_weak() {
    let mut sim = Pair::custom(
        || mpflex_sched::by_name("minrtt").unwrap(),
        &specs(),
        |c| c.link_hint_hold = Duration::from_secs(3),
    );
    let id = sim.client.open_stream(placeholder_addr());
    sim.client.stream_send(id, Bytes::from_static(b"GET"));
    let served = |sim: &Pair, path: usize| sim.server.path_counters(path).unwrap().0.payload_sent;
    let mut marks = Vec::new();
    let mut total = 0;
    for ms in 0..12_000u64 {
        let now = sim.now;
        match ms {
            3000 => {
                marks.push((served(&sim, WIFI), served(&sim, LTE)));
                sim.client.set_link_hint(WIFI, Some(LinkHint::Weak), now);
            }
            3500 | 11_000 => marks.push((served(&sim, WIFI), served(&sim, LTE))),
            8000 => {
                marks.push((served(&sim, WIFI), served(&sim, LTE)));
                sim.client.set_link_hint(WIFI, None, now);
            }
            _ => {}
        }
        if ms % EVERY_MS == 0 && sim.server.stream_ids().contains(&id) {
            let n = sim.server.stream_send(id, Bytes::from(vec![ms as u8; MESSAGE]));
            assert_eq!(n, MESSAGE, "flow control never holds a 2 Mbit/s stream back");
            total += n;
        }
        sim.step();
    }
    for _ in 0..2000 {
        sim.step();
    }
    assert_eq!(sim.client_rx[&id].len(), total, "every byte arrives");
    check_marks("served", "download", &marks);
}
