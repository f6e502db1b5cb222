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
