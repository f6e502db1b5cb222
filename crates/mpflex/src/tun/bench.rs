//! The TUN ingress's TCP/IP stack without a session, for measuring it beside other
//! user-space stacks (`examples/tun_stacks/`, docs/tun.md "Choosing the stack"): the
//! same [`Stack`], connection halves and read loop as [`super::stack::run`], with each
//! accepted connection handed to the caller instead of carried as a stream, and the
//! decision on a held SYN made by the caller instead of the server's dial. UDP and echo
//! are left out: they do not go through the stack.
//!
//! Not part of mpflex's interface: it exists so that the measurement exercises the
//! shipped stack code rather than a copy of it.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use anyhow::{Context as _, Result};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::conn::{opening, Conn, ConnRead, ConnWrite};
use super::packet::{classify, Kind};
use super::stack::{Stack, Stepped, READ_BATCH};
use crate::driver::AppRead;

/// One TCP connection the stack accepted, as a tokio byte stream.
pub struct LocalConn {
    rd: ConnRead,
    wr: ConnWrite,
}

impl LocalConn {
    fn new(stack: Arc<Stack>, socket: smoltcp::iface::SocketHandle) -> LocalConn {
        let conn = Arc::new(Conn::new(stack, socket));
        LocalConn {
            rd: ConnRead(conn.clone()),
            wr: ConnWrite(conn),
        }
    }
}

impl AsyncRead for LocalConn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.rd.try_read(buf.initialize_unfilled()) {
            Ok(n) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Registered under the stack's lock, after a second look: data that came
                // between the read and here wakes the task at once instead of never.
                self.rd.0.with(|s| {
                    if s.can_recv() || (!s.may_recv() && !opening(s)) {
                        cx.waker().wake_by_ref();
                    } else {
                        s.register_recv_waker(cx.waker());
                    }
                });
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for LocalConn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.wr).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.wr).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.wr).poll_shutdown(cx)
    }
}

/// Runs the stack on `dev` until the device fails. Every SYN is held, as the ingress
/// holds it until the server's dial: `decide(destination)` stands for that dial (true:
/// the SYN gets its SYN-ACK and the connection goes to `on_conn`; false: an RST). A
/// destination decided true is answered at once for a while after, as in the ingress.
pub async fn serve<D, F>(
    dev: tun_rs::AsyncDevice,
    mtu: usize,
    decide: D,
    on_conn: impl Fn(LocalConn, SocketAddr) + Send + Sync + 'static,
) -> Result<()>
where
    D: Fn(SocketAddr) -> F + Send + Sync + 'static,
    F: Future<Output = bool> + Send + 'static,
{
    let stack = Arc::new(Stack::new(mtu));
    let (decide, on_conn) = (Arc::new(decide), Arc::new(on_conn));
    let mut buf = vec![0u8; 65_536];
    let (mut tcp, mut out) = (Vec::new(), Vec::new());
    loop {
        for _ in 0..READ_BATCH {
            let n = match dev.try_recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e).context("reading the TUN device"),
            };
            if let Kind::Tcp { .. } = classify(&buf[..n]) {
                tcp.push(buf[..n].to_vec());
            }
            stack.count(|c| c.packets_in += 1);
        }
        let Stepped { accepted, held, delay } = stack.step(&mut tcp, &mut out, true);
        for p in &out {
            let _ = dev.send(p).await;
        }
        for (socket, dst) in accepted {
            on_conn(LocalConn::new(stack.clone(), socket), dst);
        }
        for (app, dst) in held {
            let (stack, decide, on_conn) = (stack.clone(), decide.clone(), on_conn.clone());
            tokio::spawn(async move {
                if !decide(dst).await {
                    stack.refuse_held(app, dst);
                    return;
                }
                match stack.accept_held(app, dst) {
                    Some(socket) => on_conn(LocalConn::new(stack, socket), dst),
                    None => stack.refuse_held(app, dst),
                }
            });
        }
        tokio::select! {
            r = dev.readable() => r.context("waiting on the TUN device")?,
            _ = stack.poked.notified() => {}
            _ = tokio::time::sleep(delay) => {}
        }
    }
}
