//! The server's `[acl]` against destinations that reach the server host itself or its
//! cloud's metadata service: unspecified addresses (0.0.0.0, ::, mapped), the server's own
//! addresses, loopback, link-local and 169.254.169.254, each refused for streams and for
//! datagram flows, with the default `[acl]` and with `allow_private = true`; an own
//! address listed in `allow_own` is reached. Every refused destination would answer: the
//! lab's origin listens on every address of the server's namespace.

mod support;
use std::io::{Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use support::*;

/// Own addresses on the server's loopback, in a range that is not private: one listed in
/// `allow_own`, one not.
const LISTED: &str = "198.51.100.7";
const UNLISTED: &str = "198.51.100.8";
const METADATA: &str = "169.254.169.254";

/// Sends an HTTP request over a SOCKS5 stream to `dst` and returns what came back (the
/// SOCKS reply arrives at once; a refusal is a reset after it).
fn http_via_socks(proxy: SocketAddr, dst: &str, port: u16) -> Vec<u8> {
    let Ok(mut s) = socks_connect(proxy, dst, port) else {
        return Vec::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(b"GET /bytes/10 HTTP/1.0\r\n\r\n");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

/// Opens a SOCKS5 UDP association and sends one datagram to each of `dsts` (IPv4 or
/// IPv6 addresses); the association is kept until the caller drops it.
fn datagrams_to(proxy: SocketAddr, dsts: &[SocketAddr]) -> std::net::TcpStream {
    let mut ctrl = std::net::TcpStream::connect(proxy).unwrap();
    ctrl.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    ctrl.write_all(&[5, 1, 0]).unwrap();
    let mut r = [0u8; 2];
    ctrl.read_exact(&mut r).unwrap();
    ctrl.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
    let mut rep = [0u8; 10];
    ctrl.read_exact(&mut rep).unwrap();
    let relay = SocketAddr::from(([rep[4], rep[5], rep[6], rep[7]], u16::from_be_bytes([rep[8], rep[9]])));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in dsts {
        let mut v = vec![0, 0, 0];
        match d {
            SocketAddr::V4(a) => {
                v.push(1);
                v.extend_from_slice(&a.ip().octets());
            }
            SocketAddr::V6(a) => {
                v.push(4);
                v.extend_from_slice(&a.ip().octets());
            }
        }
        v.extend_from_slice(&d.port().to_be_bytes());
        v.extend_from_slice(b"ping");
        sock.send_to(&v, relay).unwrap();
    }
    ctrl
}

fn flows_refused(lab: &Lab) -> u64 {
    lab.server_status()["sessions"][0]["datagrams"]["flows_refused"]
        .as_u64()
        .unwrap_or(0)
}

/// One `[acl]`: every destination in `refused` gets nothing, with the server's reason
/// (a piece of its log line) for each; the listed own address answers.
fn refusals(acl: &str, private_reason: &str) {
    let lab = Lab::new(Options {
        acl_table: Some(format!("{acl}allow_own = [\"{LISTED}\"]\n")),
        ..Default::default()
    });
    let sns = lab.topo.server_ns.clone();
    for a in [LISTED, UNLISTED, METADATA] {
        sh(&["ip", "-n", &sns, "addr", "add", &format!("{a}/32"), "dev", "lo"]);
    }
    let own = lab.server_addr(0);
    let port = ORIGIN_PORT;
    let refused: Vec<(String, String)> = [
        ("0.0.0.0", "0.0.0.0 is unspecified"),
        ("::", ":: is unspecified"),
        ("::ffff:0.0.0.0", "0.0.0.0 is unspecified"),
        ("127.0.0.1", "127.0.0.1 is loopback"),
        ("::ffff:127.0.0.1", "127.0.0.1 is loopback"),
        ("::1", "::1 is loopback"),
        (METADATA, "169.254.169.254 is link-local"),
        ("fe80::1", "fe80::1 is link-local"),
        (UNLISTED, "198.51.100.8 is an address of the server itself"),
        (&own, &format!("{own} {private_reason}")),
    ]
    .iter()
    .map(|(a, why)| (a.to_string(), why.to_string()))
    .collect();
    // The own address listed is reached (so the others would be, but for the ACL).
    let proxy = lab.socks();
    let cns = lab.topo.client_ns.clone();
    let got = in_ns(&cns, move || http_via_socks(proxy, LISTED, port));
    assert!(
        String::from_utf8_lossy(&got).contains("200"),
        "the own address in allow_own did not answer: {:?}",
        String::from_utf8_lossy(&got)
    );
    for (dst, why) in &refused {
        let d = dst.clone();
        let got = in_ns(&cns, move || http_via_socks(proxy, &d, port));
        assert!(
            got.is_empty(),
            "{dst}: {} bytes came back: {:?}",
            got.len(),
            String::from_utf8_lossy(&got)
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !lab.log("server").contains(why.as_str()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            lab.log("server").contains(why.as_str()),
            "{dst}: no {why:?} in the server's log"
        );
    }
    // Datagram flows meet the same rules.
    let dsts: Vec<SocketAddr> = ["0.0.0.0:5353", "[::]:5353", "127.0.0.1:5353", "169.254.169.254:5353"]
        .iter()
        .map(|s| s.parse().unwrap())
        .chain([
            format!("{UNLISTED}:5353").parse().unwrap(),
            format!("{own}:5353").parse().unwrap(),
        ])
        .collect();
    let n = dsts.len() as u64;
    let _assoc = in_ns(&cns, move || datagrams_to(proxy, &dsts));
    let deadline = Instant::now() + Duration::from_secs(5);
    while flows_refused(&lab) < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    // Each destination refused (a flow opened again by a later datagram is refused
    // again), none carried a datagram back.
    let st = lab.server_status();
    assert!(flows_refused(&lab) >= n, "server: {st}");
    assert_eq!(st["sessions"][0]["datagrams"]["sent"], 0, "server: {st}");
    assert!(lab.log("server").contains("datagram flow refused: 0.0.0.0:5353"));
}

#[test]
fn the_default_acl_refuses_the_server_host_and_its_neighbours() {
    if !ready("the_default_acl_refuses_the_server_host_and_its_neighbours") {
        return;
    }
    refusals("", "is a private or special-purpose address");
}

#[test]
fn allow_private_still_refuses_the_server_host_and_metadata() {
    if !ready("allow_private_still_refuses_the_server_host_and_metadata") {
        return;
    }
    refusals("allow_private = true\n", "is an address of the server itself");
}
