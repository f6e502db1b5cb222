//! The energy-aware mode end to end on the harness: the client holds cellular back, the
//! server learns it from the `Tier` frames and honours it for downloads, and cellular
//! wakes when WiFi is slow.

use bytes::Bytes;
use mpflex_engine::energy::LinkKind;
use mpflex_engine::harness::{Pair as Sim, PathSpec};
use mpflex_engine::{EnergyMode, PathState, Tier};

/// A download of `bytes` over `wifi` and `lte` in energy-aware mode; returns the pair
/// and when it completed (ms), calling `at(sim, ms)` every millisecond.
fn download(
    wifi: PathSpec,
    lte: PathSpec,
    bytes: usize,
    secs: u64,
    mut at: impl FnMut(&mut Sim, u64),
) -> (Sim, Option<u64>) {
    let mut sim = Sim::custom(|| mpflex_sched::by_name("minrtt").unwrap(), &[wifi, lte], |_| {});
    let now = sim.now;
    sim.client.set_path_kind(0, LinkKind::Wifi, now);
    sim.client.set_path_kind(1, LinkKind::Cellular, now);
    sim.client.set_energy_mode(EnergyMode::Aware, now);
    // The server hears of the standby on the path itself, one LTE trip later (a client
    // configured so has told it long before its first stream).
    for _ in 0..200 {
        sim.step();
    }
    let id = sim.open(b"GET");
    let mut sent = 0;
    let mut done = None;
    for ms in 0..secs * 1000 {
        at(&mut sim, ms);
        if sent < bytes && sim.server_rx.contains_key(&id) {
            let n = (bytes - sent).min(64 * 1024);
            sent += sim.server.stream_send(id, Bytes::from(vec![7u8; n]));
        }
        sim.step();
        if done.is_none() && sim.client_rx.get(&id).map_or(0, Vec::len) == bytes {
            done = Some(ms);
        }
    }
    (sim, done)
}

/// Good WiFi (20 Mbit/s): LTE carries no payload in either direction, the server holds it
/// in energy standby from the client's word, and neither side sends it keepalives.
#[test]
fn good_wifi_keeps_cellular_in_standby_on_both_sides() {
    let (sim, done) = download((10, 2500).into(), (35, 1125).into(), 16_000_000, 12, |sim, ms| {
        if ms == 0 {
            assert_eq!(
                sim.server.path_tier(1),
                Tier::EnergyStandby,
                "the server learnt the standby"
            );
            assert_eq!(sim.client.path_state(1), PathState::Standby);
        }
    });
    let done = done.expect("download completes");
    assert!(done < 8000, "{done} ms");
    for (side, s) in [("client", &sim.client), ("server", &sim.server)] {
        let c = s.path_counters(1).unwrap().0;
        assert_eq!(c.payload_sent + c.payload_resent, 0, "{side}: LTE carried payload");
        assert!(c.bytes_sent < 200, "{side}: LTE kept talking: {c:?}");
        assert!(s.path_energy_standby(1), "{side}");
    }
    let e = sim.client.energy(sim.now);
    // LTE spoke once, before the download: the `Tier` frame that put it in standby.
    assert!(e[1].bytes < 64 && e[1].promotions == 1, "{:?}", e[1]);
    // About 0.4 µJ/B at 20 Mbit/s (Table 3.2): 6.5 J for 16 MB.
    assert!(e[0].total_j() > 5.0 && e[0].total_j() < 9.0, "{:?}", e[0]);
    let v = sim.client.energy_aware().unwrap();
    assert_eq!((v.cellular_active, v.wakes), (false, 0));
    assert!(v.wifi_mbit.unwrap() > 15.0, "{v:?}");
}

/// Bad WiFi (0.8 Mbit/s, RTT 20 ms): Eq. 4.1's τ (about 0.2 s) has passed when the
/// predictor has its two samples (0.5 s), cellular wakes then, the server learns it and
/// sends there. 16 KB frames arriving every 160 ms are activity, not idleness.
#[test]
fn bad_wifi_wakes_cellular_after_tau_and_the_server_follows() {
    let mut woke = None;
    let (sim, done) = download((10, 100).into(), (35, 1125).into(), 8_000_000, 15, |sim, ms| {
        if woke.is_none() && sim.server.path_tier(1) == Tier::Primary {
            assert!(ms > 0);
            woke = Some(ms);
        }
    });
    let woke = woke.expect("cellular woke");
    assert!((500..1200).contains(&woke), "woke at {woke} ms");
    assert!(done.is_some_and(|d| d < 10_000), "{done:?}");
    let lte = sim.server.path_counters(1).unwrap().0;
    assert!(lte.payload_sent > 5_000_000, "{lte:?}");
    let e = sim.client.energy(sim.now);
    assert_eq!(e[1].promotions, 1);
    assert!(e[1].fixed_j > 12.0, "{:?}", e[1]);
}

/// Bad WiFi behind a long round trip (0.8 Mbit/s, RTT 300 ms, a weak signal): Eq. 4.1
/// asks for more than 3 s there, so τ is the thesis' 3 s.
#[test]
fn a_long_wifi_round_trip_waits_for_the_ceiling() {
    let mut woke = None;
    download((150, 100).into(), (35, 1125).into(), 8_000_000, 5, |sim, ms| {
        if woke.is_none() && sim.server.path_tier(1) == Tier::Primary {
            woke = Some(ms);
        }
    });
    let woke = woke.expect("cellular woke");
    assert!((3000..3800).contains(&woke), "woke at {woke} ms");
}
