//! Dialling a path: resolve the server, connect from the path's binding, run the Noise
//! handshake and join the session; a dial that no server answers counts towards moving
//! the session ([`Placement::refused`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::net::{TcpSocket, TcpStream};
use tracing::{debug, warn};

use crate::config::ServerList;
use crate::crypto::{client_handshake, Transport};
use crate::driver::SessionHandle;
use crate::links::table::Binding;
use crate::pathconn::{configure_path_socket, join_as_client, Joined};

use super::placement::{Placement, Ticket};

/// What every path connection authenticates, routes and joins with.
#[derive(Clone)]
pub struct Keys {
    pub private: [u8; 32],
    pub server_public: [u8; 32],
    /// The session's token.
    pub token: [u8; 16],
    /// Which server holds the session.
    pub placement: Arc<Placement>,
}

/// How long a connection attempt waits for the server's SYN-ACK before the next attempt
/// starts with a fresh SYN. The kernel retransmits a SYN after 1 s, 3 s, 7 s: over a link
/// that was dark and is back, a long attempt would leave the path unused for seconds.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A path connection that is dialled, authenticated and joined, ready to run.
pub(super) struct Dialed {
    pub stream: TcpStream,
    pub transport: Transport,
    pub joined: Joined,
    pub server: SocketAddr,
}

/// A dial that reached no server: the connection was refused, or closed before the
/// handshake was answered (a balancer with no live server for the route, a server that
/// refuses the route). Counts towards moving the session ([`Placement::refused`]).
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct Refusal(anyhow::Error);

/// Dials path `i` from `bind` to the session's server: connect, handshake, join. With
/// `reach`, a server not reached (connected and authenticated) within it fails the dial.
pub(super) async fn dial(
    h: &SessionHandle,
    i: usize,
    servers: &ServerList,
    bind: &Binding,
    keys: &Keys,
    reach: Option<Duration>,
) -> Result<Dialed> {
    let placement = &keys.placement;
    let ticket = placement.ticket().await;
    let by = reach.map(|d| (tokio::time::Instant::now() + d, d));
    let r = dial_with(h, i, servers, bind, keys, &ticket, by).await;
    if let Err(e) = &r {
        if e.downcast_ref::<Refusal>().is_some() {
            if let Some(s) = placement.refused(h.any_path_up()) {
                warn!(
                    "server {} refuses every path of the session: opening a new session on another \
                     server (open streams are reset)",
                    s.id
                );
            }
        }
    }
    r
}

/// The addresses to try for `servers` from `bind`, in order: each entry's addresses of
/// the source's family, as the resolver gives them.
async fn candidates(servers: &ServerList, bind: &Binding) -> Result<Vec<SocketAddr>> {
    let mut out = Vec::new();
    let mut last = None;
    for s in &servers.0 {
        match resolve(s).await {
            Ok(addrs) => out.extend(
                addrs
                    .into_iter()
                    .filter(|a| bind.source.is_none_or(|src| src.is_ipv4() == a.is_ipv4())),
            ),
            Err(e) => last = Some(anyhow::anyhow!("cannot resolve {s}: {e}")),
        }
    }
    match (out.is_empty(), last) {
        (false, _) => Ok(out),
        (true, Some(e)) => Err(e),
        (true, None) => anyhow::bail!("{servers} has no address of the source's family"),
    }
}

/// The server's addresses, or the last ones it resolved to when resolving fails now: a
/// path re-dialled while the resolver is unreachable — during an outage, or with
/// `tun.routes` sending the host's DNS into a session that has no path left — still
/// reaches the server it reached before.
async fn resolve(server: &str) -> std::io::Result<Vec<SocketAddr>> {
    static LAST: std::sync::Mutex<Option<std::collections::HashMap<String, Vec<SocketAddr>>>> =
        std::sync::Mutex::new(None);
    match tokio::net::lookup_host(server).await {
        Ok(addrs) => {
            let addrs: Vec<_> = addrs.collect();
            let mut last = LAST.lock().expect("resolver cache");
            last.get_or_insert_with(Default::default)
                .insert(server.to_string(), addrs.clone());
            Ok(addrs)
        }
        Err(e) => {
            let last = LAST.lock().expect("resolver cache");
            match last.as_ref().and_then(|m| m.get(server)) {
                Some(addrs) if !addrs.is_empty() => {
                    debug!("cannot resolve {server} ({e}); dialling the addresses it had");
                    Ok(addrs.clone())
                }
                _ => Err(e),
            }
        }
    }
}

/// Connects path `i` from `bind`, trying `addrs` in order from the one that answered last.
async fn connect(bind: &Binding, addrs: &[SocketAddr], placement: &Placement) -> Result<(TcpStream, SocketAddr)> {
    let start = placement.endpoint() % addrs.len();
    let mut last = None;
    for k in 0..addrs.len() {
        let idx = (start + k) % addrs.len();
        match connect_one(bind, addrs[idx]).await {
            Ok(s) => {
                placement.set_endpoint(idx);
                return Ok((s, addrs[idx]));
            }
            Err(e) => {
                if addrs.len() > 1 {
                    debug!("{e:#}; trying the next server address");
                }
                last = Some(e);
            }
        }
    }
    Err(last.expect("at least one address"))
}

/// Dials path `i` with `ticket`: connect, handshake, join the session. A `reach`
/// deadline (a probe's interval) bounds the connect and the handshake only: the server
/// moves the path onto a connection as soon as it has read its join request, so once that
/// is sent the dial runs to its answer, whatever the time.
async fn dial_with(
    h: &SessionHandle,
    i: usize,
    servers: &ServerList,
    bind: &Binding,
    keys: &Keys,
    ticket: &Ticket,
    reach: Option<(tokio::time::Instant, Duration)>,
) -> Result<Dialed> {
    let placement = &keys.placement;
    // A server that gave a join address is dialled there directly when the source's
    // family can reach it.
    let addrs = match ticket.join {
        Some(j) if bind.source.is_none_or(|src| src.is_ipv4() == j.is_ipv4()) => vec![j],
        _ => candidates(servers, bind).await?,
    };
    let (mut stream, server) = within(reach, connect(bind, &addrs, placement)).await?;
    let handshake = async {
        tokio::time::timeout(
            Duration::from_secs(10),
            client_handshake(&mut stream, &ticket.route.encode(), &keys.private, &keys.server_public),
        )
        .await
        .context("handshake timed out")?
    };
    let t = within(reach, handshake).await.map_err(|e| {
        let closed = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::UnexpectedEof
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::BrokenPipe
                )
            })
        });
        if closed {
            anyhow::Error::new(Refusal(e))
        } else {
            e
        }
    })?;
    // From here the server may have the path on this connection: no giving up.
    let (ack, joined) = tokio::time::timeout(Duration::from_secs(10), join_as_client(&mut stream, &t, keys.token, i))
        .await
        .context("no answer to Hello")??;
    if !placement.joined(ticket.route, ack.server) {
        anyhow::bail!(
            "the session moved to another server while this path joined server {}",
            ack.server.id
        );
    }
    if h.with(|sh| sh.sess.joined(ack.fresh)) {
        warn!(
            "the server lost this session (restarted, or the session moved to another server); open streams are reset"
        );
    }
    configure_path_socket(&stream, h.congestion.as_deref(), h.pacing)?;
    Ok(Dialed {
        stream,
        transport: t,
        joined,
        server,
    })
}

/// `f`, failed if `reach` (a deadline and the interval it ends) passes first.
async fn within<T>(
    reach: Option<(tokio::time::Instant, Duration)>,
    f: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match reach {
        Some((by, every)) => tokio::time::timeout_at(by, f)
            .await
            .map_err(|_| anyhow::anyhow!("the server was not reached within {every:?}"))?,
        None => f.await,
    }
}

/// Connects to `server` from `bind` (one attempt, at most [`CONNECT_TIMEOUT`]).
async fn connect_one(bind: &Binding, server: SocketAddr) -> Result<TcpStream> {
    let sock = if server.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // With `tun.routes` installed, the host's traffic goes into the TUN; path sockets carry
    // the mark that keeps them on their links (crate::tun::routes).
    if let Some(mark) = crate::tun::routes::path_mark() {
        socket2::SockRef::from(&sock)
            .set_mark(mark)
            .map_err(|e| anyhow::anyhow!("cannot mark the path socket (SO_MARK, needs CAP_NET_ADMIN): {e}"))?;
    }
    if let Some(dev) = &bind.device {
        sock.bind_device(Some(dev.as_bytes())).map_err(|e| {
            let fix = match e.raw_os_error() {
                Some(libc::ENODEV) => "no interface has that name (`ip link` lists them)",
                Some(libc::EPERM) => "binding to a device needs CAP_NET_RAW on this kernel",
                _ => "check device",
            };
            anyhow::anyhow!("device {dev}: cannot bind to it: {e}; {fix}")
        })?;
    }
    if let Some(src) = bind.source {
        sock.bind(SocketAddr::new(src, 0)).map_err(|e| {
            anyhow::anyhow!("source {src}: cannot bind to it: {e}; is it an address of this host (`ip addr`)?")
        })?;
    }
    let r = tokio::time::timeout(CONNECT_TIMEOUT, sock.connect(server))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "no answer from {server} within {CONNECT_TIMEOUT:?}: check the route over this link and that the \
             server's firewall lets the port in"
            )
        })?;
    r.map_err(|e| {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            return anyhow::Error::new(Refusal(anyhow::anyhow!(
                "cannot connect to {server}: {e}; nothing listens there: is `mpflex server` running with this \
                 address in its listen?"
            )));
        }
        anyhow::anyhow!("cannot connect to {server}: {e}; check the server address and the route over this link")
    })
}
