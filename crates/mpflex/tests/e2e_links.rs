//! Paths follow the links (`device = "c*"`, rtnetlink): an interface plugged in during a
//! download becomes a path and carries bytes within a second, over IPv4 and over IPv6;
//! removed again, the download still arrives byte-exact. A link that loses its carrier is
//! a dead path at once, not after a timeout. Entries that match nothing are shown in the
//! status, not fatal.

mod support;
use std::time::{Duration, Instant};

use support::*;

/// The client's paths: one per interface `c*`, towards the server's service address.
fn paths_over_c(ipv6: bool) -> Box<PathsToml> {
    Box::new(move |lab: &Lab| {
        let addr = lab.service_addr(ipv6);
        let server = if ipv6 { format!("[{addr}]") } else { addr };
        format!("[[paths]]\nname = \"lab\"\nserver = \"{server}:{SERVER_PORT}\"\ndevice = \"c*\"\n")
    })
}

/// Polls the client's status until `f` holds of the path on `dev`, at most `within`;
/// returns how long it took.
fn wait_path(lab: &Lab, dev: &str, within: Duration, f: impl Fn(&serde_json::Value) -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if f(&lab.client_path_on(dev)) {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn hot_plug(ipv6: bool) {
    let lab = Lab::new(Options {
        scheduler: "roundrobin",
        rate_mbit: 40,
        routed: true,
        server_listen: if ipv6 { "[::]:7000" } else { "0.0.0.0:7000" },
        client_paths: Some(paths_over_c(ipv6)),
        ..Default::default()
    });
    let size: u64 = 40 << 20;
    std::thread::scope(|s| {
        let download = s.spawn(|| lab.download(size));
        std::thread::sleep(Duration::from_millis(800));
        lab.plug_path(2);
        let carried = wait_path(&lab, "c2", Duration::from_secs(3), |p| {
            p["up"] == true && p["bytes_received"].as_u64().unwrap_or(0) > 256 * 1024
        });
        let took = carried.unwrap_or_else(|| panic!("c2 never carried 256 KiB: {}", lab.client_path_on("c2")));
        eprintln!("c2 carried 256 KiB {took:?} after its address and route were up");
        assert!(took < Duration::from_secs(1), "c2 took {took:?} to carry data");
        std::thread::sleep(Duration::from_millis(300));
        let running = !download.is_finished();
        lab.unplug_path(2);
        let gone = wait_path(&lab, "c2", Duration::from_secs(2), |p| p["up"] == false);
        assert!(gone.is_some(), "c2 removed but its path is still up");
        assert_eq!(lab.client_path_on("c2")["state"], "waiting for device");
        let (got, want) = download.join().unwrap();
        assert!(
            running,
            "the download ended before c2 was removed: the test tested little"
        );
        assert_eq!(got, want, "download corrupted across the plug and unplug");
    });
    // c2 comes back under the same path.
    lab.plug_path(2);
    assert!(
        wait_path(&lab, "c2", Duration::from_secs(3), |p| p["up"] == true).is_some(),
        "c2 plugged in again did not come back"
    );
    let ids: Vec<u64> = lab.client_status()["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [0, 1, 2], "one path per interface, reused");
}

#[test]
fn a_plugged_interface_carries_within_a_second_and_its_removal_loses_nothing_ipv4() {
    if !ready("a_plugged_interface_carries_within_a_second_and_its_removal_loses_nothing_ipv4") {
        return;
    }
    hot_plug(false);
}

#[test]
fn a_plugged_interface_carries_within_a_second_and_its_removal_loses_nothing_ipv6() {
    if !ready("a_plugged_interface_carries_within_a_second_and_its_removal_loses_nothing_ipv6") {
        return;
    }
    hot_plug(true);
}

#[test]
fn carrier_loss_is_a_dead_path_at_once_and_unmatched_entries_wait_in_the_status() {
    if !ready("carrier_loss_is_a_dead_path_at_once_and_unmatched_entries_wait_in_the_status") {
        return;
    }
    let lab = Lab::new(Options {
        scheduler: "roundrobin",
        rate_mbit: 40,
        routed: true,
        client_paths: Some(Box::new(|lab: &Lab| {
            let server = format!("{}:{SERVER_PORT}", lab.service_addr(false));
            paths_over_c(false)(lab)
                + &format!(
                    "[[paths]]\nname = \"cell\"\nserver = \"{server}\"\ndevice = \"wwan9\"\npriority = \"backup\"\n\
                     [[paths]]\nname = \"tether\"\nserver = \"{server}\"\ndevice = \"usb*\"\n\
                     [[paths]]\nname = \"any\"\nserver = \"{server}\"\nauto = true\n"
                )
        })),
        ..Default::default()
    });
    // Nothing is fatal: a named interface that is missing waits, and so do a pattern and
    // `auto` that match nothing here (every interface is a veth).
    let s = lab.client_status();
    let cell = lab.client_path_on("wwan9");
    assert_eq!(
        (
            cell["state"].as_str(),
            cell["tier"].as_u64(),
            cell["tier_name"].as_str()
        ),
        (Some("waiting for device"), Some(2), Some("backup")),
        "{s}"
    );
    let waiting = s["waiting"].as_array().cloned().unwrap_or_default();
    let states: Vec<(&str, &str)> = waiting
        .iter()
        .map(|w| (w["name"].as_str().unwrap(), w["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [("tether", "no interface matches"), ("any", "no interface matches")],
        "{s}"
    );
    let log = lab.log("client");
    assert!(log.contains("auto = true): no usable interface now"), "{log}");

    let size: u64 = 24 << 20;
    std::thread::scope(|s| {
        let download = s.spawn(|| lab.download(size));
        std::thread::sleep(Duration::from_millis(700));
        let t0 = Instant::now();
        sh(&["ip", "-n", &lab.topo.client_ns, "link", "set", "dev", "c1", "down"]);
        let down = wait_path(&lab, "c1", Duration::from_secs(2), |p| p["up"] == false).map(|_| t0.elapsed());
        let took = down.unwrap_or_else(|| panic!("c1 lost its carrier but is still up: {}", lab.client_path_on("c1")));
        eprintln!("c1 declared down {took:?} after `ip link set dev c1 down`");
        assert!(
            took < Duration::from_millis(200),
            "c1 declared down only after {took:?}"
        );
        assert_eq!(lab.client_path_on("c1")["state"], "no carrier");
        // The server cannot see the client's link; the client tells it on the other path,
        // and it drops that path's connection rather than wait for its silence.
        let told = (0..100).find_map(|_| {
            let heard = lab.log("server").contains("the client's link of this path is gone");
            std::thread::sleep(Duration::from_millis(10));
            heard.then(|| t0.elapsed())
        });
        let told = told.unwrap_or_else(|| panic!("the server was not told: {}", lab.log("server")));
        eprintln!("the server dropped c1's connection {told:?} after the carrier loss");
        let (got, want) = download.join().unwrap();
        assert_eq!(got, want, "download corrupted across the carrier loss");
    });
    // The link returns: so does the path.
    sh(&["ip", "-n", &lab.topo.client_ns, "link", "set", "dev", "c1", "up"]);
    sh(&[
        "ip",
        "-n",
        &lab.topo.client_ns,
        "route",
        "replace",
        "default",
        "via",
        &lab.server_addr(1),
        "dev",
        "c1",
        "metric",
        "101",
    ]);
    assert!(
        wait_path(&lab, "c1", Duration::from_secs(3), |p| p["up"] == true).is_some(),
        "c1 back up but its path is not: {}",
        lab.client_path_on("c1")
    );
}
