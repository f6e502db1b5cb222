//! A path connection's setup, shared by client and server: the socket options every path
//! gets and the join exchange that follows the Noise handshake (its rules are the engine's,
//! [`mpflex_engine::join`]).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::BytesMut;
use mpflex_engine::join::{self, JoinAck, JoinRequest, ServerInfo, MAX_JOIN_BYTES};
use mpflex_wire::{decode_all, Frame, Route, ROUTE_LEN};
use socket2::SockRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::crypto::{seal, Opener, Transport};
use crate::tcpinfo::{set_max_pacing_rate, set_user_timeout};

/// Pacing cap of path connections when `tuning.pacing` is on: high enough never to limit
/// a path (40 Gbit/s), but it switches the kernel's TCP pacing on, so a window opened while
/// the path was idle leaves at about the path's rate instead of as one burst into a small
/// bottleneck buffer.
pub(crate) const PACING_CAP: u64 = 5_000_000_000;

/// A path whose data stays unacknowledged this long is dead, even if keepalives cannot
/// tell yet.
const USER_TIMEOUT: Duration = Duration::from_secs(10);

/// Socket options every path connection gets.
pub fn configure_path_socket(s: &TcpStream, congestion: Option<&str>, pacing: bool) -> Result<()> {
    s.set_nodelay(true)?;
    let r = SockRef::from(s);
    if let Some(cc) = congestion {
        r.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
            anyhow::anyhow!(
                "tuning.congestion: cannot use {cc:?} on a path: {e}; load it (`modprobe tcp_{cc}`) or give \
                 mpflex CAP_NET_ADMIN (net.ipv4.tcp_allowed_congestion_control lists what others may use)"
            )
        })?;
    }
    if pacing {
        set_max_pacing_rate(s, PACING_CAP).context("tuning.pacing: SO_MAX_PACING_RATE")?;
    }
    r.set_keepalive(true)?;
    set_user_timeout(s, USER_TIMEOUT)?;
    Ok(())
}

/// A joined path connection: what the path's reader and writer continue with.
pub struct Joined {
    /// The next (send, receive) record numbers.
    pub nonces: (u64, u64),
    /// Bytes already read past the join record.
    pub leftover: BytesMut,
}

/// Sends one record holding `frame`.
async fn send_frame(sock: &mut TcpStream, t: &Transport, nonce: &mut u64, frame: Frame) -> Result<()> {
    let (mut plain, mut wire) = (Vec::new(), Vec::new());
    frame.encode(&mut plain);
    seal(t, nonce, &plain, &mut wire)?;
    sock.write_all(&wire).await?;
    Ok(())
}

/// Reads the peer's first record (its join), at most [`MAX_JOIN_BYTES`].
async fn read_join(sock: &mut TcpStream, t: &Transport, opener: &mut Opener, buf: &mut BytesMut) -> Result<Vec<Frame>> {
    loop {
        if let Some(plain) = opener.open(t, buf)? {
            return decode_all(plain.freeze()).context("malformed join record");
        }
        if sock.read_buf(buf).await? == 0 {
            bail!("peer closed the connection while joining");
        }
        if buf.len() > MAX_JOIN_BYTES {
            bail!("oversized join record");
        }
    }
}

/// (client) Joins path `path` to session `token`. Returns the server's answer (whether it
/// created the session just now, its routing id) and where the connection continues.
pub async fn join_as_client(
    sock: &mut TcpStream,
    t: &Transport,
    token: [u8; 16],
    path: usize,
) -> Result<(JoinAck, Joined)> {
    let mut nonce = 0;
    send_frame(sock, t, &mut nonce, join::hello(token, path)).await?;
    let (mut opener, mut buf) = (Opener::new(), BytesMut::with_capacity(1024));
    let frames = read_join(sock, t, &mut opener, &mut buf).await?;
    let ack = join::accept_hello_ack(&frames, token)?;
    let joined = Joined {
        nonces: (nonce, opener.nonce()),
        leftover: buf,
    };
    Ok((ack, joined))
}

/// Why a path connection's routing preamble was refused.
#[derive(Debug, thiserror::Error)]
pub enum PreambleError {
    /// Closed before sending anything: a port probe or a balancer's health check.
    #[error("closed before sending anything")]
    Silent,
    #[error(transparent)]
    Bad(#[from] mpflex_wire::RouteError),
    #[error("preamble cut short: {0}")]
    Io(#[from] std::io::Error),
}

/// (server) Reads the routing preamble that opens every path connection. Reads exactly the
/// preamble's bytes: the Noise handshake behind it is the handshake's to read.
pub async fn read_preamble(sock: &mut TcpStream) -> Result<Route, PreambleError> {
    let mut b = [0u8; ROUTE_LEN];
    let mut got = 0;
    loop {
        if let Some((r, _)) = Route::decode(&b[..got])? {
            return Ok(r);
        }
        match sock.read(&mut b[got..]).await? {
            0 if got == 0 => return Err(PreambleError::Silent),
            0 => return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()),
            n => got += n,
        }
    }
}

/// (server) Reads a path's join request; answer it with [`answer_join`].
pub async fn read_join_request(sock: &mut TcpStream, t: &Transport) -> Result<(JoinRequest, Opener, BytesMut)> {
    let (mut opener, mut buf) = (Opener::new(), BytesMut::with_capacity(4096));
    let frames = read_join(sock, t, &mut opener, &mut buf).await?;
    let req = join::accept_hello(&frames)?;
    Ok((req, opener, buf))
}

/// (server) Refuses a join: the client reads `code` as its reason.
pub async fn refuse_join(sock: &mut TcpStream, t: &Transport, code: mpflex_wire::CloseCode) -> Result<()> {
    send_frame(sock, t, &mut 0, join::refuse(code)).await?;
    sock.shutdown().await?;
    Ok(())
}

/// (server) Tells the client whether the session is `fresh` here.
pub async fn answer_join(
    sock: &mut TcpStream,
    t: &Transport,
    req: JoinRequest,
    fresh: bool,
    me: ServerInfo,
    opener: Opener,
    leftover: BytesMut,
) -> Result<Joined> {
    let mut nonce = 0;
    send_frame(sock, t, &mut nonce, join::hello_ack(req.session, fresh, me)).await?;
    Ok(Joined {
        nonces: (nonce, opener.nonce()),
        leftover,
    })
}
