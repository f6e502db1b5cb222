//! More than two links, for real: `five-router`'s five emulated links (one replaying a
//! cellular trace) get kernel MPTCP ready for a subflow on each, and a kernel MPTCP
//! connection opens one on every link and carries its bytes intact. Needs root, `ss` and
//! the shared traces; skipped (with a message) otherwise, a failure under CI=true.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mpflex_lab::emulator::{enter_ns, Emulator};
use mpflex_lab::netns::{require_root, require_tools, run, skip, Topology};
use mpflex_lab::profile::Profile;
use mpflex_lab::workload::{bind, IPPROTO_MPTCP};
use socket2::{Domain, Protocol, Socket, Type};

const PORT: u16 = 7190;
const SIZE: usize = 1 << 20;

/// The server's established connections on `PORT`, by their local address: a kernel
/// MPTCP connection shows each subflow as one.
fn subflow_addrs(topo: &Topology) -> Vec<String> {
    let out = run(&[
        "ip",
        "netns",
        "exec",
        &topo.server_ns,
        "ss",
        "-Htn",
        "state",
        "established",
        "sport",
        "=",
        ":7190",
    ])
    .unwrap();
    let mut addrs: Vec<String> = out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter_map(|a| a.rsplit_once(':').map(|(ip, _)| ip.to_string()))
        .collect();
    addrs.sort();
    addrs.dedup();
    addrs
}

#[test]
fn kernel_mptcp_opens_a_subflow_on_each_of_five_links() {
    let test = "kernel_mptcp_opens_a_subflow_on_each_of_five_links";
    if !require_root(test) || !require_tools(test, &["ss", "ip"]) {
        return;
    }
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    if !traces.is_dir() {
        skip(test, &format!("{} is missing", traces.display()));
        return;
    }
    let prefix = traces.join("ATT-LTE-driving-2016");
    let profile = Profile::resolve(&format!("five-router:{}", prefix.display())).unwrap();
    let topo = Topology::create(profile.paths.len(), 900).unwrap();
    let limits = run(&["ip", "-n", &topo.client_ns, "mptcp", "limits", "show"]).unwrap();
    assert!(
        limits.contains("add_addr_accepted 5") && limits.contains("subflows 5"),
        "{limits}"
    );
    let endpoints = run(&["ip", "-n", &topo.server_ns, "mptcp", "endpoint", "show"]).unwrap();
    for i in 1..5 {
        assert!(
            endpoints.contains(&format!("{} ", topo.server_addr(i))) && endpoints.matches("signal").count() == 4,
            "{endpoints}"
        );
    }
    let _emu = Emulator::start(&topo, &profile, 7).unwrap();

    // The server listens on every address, as the lab's workload server does: a join
    // arrives at the address the server announced for its link, not the first one.
    let listen: SocketAddr = format!("0.0.0.0:{PORT}").parse().unwrap();
    let first: SocketAddr = format!("{}:{PORT}", topo.server_addr(0)).parse().unwrap();
    let sns = topo.server_ns.clone();
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        enter_ns(&sns).unwrap();
        let l = bind(listen, true, None).unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got
    });
    ready_rx.recv().unwrap();
    let cns = topo.client_ns.clone();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let body: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    let sent = body.clone();
    let client = std::thread::spawn(move || {
        enter_ns(&cns).unwrap();
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::from(IPPROTO_MPTCP))).unwrap();
        s.connect(&first.into()).unwrap();
        let mut s: TcpStream = s.into();
        s.write_all(&sent).unwrap();
        // Held open until the subflows have been counted.
        let _ = done_rx.recv_timeout(Duration::from_secs(30));
    });
    // The joins cross each link's delay, the traced one through its outages: wait for all.
    let start = Instant::now();
    let mut seen = subflow_addrs(&topo);
    while seen.len() < 5 && start.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
        seen = subflow_addrs(&topo);
    }
    eprintln!("subflows {seen:?} after {:?}", start.elapsed());
    done_tx.send(()).unwrap();
    client.join().unwrap();
    let got = server.join().unwrap();
    let want: Vec<String> = (0..5).map(|i| topo.server_addr(i)).collect();
    assert_eq!(seen, want, "subflows after {:?}", start.elapsed());
    assert!(got == body, "{} of {SIZE} bytes, or corrupted", got.len());
}
