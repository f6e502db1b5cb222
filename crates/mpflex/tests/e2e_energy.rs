//! The energy-aware mode (`energy_mode = "aware"`, docs/energy.md) opens the cellular path
//! only when it is needed, as eMPTCP opens its LTE subflow (Lim, seed 003 §4.1.5): not at
//! the start while WiFi carries, not for a small download, as soon as the mode wakes it for
//! a long one, and at once when WiFi stops carrying. A real client and server over two
//! paths, downloads with curl through SOCKS5, each checked by sha256.
//!
//! Settings: the lab's `wifi-bad` links (WiFi 0.8 Mbit/s, LTE 9 Mbit/s, emulated in user
//! space), where the thesis' model says both links together cost less per byte than WiFi
//! alone, so a download that lasts wakes cellular; the mode's κ and τ are the shipped
//! ones (τ from Eq. 4.1 at WiFi's 15 ms round trip: about 0.15 s, so cellular wakes with
//! the predictor's second sample, 0.5 s into a download).

mod support;
use std::time::{Duration, Instant};

use support::*;

const WIFI: usize = 0;
const CELLULAR: usize = 1;

fn path(lab: &Lab, p: usize) -> serde_json::Value {
    lab.client_status()["paths"][p].clone()
}

/// Waits up to `within` for `cond` on the client's status; returns how long it took.
fn wait_for(lab: &Lab, within: Duration, what: &str, cond: impl Fn(&serde_json::Value) -> bool) -> Duration {
    let t0 = Instant::now();
    loop {
        let s = lab.client_status();
        if cond(&s) {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < within, "{what} not within {within:?}: {s:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn lab() -> Lab {
    Lab::new(Options {
        links: Some(mpflex_lab::profile::wifi_bad()),
        client_root: "energy_mode = \"aware\"\n".into(),
        client_paths: Some(Box::new(|lab: &Lab| {
            [(WIFI, "wifi"), (CELLULAR, "cellular")]
                .iter()
                .map(|&(p, kind)| {
                    format!(
                        "[[paths]]\nname = \"{kind}\"\nserver = \"{}:7000\"\nsource = \"{}\"\nkind = \"{kind}\"\n",
                        lab.server_addr(p),
                        lab.client_addr(p)
                    )
                })
                .collect()
        })),
        paths_up: 1,
        ..Default::default()
    })
}

#[test]
fn cellular_is_dialled_only_when_the_mode_wakes_it_or_wifi_stops() {
    if !ready("e2e_energy") {
        return;
    }
    let mut lab = lab();
    // At the start WiFi joins and cellular is held back, undialled (the start's grace is
    // 2 s; well past it, nothing changed).
    wait_for(&lab, Duration::from_secs(10), "cellular held back", |s| {
        s["paths"][CELLULAR]["held"] == true
    });
    std::thread::sleep(Duration::from_secs(3));
    let c = path(&lab, CELLULAR);
    assert_eq!(c["up"], false, "{c:#}");
    assert_eq!(c["state"], "held back", "{c:#}");
    assert_eq!(path(&lab, WIFI)["up"], true);

    // A small download goes over WiFi alone: it ends (30 KB at 0.8 Mbit/s: 0.3 s) before
    // the predictor has the two samples a decision needs.
    let (got, want) = lab.download(30_000);
    assert_eq!(got, want);
    let c = path(&lab, CELLULAR);
    assert_eq!(
        (c["up"].clone(), c["held"].clone()),
        (false.into(), true.into()),
        "{c:#}"
    );
    assert_eq!(c["energy_j"].as_f64().unwrap_or(0.0), 0.0, "{c:#}");

    // A long download: the mode wakes cellular after τ and two samples of WiFi (0.5 s)
    // and the path is dialled then,
    // joins and carries. (After a pause longer than a burst's gap, 1 s: the downloads
    // would otherwise be one burst, and τ would count from the first.)
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    let (got, (up_after, carried)) = std::thread::scope(|s| {
        let dl = s.spawn(|| lab.download(1_500_000));
        let up_after = wait_for(&lab, Duration::from_secs(20), "cellular woken and up", |s| {
            s["paths"][CELLULAR]["up"] == true
        });
        let (got, want) = dl.join().unwrap();
        assert_eq!(got, want);
        let carried = path(&lab, CELLULAR)["bytes_received"].as_u64().unwrap_or(0);
        (got, (up_after, carried))
    });
    eprintln!(
        "long download: cellular up {up_after:?} after its start, {carried} bytes over it, all in {:?}",
        t0.elapsed()
    );
    assert_eq!(got.len(), 64);
    assert!(
        up_after >= Duration::from_millis(400),
        "cellular came up before WiFi was sampled: {up_after:?}"
    );
    assert!(
        up_after < Duration::from_secs(3),
        "cellular came up only after the ceiling of τ, 3 s: {up_after:?}"
    );
    assert!(carried > 50_000, "cellular was dialled but carried {carried} bytes");
    let wakes = lab.client_status()["energy"]["aware"]["wakes"].as_u64().unwrap_or(0);
    assert!(wakes >= 1, "no wake counted");

    // A fresh client; WiFi's link goes dark while the session idles. The next download
    // finds WiFi silent: suspect, it stops carrying, cellular is dialled at once and
    // carries the download.
    assert!(lab.stop_client("TERM"));
    lab.start_client("client2.log", 1);
    wait_for(&lab, Duration::from_secs(10), "cellular held back", |s| {
        s["paths"][CELLULAR]["held"] == true
    });
    lab.link_down(WIFI);
    let t0 = Instant::now();
    let (got, want) = lab.download(200_000);
    let took = t0.elapsed();
    assert_eq!(got, want);
    let c = path(&lab, CELLULAR);
    eprintln!("WiFi dark: 200 KB over cellular in {took:?}");
    assert_eq!(c["up"], true, "{c:#}");
    assert!(c["bytes_received"].as_u64().unwrap_or(0) > 200_000, "{c:#}");
    // A dark path's suspicion, a dial and a join: well within the path timeout's
    // patience, not a stall.
    assert!(took < Duration::from_secs(5), "{took:?}");
    // WiFi back: it carries again, and cellular, connected, is held back from new data
    // (an energy standby) without being taken down.
    lab.link_up(WIFI);
    wait_for(
        &lab,
        Duration::from_secs(15),
        "WiFi up again and cellular in energy standby",
        |s| s["paths"][WIFI]["up"] == true && s["paths"][CELLULAR]["energy_standby"] == true,
    );
    let (got, want) = lab.download(200_000);
    assert_eq!(got, want);
}
