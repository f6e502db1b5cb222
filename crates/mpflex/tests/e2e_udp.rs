//! UDP through mpflex: a SOCKS5 UDP client written here (RFC 1928 §7) sends datagrams
//! through `mpflex client` and `mpflex server` over two namespace paths to a UDP echo
//! server and a small DNS responder in the server's namespace. IPv4 and name
//! destinations are echoed; a destination the server's ACL denies is refused (counted on
//! both sides, logged by the server) while other flows keep flowing; FRAG ≠ 0 and
//! malformed requests are dropped and counted; the association ends with its control
//! connection.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use support::dns::start_dns;
use support::lan::{lan_behind_client, Divert, Tool};
use support::*;

const ECHO_PORT: u16 = 5300;
/// The server's ACL denies this port.
const DENIED_PORT: u16 = 5399;

/// A UDP echo server on every address of the server's namespace (IPv4 and IPv6, one
/// dual-stack socket), for the test's lifetime.
fn start_echo(ns: &str, port: u16) {
    let sock = in_ns(ns, move || UdpSocket::bind(("::", port)).expect("echo socket"));
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let _ = sock.send_to(&buf[..n], from);
        }
    });
}

fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// A SOCKS5 UDP association: its control connection and the client's UDP socket.
struct Assoc {
    ctrl: TcpStream,
    sock: UdpSocket,
    relay: SocketAddr,
}

impl Assoc {
    /// Must run inside the client's namespace.
    fn open(proxy: SocketAddr) -> Assoc {
        let mut ctrl = TcpStream::connect(proxy).unwrap();
        ctrl.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ctrl.write_all(&[5, 1, 0]).unwrap();
        let mut r = [0u8; 2];
        ctrl.read_exact(&mut r).unwrap();
        assert_eq!(r, [5, 0]);
        // UDP ASSOCIATE, the client's address not known yet (all zero).
        ctrl.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        let mut rep = [0u8; 10];
        ctrl.read_exact(&mut rep).unwrap();
        assert_eq!(rep[..4], [5, 0, 0, 1], "UDP ASSOCIATE reply");
        let relay = SocketAddr::from(([rep[4], rep[5], rep[6], rep[7]], u16::from_be_bytes([rep[8], rep[9]])));
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        Assoc { ctrl, sock, relay }
    }

    fn header(dst: &Dst, frag: u8) -> Vec<u8> {
        let mut v = vec![0, 0, frag];
        match dst {
            Dst::Ip(a) => match a {
                SocketAddr::V4(a) => {
                    v.push(1);
                    v.extend_from_slice(&a.ip().octets());
                }
                SocketAddr::V6(a) => {
                    v.push(4);
                    v.extend_from_slice(&a.ip().octets());
                }
            },
            Dst::Name(n, _) => {
                v.push(3);
                v.push(n.len() as u8);
                v.extend_from_slice(n.as_bytes());
            }
        }
        let port = match dst {
            Dst::Ip(a) => a.port(),
            Dst::Name(_, p) => *p,
        };
        v.extend_from_slice(&port.to_be_bytes());
        v
    }

    fn send(&self, dst: &Dst, data: &[u8]) {
        self.send_frag(dst, data, 0)
    }

    fn send_frag(&self, dst: &Dst, data: &[u8], frag: u8) {
        let mut d = Self::header(dst, frag);
        d.extend_from_slice(data);
        self.sock.send_to(&d, self.relay).unwrap();
    }

    /// The next datagram's header (as sent) and payload, or `None` after the timeout.
    fn recv(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let mut buf = [0u8; 65536];
        let n = self.sock.recv(&mut buf).ok()?;
        let hlen = match buf[3] {
            1 => 4 + 4 + 2,
            4 => 4 + 16 + 2,
            3 => 4 + 1 + buf[4] as usize + 2,
            t => panic!("reply with address type {t}"),
        };
        Some((buf[..hlen].to_vec(), buf[hlen..n].to_vec()))
    }

    /// Sends `data` to `dst` until the answer comes back (UDP may lose the first while
    /// the flow opens); returns the answer's header and payload.
    fn exchange(&self, dst: &Dst, data: &[u8], within: Duration) -> Option<(Vec<u8>, Vec<u8>)> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            self.send(dst, data);
            if let Some(r) = self.recv() {
                return Some(r);
            }
        }
        None
    }
}

#[derive(Clone)]
enum Dst {
    Ip(SocketAddr),
    Name(String, u16),
}

/// The datagram counts of the only session: the client's status shows its session at the
/// top, the server's in a list.
fn datagrams(status: &serde_json::Value) -> serde_json::Value {
    match &status["datagrams"] {
        serde_json::Value::Null => status["sessions"][0]["datagrams"].clone(),
        d => d.clone(),
    }
}

#[test]
fn socks5_udp_over_two_paths() {
    if !ready("socks5_udp_over_two_paths") {
        return;
    }
    let lab = Lab::new(Options {
        server_acl: format!("deny_ports = [{DENIED_PORT}]\n"),
        ..Default::default()
    });
    start_echo(&lab.topo.server_ns, ECHO_PORT);
    start_echo(&lab.topo.server_ns, DENIED_PORT);
    start_dns(&lab.topo.server_ns);
    let echo_v4 = Dst::Ip(format!("{}:{ECHO_PORT}", lab.server_addr(0)).parse().unwrap());
    let echo_v6 = Dst::Ip(format!("[::1]:{ECHO_PORT}").parse().unwrap());
    let echo_name = Dst::Name("localhost".into(), ECHO_PORT);
    let denied = Dst::Ip(format!("{}:{DENIED_PORT}", lab.server_addr(1)).parse().unwrap());
    let dns = Dst::Ip(format!("{}:53", lab.server_addr(1)).parse().unwrap());
    let proxy = lab.socks();

    let (v4, v6, name, denied_got, dns_ok, many) = in_ns(&lab.topo.client_ns.clone(), move || {
        let a = Assoc::open(proxy);
        let v4 = a.exchange(&echo_v4, b"hello over v4", Duration::from_secs(5));
        let v6 = a.exchange(&echo_v6, b"hello over v6", Duration::from_secs(5));
        let name = a.exchange(&echo_name, b"hello by name", Duration::from_secs(5));
        // The denied destination: the server refuses the flow; nothing comes back, and
        // the echo flow still works after it.
        let denied_got = a.exchange(&denied, b"not allowed", Duration::from_secs(2));
        // Voice-like: 200 datagrams of 160 bytes, 10 ms apart, each echoed.
        let mut many = 0;
        for i in 0..200u32 {
            let mut d = vec![0u8; 160];
            d[..4].copy_from_slice(&i.to_be_bytes());
            a.send(&echo_v4, &d);
            std::thread::sleep(Duration::from_millis(10));
        }
        a.sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut seen = std::collections::HashSet::new();
        while let Some((_, d)) = a.recv() {
            if d.len() == 160 {
                seen.insert(u32::from_be_bytes([d[0], d[1], d[2], d[3]]));
            }
        }
        many += seen.len();
        // DNS: 1,000 queries, each answered (issue 24's floor).
        a.sock.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let mut dns_ok = 0;
        for id in 0..1000u16 {
            let q = dns_query(id, "example.test");
            if let Some((_, r)) = a.exchange(&dns, &q, Duration::from_secs(3)) {
                if r.len() == q.len() + 16 && r[..2] == id.to_be_bytes() && r[2] & 0x80 != 0 {
                    dns_ok += 1;
                }
            }
        }
        // FRAG ≠ 0 is dropped; a garbage header too.
        a.send_frag(&echo_v4, b"fragment", 1);
        a.sock.send_to(&[0, 0, 0, 9, 1, 2], a.relay).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        drop(a.ctrl);
        (v4, v6, name, denied_got, dns_ok, many)
    });

    let (h, d) = v4.expect("IPv4 echo through mpflex");
    assert_eq!(d, b"hello over v4");
    assert_eq!(h[3], 1, "the reply names the IPv4 source");
    let (h, d) = v6.expect("IPv6 echo through mpflex");
    assert_eq!(d, b"hello over v6");
    assert_eq!(h[3], 4);
    let (h, d) = name.expect("echo by name through mpflex");
    assert_eq!(d, b"hello by name");
    assert_eq!(&h[3..5 + "localhost".len()], b"\x03\x09localhost");
    assert!(denied_got.is_none(), "the denied destination answered: {denied_got:?}");
    assert!(many >= 198, "voice-like echoes: {many} of 200");
    assert_eq!(dns_ok, 1000, "DNS queries answered");

    let deadline = Instant::now() + Duration::from_secs(5);
    let (c, s) = loop {
        let c = datagrams(&lab.client_status());
        let s = datagrams(&lab.server_status());
        if c["dropped"]["frag"] == 1 && c["flows"] == 0 || Instant::now() > deadline {
            break (c, s);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(c["dropped"]["frag"], 1, "client: {c}");
    assert_eq!(c["dropped"]["malformed"], 1, "client: {c}");
    assert_eq!(c["flows"], 0, "the association's flows close with it: {c}");
    assert!(c["flows_refused"].as_u64() >= Some(1), "client: {c}");
    assert!(s["flows_refused"].as_u64() >= Some(1), "server: {s}");
    assert!(c["copies"].as_u64() > Some(100), "realtime datagrams were copied: {c}");
    assert!(
        s["duplicates"].as_u64() > Some(100),
        "the server dropped second copies: {s}"
    );
    assert!(s["received"].as_u64() >= Some(300), "server: {s}");
    // Realtime copies went on both paths.
    let per_path: Vec<u64> = lab.client_status()["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["datagrams_sent"].as_u64().unwrap_or(0))
        .collect();
    assert!(per_path.iter().all(|&n| n > 100), "datagrams per path: {per_path:?}");
    let log = lab.log("server");
    assert!(log.contains("datagram flow refused"), "server log names the refusal");
    assert!(log.contains(&DENIED_PORT.to_string()));
    // /metrics has the same counts.
    let metrics = in_ns(&lab.topo.client_ns.clone(), || {
        let mut s = TcpStream::connect(("127.0.0.1", CLIENT_STATUS)).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    });
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("mpflex_session_datagrams_dropped_total")
                && l.contains("reason=\"frag\"")
                && l.ends_with(" 1")),
        "{metrics}"
    );
}

/// A flow idle for the server's timeout is closed on both sides, and the next datagram
/// opens a new one. Then one application floods a 10 Mbit/s pair of paths with 1200-byte
/// datagrams while another runs a voice-like echo: the flood's excess is dropped and
/// counted, the voice datagrams keep flowing, and nothing crashes.
#[test]
fn udp_idle_timeout_and_a_flood_beside_a_call() {
    if !ready("udp_idle_timeout_and_a_flood_beside_a_call") {
        return;
    }
    let lab = Lab::new(Options {
        rate_mbit: 10,
        server_toml: "[udp]\nidle_timeout_secs = 2\ndns_idle_timeout_secs = 1\n".into(),
        ..Default::default()
    });
    start_echo(&lab.topo.server_ns, ECHO_PORT);
    let echo = Dst::Ip(format!("{}:{ECHO_PORT}", lab.server_addr(0)).parse().unwrap());
    let proxy = lab.socks();
    let cns = lab.topo.client_ns.clone();

    let a = in_ns(&cns, move || Assoc::open(proxy));
    let first = a.exchange(&echo, b"before idle", Duration::from_secs(5));
    assert_eq!(first.map(|(_, d)| d), Some(b"before idle".to_vec()));
    assert_eq!(datagrams(&lab.server_status())["flows"], 1);
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(
        datagrams(&lab.server_status())["flows"],
        0,
        "idle flow closed on the server"
    );
    assert_eq!(datagrams(&lab.client_status())["flows"], 0, "and on the client");
    let again = a.exchange(&echo, b"after idle", Duration::from_secs(5));
    assert_eq!(again.map(|(_, d)| d), Some(b"after idle".to_vec()));

    let flood_dst = echo.clone();
    let flood = spawn_in_ns(&cns, move || {
        let f = Assoc::open(proxy);
        let d = vec![0xeeu8; 1200];
        let until = Instant::now() + Duration::from_secs(4);
        let mut n = 0u64;
        while Instant::now() < until {
            f.send(&flood_dst, &d);
            n += 1;
        }
        n
    });
    std::thread::sleep(Duration::from_millis(500));
    let mut voice = 0;
    for i in 0..100u32 {
        let mut d = vec![0u8; 160];
        d[..4].copy_from_slice(&i.to_be_bytes());
        a.send(&echo, &d);
        std::thread::sleep(Duration::from_millis(20));
    }
    a.sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut seen = std::collections::HashSet::new();
    while let Some((_, d)) = a.recv() {
        if d.len() == 160 {
            seen.insert(u32::from_be_bytes([d[0], d[1], d[2], d[3]]));
        }
    }
    voice += seen.len();
    let flooded = flood.join().unwrap();
    let c = datagrams(&lab.client_status());
    let s = datagrams(&lab.server_status());
    let dropped = |v: &serde_json::Value| {
        v["dropped"]["queue_full"].as_u64().unwrap_or(0) + v["dropped"]["expired"].as_u64().unwrap_or(0)
    };
    eprintln!("flood: {flooded} datagrams sent; voice echoes {voice} of 100; client {c}; server {s}");
    assert!(flooded > 20_000, "the flood sent {flooded} datagrams");
    assert!(dropped(&c) > 1000, "the flood's excess is dropped and counted: {c}");
    assert!(
        voice >= 90,
        "voice echoes beside the flood: {voice} of 100; client {c}, server {s}"
    );
    assert!(lab.client.is_some() && lab.paths_up() == 2, "both paths still up");
    drop(a);
}

/// `iperf3 -u` from the LAN host through the transparent ingresses (its control
/// connection by REDIRECT, its datagrams by TPROXY) over two 10 Mbit/s paths, offered
/// 16 Mbit/s (0.8 of their sum): most of it arrives and little is lost. Issue 24's floor
/// (at the paths' whole sum: 85 % delivered, 2 % loss) is the lab's to measure; this
/// test holds the line at 0.8 of the sum.
#[test]
fn iperf3_udp_through_tproxy() {
    let test = "iperf3_udp_through_tproxy";
    if !ready(test) || !mpflex_netns::require_tools(test, &["nft", "iperf3"]) {
        return;
    }
    let lab = Lab::new(Options {
        rate_mbit: 10,
        transparent_listen: "[::]:1081",
        client_root: "transparent_udp_listen = \"[::]:1082\"\n".into(),
        routed: true,
        ..Default::default()
    });
    let lan = lan_behind_client(&lab, &[Divert::UdpTproxy, Divert::TcpRedirect], Tool::Nft);
    let l = lan.0.clone();
    let remote = lab.service_addr(false);
    let mut server = lab.spawn_in(
        &lab.topo.server_ns,
        &["iperf3", "-s", "-1", "-B", &remote, "-p", "5299"],
        "iperf3-server.log",
    );
    std::thread::sleep(Duration::from_millis(500));
    let out = std::process::Command::new("ip")
        .args([
            "netns", "exec", &l, "iperf3", "-c", &remote, "-p", "5299", "-u", "-b", "16M", "-l", "1200", "-t", "6",
            "--json",
        ])
        .output()
        .expect("iperf3");
    let _ = server.kill();
    let _ = server.wait();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let sum = &v["end"]["sum"];
    let mbit = sum["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6;
    let lost = sum["lost_percent"].as_f64().unwrap_or(100.0);
    let s = datagrams(&lab.server_status());
    eprintln!(
        "iperf3 -u at 16 Mbit/s over 2 × 10 Mbit/s through TPROXY: {mbit:.2} Mbit/s, {lost:.2} % lost; server {s}"
    );
    assert!(
        s["received"].as_u64() > Some(5000),
        "the datagrams went through mpflex: {s}"
    );
    assert!(lost <= 5.0, "lost {lost} %: {sum}");
}

/// The router case: a host on a LAN behind the client's namespace sends UDP to the echo
/// server's IPv4 and IPv6 addresses; nftables `tproxy` rules divert it to one dual-stack
/// `transparent_udp_listen`, mpflex carries it, and each answer comes back from the
/// address the host sent to. The client's namespace does not forward packets, so nothing
/// reaches the echo server around mpflex.
#[test]
fn tproxy_udp_from_a_lan_host() {
    let test = "tproxy_udp_from_a_lan_host";
    if !ready(test) || !mpflex_netns::require_tools(test, &["nft"]) {
        return;
    }
    let lab = Lab::new(Options {
        client_root: "transparent_udp_listen = \"[::]:1082\"\n".into(),
        routed: true,
        ..Default::default()
    });
    start_echo(&lab.topo.server_ns, ECHO_PORT);
    let lan = lan_behind_client(&lab, &[Divert::UdpTproxy], Tool::Nft);
    let l = lan.0.clone();

    let v4: SocketAddr = format!("{}:{ECHO_PORT}", lab.service_addr(false)).parse().unwrap();
    let v6: SocketAddr = format!("[{}]:{ECHO_PORT}", lab.service_addr(true)).parse().unwrap();
    for echo in [v4, v6] {
        let got = in_ns(&l, move || {
            let s = UdpSocket::bind(if echo.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            let mut buf = [0u8; 2048];
            let mut answers = Vec::new();
            for i in 0..20u8 {
                s.send_to(&[b'q', i], echo).unwrap();
                if let Ok((n, from)) = s.recv_from(&mut buf) {
                    answers.push((buf[..n].to_vec(), from));
                }
            }
            answers
        });
        assert!(
            got.len() >= 18,
            "answers from {echo} through TPROXY: {} of 20",
            got.len()
        );
        assert!(
            got.iter().all(|(_, from)| *from == echo),
            "answers come from the address sent to: {got:?}"
        );
    }
    let s = datagrams(&lab.server_status());
    assert!(
        s["received"].as_u64() >= Some(36),
        "the datagrams went through mpflex: {s}"
    );
    assert_eq!(s["flows_opened"], 2, "one flow per host and destination: {s}");
}

/// Ten thousand concurrent flows (one association, one destination port each): the
/// server holds them in at most 200 MB (issue 24's floor), and they expire on time.
#[test]
fn ten_thousand_flows_fit_and_expire() {
    if !ready("ten_thousand_flows_fit_and_expire") {
        return;
    }
    let idle = 8;
    // One client key holds the 10,000 flows: more than its default share of the lab
    // server's descriptors (half of three quarters of this process's RLIMIT_NOFILE).
    let lab = Lab::new(Options {
        server_toml: format!("[udp]\nidle_timeout_secs = {idle}\n[limits]\nmax_descriptors_per_client = 11000\n"),
        ..Default::default()
    });
    let server = lab.server_addr(0);
    let proxy = lab.socks();
    let n = 10_000u16;
    let a = in_ns(&lab.topo.client_ns.clone(), move || {
        let a = Assoc::open(proxy);
        let mut last = Instant::now();
        for i in 0..n {
            let dst = Dst::Ip(format!("{server}:{}", 20_000 + i).parse().unwrap());
            last = Instant::now();
            a.send(&dst, &i.to_be_bytes());
            // Paced within the relay socket's receive buffer (a few hundred small
            // datagrams) and the session's datagram queue (1024), with room for a busy
            // machine that runs the relay late: 4 s for all, within the idle timeout.
            if i % 25 == 24 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        (a, last)
    });
    // The last flow opened on the server after its datagram was sent, so none of them
    // may expire before `idle` after that send (a clock read after the sending thread
    // was joined could be later than the last flow's opening, and flows then seemed to
    // expire early).
    let (a, opened) = a;
    // None: no answer from the status (a busy server may not answer in time), which says
    // nothing of the flows; only a real count ends a wait.
    let flows = |v: &serde_json::Value| datagrams(v)["flows"].as_u64();
    let mut peak = 0;
    while Instant::now() < opened + Duration::from_secs(idle - 1) {
        peak = peak.max(flows(&lab.server_status()).unwrap_or(0));
        if peak >= n as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let rss = Lab::rss_kib(lab.server.as_ref().unwrap());
    let s = datagrams(&lab.server_status());
    eprintln!("server: {peak} flows at once, {rss} KiB resident; {s}");
    assert_eq!(peak, n as u64, "flows open at once on the server: {s}");
    assert!(rss <= 200 * 1024, "server resident {rss} KiB with {peak} flows");
    let deadline = opened + Duration::from_secs(idle + 4);
    while Instant::now() < deadline && flows(&lab.server_status()) != Some(0) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let expired_after = opened.elapsed();
    assert_eq!(flows(&lab.server_status()), Some(0), "idle flows expire");
    assert!(expired_after >= Duration::from_secs(idle), "not before their timeout");
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && flows(&lab.client_status()) != Some(0) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(flows(&lab.client_status()), Some(0), "the client hears of each expiry");
    drop(a);
}
