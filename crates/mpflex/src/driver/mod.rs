//! The I/O driver: runs a sans-IO [`Session`] over real sockets.
//!
//! One session is shared by small tokio tasks under a mutex that is never held across an
//! `.await`: per path a reader (decrypt, decode, feed the engine) and a writer (late
//! binding: pull frames only while the kernel socket holds little unsent data), per
//! application stream an uplink and a downlink task, and one timer task. The engine's
//! events are turned into `Notify` wake-ups whenever the lock is released.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::{Buf, Bytes, BytesMut};
use mpflex_engine::{Event, PathWriter, RecvResult, Session, StreamId, WriterStep};
use mpflex_wire::{decode_all, reset, TargetAddr};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::crypto::{seal_record, Opener, Transport};
use crate::pathconn::Joined;
use crate::tcpinfo::{cc_bandwidth, idle_restart_applies, set_linger_zero, set_notsent_lowat, tcp_info, SsthreshReset};

/// Wake-ups for the two tasks of a stream.
#[derive(Default)]
pub struct StreamSignals {
    /// Data, a fin or a reset is waiting for the application.
    pub readable: Notify,
    /// Flow-control credit arrived (or the stream was reset).
    pub writable: Notify,
}

pub struct PathSlot {
    pub name: String,
    pub wake: Arc<Notify>,
    /// Cancels the tasks of the path's current connection.
    pub kill: CancellationToken,
    /// Counts connections of this path, so a replaced one does not take the path down.
    pub generation: u64,
}

pub struct Shared {
    pub sess: Session,
    pub streams: HashMap<StreamId, Arc<StreamSignals>>,
    pub paths: Vec<PathSlot>,
    timer_deadline: Option<Instant>,
}

/// A stream the peer opened (server side): connect it.
pub struct Opened {
    pub stream: StreamId,
    pub addr: TargetAddr,
    pub signals: Arc<StreamSignals>,
}

#[derive(Clone)]
pub struct SessionHandle {
    inner: Arc<Mutex<Shared>>,
    timer: Arc<Notify>,
    opens: Option<mpsc::UnboundedSender<Opened>>,
    /// Fatal session error or shutdown.
    pub closed: CancellationToken,
    pub lowat_max: u32,
    /// Congestion control for this session's path connections.
    pub congestion: Option<String>,
    /// Whether path connections use the kernel's TCP pacing.
    pub pacing: bool,
    /// Whether a path restarting after an idle spell drops its old slow-start threshold
    /// ([`SsthreshReset`]).
    pub fresh_ssthresh: bool,
}

impl SessionHandle {
    pub fn new(
        sess: Session,
        path_names: Vec<String>,
        opens: Option<mpsc::UnboundedSender<Opened>>,
        lowat_max: u32,
    ) -> Self {
        let paths = path_names
            .into_iter()
            .map(|name| PathSlot {
                name,
                wake: Arc::new(Notify::new()),
                kill: CancellationToken::new(),
                generation: 0,
            })
            .collect();
        let h = SessionHandle {
            inner: Arc::new(Mutex::new(Shared {
                sess,
                streams: HashMap::new(),
                paths,
                timer_deadline: None,
            })),
            timer: Arc::new(Notify::new()),
            opens,
            closed: CancellationToken::new(),
            lowat_max,
            congestion: None,
            pacing: true,
            fresh_ssthresh: true,
        };
        tokio::spawn(timer_task(h.clone()));
        h
    }

    /// Runs `f` under the session lock, then turns the engine's events into wake-ups.
    pub fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        let mut sh = self.inner.lock().expect("session lock poisoned");
        let r = f(&mut sh);
        self.dispatch(&mut sh);
        r
    }

    fn dispatch(&self, sh: &mut Shared) {
        let mut wake_paths = false;
        while let Some(ev) = sh.sess.poll_event() {
            match ev {
                Event::WakePaths => wake_paths = true,
                Event::StreamReadable(id) => {
                    if let Some(s) = sh.streams.get(&id) {
                        s.readable.notify_one();
                    }
                }
                Event::StreamWritable(id) => {
                    if let Some(s) = sh.streams.get(&id) {
                        s.writable.notify_one();
                    }
                }
                Event::StreamReset { stream, code } => {
                    debug!(stream, code, "stream reset by peer");
                    if let Some(s) = sh.streams.remove(&stream) {
                        s.readable.notify_one();
                        s.writable.notify_one();
                    }
                }
                Event::StreamOpened { stream, addr } => {
                    let signals = Arc::new(StreamSignals::default());
                    sh.streams.insert(stream, signals.clone());
                    let sent = self
                        .opens
                        .as_ref()
                        .is_some_and(|tx| tx.send(Opened { stream, addr, signals }).is_ok());
                    if !sent {
                        sh.sess.stream_reset(stream, reset::REFUSED);
                    }
                }
                Event::PathTimedOut(p) => {
                    warn!(path = %sh.paths[p].name, "path silent for too long; dropping it");
                    sh.paths[p].kill.cancel();
                }
                Event::Closed { code } => {
                    info!(code, "peer closed the session");
                    self.closed.cancel();
                }
            }
        }
        if wake_paths {
            for p in &sh.paths {
                p.wake.notify_one();
            }
        }
        let next = sh.sess.poll_timeout();
        if next.is_some() && (sh.timer_deadline.is_none() || next < sh.timer_deadline) {
            self.timer.notify_one();
        }
    }

    /// Opens a stream (client side) and registers its signals. Returns the part of
    /// `initial` flow control did not let through yet; hand it to [`run_stream`].
    pub fn open_stream(&self, addr: TargetAddr, initial: Bytes) -> (StreamId, Arc<StreamSignals>, Bytes) {
        let signals = Arc::new(StreamSignals::default());
        let (id, rest) = self.with(|sh| {
            let id = sh.sess.open_stream(addr);
            let taken = sh.sess.stream_send(id, initial.clone());
            sh.streams.insert(id, signals.clone());
            (id, initial.slice(taken..))
        });
        (id, signals, rest)
    }

    pub fn path_name(&self, p: usize) -> String {
        self.with(|sh| sh.paths[p].name.clone())
    }

    /// Adds a path slot on the server, where paths appear as clients dial them.
    pub fn ensure_path_slot(&self, p: usize, name: &str) {
        self.with(|sh| {
            while sh.paths.len() <= p {
                let i = sh.paths.len();
                sh.paths.push(PathSlot {
                    name: format!("path{i}"),
                    wake: Arc::new(Notify::new()),
                    kill: CancellationToken::new(),
                    generation: 0,
                });
            }
            sh.paths[p].name = name.to_string();
        })
    }

    /// Runs one connection of path `p`, joined as `joined` says, until it fails or is
    /// replaced. Returns why it ended.
    pub async fn run_path(&self, p: usize, sock: TcpStream, transport: Transport, joined: Joined) -> Result<()> {
        let Joined { nonces, leftover } = joined;
        let kill = CancellationToken::new();
        let (wake, generation) = self.with(|sh| {
            // A newer connection for the same path replaces the old one.
            sh.paths[p].kill.cancel();
            sh.paths[p].kill = kill.clone();
            sh.paths[p].generation += 1;
            sh.sess.path_up(p, Instant::now());
            (sh.paths[p].wake.clone(), sh.paths[p].generation)
        });
        let sock = Arc::new(sock);
        let t = Arc::new(transport);
        let res = tokio::select! {
            r = path_reader(self.clone(), p, sock.clone(), t.clone(), nonces.1, leftover) => r,
            r = path_writer(self.clone(), p, sock.clone(), t, wake, nonces.0) => r,
            _ = kill.cancelled() => Err(anyhow::anyhow!("path dropped")),
            _ = self.closed.cancelled() => Ok(()),
        };
        self.with(|sh| {
            // Only the current connection may take the path down, not one it replaced.
            if sh.paths[p].generation == generation {
                sh.sess.path_down(p);
            }
        });
        kill.cancel();
        res
    }

    /// Queues a session Close on every path and gives writers a moment to send it.
    pub async fn close(&self, code: u8) {
        self.with(|sh| sh.sess.close(code));
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.closed.cancel();
    }

    /// Resets every stream locally (the session is going away).
    pub fn abort_all_streams(&self) {
        self.with(|sh| {
            for id in sh.sess.stream_ids() {
                sh.sess.stream_reset(id, reset::SESSION_GONE);
            }
            for (_, s) in sh.streams.drain() {
                s.readable.notify_one();
                s.writable.notify_one();
            }
        });
    }

    /// Whether any path is up.
    pub fn any_path_up(&self) -> bool {
        self.with(|sh| (0..sh.sess.num_paths()).any(|p| sh.sess.path_status(p) == mpflex_engine::PathStatus::Up))
    }

    /// A JSON snapshot for the status endpoint.
    pub fn status_json(&self) -> serde_json::Value {
        self.with(|sh| {
            let paths: Vec<serde_json::Value> = (0..sh.paths.len())
                .map(|p| {
                    let name = sh.paths[p].name.clone();
                    match sh.sess.path_counters(p) {
                        Some((c, snap)) => serde_json::json!({
                            "id": p,
                            "name": name,
                            "up": sh.sess.path_status(p) == mpflex_engine::PathStatus::Up,
                            "bytes_sent": c.bytes_sent,
                            "bytes_received": c.bytes_received,
                            "payload_sent": c.payload_sent,
                            "payload_resent": c.payload_resent,
                            "duplicate_received": c.duplicate_received,
                            "failures": c.failures,
                            "suspicions": c.suspicions,
                            "stall_reinjections": c.stall_reinjections,
                            "owd_us": sh.sess.path_owd(p).map(|(o, _)| o),
                            "owd_dev_us": sh.sess.path_owd(p).map(|(_, d)| d),
                            "srtt_us": snap.srtt.as_micros() as u64,
                            "rttvar_us": snap.rttvar.as_micros() as u64,
                            "cwnd": snap.cwnd,
                            "mss": snap.mss,
                            "in_flight": snap.in_flight,
                            "notsent": snap.notsent,
                            "delivery_rate": snap.delivery_rate,
                        }),
                        None => serde_json::json!({"id": p, "name": name, "up": false}),
                    }
                })
                .collect();
            let held = sh.sess.held_bytes();
            serde_json::json!({
                "scheduler": sh.sess.scheduler_name(),
                "streams": sh.sess.num_streams(),
                "buffered_frames": sh.sess.buffered_frames(),
                "held_bytes": {"send": held.0, "receive": held.1},
                "early_delivered": sh.sess.early_delivered(),
                "paths": paths,
            })
        })
    }
}

async fn timer_task(h: SessionHandle) {
    loop {
        let next = h.with(|sh| {
            let now = Instant::now();
            if sh.sess.poll_timeout().is_some_and(|t| t <= now) {
                sh.sess.handle_timeout(now);
            }
            let next = sh.sess.poll_timeout();
            sh.timer_deadline = next;
            next
        });
        let sleep_to = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep_until(sleep_to.into()) => {}
            _ = h.timer.notified() => {}
            _ = h.closed.cancelled() => return,
        }
    }
}

async fn path_reader(
    h: SessionHandle,
    p: usize,
    sock: Arc<TcpStream>,
    t: Arc<Transport>,
    nonce: u64,
    mut buf: BytesMut,
) -> Result<()> {
    let mut opener = Opener::starting_at(nonce);
    let mut frames = Vec::new();
    loop {
        if buf.capacity() - buf.len() < 128 * 1024 {
            buf.reserve(256 * 1024);
        }
        if !buf.is_empty() {
            // Bytes read during the join exchange come first.
            while let Some(plain) = opener.open(&t, &mut buf)? {
                frames.extend(decode_all(plain.freeze()).context("malformed frame")?);
            }
        }
        sock.readable().await?;
        match sock.try_read_buf(&mut buf) {
            Ok(0) => bail!("peer closed the path"),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e.into()),
        }
        while let Some(plain) = opener.open(&t, &mut buf)? {
            frames.extend(decode_all(plain.freeze()).context("malformed frame")?);
        }
        if frames.is_empty() {
            continue;
        }
        let now = Instant::now();
        let res = h.with(|sh| {
            for f in frames.drain(..) {
                sh.sess.handle_frame(p, f, now)?;
            }
            Ok::<_, mpflex_engine::ProtocolError>(())
        });
        if let Err(e) = res {
            warn!("protocol error from peer: {e}; closing the session");
            h.closed.cancel();
            return Err(e.into());
        }
    }
}

/// Moves the bytes the engine's late-binding policy lets this path take
/// ([`Session::drive_writer`]): reads the socket's statistics, applies the low-water mark,
/// writes the sealed records, and waits on the socket or for a wake-up.
async fn path_writer(
    h: SessionHandle,
    p: usize,
    sock: Arc<TcpStream>,
    t: Arc<Transport>,
    wake: Arc<Notify>,
    mut nonce: u64,
) -> Result<()> {
    // Records are encoded straight into the wire buffer and sealed there in place.
    let mut records: Vec<Range<usize>> = Vec::new();
    let mut wire = Vec::with_capacity(1 << 20);
    let idle_restart = idle_restart_applies(&*sock);
    let mut ssthresh = SsthreshReset::new(&*sock, h.fresh_ssthresh && idle_restart);
    let mut writer = PathWriter::new(h.lowat_max, idle_restart, ssthresh.available());
    let mut lowat = writer.lowat();
    set_notsent_lowat(&*sock, lowat)?;
    loop {
        let info = tcp_info(&*sock)?;
        let bandwidth = cc_bandwidth(&*sock);
        wire.clear();
        records.clear();
        let step = h.with(|sh| {
            sh.sess.drive_writer(
                p,
                &mut writer,
                &info,
                bandwidth,
                Instant::now(),
                &mut wire,
                &mut records,
            )
        });
        if writer.lowat() != lowat {
            lowat = writer.lowat();
            set_notsent_lowat(&*sock, lowat)?;
        }
        match step {
            WriterStep::Closed { state } => bail!("path connection closed (TCP state {state})"),
            WriterStep::Full => wait_below_lowat(&sock).await?,
            WriterStep::Idle { until } => {
                let deadline = until.unwrap_or_else(|| Instant::now() + Duration::from_millis(200));
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep_until(deadline.into()) => {}
                }
            }
            WriterStep::Write { reset_ssthresh } => {
                for r in &records {
                    seal_record(&t, &mut nonce, &mut wire[r.clone()])?;
                }
                if reset_ssthresh && !ssthresh.reset(&*sock) {
                    writer.disable_ssthresh_reset();
                }
                write_all(&sock, &wire).await?;
            }
        }
    }
}

/// Waits until the socket's unsent bytes drop below its low-water mark.
async fn wait_below_lowat(sock: &TcpStream) -> Result<()> {
    // Forget the cached readiness so the wait ends only at the kernel's "below the
    // low-water mark" edge.
    let _ = sock.try_io(Interest::WRITABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
    // The kernel signals "writable again" only to a waiter that found the socket
    // unwritable: poll(2) once, which records that (SOCK_NOSPACE).
    if poll_writable_now(sock) {
        // Let the other tasks (this path's reader first) run before looking again.
        tokio::task::yield_now().await;
        return Ok(());
    }
    tokio::select! {
        r = sock.writable() => r?,
        // Never sleep long on a missed edge.
        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
    }
    Ok(())
}

/// A zero-timeout poll(2) for POLLOUT, which honours TCP_NOTSENT_LOWAT.
fn poll_writable_now(sock: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    n > 0 && pfd.revents & libc::POLLOUT != 0
}

async fn write_all(sock: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        sock.writable().await?;
        match sock.try_write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

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
                if !offer(&h, id, &sig, data).await {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
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

#[cfg(test)]
mod tests;
