//! `voip`: a voice call's packets both ways — 160-byte UDP datagrams at 50 per second
//! each way (G.711 at 20 ms framing) for `--secs` — while the runner blackholes the
//! first path at a third of the run and brings it back at two thirds. Records loss,
//! duplicates and one-way delay percentiles per direction (`up_…`, `down_…`) and both
//! directions pooled (`lost_pct`, `dup_pct`, `owd_p50_ms`, `owd_p99_ms`).
//!
//! The baselines are UDP straight over one path (`tcp-<path>` systems carry this
//! workload's datagrams over that path alone); kernel MPTCP carries no UDP and is left
//! out. mpflex carries the call through its SOCKS5 `UDP ASSOCIATE`.
//!
//! How a call runs: the client opens a control connection (TCP, the same way as every
//! workload, so through mpflex it is a stream) and registers a random call token for the
//! call's length; then both ends send. The server starts its downlink at the first
//! uplink datagram of the token, to the address that datagram came from (the client's
//! bound address, or mpflex's server-side flow socket), and follows that address if it
//! changes. At the end the client asks for the uplink's record over the control
//! connection. The namespaces share one clock, so send stamps give one-way delays.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{connect, fields, make_request, percentile, unix_ns, ClientRun, Fields, PathEvent, Spec, Via, OP_VOIP};
use crate::summary::{no_line, BarChart, Column, Summary, Table};

/// A datagram's size: one 20 ms G.711 frame.
pub const PACKET: usize = 160;
/// Datagrams per second each way.
pub const RATE: u64 = 50;
/// How long after the last send a late datagram still counts as received.
const GRACE: Duration = Duration::from_secs(2);
const MAGIC: &[u8; 4] = b"VoIP";
const UP: u8 = 0;
const DOWN: u8 = 1;

pub struct Voip;

impl Spec for Voip {
    fn name(&self) -> &'static str {
        "voip"
    }

    fn default_secs(&self) -> f64 {
        30.0
    }

    fn datagrams(&self) -> bool {
        true
    }

    fn path_event(&self, _variant: Option<&str>) -> Option<PathEvent> {
        Some(PathEvent::Blackhole)
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        self::run(run.server, &run.via, run.secs)
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |_| {
                format!(
                    ", {PACKET}-byte datagrams at {RATE}/s each way, the first path dark from 1/3 to 2/3 — median (p10–p90)"
                )
            },
            columns: vec![
                ("lost, %", Column::Dist(|r| r.field("lost_pct"), 2)),
                ("dup, %", Column::Dist(|r| r.field("dup_pct"), 1)),
                ("down owd p50, ms", Column::Dist(|r| r.field("down_owd_p50_ms"), 0)),
                ("down owd p99, ms", Column::Dist(|r| r.field("down_owd_p99_ms"), 0)),
                ("up owd p50, ms", Column::Dist(|r| r.field("up_owd_p50_ms"), 0)),
                ("up owd p99, ms", Column::Dist(|r| r.field("up_owd_p99_ms"), 0)),
                ("longest silence, ms", Column::Dist(|r| r.field("max_gap_ms"), 0)),
            ],
        };
        let chart = BarChart {
            suffix: "owd",
            title: "one-way delay of a call's datagrams",
            y_desc: "one-way delay, ms (median over runs, p10–p90)",
            bars: vec![
                (Some("down p50"), |r| r.field("down_owd_p50_ms")),
                (Some("down p99"), |r| r.field("down_owd_p99_ms")),
                (Some("up p50"), |r| r.field("up_owd_p50_ms")),
                (Some("up p99"), |r| r.field("up_owd_p99_ms")),
            ],
            line: no_line,
        };
        Summary::BySystem(table, chart)
    }
}

/// A datagram: magic, call token, direction, sequence number, send time (ns since the
/// Unix epoch), padding to [`PACKET`].
fn packet(token: u64, dir: u8, seq: u32, sent_ns: u64) -> [u8; PACKET] {
    let mut p = [0u8; PACKET];
    p[..4].copy_from_slice(MAGIC);
    p[4..12].copy_from_slice(&token.to_be_bytes());
    p[12] = dir;
    p[13..17].copy_from_slice(&seq.to_be_bytes());
    p[17..25].copy_from_slice(&sent_ns.to_be_bytes());
    p
}

/// (token, direction, sequence number, send time) of a datagram of ours.
fn parse(p: &[u8]) -> Option<(u64, u8, u32, u64)> {
    if p.len() != PACKET || &p[..4] != MAGIC {
        return None;
    }
    Some((
        u64::from_be_bytes(p[4..12].try_into().ok()?),
        p[12],
        u32::from_be_bytes(p[13..17].try_into().ok()?),
        u64::from_be_bytes(p[17..25].try_into().ok()?),
    ))
}

/// What one direction of a call received: first copies' one-way delays (ms) and arrival
/// times, and how many copies came twice or more.
#[derive(Debug, Default)]
struct Received {
    seen: Vec<bool>,
    owd_ms: Vec<f64>,
    arrivals: Vec<Instant>,
    dups: u64,
}

impl Received {
    fn new(expected: u32) -> Received {
        Received {
            seen: vec![false; expected as usize],
            ..Received::default()
        }
    }

    fn take(&mut self, seq: u32, sent_ns: u64) {
        let Some(s) = self.seen.get_mut(seq as usize) else {
            return; // not of this call's length: not ours to count
        };
        if std::mem::replace(s, true) {
            self.dups += 1;
            return;
        }
        self.owd_ms.push(unix_ns().saturating_sub(sent_ns) as f64 / 1e6);
        self.arrivals.push(Instant::now());
    }
}

/// The number of datagrams a call of `ms` sends each way.
fn expected(ms: u64) -> u32 {
    (ms * RATE / 1000) as u32
}

/// A call the server knows: its uplink record and where its downlink goes.
struct Call {
    ms: u64,
    up: Received,
    peer: Option<SocketAddr>,
}

type Calls = Arc<Mutex<HashMap<u64, Call>>>;

/// The server's calls, shared by the control connections and the UDP socket.
fn calls() -> &'static Calls {
    static CALLS: OnceLock<Calls> = OnceLock::new();
    CALLS.get_or_init(Calls::default)
}

/// The server's UDP side on `listen` (the workload server's own port): takes uplink
/// datagrams and starts each call's downlink at its first. Runs until killed.
pub fn serve_udp(listen: SocketAddr) -> Result<()> {
    let sock = Arc::new(UdpSocket::bind(listen).with_context(|| format!("UDP bind {listen}"))?);
    let mut buf = [0u8; 2048];
    loop {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Some((token, UP, seq, sent)) = parse(&buf[..n]) else {
            continue;
        };
        let start = {
            let mut calls = calls().lock().expect("calls");
            let Some(call) = calls.get_mut(&token) else { continue };
            call.up.take(seq, sent);
            let first = call.peer.is_none();
            call.peer = Some(from);
            first.then_some(call.ms)
        };
        if let Some(ms) = start {
            let sock = sock.clone();
            std::thread::spawn(move || {
                send_call(expected(ms), token, DOWN, |p| {
                    let peer = calls().lock().expect("calls").get(&token).and_then(|c| c.peer);
                    if let Some(peer) = peer {
                        let _ = sock.send_to(p, peer);
                    }
                })
            });
        }
    }
}

/// A control connection's call (after its request, `arg` = the call's ms): reads the
/// token, acknowledges, and at the client's end byte answers with the uplink's record:
/// unique count (4), duplicates (8), then each first copy's one-way delay in µs (4 each).
pub fn control(c: &mut TcpStream, ms: u64) -> bool {
    let mut t = [0u8; 8];
    if c.read_exact(&mut t).is_err() {
        return false;
    }
    let token = u64::from_be_bytes(t);
    calls().lock().expect("calls").insert(
        token,
        Call {
            ms,
            up: Received::new(expected(ms)),
            peer: None,
        },
    );
    let mut end = [0u8; 1];
    let ok = c.write_all(&[1]).is_ok() && c.read_exact(&mut end).is_ok();
    let call = calls().lock().expect("calls").remove(&token);
    let Some(call) = call.filter(|_| ok) else { return false };
    let mut out = Vec::with_capacity(12 + 4 * call.up.owd_ms.len());
    out.extend_from_slice(&(call.up.owd_ms.len() as u32).to_be_bytes());
    out.extend_from_slice(&call.up.dups.to_be_bytes());
    for d in &call.up.owd_ms {
        out.extend_from_slice(&((d * 1000.0).round() as u32).to_be_bytes());
    }
    c.write_all(&out).is_ok()
}

/// Sends `n` datagrams of a call at [`RATE`] per second, each stamped when sent.
fn send_call(n: u32, token: u64, dir: u8, mut send: impl FnMut(&[u8])) {
    let interval = Duration::from_nanos(1_000_000_000 / RATE);
    let start = Instant::now();
    for seq in 0..n {
        let at = start + interval * seq;
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        send(&packet(token, dir, seq, unix_ns()));
    }
}

/// The client's UDP side: plain, bound to a path's address, or through a SOCKS5 UDP
/// relay (RFC 1928 §7), whose TCP connection must stay open for the association to.
struct Datagrams {
    sock: UdpSocket,
    /// The relay and the header every datagram to the server carries.
    socks: Option<(SocketAddr, Vec<u8>, TcpStream)>,
    server: SocketAddr,
}

impl Datagrams {
    fn open(server: SocketAddr, via: &Via) -> Result<Datagrams> {
        let any = |ip: IpAddr| match ip {
            IpAddr::V4(_) => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0),
            IpAddr::V6(_) => SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), 0),
        };
        match via {
            Via::Tcp { bind } => Ok(Datagrams {
                sock: UdpSocket::bind(bind.unwrap_or(any(server.ip())))?,
                socks: None,
                server,
            }),
            Via::Mptcp => bail!("kernel MPTCP carries no UDP: voip runs over tcp-<path> and mpflex"),
            Via::Socks(proxy) => {
                let mut c = TcpStream::connect_timeout(proxy, Duration::from_secs(5))?;
                c.set_nodelay(true)?;
                c.write_all(&[5, 1, 0])?;
                let mut r = [0u8; 2];
                c.read_exact(&mut r)?;
                if r != [5, 0] {
                    bail!("SOCKS5 greeting answered {r:?}");
                }
                // UDP ASSOCIATE; the client's address is not known in advance: 0.0.0.0:0.
                c.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0])?;
                let relay = read_reply(&mut c, *proxy)?;
                let sock = UdpSocket::bind(any(relay.ip()))?;
                let mut header = vec![0, 0, 0];
                push_addr(&mut header, server);
                Ok(Datagrams {
                    sock,
                    socks: Some((relay, header, c)),
                    server,
                })
            }
        }
    }

    fn send(&self, p: &[u8]) {
        let _ = match &self.socks {
            None => self.sock.send_to(p, self.server),
            Some((relay, header, _)) => {
                let mut d = header.clone();
                d.extend_from_slice(p);
                self.sock.send_to(&d, relay)
            }
        };
    }

    /// The next datagram's payload (the SOCKS header taken off), or None at the timeout.
    fn recv<'a>(&self, buf: &'a mut [u8]) -> Option<&'a [u8]> {
        let n = self.sock.recv(buf).ok()?;
        match &self.socks {
            None => Some(&buf[..n]),
            Some(_) => {
                let skip = match buf.get(3)? {
                    1 => 10,
                    4 => 22,
                    3 => 7 + *buf.get(4)? as usize,
                    _ => return Some(&[]),
                };
                buf.get(skip..n)
            }
        }
    }
}

fn push_addr(v: &mut Vec<u8>, a: SocketAddr) {
    match a {
        SocketAddr::V4(a) => {
            v.push(1);
            v.extend_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            v.push(4);
            v.extend_from_slice(&a.ip().octets());
        }
    }
    v.extend_from_slice(&a.port().to_be_bytes());
}

/// A SOCKS5 reply's bound address; an unspecified one means the proxy's own address.
fn read_reply(c: &mut TcpStream, proxy: SocketAddr) -> Result<SocketAddr> {
    let mut h = [0u8; 4];
    c.read_exact(&mut h)?;
    if h[1] != 0 {
        bail!("SOCKS5 UDP ASSOCIATE refused: reply {}", h[1]);
    }
    let ip: IpAddr = match h[3] {
        1 => {
            let mut a = [0u8; 4];
            c.read_exact(&mut a)?;
            Ipv4Addr::from(a).into()
        }
        4 => {
            let mut a = [0u8; 16];
            c.read_exact(&mut a)?;
            Ipv6Addr::from(a).into()
        }
        t => bail!("SOCKS5 reply address type {t}"),
    };
    let mut p = [0u8; 2];
    c.read_exact(&mut p)?;
    let ip = if ip.is_unspecified() { proxy.ip() } else { ip };
    Ok(SocketAddr::new(ip, u16::from_be_bytes(p)))
}

/// One call of `secs` to `server` over `via`.
pub fn run(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let ms = (secs * 1000.0) as u64;
    let n = expected(ms);
    let token = unix_ns() ^ (std::process::id() as u64) << 32;
    let mut ctl = connect(server, via)?;
    ctl.write_all(&make_request(OP_VOIP, ms))?;
    ctl.write_all(&token.to_be_bytes())?;
    let mut ack = [0u8; 1];
    ctl.read_exact(&mut ack).context("the server did not take the call")?;
    let d = Datagrams::open(server, via)?;
    d.sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    let start = Instant::now();
    let end = start + Duration::from_millis(ms) + GRACE;
    let mut down = Received::new(n);
    std::thread::scope(|sc| {
        sc.spawn(|| send_call(n, token, UP, |p| d.send(p)));
        let mut buf = [0u8; 2048];
        while Instant::now() < end {
            if let Some((t, DOWN, seq, sent)) = d.recv(&mut buf).and_then(parse) {
                if t == token {
                    down.take(seq, sent);
                }
            }
        }
    });
    ctl.write_all(&[0])?;
    let mut h = [0u8; 12];
    ctl.read_exact(&mut h).context("the uplink's record")?;
    let unique = u32::from_be_bytes(h[..4].try_into()?);
    let mut up = Received::new(n);
    up.dups = u64::from_be_bytes(h[4..].try_into()?);
    let mut owd = vec![0u8; 4 * unique as usize];
    ctl.read_exact(&mut owd)?;
    up.owd_ms = owd
        .chunks(4)
        .map(|c| u32::from_be_bytes(c.try_into().expect("4 bytes")) as f64 / 1000.0)
        .collect();
    Ok(report(n, &up, &down))
}

/// The record of a call of `n` datagrams each way.
fn report(n: u32, up: &Received, down: &Received) -> Fields {
    let pct = |k: u64, of: u64| 100.0 * k as f64 / of.max(1) as f64;
    let lost = |r: &Received| (n as u64).saturating_sub(r.owd_ms.len() as u64);
    let max_gap = down.arrivals.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default();
    let both: Vec<f64> = up.owd_ms.iter().chain(&down.owd_ms).copied().collect();
    let mut f = fields(vec![
        ("packets", n.into()),
        ("lost_pct", pct(lost(up) + lost(down), 2 * n as u64).into()),
        ("dup_pct", pct(up.dups + down.dups, 2 * n as u64).into()),
        ("owd_p50_ms", percentile(&both, 0.5).into()),
        ("owd_p99_ms", percentile(&both, 0.99).into()),
        ("max_gap_ms", (max_gap.as_secs_f64() * 1000.0).into()),
    ]);
    for (dir, r) in [("up", up), ("down", down)] {
        f.insert(format!("{dir}_lost_pct"), pct(lost(r), n as u64).into());
        f.insert(format!("{dir}_dup_pct"), pct(r.dups, n as u64).into());
        f.insert(format!("{dir}_owd_p50_ms"), percentile(&r.owd_ms, 0.5).into());
        f.insert(format!("{dir}_owd_p99_ms"), percentile(&r.owd_ms, 0.99).into());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_round_trip_and_foreign_ones_are_ignored() {
        let p = packet(7, DOWN, 42, 1234);
        assert_eq!(parse(&p), Some((7, DOWN, 42, 1234)));
        assert_eq!(parse(&p[..100]), None);
        let mut q = p;
        q[0] = b'X';
        assert_eq!(parse(&q), None);
    }

    #[test]
    fn duplicates_and_out_of_range_sequence_numbers() {
        let mut r = Received::new(3);
        r.take(0, unix_ns());
        r.take(0, unix_ns());
        r.take(2, unix_ns());
        r.take(9, unix_ns());
        assert_eq!((r.owd_ms.len(), r.dups), (2, 1));
        let f = report(3, &r, &Received::new(3));
        assert!((f["up_lost_pct"].as_f64().unwrap() - 100.0 / 3.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f["down_lost_pct"].as_f64(), Some(100.0));
        assert!((f["lost_pct"].as_f64().unwrap() - 400.0 / 6.0).abs() < 1e-9, "{f:?}");
        assert!((f["up_dup_pct"].as_f64().unwrap() - 100.0 / 3.0).abs() < 1e-9, "{f:?}");
    }
}
