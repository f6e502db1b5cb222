//! `tun.routes`: the host routing that sends traffic into the TUN while path sockets (marked)
//! keep leaving on their links, and that leaves the host exactly as it found it — on a
//! clean removal, and after a crash (the next start clears what the dead one left).
//!
//! Each test builds a namespace with a link (one end of a veth pair with an address, a default
//! route and a connected network, both families) and a TUN device, and asks the kernel
//! (`ip route get`) where packets go.

use mpflex::tun::routes::{self, Capture, Plan, MARK};
use mpflex_netns::{in_ns, Netns};
use mpflex_netns::{require_root, require_tools};

const TEST: &str = "e2e_tun_routes";

/// A namespace with `wan0` (a veth end: 10.9.0.2/24, default via 10.9.0.1; fd09::2/64, default via
/// fd09::1) and `mpt0`, a TUN device (10.200.0.1/24, fd00:200::1/64).
///
/// The tests take turns: the path mark is the process's ([`routes::path_mark`]).
fn host() -> Option<(Netns, std::sync::MutexGuard<'static, ()>)> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if !require_root(TEST) || !require_tools(TEST, &["ip"]) {
        return None;
    }
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let ns = Netns::create("tunroutes").expect("namespace");
    for cmd in [
        "ip link add wan0 type veth peer name wan0p",
        "ip link set wan0p up",
        "ip addr add 10.9.0.2/24 dev wan0",
        "ip -6 addr add fd09::2/64 dev wan0 nodad",
        "ip link set wan0 up",
        "ip route add default via 10.9.0.1",
        "ip -6 route add default via fd09::1",
        "ip tuntap add dev mpt0 mode tun",
        "ip addr add 10.200.0.1/24 dev mpt0",
        "ip -6 addr add fd00:200::1/64 dev mpt0 nodad",
        "ip link set mpt0 up",
        "ip link add lan0 type veth peer name lan0p",
        "ip link set lan0p up",
        "ip link set lan0 up",
    ] {
        let args: Vec<&str> = cmd.split(' ').collect();
        ns.exec(&args).unwrap_or_else(|e| panic!("{cmd}: {e:#}"));
    }
    settle(&ns);
    Some((ns, turn))
}

/// Waits until the kernel has finished with the links' IPv6 link-local addresses: each veth
/// end that is up gets one after duplicate address detection (about a second), and its
/// local route with it. A snapshot taken before would lack routes that one taken after
/// has, though the code under test added nothing.
fn settle(ns: &Netns) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let addrs = ns.exec(&["ip", "-6", "-j", "addr", "show"]).expect("ip addr");
        let links: serde_json::Value = serde_json::from_str(&addrs).expect("ip -j");
        let settled = ["wan0", "wan0p", "lan0", "lan0p"].iter().all(|dev| {
            links.as_array().into_iter().flatten().any(|l| {
                let v6 = l["addr_info"].as_array().cloned().unwrap_or_default();
                l["ifname"] == *dev
                    && v6.iter().any(|a| a["scope"] == "link")
                    && v6.iter().all(|a| a["tentative"] != true)
            })
        });
        if settled {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "IPv6 link-local addresses not settled after 10 s:\n{addrs}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Everything the host routes by: rules and every table, both families.
fn snapshot(ns: &Netns) -> String {
    let mut out = String::new();
    for cmd in [
        "ip -4 rule show",
        "ip -6 rule show",
        "ip -4 route show table all",
        "ip -6 route show table all",
    ] {
        let args: Vec<&str> = cmd.split(' ').collect();
        out += &format!("## {cmd}\n{}\n", ns.exec(&args).expect(cmd));
    }
    out
}

/// The device the kernel sends `dst` out of (with `mark`, as a path socket).
fn dev_for(ns: &Netns, dst: &str, mark: Option<u32>) -> String {
    dev_in(ns.name(), dst, mark)
}

fn dev_in(ns: &str, dst: &str, mark: Option<u32>) -> String {
    let m = mark.map(|m| m.to_string());
    let mut args = vec!["ip", "route", "get", dst];
    if let Some(m) = &m {
        args.extend(["mark", m.as_str()]);
    }
    let out = mpflex_netns::exec(ns, &args).unwrap_or_else(|e| panic!("ip route get {dst}: {e:#}"));
    let mut words = out.split_whitespace();
    while let Some(w) = words.next() {
        if w == "dev" {
            return words.next().unwrap_or_default().to_string();
        }
    }
    panic!("no device in {out:?}")
}

/// Runs `f` (async) on a runtime inside `ns`.
fn within<R: Send + 'static, F: std::future::Future<Output = R> + 'static>(
    ns: &Netns,
    f: impl FnOnce() -> F + Send + 'static,
) -> R {
    in_ns(ns.name(), move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f())
    })
}

fn plan(capture: Capture, lan: &[&str]) -> Plan {
    Plan {
        dev: "mpt0".into(),
        capture,
        lan: lan.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn default_sends_the_hosts_traffic_into_the_tun_and_path_sockets_onto_their_links() {
    let Some((ns, _turn)) = host() else { return };
    let before = snapshot(&ns);
    let name = ns.name().to_string();
    within(&ns, move || async move {
        let installed = routes::install(&plan(Capture::Default, &[])).await.expect("install");
        assert_eq!(
            routes::path_mark(),
            Some(MARK),
            "path sockets are marked while routes are installed"
        );
        for dst in ["1.1.1.1", "2001:db8::1"] {
            assert_eq!(
                dev_in(&name, dst, None),
                "mpt0",
                "{dst}: the host's traffic goes into the TUN"
            );
            assert_eq!(
                dev_in(&name, dst, Some(MARK)),
                "wan0",
                "{dst}: a path socket keeps its link"
            );
        }
        for dst in ["10.9.0.7", "fd09::7"] {
            assert_eq!(
                dev_in(&name, dst, None),
                "wan0",
                "{dst}: the connected network stays direct"
            );
        }
        installed.remove().await.expect("remove");
        assert_eq!(
            routes::path_mark(),
            None,
            "path sockets opened after removal are not marked"
        );
    });
    assert_eq!(
        snapshot(&ns),
        before,
        "removal leaves the host's routing exactly as it was"
    );
}

#[test]
fn prefixes_send_only_those_destinations_into_the_tun() {
    let Some((ns, _turn)) = host() else { return };
    let before = snapshot(&ns);
    let ns_name = ns.name().to_string();
    within(&ns, move || async move {
        let p = Capture::Prefixes(vec![
            "203.0.113.0/24".parse().unwrap(),
            "2001:db8:5::/48".parse().unwrap(),
        ]);
        let installed = routes::install(&plan(p, &[])).await.expect("install");
        let get = |dst: &str| dev_in(&ns_name, dst, None);
        assert_eq!(get("203.0.113.9"), "mpt0");
        assert_eq!(get("2001:db8:5::9"), "mpt0");
        assert_eq!(
            get("198.51.100.9"),
            "wan0",
            "a destination not listed keeps the host's route"
        );
        assert_eq!(get("2001:db8:6::9"), "wan0");
        installed.remove().await.expect("remove");
    });
    assert_eq!(snapshot(&ns), before);
}

#[test]
fn a_crash_leaves_the_host_routed_and_the_next_start_clears_what_it_left() {
    let Some((ns, _turn)) = host() else { return };
    let before = snapshot(&ns);
    // A run that dies without removing anything (kill -9).
    within(&ns, || async {
        let installed = routes::install(&plan(Capture::Default, &[])).await.expect("install");
        std::mem::forget(installed);
    });
    assert_ne!(snapshot(&ns), before, "the crashed run's rules are still there");
    // Its TUN device went with it: the host still has a route everywhere.
    ns.exec(&["ip", "link", "del", "mpt0"]).expect("del tun");
    assert_eq!(dev_for(&ns, "1.1.1.1", None), "wan0", "no host left without a route");
    assert_eq!(dev_for(&ns, "2001:db8::1", None), "wan0");
    // The restart makes its device again and installs over the leftovers.
    ns.exec(&["ip", "tuntap", "add", "dev", "mpt0", "mode", "tun"])
        .expect("tun");
    ns.exec(&["ip", "link", "set", "mpt0", "up"]).expect("up");
    within(&ns, || async {
        let installed = routes::install(&plan(Capture::Default, &[]))
            .await
            .expect("install over leftovers");
        installed.remove().await.expect("remove");
    });
    // The restarted device is a new one (its own kernel routes come back in another
    // order): compare everything else.
    let others = |s: &str| s.lines().filter(|l| !l.contains("mpt0")).collect::<Vec<_>>().join("\n");
    assert_eq!(
        others(&snapshot(&ns)),
        others(&before),
        "after the restart's clean exit the host is as it was"
    );
    // And a start that finds leftovers while mpflex is not started again: `clear` alone.
    within(&ns, || async {
        std::mem::forget(routes::install(&plan(Capture::Default, &[])).await.expect("install"));
        assert!(
            routes::clear().await.expect("clear") >= 4,
            "two rules and a route per family"
        );
    });
    assert_eq!(others(&snapshot(&ns)), others(&before));
}

#[test]
fn lan_forwarding_is_switched_on_and_restored() {
    let Some((ns, _turn)) = host() else { return };
    let read = |key: &str| ns.exec(&["sysctl", "-n", key]).expect("sysctl").trim().to_string();
    assert_eq!(read("net.ipv4.ip_forward"), "0");
    within(&ns, || async {
        let installed = routes::install(&plan(Capture::Default, &["lan0"]))
            .await
            .expect("install");
        let fwd = std::fs::read_to_string("/proc/sys/net/ipv4/conf/lan0/forwarding").unwrap();
        assert_eq!(fwd.trim(), "1", "the LAN's traffic is forwarded into the TUN");
        installed.remove().await.expect("remove");
    });
    assert_eq!(read("net.ipv4.ip_forward"), "0", "restored on removal");
    assert_eq!(read("net.ipv4.conf.lan0.forwarding"), "0");
    // A LAN device that does not exist is a clear error and leaves nothing behind.
    let before = snapshot(&ns);
    let err = within(&ns, || async {
        routes::install(&plan(Capture::Default, &["nosuch0"]))
            .await
            .err()
            .map(|e| format!("{e:#}"))
    })
    .expect("an unknown LAN device is refused");
    assert!(err.contains("nosuch0"), "{err}");
    assert_eq!(snapshot(&ns), before, "a failed install takes back what it added");
}
