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

/// Receive buffer of a UDP ingress socket (the SOCKS5 relay, the TPROXY listener), bytes.
/// One socket takes every datagram of its applications, and a burst larger than the
/// buffer is dropped by the kernel before mpflex sees it (counted only in the host's
/// `RcvbufErrors`): 4 MB holds a quarter second at 128 Mbit/s.
pub const UDP_INGRESS_RCVBUF: usize = 4 << 20;

/// Gives `sock` a receive buffer of [`UDP_INGRESS_RCVBUF`]: forced past `net.core.rmem_max`
/// when the process may (`CAP_NET_ADMIN`), else as much as that sysctl allows. Returns
/// the size the kernel reports (twice the request, for its bookkeeping).
pub fn deep_receive_buffer(sock: &tokio::net::UdpSocket) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let want = UDP_INGRESS_RCVBUF as libc::c_int;
    // SAFETY: setsockopt reads an int from the pointer for the given length.
    let forced = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&want as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    } == 0;
    let s = socket2::SockRef::from(sock);
    if !forced {
        s.set_recv_buffer_size(UDP_INGRESS_RCVBUF)?;
    }
    s.recv_buffer_size()
}

#[cfg(test)]
mod tests {
    /// The buffer grows past the kernel's default (212,992 bytes on Debian), to the full
    /// request when the test may force it (root) or to `net.core.rmem_max` otherwise.
    #[tokio::test]
    async fn an_ingress_socket_gets_a_deep_receive_buffer() {
        let s = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let before = socket2::SockRef::from(&s).recv_buffer_size().unwrap();
        let after = super::deep_receive_buffer(&s).unwrap();
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            assert!(after >= super::UDP_INGRESS_RCVBUF, "{after}");
        } else {
            assert!(after >= before, "{before} -> {after}");
        }
    }
}
