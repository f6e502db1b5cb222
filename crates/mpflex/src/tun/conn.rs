//! A TCP connection of the TUN's stack as a stream's application side: its two halves
//! read and write the smoltcp socket under the stack's lock and wake the stack's task,
//! which sends what they queued and the window updates their reads opened.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp::{self, RecvError, State};
use tokio::io::AsyncWrite;

use super::stack::Stack;
use crate::driver::{AppRead, AppWrite};

/// One connection's socket; the last half dropped hands it back to the stack, which
/// removes it once it has closed.
pub struct Conn {
    stack: Arc<Stack>,
    socket: SocketHandle,
}

impl Conn {
    pub fn new(stack: Arc<Stack>, socket: SocketHandle) -> Self {
        Conn { stack, socket }
    }

    pub(super) fn with<R>(&self, f: impl FnOnce(&mut tcp::Socket<'static>) -> R) -> R {
        self.stack.with_socket(self.socket, f)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.stack.release(self.socket);
    }
}

/// The application's sending half.
pub struct ConnRead(pub Arc<Conn>);
/// The application's receiving half.
pub struct ConnWrite(pub Arc<Conn>);

/// Whether the handshake is still under way: nothing to read or write yet.
pub(super) fn opening(s: &tcp::Socket<'_>) -> bool {
    matches!(s.state(), State::Listen | State::SynReceived | State::SynSent)
}

impl AppRead for ConnRead {
    fn readable(&self) -> impl std::future::Future<Output = io::Result<()>> + Send {
        poll_fn(move |cx| {
            self.0.with(|s| {
                if s.can_recv() || (!s.may_recv() && !opening(s)) {
                    Poll::Ready(Ok(()))
                } else {
                    s.register_recv_waker(cx.waker());
                    Poll::Pending
                }
            })
        })
    }

    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.0.with(|s| match s.recv_slice(buf) {
            Ok(0) => Err(io::ErrorKind::WouldBlock.into()),
            Ok(n) => Ok(n),
            Err(RecvError::Finished) => Ok(0),
            Err(RecvError::InvalidState) if opening(s) => Err(io::ErrorKind::WouldBlock.into()),
            Err(RecvError::InvalidState) => Err(io::ErrorKind::ConnectionReset.into()),
        });
        if matches!(r, Ok(n) if n > 0) {
            // The window opened: the stack may have an update to send.
            self.0.stack.poke();
        }
        r
    }
}

impl AsyncWrite for ConnWrite {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = self.0.with(|s| {
            if s.can_send() {
                return Poll::Ready(s.send_slice(buf).map_err(|_| io::ErrorKind::BrokenPipe.into()));
            }
            if s.may_send() || opening(s) {
                s.register_send_waker(cx.waker());
                return Poll::Pending;
            }
            Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()))
        });
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.0.stack.poke();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// A FIN after what is queued.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.with(|s| s.close());
        self.0.stack.poke();
        Poll::Ready(Ok(()))
    }
}

impl AppWrite for ConnWrite {
    fn unacked(&self) -> usize {
        self.0.with(|s| s.send_queue())
    }

    /// An RST, at once.
    fn abort(self) {
        self.0.with(|s| s.abort());
        self.0.stack.poke();
    }
}
