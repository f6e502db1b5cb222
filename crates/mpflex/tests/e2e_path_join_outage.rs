//! A path dialled while its link is dark joins within a second of the link's return,
//! whatever the outage's length: the client paces a waiting path's SYNs at most half a
//! second apart for the first minute of the wait (crates/mpflex/src/client/syn_pace.rs)
//! instead of leaving the join to the kernel's backed-off retransmissions. It says the
//! path waits for its link (not that a firewall is to blame), shows it so in the status,
//! and the session carries its data on the other paths meanwhile (docs/paths.md).

mod support;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mpflex_lab::link::Rate;
use mpflex_lab::profile::{five_router, three_wan, Profile};
use mpflex_lab::trace::Trace;
use support::*;

/// The floor: a path dialled into an outage joins within this long of the link's return.
const FLOOR: Duration = Duration::from_secs(1);
/// Beside the floor, for a loaded machine: the client's, the emulator's and this test's
/// threads run late, up to this much in all.
const MARGIN: Duration = Duration::from_millis(200);

/// The trace the cellular link replays: T-Mobile LTE, 16.7/13.3 Mbit/s on average, with no
/// gap of 300 ms or more in its first 19 s, so the trace itself does not darken the link
/// when the outage ends.
const TRACE: &str = "TMobile-LTE-short";

/// Drops (or, with `-D`, stops dropping) every packet path `p` brings to the server, in
/// the server's namespace: the link is dark, no reset or unreachable reaches the client.
fn dark(lab: &Lab, p: usize, op: &str) {
    let dev = lab.topo.server_dev(p);
    sh(&[
        "ip",
        "netns",
        "exec",
        &lab.topo.server_ns,
        "iptables",
        op,
        "INPUT",
        "-i",
        &dev,
        "-j",
        "DROP",
    ]);
}

/// The client's view of path `p`.
fn path(lab: &Lab, p: usize) -> serde_json::Value {
    lab.client_status()["paths"][p].clone()
}

/// The client's log line that path `p` joined.
fn up_line(p: usize) -> String {
    format!("path up path=p{} ", p + 1)
}

/// How long after `back` the client logged path `p` up, by the log line's own time
/// (waiting for it up to a few seconds past the floor); `None` if it did not join.
fn join_lag(lab: &Lab, p: usize, back: SystemTime) -> Option<Duration> {
    let needle = up_line(p);
    let deadline = Instant::now() + FLOOR + MARGIN + Duration::from_secs(3);
    loop {
        let log = lab.log("client");
        if let Some(line) = log.lines().find(|l| l.contains(&needle)) {
            let at = log_time(line);
            return Some(
                at.duration_since(back)
                    .unwrap_or_else(|_| panic!("path {p} joined before its link came back: {line}")),
            );
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The time a log line of the daemons starts with (`2026-11-29T13:52:31.483869Z`, UTC).
fn log_time(line: &str) -> SystemTime {
    let ts = line.split_whitespace().next().expect("a timestamp");
    let (date, time) = ts.trim_end_matches('Z').split_once('T').expect("date T time");
    let num = |s: &str| -> i64 { s.parse().unwrap_or_else(|_| panic!("{ts}: not a time")) };
    let ymd: Vec<i64> = date.split('-').map(num).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let hms: Vec<i64> = hms.split(':').map(num).collect();
    let nanos = num(&format!("{frac:0<9}")[..9]);
    // Days since 1970-01-01 of a proleptic Gregorian date (eras of 400 years from
    // 0000-03-01, each 146097 days; 719468 days from then to the epoch).
    let (y, m, d) = (ymd[0] - (ymd[1] <= 2) as i64, ymd[1], ymd[2]);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2];
    UNIX_EPOCH + Duration::new(secs as u64, nanos as u32)
}

/// `TcpExt: TCPSynRetrans` in namespace `ns`: SYNs the kernel retransmitted there.
fn syn_retransmissions(ns: &str) -> u64 {
    // The thread's own namespace: /proc/net is the process's.
    let text = in_ns(ns, || std::fs::read_to_string("/proc/thread-self/net/netstat")).expect("netstat");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("TcpExt:")).collect();
    let (names, values) = (lines[0].split_whitespace(), lines[1].split_whitespace());
    names
        .zip(values)
        .find(|(n, _)| *n == "TCPSynRetrans")
        .and_then(|(_, v)| v.parse().ok())
        .expect("TCPSynRetrans")
}

#[test]
fn log_times_read_as_the_instants_they_name() {
    let at = |s: &str| {
        log_time(&format!("{s}  INFO mpflex: x"))
            .duration_since(UNIX_EPOCH)
            .unwrap()
    };
    assert_eq!(at("1970-01-01T00:00:01.5Z"), Duration::from_millis(1500));
    assert_eq!(at("2000-03-01T00:00:00Z"), Duration::from_secs(951_868_800));
    assert_eq!(
        at("2026-11-29T13:52:31.483869Z"),
        Duration::new(1_795_960_351, 483_869_000)
    );
}

#[test]
fn a_path_dialled_into_an_outage_joins_when_the_link_returns() {
    let test = "a_path_dialled_into_an_outage_joins_when_the_link_returns";
    if !ready(test) || !mpflex_netns::require_tools(test, &["iptables"]) {
        return;
    }
    // Off the kernel's schedule too: its SYNs leave at 0, 1, 2, 3, 4, 5, 7, 11 s.
    let outage = Duration::from_millis(5500);
    let mut lab = Lab::new(Options {
        defer_client: true,
        ..Options::default()
    });
    dark(&lab, 1, "-I");
    let started = Instant::now();
    lab.start_client("client.log", 1);

    // Meanwhile the other path carries the session.
    let (got, want) = lab.download(2 << 20);
    assert_eq!(got, want, "a download while path 1's link is dark");
    assert!(
        lab.client_path_bytes()[0] > 2 << 20,
        "path 0 did not carry the download"
    );
    let p1 = path(&lab, 1);
    assert_eq!(p1["up"], false, "path 1 is up through a dark link: {p1:#}");
    // Past the SYN's first retransmission, the status says what the path does.
    while started.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let p1 = path(&lab, 1);
    assert_eq!(p1["state"], "waiting for link", "{p1:#}");
    // A loaded machine may take longer over the checks than the outage lasts: the link then
    // stays dark until half a second past the next whole second, off the kernel's
    // schedule still.
    let checked = started.elapsed();
    let outage = if checked < outage {
        outage
    } else {
        Duration::from_secs(checked.as_secs() + 1) + Duration::from_millis(500)
    };

    std::thread::sleep(outage.saturating_sub(started.elapsed()));
    assert!(
        !lab.log("client").contains(&up_line(1)),
        "path 1 joined through a dark link"
    );
    dark(&lab, 1, "-D");
    let back = SystemTime::now();
    let lag = join_lag(&lab, 1, back);
    eprintln!("link back after {outage:?}, path 1 up {lag:?} later");
    assert!(
        lag.is_some_and(|l| l <= FLOOR + MARGIN),
        "path 1 joined {lag:?} after its link came back, not within {FLOOR:?} (+ {MARGIN:?}); logs in {}",
        lab.dir.display()
    );
    lab.wait_paths_up(2, Duration::from_secs(2));

    // Both paths carry again.
    let (got, want) = lab.download(2 << 20);
    assert_eq!(got, want, "a download after path 1 joined");
    let log = lab.log("client");
    assert!(log.contains("waiting for the link"), "the wait is not said:\n{log}");
    assert_eq!(
        log.matches("waiting for the link").count(),
        1,
        "the wait is said more than once:\n{log}"
    );
    assert!(!log.contains("firewall"), "a dark link is blamed on a firewall:\n{log}");
    assert!(
        log.contains("the link is back"),
        "the join after the wait is not said:\n{log}"
    );
}

/// `<traces>/TRACE`, the prefix of its `.down` and `.up`, if this checkout sits beside the
/// shared traces (else the test is skipped, or fails under CI).
fn trace_prefix(test: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    let prefix = dir.join(TRACE);
    if Path::new(&format!("{}.down", prefix.display())).exists() {
        Some(prefix)
    } else {
        mpflex_netns::skip(test, &format!("{} is missing", dir.display()));
        None
    }
}

/// Links of 2, 3 and 5 paths, each with one link replaying the trace at `prefix` (its
/// index beside it): `trace:` (seed-default's WiFi, and LTE replaying the trace),
/// `three-wan` with its LTE link replaying the trace, and `five-router:` (its `lte-trace`).
fn profiles(prefix: &Path) -> Vec<(Profile, usize)> {
    let p = prefix.display().to_string();
    let two = Profile::resolve(&format!("trace:{p}")).unwrap();
    let mut three = three_wan();
    three.name = format!("three-wan, lte replaying {TRACE}");
    three.paths[2].down.rate = Rate::Trace(Trace::load(Path::new(&format!("{p}.down"))).unwrap());
    three.paths[2].up.rate = Rate::Trace(Trace::load(Path::new(&format!("{p}.up"))).unwrap());
    let five = five_router(&p).unwrap();
    vec![(two, 1), (three, 2), (five, 4)]
}

/// The MAC address of `dev` in namespace `ns`.
fn mac(ns: &str, dev: &str) -> String {
    let out = sh(&["ip", "-n", ns, "-o", "link", "show", "dev", dev]);
    let mut words = out.split_whitespace();
    words.find(|w| *w == "link/ether");
    words.next().expect("link/ether").to_string()
}

/// Path `p`'s two ends know each other's MAC address for good: the emulated link carries
/// Ethernet, but a cellular one (wwan, rmnet, ppp) resolves no neighbours, so its outage
/// holds up only the SYNs, not an ARP exchange too.
fn no_arp(lab: &Lab, p: usize) {
    let t = &lab.topo;
    let ends = [
        (
            &t.client_ns,
            t.client_dev(p),
            t.server_addr(p),
            mac(&t.server_ns, &t.server_dev(p)),
        ),
        (
            &t.server_ns,
            t.server_dev(p),
            t.client_addr(p),
            mac(&t.client_ns, &t.client_dev(p)),
        ),
    ];
    for (ns, dev, peer, lladdr) in ends {
        sh(&[
            "ip",
            "-n",
            ns,
            "neigh",
            "replace",
            &peer,
            "lladdr",
            &lladdr,
            "dev",
            &dev,
            "nud",
            "permanent",
        ]);
    }
}

/// One outage run and what it measured.
struct Run {
    profile: String,
    paths: usize,
    /// From the link's return to the path's join.
    lag: Option<Duration>,
    /// SYNs the kernel retransmitted over the outage (the client's only unanswered ones).
    syn_retransmissions: u64,
    /// The client's log lines about the path.
    log: String,
    /// How long the link was dark.
    outage: Duration,
}

/// On `profile`'s links, link `dark` goes dark, the client starts (its other paths join),
/// and the link comes back `outage` after it went, or with `after_syn` right after the
/// first SYN it lost from then on: the worst moment, the next SYN as far off as it gets.
/// With `arp`, its ends resolve each other's address as on Ethernet or WiFi; else they
/// need not ([`no_arp`]).
fn outage_run(profile: Profile, dark: usize, outage: Duration, after_syn: bool, arp: bool) -> Run {
    let n = profile.paths.len();
    let name = profile.name.clone();
    let mut lab = Lab::new(Options {
        defer_client: true,
        links: Some(profile),
        ..Options::default()
    });
    if !arp {
        no_arp(&lab, dark);
    }
    lab.set_emulated_link(dark, false);
    let down = Instant::now();
    let syns_before = syn_retransmissions(&lab.topo.client_ns);
    lab.start_client("client.log", n - 1);
    assert!(
        down.elapsed() + Duration::from_secs(1) < outage,
        "{name}: the other paths took {:?} to join",
        down.elapsed()
    );
    std::thread::sleep((down + outage).saturating_duration_since(Instant::now()));
    if after_syn {
        // The client sends nothing else over the dark link (no ARP, no IPv6 address on it).
        let lost = |lab: &Lab| lab.link_stats()[dark][1].dropped_down;
        let before = lost(&lab);
        while lost(&lab) == before {
            assert!(
                down.elapsed() < outage + Duration::from_secs(2),
                "{name}: no SYN for 2 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let syns = syn_retransmissions(&lab.topo.client_ns) - syns_before;
    assert!(
        !lab.log("client").contains(&up_line(dark)),
        "{name}: path {dark} joined through a dark link"
    );
    lab.set_emulated_link(dark, true);
    let back = SystemTime::now();
    let dark_for = down.elapsed();
    let lag = join_lag(&lab, dark, back);
    if lag.is_some() {
        lab.wait_paths_up(n, Duration::from_secs(2));
    }
    Run {
        profile: name,
        paths: n,
        lag,
        syn_retransmissions: syns,
        log: lab
            .log("client")
            .lines()
            .filter(|l| {
                let name = format!("p{}", dark + 1);
                l.split_whitespace()
                    .any(|w| w.strip_prefix("path=").is_some_and(|v| v.trim_matches('"') == name))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        outage: dark_for,
    }
}

/// The floor for 2, 3 and 5 paths at once (the three labs side by side), an outage of
/// `outage` on the trace-driven link from before the client's dial (with `after_syn`, up
/// to the next SYN lost after it, [`outage_run`]).
fn trace_driven_outage(test: &str, outage: Duration, after_syn: bool) {
    if !ready(test) {
        return;
    }
    let Some(prefix) = trace_prefix(test) else {
        return;
    };
    let runs: Vec<_> = profiles(&prefix)
        .into_iter()
        .map(|(profile, dark)| std::thread::spawn(move || outage_run(profile, dark, outage, after_syn, false)))
        .collect();
    let runs: Vec<Run> = runs
        .into_iter()
        .map(|r| r.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
        .collect();
    for r in &runs {
        eprintln!(
            "{} paths ({}), outage {:.2?}: joined {:?} after the link's return; {} SYN retransmissions over the outage",
            r.paths, r.profile, r.outage, r.lag, r.syn_retransmissions
        );
    }
    for r in &runs {
        assert!(
            r.lag.is_some_and(|l| l <= FLOOR + MARGIN),
            "{} paths ({}): the path joined {:?} after its link came back, not within {FLOOR:?} (+ {MARGIN:?}); \
             the client's log of it:\n{}",
            r.paths,
            r.profile,
            r.lag,
            r.log
        );
        // What the wait cost: two SYNs a second from two sockets (syn_pace), the first of
        // each not a retransmission.
        let bound = 2 * outage.as_secs() + 2;
        assert!(
            r.syn_retransmissions <= bound,
            "{} paths: {} SYN retransmissions in {outage:?}, more than two a second",
            r.paths,
            r.syn_retransmissions
        );
    }
}

#[test]
fn a_path_dialled_into_a_6s_outage_of_a_traced_link_joins_within_a_second_of_its_return() {
    trace_driven_outage(
        "a_path_dialled_into_a_6s_outage_of_a_traced_link_joins_within_a_second_of_its_return",
        Duration::from_secs(6),
        false,
    );
}

/// Off the kernel's schedule (alone, it would retransmit at 7 s and next at 11 s), and
/// back at the worst moment: right after a lost SYN.
#[test]
fn a_path_dialled_into_an_8s_outage_of_a_traced_link_joins_within_a_second_of_its_return() {
    trace_driven_outage(
        "a_path_dialled_into_an_8s_outage_of_a_traced_link_joins_within_a_second_of_its_return",
        Duration::from_secs(8),
        true,
    );
}

/// On a link with neighbours (WiFi here) the outage also holds up ARP: the SYNs wait for
/// the next hop's answer, and the kernel asks a second apart (`retrans_time_ms`), giving
/// up after three tries (the attempt then fails with EHOSTUNREACH and the paced wait starts
/// it again at once). So the join may come one ARP interval later than the floor.
#[test]
fn a_path_dialled_into_an_outage_of_a_link_with_arp_joins_within_two_seconds_of_its_return() {
    let test = "a_path_dialled_into_an_outage_of_a_link_with_arp_joins_within_two_seconds_of_its_return";
    if !ready(test) {
        return;
    }
    let arp_interval = Duration::from_secs(1);
    let outage = Duration::from_millis(6500);
    let r = outage_run(mpflex_lab::profile::seed_default(70), 0, outage, false, true);
    eprintln!(
        "WiFi with ARP, outage {outage:?}: joined {:?} after the link's return; {} SYN retransmissions over the outage",
        r.lag, r.syn_retransmissions
    );
    assert!(
        r.lag.is_some_and(|l| l <= FLOOR + arp_interval + MARGIN),
        "the path joined {:?} after its link came back, not within {:?} (+ {MARGIN:?}); the client's log of it:\n{}",
        r.lag,
        FLOOR + arp_interval,
        r.log
    );
    assert!(
        !r.log.contains("cannot join"),
        "the neighbour's silence failed the dial:\n{}",
        r.log
    );
}
