//! Accepting connections: applications on the client, path connections on the server.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    let mut backoff = Backoff::default();
    loop {
        let (sock, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                backoff.failed(&e, what).await;
                continue;
            }
        };
        backoff.reset();
        let task = serve(sock, peer);
        tokio::spawn(async move {
            if let Err(e) = task.await {
                debug!(%peer, "{what}: {e:#}");
            }
        });
    }
}

/// Failed accepts in this process (out of descriptors, mostly), for `/metrics`.
pub static ACCEPT_ERRORS: AtomicU64 = AtomicU64::new(0);

/// What a listener does when `accept` fails: the error (`EMFILE`: out of descriptors,
/// `ENFILE`, `ENOBUFS`) stays until something closes, so retrying at once would spin.
/// Each failure is counted ([`ACCEPT_ERRORS`]); the listener waits 10 ms, doubling to
/// 1 s while failures continue; the log gets a line a minute at most, with the count
/// since the last.
#[derive(Debug, Default)]
pub struct Backoff {
    wait: Duration,
    logged: Option<Instant>,
    unlogged: u64,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MOST: Duration = Duration::from_secs(1);
    const LOG_EVERY: Duration = Duration::from_secs(60);

    /// Counts, maybe logs, and waits.
    pub async fn failed(&mut self, e: &std::io::Error, what: &str) {
        let wait = self.note(e, what);
        tokio::time::sleep(wait).await;
    }

    /// Counts and maybe logs a failure; the time to wait before the next try.
    fn note(&mut self, e: &std::io::Error, what: &str) -> Duration {
        ACCEPT_ERRORS.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        if self.logged.is_none_or(|t| now.duration_since(t) >= Self::LOG_EVERY) {
            let fix = if e.raw_os_error() == Some(libc::EMFILE) || e.raw_os_error() == Some(libc::ENFILE) {
                "; out of file descriptors: raise LimitNOFILE or lower [limits] max_descriptors"
            } else {
                ""
            };
            warn!(
                "{what}: accept failed: {e}{fix} ({} more since the last line; waiting up to {:?} between tries)",
                self.unlogged,
                Self::MOST
            );
            self.logged = Some(now);
            self.unlogged = 0;
        } else {
            self.unlogged += 1;
        }
        self.wait = (self.wait * 2).clamp(Self::FIRST, Self::MOST);
        self.wait
    }

    /// An accept succeeded: the next failure waits the shortest time again.
    pub fn reset(&mut self) {
        self.wait = Duration::ZERO;
    }
}

/// The accept queue a listener asks the kernel for (capped by `net.core.somaxconn`): a
/// burst of connections (every client rejoining after a restart, or a flood) waits there
/// for the accept loop instead of having its handshakes' last ACK dropped, which leaves the
/// peer believing it is connected while the server has no connection to refuse or time out.
const ACCEPT_BACKLOG: u32 = 4_096;

/// Listens on `addr`, the value of configuration key `key`. A failure says what to change,
/// in one line: these are the errors an operator meets at start.
pub async fn bind(addr: SocketAddr, key: &str) -> Result<TcpListener> {
    let listen = || -> std::io::Result<TcpListener> {
        let s = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        s.set_reuseaddr(true)?;
        s.bind(addr)?;
        s.listen(ACCEPT_BACKLOG)
    };
    listen().map_err(|e| anyhow::anyhow!("{key}: cannot listen on {addr}: {e}; {}", bind_fix(&e, addr, key)))
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
    /// Out of descriptors: the listener backs off (10 ms doubling to 1 s) instead of
    /// spinning, and counts every failure.
    #[test]
    fn failing_accepts_back_off_and_count() {
        use std::sync::atomic::Ordering;
        use std::time::Duration;
        let mut b = super::Backoff::default();
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        let before = super::ACCEPT_ERRORS.load(Ordering::Relaxed);
        let waits: Vec<u64> = (0..9).map(|_| b.note(&e, "test").as_millis() as u64).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert!(super::ACCEPT_ERRORS.load(Ordering::Relaxed) >= before + 9);
        // One line logged, the others counted for the next.
        assert_eq!(b.unlogged, 8);
        b.reset();
        assert_eq!(b.note(&e, "test"), Duration::from_millis(10));
    }

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
