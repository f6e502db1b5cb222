//! The `chunk` workload: a server that answers an 8-byte request (the size) with that many
//! bytes, and a client that times request → last byte, over plain TCP, kernel MPTCP, or
//! SOCKS5 (mpflex). Both run as `mpflex-lab` subcommands inside the namespaces.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

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
    let l: TcpListener = s.into();
    let zeros = vec![0u8; 1 << 20];
    let zeros: &'static [u8] = Box::leak(zeros.into_boxed_slice());
    for conn in l.incoming() {
        let Ok(mut c) = conn else { continue };
        std::thread::spawn(move || {
            let _ = c.set_nodelay(true);
            let mut req = [0u8; 8];
            while c.read_exact(&mut req).is_ok() {
                let mut left = u64::from_be_bytes(req) as usize;
                while left > 0 {
                    let n = left.min(zeros.len());
                    if c.write_all(&zeros[..n]).is_err() {
                        return;
                    }
                    left -= n;
                }
            }
        });
    }
    Ok(())
}

/// How the client reaches the server.
#[derive(Debug, Clone)]
pub enum Via {
    Tcp { bind: Option<SocketAddr> },
    Mptcp,
    Socks(SocketAddr),
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
    s.write_all(&size.to_be_bytes())?;
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
