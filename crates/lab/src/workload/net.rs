//! What every workload shares: the server in the server namespace, its request protocol,
//! and the client's ways to reach it (plain TCP, kernel MPTCP, or SOCKS5 to mpflex).
//!
//! Requests are 8 bytes, big-endian: the top byte is the operation, the low 56 bits its
//! argument.
//! * `0` download: the server sends `arg` bytes (`chunk`, `shortflows`, `video`, `bulk`
//!   down and the download of `download-ping` with a huge `arg`, the small exchanges of
//!   `upload-ping` and `download-ping`).
//! * `1` upload: the server reads `arg` bytes (or until the client's EOF), reporting the
//!   count right after its first read and every 250 ms as 16-byte records (count, the
//!   server's time of that count, 0) and the final one as (count, time, 1).
//! * `2` stream: another 8 bytes follow (the duration in ms); the server sends 1000-byte
//!   messages (sequence number, send time in ns since the Unix epoch) at `arg` kbit/s for
//!   that long, then closes (`handover`).
//! * `3` call: the control connection of a `voip` call of `arg` ms (see `voip`); its
//!   datagrams go to the UDP socket on the server's port number.
//! * `4` ping: a download of `arg` bytes whose first 8 carry the server's time of the
//!   request's arrival (ns since the Unix epoch, big-endian), the rest zeros: the ping
//!   workloads split each exchange into its request's and its response's part
//!   (namespaces share one clock).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

pub const IPPROTO_MPTCP: i32 = 262;

fn proto(mptcp: bool) -> Protocol {
    if mptcp {
        Protocol::from(IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    }
}

/// Serves chunk requests until killed.
pub fn serve(listen: SocketAddr, mptcp: bool, cc: Option<&str>) -> Result<()> {
    serve_on(bind(listen, mptcp, cc)?, mptcp)
}

/// The workload server's listening socket (`listen` may name port 0).
pub fn bind(listen: SocketAddr, mptcp: bool, cc: Option<&str>) -> Result<TcpListener> {
    let s = Socket::new(Domain::for_address(listen), Type::STREAM, Some(proto(mptcp)))
        .context("socket (is MPTCP enabled? sysctl net.mptcp.enabled)")?;
    // The sender's congestion control decides a download; accepted sockets inherit it.
    if let Some(cc) = cc {
        s.set_tcp_congestion(cc.as_bytes())
            .with_context(|| format!("congestion control {cc:?}"))?;
    }
    s.set_reuse_address(true)?;
    s.bind(&listen.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Serves the workloads on `l` until the process ends.
pub fn serve_on(l: TcpListener, mptcp: bool) -> Result<()> {
    let listen = l.local_addr()?;
    // The datagram workloads' server on the same port number (the baselines' server
    // only: kernel MPTCP carries no UDP).
    if !mptcp {
        std::thread::spawn(move || super::voip::serve_udp(listen));
    }
    let zeros = vec![0u8; 1 << 20];
    let zeros: &'static [u8] = Box::leak(zeros.into_boxed_slice());
    for conn in l.incoming() {
        let Ok(mut c) = conn else { continue };
        std::thread::spawn(move || {
            let _ = c.set_nodelay(true);
            let mut req = [0u8; 8];
            while c.read_exact(&mut req).is_ok() {
                let arrived = unix_ns();
                let (op, arg) = split_request(u64::from_be_bytes(req));
                let ok = match op {
                    OP_DOWNLOAD => send_zeros(&mut c, zeros, arg),
                    OP_PING => send_stamped(&mut c, zeros, arg, arrived),
                    OP_UPLOAD => sink(&mut c, arg),
                    OP_VOIP => super::voip::control(&mut c, arg),
                    OP_STREAM => {
                        let mut d = [0u8; 8];
                        c.read_exact(&mut d).is_ok() && stream(&mut c, arg, u64::from_be_bytes(d)).is_ok()
                    }
                    _ => false,
                };
                if !ok {
                    return;
                }
            }
        });
    }
    Ok(())
}

pub const OP_DOWNLOAD: u8 = 0;
pub const OP_UPLOAD: u8 = 1;
pub const OP_STREAM: u8 = 2;
/// A call's control connection (`voip`): `arg` is the call's length in ms.
pub const OP_VOIP: u8 = 3;
/// A download stamped with the request's arrival (see the module's documentation).
pub const OP_PING: u8 = 4;
/// "Until the connection ends", for downloads and uploads without a fixed size.
pub const UNTIL_EOF: u64 = (1 << 56) - 1;
/// Size of a `stream` message.
pub const MESSAGE: usize = 1000;

pub fn make_request(op: u8, arg: u64) -> [u8; 8] {
    ((op as u64) << 56 | arg.min(UNTIL_EOF)).to_be_bytes()
}

fn split_request(r: u64) -> (u8, u64) {
    ((r >> 56) as u8, r & UNTIL_EOF)
}

fn send_zeros(c: &mut TcpStream, zeros: &[u8], n: u64) -> bool {
    let mut left = n as usize;
    while left > 0 {
        let k = left.min(zeros.len());
        if c.write_all(&zeros[..k]).is_err() {
            return false;
        }
        left -= k;
    }
    true
}

/// `n` bytes, the first 8 (or fewer, if `n` is less) `arrived` big-endian, then zeros.
fn send_stamped(c: &mut TcpStream, zeros: &[u8], n: u64, arrived: u64) -> bool {
    let stamp = arrived.to_be_bytes();
    let head = (n as usize).min(stamp.len());
    // One write: the stamp and the zeros after it leave in the same segments.
    let first = (n as usize).min(zeros.len());
    let mut buf = zeros[..first].to_vec();
    buf[..head].copy_from_slice(&stamp[..head]);
    c.write_all(&buf).is_ok() && send_zeros(c, zeros, n - first as u64)
}

/// Reads up to `n` bytes (or to EOF), reporting progress; true if the connection may
/// carry another request. A report is 16 bytes: the count (8), the receiver's time of
/// that count in µs since the Unix epoch (7), and 1 for the final report, else 0. One
/// report follows the first read at once, then one every 250 ms, and the final one the
/// end. The receiver's own times give the whole run's rate from the first byte to the
/// last; the client's receipt times would add the reports' one-way delay, which differs
/// from path to path.
fn sink(c: &mut TcpStream, n: u64) -> bool {
    let Ok(w) = c.try_clone() else { return false };
    let w = Mutex::new(w);
    // (bytes read, when the last read returned).
    let got = Mutex::new((0u64, unix_us()));
    let done = AtomicBool::new(false);
    let count = || got.lock().expect("count").0;
    let eof = std::thread::scope(|sc| {
        sc.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(250));
                let (k, at) = *got.lock().expect("count");
                if done.load(Ordering::SeqCst) || report(&w, k, at, false).is_err() {
                    return;
                }
            }
        });
        let mut buf = vec![0u8; 256 * 1024];
        let mut eof = false;
        while count() < n {
            let want = (n - count()).min(buf.len() as u64) as usize;
            match c.read(&mut buf[..want]) {
                Ok(k) if k > 0 => {
                    let (total, at) = {
                        let mut g = got.lock().expect("count");
                        *g = (g.0 + k as u64, unix_us());
                        *g
                    };
                    if total == k as u64 && report(&w, total, at, false).is_err() {
                        eof = true;
                        break;
                    }
                }
                _ => {
                    eof = true;
                    break;
                }
            }
        }
        done.store(true, Ordering::SeqCst);
        eof
    });
    let (k, at) = *got.lock().expect("count");
    report(&w, k, at, true).is_ok() && !eof
}

/// Writes one progress report of [`sink`].
fn report(w: &Mutex<TcpStream>, count: u64, at_us: u64, last: bool) -> std::io::Result<()> {
    let mut rec = [0u8; 16];
    rec[..8].copy_from_slice(&count.to_be_bytes());
    rec[8..15].copy_from_slice(&at_us.to_be_bytes()[1..]);
    rec[15] = last as u8;
    w.lock().expect("writer").write_all(&rec)
}

/// A progress report of [`sink`]: (count, receiver's µs since the Unix epoch, final).
pub fn parse_report(rec: &[u8; 16]) -> (u64, u64, bool) {
    let mut at = [0u8; 8];
    at[1..].copy_from_slice(&rec[8..15]);
    (
        u64::from_be_bytes(rec[..8].try_into().expect("8 bytes")),
        u64::from_be_bytes(at),
        rec[15] == 1,
    )
}

pub fn unix_us() -> u64 {
    unix_ns() / 1000
}

pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Sends numbered, timestamped messages at `kbit` kbit/s for `ms` milliseconds.
fn stream(c: &mut TcpStream, kbit: u64, ms: u64) -> std::io::Result<()> {
    let interval = Duration::from_secs_f64(MESSAGE as f64 * 8.0 / (kbit.max(1) as f64 * 1000.0));
    let start = Instant::now();
    let end = start + Duration::from_millis(ms);
    let mut msg = [0u8; MESSAGE];
    let mut seq = 0u64;
    loop {
        let due = start + interval * seq as u32;
        if due >= end {
            break;
        }
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        msg[..8].copy_from_slice(&seq.to_be_bytes());
        msg[8..16].copy_from_slice(&unix_ns().to_be_bytes());
        c.write_all(&msg)?;
        seq += 1;
    }
    c.shutdown(std::net::Shutdown::Write)
}

/// How the client reaches the server.
#[derive(Debug, Clone)]
pub enum Via {
    Tcp { bind: Option<SocketAddr> },
    Mptcp,
    Socks(SocketAddr),
}

impl Via {
    /// From a client's options: a SOCKS5 proxy if given, else MPTCP if asked, else TCP
    /// bound to `bind`.
    pub fn of(socks: Option<SocketAddr>, mptcp: bool, bind: Option<std::net::IpAddr>) -> Via {
        match (socks, mptcp) {
            (Some(p), _) => Via::Socks(p),
            (None, true) => Via::Mptcp,
            (None, false) => Via::Tcp {
                bind: bind.map(|b| SocketAddr::new(b, 0)),
            },
        }
    }
}

pub fn connect(server: SocketAddr, via: &Via) -> Result<TcpStream> {
    let s = match via {
        Via::Tcp { bind } => {
            let s = Socket::new(Domain::for_address(server), Type::STREAM, Some(Protocol::TCP))?;
            if let Some(b) = bind {
                s.bind(&SockAddr::from(*b))?;
            }
            s.connect_timeout(&server.into(), Duration::from_secs(20))?;
            s.into()
        }
        Via::Mptcp => {
            let s = Socket::new(
                Domain::for_address(server),
                Type::STREAM,
                Some(Protocol::from(IPPROTO_MPTCP)),
            )?;
            s.connect_timeout(&server.into(), Duration::from_secs(20))?;
            s.into()
        }
        Via::Socks(proxy) => {
            let mut s = TcpStream::connect_timeout(proxy, Duration::from_secs(5))?;
            s.set_nodelay(true)?;
            s.write_all(&[5, 1, 0])?;
            let mut r = [0u8; 2];
            s.read_exact(&mut r)?;
            let mut req = vec![5, 1, 0];
            match server {
                SocketAddr::V4(a) => {
                    req.push(1);
                    req.extend_from_slice(&a.ip().octets());
                }
                SocketAddr::V6(a) => {
                    req.push(4);
                    req.extend_from_slice(&a.ip().octets());
                }
            }
            req.extend_from_slice(&server.port().to_be_bytes());
            s.write_all(&req)?;
            let mut rep = [0u8; 10];
            s.read_exact(&mut rep)?;
            if rep[1] != 0 {
                bail!("SOCKS5 reply {}", rep[1]);
            }
            s
        }
    };
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    Ok(s)
}

/// Requests `size` bytes and reads them all.
pub fn request(s: &mut TcpStream, size: u64) -> Result<()> {
    s.write_all(&make_request(OP_DOWNLOAD, size))?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut left = size as usize;
    while left > 0 {
        let n = s.read(&mut buf[..left.min(256 * 1024)])?;
        if n == 0 {
            bail!("connection closed with {left} bytes missing");
        }
        left -= n;
    }
    Ok(())
}

/// Asks for a stamped download of `size` bytes (at least 8) and reads it all; returns the
/// server's time of the request's arrival, ns since the Unix epoch.
pub fn ping(s: &mut TcpStream, size: u64) -> Result<u64> {
    s.write_all(&make_request(OP_PING, size))?;
    let mut buf = vec![0u8; size as usize];
    s.read_exact(&mut buf)?;
    let mut stamp = [0u8; 8];
    let head = buf.len().min(8);
    stamp[..head].copy_from_slice(&buf[..head]);
    Ok(u64::from_be_bytes(stamp))
}

/// `total` bytes split by `share` (of the first part, 0..=1): (first, rest), the first
/// rounded to the nearest byte, the two adding up to `total`.
pub fn split(total: u64, share: f64) -> (u64, u64) {
    let first = ((total as f64 * share.clamp(0.0, 1.0)).round() as u64).min(total);
    (first, total - first)
}

/// One measurement: `fresh` connects first (and the time includes it), otherwise the
/// request goes on `warm`, an established connection.
pub fn timed(server: SocketAddr, via: &Via, size: u64, warm: Option<&mut TcpStream>) -> Result<Duration> {
    let t = Instant::now();
    match warm {
        Some(s) => request(s, size)?,
        None => {
            let mut s = connect(server, via)?;
            request(&mut s, size)?;
        }
    }
    Ok(t.elapsed())
}

pub use crate::record::Fields;

/// Fields from (name, value) pairs.
pub(super) fn fields(pairs: Vec<(&str, serde_json::Value)>) -> Fields {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Mbit/s of `bytes` in `d`.
pub(super) fn mbit(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64().max(1e-9) / 1e6
}

/// The `q` quantile of some samples ([`crate::summary::quantile`]); NaN (written as null)
/// for none.
pub(super) fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    crate::summary::quantile(v, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_adds_up_to_the_total() {
        assert_eq!(split(1 << 20, 0.25), (262_144, 786_432));
        assert_eq!(split(1 << 20, 1.0), (1 << 20, 0));
        assert_eq!(split(1 << 20, 0.0), (0, 1 << 20));
        assert_eq!(split(1000, 1.0 / 3.0), (333, 667));
        assert_eq!(split(10, 1.5), (10, 0));
    }

    #[test]
    fn requests_round_trip() {
        for (op, arg) in [
            (OP_DOWNLOAD, 0),
            (OP_UPLOAD, UNTIL_EOF),
            (OP_STREAM, 2000),
            (OP_DOWNLOAD, 1 << 40),
        ] {
            assert_eq!(split_request(u64::from_be_bytes(make_request(op, arg))), (op, arg));
        }
        // An old-style chunk request (the size alone) is a download.
        assert_eq!(split_request(4 << 20), (OP_DOWNLOAD, 4 << 20));
    }
}
