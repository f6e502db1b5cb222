//! `tuning.fresh_ssthresh` on a real kernel connection: a CUBIC connection keeps the
//! slow-start threshold a burst through a small droptail buffer left; a keepalive lost
//! after an idle spell leaves one below the initial window, and once the connection has
//! idled past its RTO the reset gives it a new connection's ("none"), leaves it on CUBIC,
//! and the connection goes on carrying data. Needs root (a network namespace with `tbf`
//! on lo, iptables to drop the keepalive).

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mpflex::tcpinfo::{tcp_info, SsthreshReset, INFINITE_SSTHRESH};
use mpflex_netns::Netns;
use support::sh;

/// `tcpi_ca_state` after a retransmission timeout (linux/tcp.h `TCP_CA_Loss`).
const TCP_CA_LOSS: u8 = 4;

/// A namespace of its own with a 100 Mbit/s, 100 KB droptail `tbf` on its loopback (MTU
/// 1500), removed on drop.
struct LossyNs(Netns);

impl LossyNs {
    fn new() -> LossyNs {
        let ns = Netns::create("lossy").unwrap_or_else(|e| panic!("{e:#}"));
        sh(&["ip", "-n", ns.name(), "link", "set", "lo", "mtu", "1500", "up"]);
        sh(&[
            "tc",
            "-n",
            ns.name(),
            "qdisc",
            "add",
            "dev",
            "lo",
            "root",
            "tbf",
            "rate",
            "100mbit",
            "burst",
            "15k",
            "limit",
            "100k",
        ]);
        LossyNs(ns)
    }

    /// `iptables <op> <rule>` in the namespace.
    fn iptables(&self, op: &str, rule: &[&str]) {
        let mut a = vec!["iptables", "-w", op];
        a.extend_from_slice(rule);
        self.0.exec(&a).unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// Moves the calling thread into the namespace.
    fn enter(&self) {
        self.0.enter();
    }
}

fn cc_of(s: &TcpStream) -> Vec<u8> {
    let mut cc = socket2::SockRef::from(s).tcp_congestion().unwrap();
    cc.retain(|&b| b != 0);
    cc
}

/// Writes `n` bytes and waits until the peer has acknowledged all of them.
fn send_and_drain(c: &mut TcpStream, n: usize) {
    let buf = vec![7u8; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(buf.len());
        c.write_all(&buf[..k]).unwrap();
        left -= k;
    }
    let t0 = Instant::now();
    while tcp_info(c).unwrap().unacked > 0 {
        assert!(t0.elapsed() < Duration::from_secs(30), "transfer never drained");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_lost_keepalives_threshold_is_dropped_and_a_bursts_is_kept() {
    let test = "a_lost_keepalives_threshold_is_dropped_and_a_bursts_is_kept";
    if !mpflex_netns::require_root(test) || !mpflex_netns::require_tools(test, &["ip", "tc", "iptables"]) {
        return;
    }
    let ns = LossyNs::new();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            ns.enter();
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            socket2::SockRef::from(&c).set_tcp_congestion(b"cubic").unwrap();
            let (mut s, _) = l.accept().unwrap();
            let reader = std::thread::spawn(move || {
                let mut got = 0usize;
                let mut b = vec![0u8; 256 * 1024];
                loop {
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => return got,
                        Ok(k) => got += k,
                    }
                }
            });

            // A fresh connection has no threshold; 4 MB through a 100 KB buffer set one (by a
            // loss, or by HyStart leaving slow start as the queue builds).
            assert_eq!(tcp_info(&c).unwrap().snd_ssthresh, INFINITE_SSTHRESH);
            send_and_drain(&mut c, 4 << 20);
            let lossy = tcp_info(&c).unwrap();
            assert!(
                lossy.snd_ssthresh < INFINITE_SSTHRESH,
                "no threshold after 4 MB through 100 KB: {lossy:?}"
            );

            let mut reset = SsthreshReset::new(&c, true);
            let mut off = SsthreshReset::new(&c, false);
            let idle_past_rto = |c: &TcpStream| {
                let rto = tcp_info(c).unwrap().rto as u64;
                std::thread::sleep(Duration::from_micros(rto) + Duration::from_millis(150));
                tcp_info(c).unwrap()
            };
            // A real burst's threshold is the path's memory: kept.
            let idle = idle_past_rto(&c);
            assert!(
                idle.snd_ssthresh >= 10,
                "burst left a threshold below the initial window: {idle:?}"
            );
            assert!(!SsthreshReset::due(&idle));
            assert!(!reset.before_write(&c, &idle));
            assert_eq!(tcp_info(&c).unwrap().snd_ssthresh, idle.snd_ssthresh);

            // A "keepalive" after a longer idle spell (the kernel halves the window once per
            // RTO idle, down to 10) that is lost: its retransmission timeout leaves
            // 0.7 x 10 = 7.
            std::thread::sleep(Duration::from_micros(4 * idle.rto as u64));
            let port = l.local_addr().unwrap().port().to_string();
            // Dropped on arrival, so that the sender sees an ordinary loss (a local drop in
            // OUTPUT would fail the send itself).
            let rule = ["INPUT", "-p", "tcp", "--dport", &port, "-j", "DROP"];
            ns.iptables("-A", &rule);
            c.write_all(&[1u8; 100]).unwrap();
            let t0 = Instant::now();
            // Until the retransmission timer has fired (a tail-loss probe comes first and
            // does not touch the threshold).
            while tcp_info(&c).unwrap().ca_state != TCP_CA_LOSS {
                assert!(t0.elapsed() < Duration::from_secs(10), "no timeout while dropped");
                std::thread::sleep(Duration::from_millis(10));
            }
            ns.iptables("-D", &rule);
            send_and_drain(&mut c, 0);
            let idle = idle_past_rto(&c);
            assert!(
                idle.snd_ssthresh < 10,
                "a lost keepalive left {}: {idle:?}",
                idle.snd_ssthresh
            );
            assert!(SsthreshReset::due(&idle), "not due: {idle:?}");
            // Switched off: nothing happens.
            assert!(!off.before_write(&c, &idle));
            assert_eq!(tcp_info(&c).unwrap().snd_ssthresh, idle.snd_ssthresh);

            assert!(reset.before_write(&c, &idle));
            assert_eq!(reset.count, 1);
            let after = tcp_info(&c).unwrap();
            assert_eq!(
                after.snd_ssthresh, INFINITE_SSTHRESH,
                "threshold left at {}",
                after.snd_ssthresh
            );
            assert_eq!(cc_of(&c), b"cubic", "left on another congestion control");
            // With the threshold gone nothing is due, and the connection still carries data.
            assert!(!SsthreshReset::due(&tcp_info(&c).unwrap()));
            assert!(!reset.before_write(&c, &tcp_info(&c).unwrap()));
            send_and_drain(&mut c, 1 << 20);
            drop(c);
            assert_eq!(reader.join().unwrap(), (4 << 20) + 100 + (1 << 20));
        });
    });
}

#[test]
fn bbr_connections_are_left_alone() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _s = l.accept().unwrap();
    if socket2::SockRef::from(&c).set_tcp_congestion(b"bbr").is_err() {
        mpflex_netns::skip("bbr_connections_are_left_alone", "the kernel offers no bbr (tcp_bbr)");
        return;
    }
    let mut r = SsthreshReset::new(&c, true);
    // Even a state that would be due for CUBIC is not touched on BBR.
    let mut info = tcp_info(&c).unwrap();
    info.snd_ssthresh = 7;
    info.last_data_sent = 10_000;
    info.unacked = 0;
    assert!(SsthreshReset::due(&info));
    assert!(!r.before_write(&c, &info));
    assert_eq!(cc_of(&c), b"bbr");
}
