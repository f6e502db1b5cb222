//! An application stream's two tasks: the uplink (application -> session) and the
//! downlink (session -> application).

use std::io;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes};
use mpflex_engine::{RecvResult, StreamId};
use mpflex_wire::reset;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tracing::debug;

use super::{SessionHandle, StreamSignals};
use crate::tcpinfo::set_linger_zero;

/// Carries an application connection over the session until both directions end.
/// `pending` holds bytes already read from the application but not yet queued.
pub async fn run_stream(h: SessionHandle, id: StreamId, app: TcpStream, signals: Arc<StreamSignals>, pending: Bytes) {
    let _ = app.set_nodelay(true);
    let (rd, wr) = app.into_split();
    let up = uplink(h.clone(), id, rd, signals.clone(), pending);
    let down = downlink(h.clone(), id, wr, signals.clone());
    tokio::join!(up, down);
    h.with(|sh| {
        if !sh.sess.stream_exists(id) {
            sh.streams.remove(&id);
        }
    });
}

/// Most bytes one application read takes.
const READ_MAX: usize = 256 * 1024;

thread_local! {
    /// Where application reads land before they are copied out at their size: one per
    /// runtime thread, shared by every stream (see [`uplink`]).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; READ_MAX]);
}

/// Application -> session. A read lands in the thread's scratch buffer and is copied out
/// at its exact size, because frames hold their payload until the peer acknowledges it: a
/// stream then keeps only what it has queued, never a read buffer of its own nor a big
/// allocation pinned by a short read (a growing buffer per stream holds memory far beyond
/// the data queued once thousands of streams are open; the README's "1,000 concurrent
/// streams" has the measurement).
/// The copy costs far less than the record's encryption.
async fn uplink(h: SessionHandle, id: StreamId, rd: OwnedReadHalf, sig: Arc<StreamSignals>, pending: Bytes) {
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
        let want = (cap as usize).min(READ_MAX);
        let ready = tokio::select! {
            r = rd.readable() => r,
            _ = sig.writable.notified() => continue, // reset while waiting
            _ = h.closed.cancelled() => return,
        };
        let r = ready.and_then(|()| {
            SCRATCH.with_borrow_mut(|s| rd.try_read(&mut s[..want]).map(|n| Bytes::copy_from_slice(&s[..n])))
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
                debug!(stream = id, "application read failed: {e}");
                h.with(|sh| sh.sess.stream_reset(id, reset::APP));
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
async fn downlink(h: SessionHandle, id: StreamId, mut wr: OwnedWriteHalf, sig: Arc<StreamSignals>) {
    let mut chunks: Vec<Bytes> = Vec::new();
    loop {
        // Take everything that is waiting (up to a bound) in one lock, write it in one go.
        let end = h.with(|sh| {
            let mut total = 0;
            loop {
                match sh.sess.stream_recv(id, 1 << 20) {
                    RecvResult::Data(b) => {
                        total += b.len();
                        chunks.push(b);
                        if total >= 1 << 20 {
                            return None;
                        }
                    }
                    other => return Some(other),
                }
            }
        });
        if !chunks.is_empty() {
            if let Err(e) = write_all_vectored(&mut wr, &mut chunks).await {
                debug!(stream = id, "application write failed: {e}");
                h.with(|sh| sh.sess.stream_reset(id, reset::APP));
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
                        abort_app(wr);
                        return;
                    }
                }
            }
            Some(RecvResult::Gone) => {
                // Reset by the peer: make the application see a reset too.
                abort_app(wr);
                return;
            }
        }
    }
}

/// Makes the application see a reset, never a clean end: the connection is closed with
/// SO_LINGER 0 (an RST) once the read half is gone too. Dropping the write half instead
/// would send a FIN first, and an application reading to EOF would take a truncated
/// stream for a complete one.
fn abort_app(wr: OwnedWriteHalf) {
    let _ = set_linger_zero(wr.as_ref());
    wr.forget();
}

/// Writes all `chunks` (and empties the vector) with as few system calls as possible.
async fn write_all_vectored(wr: &mut OwnedWriteHalf, chunks: &mut Vec<Bytes>) -> io::Result<()> {
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
