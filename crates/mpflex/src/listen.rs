//! Accepting connections: applications on the client, path connections on the server.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

/// Accepts connections on `l` for ever, each served by `serve` in a task of its own; a
/// connection that ends with an error is logged (at debug level: peers misbehave) as
/// `what`. A failing accept (out of file descriptors and the like) backs off instead of
/// spinning.
pub async fn accept_each<F, Fut>(l: TcpListener, what: &'static str, serve: F)
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    loop {
        let (sock, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let task = serve(sock, peer);
        tokio::spawn(async move {
            if let Err(e) = task.await {
                debug!(%peer, "{what}: {e:#}");
            }
        });
    }
}

/// Listens on `addr`, the value of configuration key `key`. A failure says what to change,
/// in one line: these are the errors an operator meets at start.
pub async fn bind(addr: SocketAddr, key: &str) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("{key}: cannot listen on {addr}: {e}; {}", bind_fix(&e, addr, key)))
}

/// What to do about a failed bind.
fn bind_fix(e: &std::io::Error, addr: SocketAddr, key: &str) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        AddrInUse => format!(
            "another program (or another mpflex) uses port {p}: stop it (`ss -ltnp 'sport = :{p}'` names it) \
             or set another port in {key}",
            p = addr.port()
        ),
        AddrNotAvailable => format!(
            "{} is not an address of this host: use one of its addresses (`ip addr`) or 0.0.0.0 in {key}",
            addr.ip()
        ),
        PermissionDenied => {
            format!("ports below 1024 need root or CAP_NET_BIND_SERVICE: choose a port from 1024 up in {key}")
        }
        _ => format!("check {key}"),
    }
}
