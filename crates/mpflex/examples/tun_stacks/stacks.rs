//! The two stacks of the side-by-side on a TUN device, and the HTTP responder every
//! connection of either ends in.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::path::Path;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use anyhow::{Context as _, Result};
use sha2::{Digest, Sha256};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::{HOLD_PORT, HOLD_PROBE, REFUSED_PORT};

/// The device's address; the stack answers for every other address of its prefix.
const TUN_ADDR: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
const DEV: &str = "mpflstk0";
/// Each connection's receive and send buffer in ipstack, as the ingress gives its own
/// connections (docs/tun.md), so that neither stack wins by a larger window.
const IPSTACK_BUFFER: usize = 256 * 1024;

/// The TUN device, made in the namespace by a thread that enters it (a device belongs
/// to the namespace of the thread that makes it); its descriptor works from any thread.
pub fn open_tun(ns: &str, mtu: u16) -> Result<tun_rs::SyncDevice> {
    let path = Path::new("/run/netns").join(ns);
    std::thread::scope(|s| {
        s.spawn(|| {
            let f = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
            // SAFETY: setns on a namespace file descriptor this thread holds open; it
            // moves only this thread, which ends after making the device.
            if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error()).context("entering the namespace");
            }
            tun_rs::DeviceBuilder::new()
                .name(DEV)
                .mtu(mtu)
                .ipv4(TUN_ADDR, 24, None::<Ipv4Addr>)
                .build_sync()
                .context("making the TUN device")
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the device thread panicked"))?
    })
}

/// The answer on a held SYN, standing for the ingress's server-side dial.
async fn decide(dst: SocketAddr) -> bool {
    match dst.port() {
        REFUSED_PORT => false,
        HOLD_PORT => {
            tokio::time::sleep(HOLD_PROBE).await;
            true
        }
        _ => true,
    }
}

pub async fn run_smoltcp(dev: tun_rs::SyncDevice, mtu: u16) -> Result<()> {
    let dev = tun_rs::AsyncDevice::new(dev)?;
    mpflex::tun::bench::serve(dev, usize::from(mtu), decide, |c, _| {
        tokio::spawn(respond(c));
    })
    .await
}

/// ipstack answers a SYN as it makes the connection's stream, before `accept` returns
/// it: the decision can only drop the connection after it opened.
pub async fn run_ipstack(dev: tun_rs::SyncDevice, mtu: u16) -> Result<()> {
    let mut cfg = ipstack::IpStackConfig::default();
    cfg.mtu(mtu)?;
    let mut tcp = ipstack::TcpConfig::default();
    tcp.max_unacked_bytes = IPSTACK_BUFFER as u32;
    tcp.read_buffer_size = IPSTACK_BUFFER;
    // It offers no MSS of its own (the peer would then send 536-byte segments, RFC 9293
    // §3.7.1): the largest the device carries, as the ingress's stack offers.
    tcp.options = Some(vec![ipstack::TcpOptions::MaximumSegmentSize(mtu - 40)]);
    cfg.with_tcp_config(tcp);
    let mut stack = ipstack::IpStack::new(cfg, TunIo::new(dev)?);
    loop {
        if let ipstack::IpStackStream::Tcp(s) = stack.accept().await? {
            let dst = s.peer_addr();
            tokio::spawn(async move {
                if decide(dst).await {
                    respond(s).await;
                } else {
                    // The nearest it has to refusing: a FIN (dropping the stream alone
                    // leaves the application's connection open).
                    let mut s = s;
                    let _ = s.shutdown().await;
                }
            });
        }
    }
}

/// A TUN descriptor as a tokio byte stream, one packet per read and write (ipstack's
/// device interface).
struct TunIo(AsyncFd<OwnedFd>);

impl TunIo {
    fn new(dev: tun_rs::SyncDevice) -> Result<TunIo> {
        dev.set_nonblocking(true)?;
        // SAFETY: the descriptor is the device's, handed over whole by into_raw_fd.
        let fd = unsafe { OwnedFd::from_raw_fd(dev.into_raw_fd()) };
        // SAFETY: the AsyncFd owns the descriptor, open until it is dropped.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)?;
        Ok(TunIo(fd))
    }
}

impl AsyncRead for TunIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut g = ready!(self.0.poll_read_ready(cx))?;
            let b = buf.initialize_unfilled();
            // SAFETY: read(2) into the unfilled part of the buffer, at most its length.
            let r = g.try_io(|fd| cvt(unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) }));
            if let Ok(r) = r {
                buf.advance(r?);
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl AsyncWrite for TunIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let mut g = ready!(self.0.poll_write_ready(cx))?;
            // SAFETY: write(2) of the given bytes.
            let r = g.try_io(|fd| cvt(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) }));
            if let Ok(r) = r {
                return Poll::Ready(r);
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn cvt(n: isize) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// What a request asks of the responder.
#[derive(Debug, PartialEq)]
enum Request {
    /// `GET /bytes/N`: N bytes of the pattern.
    Bytes(u64),
    /// `GET /small`: two bytes.
    Small,
    /// `PUT /sink` with a length: swallowed; `?sum`: answered with their SHA-256.
    Sink {
        len: u64,
        sum: bool,
        expect: bool,
    },
    Other,
}

/// The request of a whole header block (through its blank line).
fn parse_request(head: &str) -> Request {
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let header = |name: &str| {
        head.split("\r\n")
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    };
    match (method, path) {
        ("GET", "/small") => Request::Small,
        ("GET", p) => p
            .strip_prefix("/bytes/")
            .and_then(|n| n.parse().ok())
            .map_or(Request::Other, Request::Bytes),
        ("PUT", "/sink" | "/sink?sum") => match header("content-length").and_then(|v| v.parse().ok()) {
            Some(len) => Request::Sink {
                len,
                sum: path.ends_with("?sum"),
                expect: header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")),
            },
            None => Request::Other,
        },
        _ => Request::Other,
    }
}

/// Answers one request on one connection, then closes it.
async fn respond<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    let _ = respond_inner(&mut s).await;
    let _ = s.shutdown().await;
}

async fn respond_inner<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = 0;
    let end = loop {
        let n = s.read(&mut buf[have..]).await?;
        if n == 0 {
            return Ok(());
        }
        have += n;
        if let Some(i) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if have == buf.len() {
            return Err(io::ErrorKind::InvalidData.into());
        }
    };
    let req = parse_request(&String::from_utf8_lossy(&buf[..end]));
    let head = |len: u64| format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n");
    match req {
        Request::Small => s.write_all(format!("{}ok", head(2)).as_bytes()).await,
        Request::Bytes(n) => {
            s.write_all(head(n).as_bytes()).await?;
            let block = pattern(BLOCK as u64);
            let mut left = n;
            while left > 0 {
                let k = left.min(BLOCK as u64) as usize;
                s.write_all(&block[..k]).await?;
                left -= k as u64;
            }
            Ok(())
        }
        Request::Sink { len, sum, expect } => {
            if expect {
                s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
            }
            let mut h = sum.then(Sha256::new);
            let first = &buf[end..have];
            let mut got = first.len() as u64;
            if let Some(h) = h.as_mut() {
                h.update(first);
            }
            while got < len {
                let n = s.read(&mut buf).await?;
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                if let Some(h) = h.as_mut() {
                    h.update(&buf[..n]);
                }
                got += n as u64;
            }
            let body = match h {
                Some(h) => format!("{got} {}", hex::encode(h.finalize())),
                None => got.to_string(),
            };
            s.write_all(format!("{}{body}", head(body.len() as u64)).as_bytes())
                .await
        }
        Request::Other => {
            s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await
        }
    }
}

/// The downloads' bytes repeat a block of this many.
const BLOCK: usize = 64 * 1024;

/// `n` bytes of the download pattern: a fixed pseudo-random block (xorshift64), repeated.
pub fn pattern(n: u64) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let block: Vec<u8> = (0..BLOCK)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    block.iter().copied().cycle().take(n as usize).collect()
}

pub fn pattern_sha256(n: u64) -> String {
    sha256_hex(&pattern(n))
}

pub fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_from_their_header_block() {
        assert_eq!(parse_request("GET /small HTTP/1.1\r\nHost: x\r\n\r\n"), Request::Small);
        assert_eq!(
            parse_request("GET /bytes/1048576 HTTP/1.1\r\n\r\n"),
            Request::Bytes(1 << 20)
        );
        assert_eq!(parse_request("GET /bytes/lots HTTP/1.1\r\n\r\n"), Request::Other);
        assert_eq!(
            parse_request("PUT /sink?sum HTTP/1.1\r\ncontent-length: 10\r\nExpect: 100-continue\r\n\r\n"),
            Request::Sink {
                len: 10,
                sum: true,
                expect: true
            }
        );
        assert_eq!(
            parse_request("PUT /sink HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Request::Other
        );
    }

    #[test]
    fn the_pattern_repeats_its_block() {
        let p = pattern(BLOCK as u64 * 2 + 5);
        assert_eq!(p[..BLOCK], p[BLOCK..2 * BLOCK]);
        assert_eq!(p[..5], p[2 * BLOCK..]);
    }
}
