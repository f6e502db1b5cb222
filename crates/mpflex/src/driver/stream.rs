//! An application stream's two tasks: the uplink (application -> session) and the
//! downlink (session -> application).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use mpflex_engine::{RecvResult, StreamId};
use mpflex_wire::{FlowCloseCode, ResetCode, TargetAddr};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tracing::{debug, info};

use super::{bufpool, SessionHandle, StreamSignals};
use crate::tcpinfo::set_linger_zero;

/// How long a reset from the peer waits for the application to take the bytes that came
/// before it: an application that does not read gets the reset then.
const ABORT_DRAIN: Duration = Duration::from_secs(2);

/// An application's connection as a stream carries it: a kernel socket (SOCKS5,
/// REDIRECT, TPROXY) or a connection of the TUN ingress's own TCP stack.
pub trait AppConn: Send + 'static {
    type Rd: AppRead;
    type Wr: AppWrite;
    fn into_halves(self) -> (Self::Rd, Self::Wr);
}

/// The application's sending half, read by readiness and non-blocking reads so a read
/// lands in a shared scratch buffer ([`uplink`]).
pub trait AppRead: Send + Sync + 'static {
    /// Ready to read: data, its end, or an error is waiting.
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send;
    /// What is waiting (0: the application's end), or `WouldBlock`.
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
}

/// The application's receiving half.
pub trait AppWrite: AsyncWrite + Unpin + Send + 'static {
    /// Bytes written that the application's side has not acknowledged yet: an abort
    /// would discard them.
    fn unacked(&self) -> usize;
    /// Makes the application see a reset, never a clean end.
    fn abort(self);
}

impl AppConn for TcpStream {
    type Rd = OwnedReadHalf;
    type Wr = OwnedWriteHalf;
    fn into_halves(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let _ = self.set_nodelay(true);
        self.into_split()
    }
}

impl AppRead for OwnedReadHalf {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        OwnedReadHalf::readable(self)
    }
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        OwnedReadHalf::try_read(self, buf)
    }
}

impl AppWrite for OwnedWriteHalf {
    fn unacked(&self) -> usize {
        crate::tcpinfo::unacked(self.as_ref())
    }

    /// The connection is closed with SO_LINGER 0 (an RST) once the read half is gone
    /// too. Dropping the write half instead would send a FIN first, and an application
    /// reading to EOF would take a truncated stream for a complete one.
    fn abort(self) {
        let _ = set_linger_zero(self.as_ref());
        self.forget();
    }
}

/// Carries an application connection over the session until both directions end.
/// `pending` holds bytes already read from the application but not yet queued.
pub async fn run_stream<A: AppConn>(
    h: SessionHandle,
    id: StreamId,
    app: A,
    signals: Arc<StreamSignals>,
    pending: Bytes,
) {
    let (rd, wr) = app.into_halves();
    run_halves(h, id, rd, wr, signals, pending).await
}

/// [`run_stream`] on a connection already split (its first bytes read off `rd`).
pub async fn run_halves<R: AppRead, W: AppWrite>(
    h: SessionHandle,
    id: StreamId,
    rd: R,
    wr: W,
    signals: Arc<StreamSignals>,
    pending: Bytes,
) {
    let up = uplink(h.clone(), id, rd, signals.clone(), pending);
    let down = downlink(h.clone(), id, wr, signals.clone());
    tokio::join!(up, down);
    h.with(|sh| {
        if !sh.sess.stream_exists(id) {
            sh.streams.remove(&id);
        }
    });
}

/// Application -> session. A read lands in a buffer of the pool ([`bufpool`]) and is
/// queued as it lies, its frames slices of the buffer until the peer acknowledges them;
/// a short read is copied out at its size instead ([`bufpool::Buf::into_bytes`]), so a
/// stream never pins a big buffer for a few bytes (thousands of open streams, the
/// README's "1,000 concurrent streams"), and an idle stream holds none.
async fn uplink<R: AppRead>(h: SessionHandle, id: StreamId, rd: R, sig: Arc<StreamSignals>, pending: Bytes) {
    if !offer(&h, id, &sig, pending).await {
        return;
    }
    loop {
        let (cap, exists) = h.with(|sh| (sh.sess.send_capacity(id), sh.sess.stream_exists(id)));
        if !exists {
            return;
        }
        if cap == 0 {
            tokio::select! {
                _ = sig.writable.notified() => {}
                _ = h.closed.cancelled() => return,
            }
            continue;
        }
        let want = (cap as usize).min(bufpool::BUF_LEN);
        let ready = tokio::select! {
            r = rd.readable() => r,
            _ = sig.writable.notified() => continue, // reset while waiting
            _ = h.closed.cancelled() => return,
        };
        let r = ready.and_then(|()| {
            let mut buf = bufpool::Buf::take();
            rd.try_read(&mut buf[..want]).map(|n| buf.into_bytes(n))
        });
        match r {
            Ok(data) if data.is_empty() => {
                h.with(|sh| sh.sess.stream_finish(id));
                return;
            }
            Ok(data) => {
                let dry = data.len() < want;
                if !offer(&h, id, &sig, data).await {
                    return;
                }
                // The socket held less than the session would take: the application is
                // not ahead of the paths now, and what is queued is all there is.
                if dry {
                    h.with(|sh| sh.sess.stream_source_dry(id));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                h.with(|sh| sh.sess.stream_source_dry(id));
                continue;
            }
            Err(e) => {
                // An RST from the application: what it sent before still goes first.
                debug!(stream = id, "application read failed: {e}");
                h.with(|sh| sh.sess.stream_abort(id, ResetCode::App));
                return;
            }
        }
    }
}

/// Queues `data` read from the application, waiting for credit as long as it takes. The
/// session window is shared by all streams: others may have used the capacity a stream saw
/// before its read completed. Nothing read is ever dropped. False when the stream or the
/// session ended first.
async fn offer(h: &SessionHandle, id: StreamId, sig: &StreamSignals, mut data: Bytes) -> bool {
    while !data.is_empty() {
        let (taken, exists) = h.with(|sh| {
            sh.sess.set_clock(Instant::now());
            let n = sh.sess.stream_send(id, data.clone());
            (n, sh.sess.stream_exists(id))
        });
        data.advance(taken);
        if data.is_empty() {
            break;
        }
        if !exists {
            return false;
        }
        tokio::select! {
            _ = sig.writable.notified() => {}
            _ = h.closed.cancelled() => return false,
        }
    }
    true
}

/// Session -> application.
async fn downlink<W: AppWrite>(h: SessionHandle, id: StreamId, mut wr: W, sig: Arc<StreamSignals>) {
    let mut chunks: Vec<Bytes> = Vec::new();
    loop {
        // Take everything that is waiting (up to a bound) in one lock, write it in one go.
        // The bytes stay charged to the session's credit until written, so a destination
        // that reads slowly holds the peer back instead of this task's memory growing.
        let (end, taken) = h.with(|sh| {
            let mut total = 0;
            loop {
                match sh.sess.stream_take(id, 1 << 20) {
                    RecvResult::Data(b) => {
                        total += b.len();
                        chunks.push(b);
                        if total >= 1 << 20 {
                            return (None, total);
                        }
                    }
                    other => return (Some(other), total),
                }
            }
        });
        if !chunks.is_empty() {
            // A destination that stops reading does not hold the task past the session.
            let written = tokio::select! {
                r = write_all_vectored(&mut wr, &mut chunks) => r,
                _ = h.closed.cancelled() => Err(io::ErrorKind::ConnectionAborted.into()),
            };
            // Written or lost with the application: either way no longer held.
            h.with(|sh| {
                sh.sess.stream_delivered(taken as u64);
                if let Err(e) = &written {
                    debug!(stream = id, "application write failed: {e}");
                    sh.sess.stream_abort(id, ResetCode::App);
                }
            });
            if written.is_err() {
                if h.closed.is_cancelled() {
                    wr.abort();
                }
                return;
            }
        }
        match end {
            None | Some(RecvResult::Data(_)) => {}
            Some(RecvResult::Fin) => {
                let _ = wr.shutdown().await;
                return;
            }
            Some(RecvResult::Blocked) => {
                tokio::select! {
                    _ = sig.readable.notified() => {}
                    _ = h.closed.cancelled() => {
                        wr.abort();
                        return;
                    }
                }
            }
            Some(RecvResult::Gone) => {
                // Reset by the peer: the application sees a reset too, once it has the
                // bytes that came before it (written above).
                abort_after_unacked(wr, &h).await;
                return;
            }
        }
    }
}

/// Resets the application's connection once what was written to it is acknowledged, or
/// after [`ABORT_DRAIN`]: an RST discards the unacknowledged bytes, which over a direct
/// TCP connection would have been in the application's receive buffer before the reset.
async fn abort_after_unacked<W: AppWrite>(wr: W, h: &SessionHandle) {
    let until = Instant::now() + ABORT_DRAIN;
    while wr.unacked() > 0 && Instant::now() < until && !h.closed.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    wr.abort();
}

/// Writes all `chunks` (and empties the vector) with as few system calls as possible.
async fn write_all_vectored<W: AsyncWrite + Unpin>(wr: &mut W, chunks: &mut Vec<Bytes>) -> io::Result<()> {
    let mut i = 0;
    while i < chunks.len() {
        let slices: Vec<io::IoSlice<'_>> = chunks[i..].iter().take(64).map(|c| io::IoSlice::new(c)).collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let c = &mut chunks[i];
            if n >= c.len() {
                n -= c.len();
                i += 1;
            } else {
                c.advance(n);
                n = 0;
            }
        }
    }
    chunks.clear();
    Ok(())
}

/// (client) Logs a stream the server refused, in words: the application sees only a
/// reset, so the log says why and where to change it.
pub(super) fn say_refused(stream: StreamId, code: ResetCode, target: Option<&TargetAddr>) {
    let to = target.map_or("?".to_string(), |t| t.to_string());
    match code {
        ResetCode::Refused => info!(
            stream,
            "stream to {to} refused by the server's [acl]: allow it there (the server's log names the rule)"
        ),
        ResetCode::Limit => info!(
            stream,
            "stream to {to} refused by the server's [limits]: this client holds as many streams or descriptors as the \
             server allows (its log and /metrics name the limit); close some, or ask its operator"
        ),
        _ => {}
    }
}

/// (client) Logs a datagram flow the server closed.
pub(super) fn say_flow_closed(flow: u32, code: FlowCloseCode, target: &TargetAddr) {
    match code {
        FlowCloseCode::Refused => info!(
            flow,
            "datagram flow to {target} refused by the server's [acl]: allow it there (the server's log names the rule)"
        ),
        FlowCloseCode::TooMany => info!(
            flow,
            "datagram flow to {target} refused by the server's [limits]: this client holds as many flows or \
             descriptors as the server allows (its log and /metrics name the limit)"
        ),
        _ => debug!(flow, %code, "datagram flow closed by the peer"),
    }
}
