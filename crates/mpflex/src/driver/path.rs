//! A path connection's two tasks: the reader (decrypt, decode, feed the engine) and the
//! writer (late binding: hand the socket what the engine's policy lets it take).

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use mpflex_engine::{PathSocket, WriterStep};
use mpflex_wire::{decode_all, Frame};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{bufpool, SessionHandle};
use crate::crypto::{Opener, Sealer, Transport};
use crate::pathconn::{Joined, PACING_CAP};
use crate::tcpinfo::{
    cc_bandwidth, idle_restart_applies, set_max_pacing_rate, set_notsent_lowat, set_quickack, tcp_info, SsthreshReset,
};

/// An idle writer of a session that carries streams or flows reads its socket's
/// statistics at least this often, so the schedulers decide on fresh ones when data comes.
/// A writer of a session that carries nothing waits for the engine alone, which wakes it
/// for data and for each keepalive (its statistics are read then): a server holding
/// thousands of idle sessions spent a quarter of a core refreshing them five times a
/// second, and still a few percent once every 5 s.
const IDLE_REFRESH: Duration = Duration::from_millis(200);

/// The least age of a BBR path's bandwidth reading before its writer reads it again.
/// BBR's estimate is the largest delivery-rate sample of its last ten or so round trips
/// (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016): within
/// a round trip it can only rise to a new sample, so a reading serves for the path's
/// smoothed RTT, and for at least this long on paths of a smaller one (loopback, a LAN),
/// whose writers step every few tens of microseconds. Read on every step, `TCP_CC_INFO`
/// was a third of a busy BBR server's system calls (docs/performance.md).
const BANDWIDTH_MIN_AGE: Duration = Duration::from_millis(1);

/// How often bytes of an incomplete record are reported as a sign of life
/// ([`mpflex_engine::Session::path_receiving`]) at most: a small fraction of the
/// suspicion threshold's 150 ms floor, and few lock turns on a fast link.
const RECEIVING_EVERY: Duration = Duration::from_millis(10);
/// A path read of fewer bytes (control frames, a trickle of data) has its records'
/// plaintext copied out, and its buffer is free again at once: only reads worth a
/// buffer keep one.
const KEEP_READ_FROM: usize = 32 * 1024;

impl SessionHandle {
    /// Runs one connection of path `p`, joined as `joined` says, until it fails or is
    /// replaced. Returns why it ended.
    pub async fn run_path(&self, p: usize, sock: TcpStream, transport: Transport, joined: Joined) -> Result<()> {
        let Joined { nonces, leftover } = joined;
        let kill = CancellationToken::new();
        // What the session's writer of this path needs to know of its socket.
        let idle_restart = idle_restart_applies(&sock);
        let ssthresh = SsthreshReset::new(&sock, idle_restart);
        let socket = PathSocket {
            idle_restart,
            ssthresh_reset: ssthresh.available(),
        };
        let generation = self.with(|sh| {
            // A newer connection for the same path replaces the old one.
            sh.paths[p].kill.cancel();
            sh.paths[p].kill = kill.clone();
            sh.paths[p].generation += 1;
            sh.sess.path_up_with(p, socket, Instant::now());
            sh.paths[p].generation
        });
        self.paths_changed.notify_one();
        let sock = Arc::new(sock);
        let t = Arc::new(transport);
        let res = tokio::select! {
            r = path_reader(self.clone(), p, sock.clone(), t.clone(), nonces.1, leftover) => r,
            r = path_writer(self.clone(), p, sock.clone(), t, generation, nonces.0, ssthresh) => r,
            _ = kill.cancelled() => Err(anyhow::anyhow!("path dropped")),
            _ = self.closed.cancelled() => Ok(()),
        };
        self.with(|sh| {
            // Only the current connection may take the path down, not one it replaced.
            if sh.paths[p].generation == generation {
                sh.sess.path_down(p);
            }
        });
        self.paths_changed.notify_one();
        kill.cancel();
        res
    }
}

/// Reads, opens and decodes what the peer sends on path `p`, and feeds it to the session.
/// A read lands in a buffer of the pool ([`bufpool`]) only while it is being read: an
/// idle path holds nothing but the front of a record whose rest is on its way (a server's
/// paths are mostly idle, thousands of them). Payloads go to the session as slices of the
/// buffer they arrived in; the session copies out those that must wait.
pub(super) async fn path_reader(
    h: SessionHandle,
    p: usize,
    sock: Arc<TcpStream>,
    t: Arc<Transport>,
    nonce: u64,
    leftover: BytesMut,
) -> Result<()> {
    let mut opener = Opener::starting_at(nonce);
    // Key switches already added to the path's count.
    let mut counted = 0;
    let mut frames = Vec::new();
    // Bytes read during the join exchange come first.
    let mut partial = leftover.to_vec();
    let mut fresh = !partial.is_empty();
    let config = h.with(|sh| sh.sess.config().clone());
    let mut told = Instant::now();
    loop {
        if !fresh {
            sock.readable().await?;
        }
        let mut buf = bufpool::Buf::take();
        buf[..partial.len()].copy_from_slice(&partial);
        let len = if fresh {
            partial.len()
        } else {
            match sock.try_read(&mut buf[partial.len()..]) {
                Ok(0) => bail!("peer closed the path"),
                Ok(n) => {
                    // Acknowledged at once under queue control (`EngineConfig::quick_ack`).
                    if config.quick_ack(n) {
                        let _ = set_quickack(&*sock);
                    }
                    partial.len() + n
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e.into()),
            }
        };
        fresh = false;
        open_records(&mut opener, &t, buf, len, &mut partial, &mut frames)?;
        let now = Instant::now();
        if frames.is_empty() {
            if now.saturating_duration_since(told) >= RECEIVING_EVERY {
                told = now;
                h.with(|sh| sh.sess.path_receiving(p, now));
            }
            continue;
        }
        told = now;
        let switched = opener.rekeys() - counted;
        counted = opener.rekeys();
        let res = h.with(|sh| {
            sh.paths[p].rekeys.1 += switched;
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

/// Opens the whole records in `buf[..len]` and decodes their frames into `frames`; the
/// front of a record not yet whole is left in `partial`. Payloads are slices of `buf` if
/// the read is worth its buffer and the pool's budget allows ([`bufpool::Buf::pinnable`]),
/// else copies at their size.
fn open_records(
    opener: &mut Opener,
    t: &Transport,
    mut buf: bufpool::Buf,
    len: usize,
    partial: &mut Vec<u8>,
    frames: &mut Vec<Frame>,
) -> Result<()> {
    let mut plains: Vec<Range<usize>> = Vec::new();
    let mut at = 0;
    loop {
        let (plain, used) = opener.open_in(t, &mut buf[at..len])?;
        if let Some(r) = plain {
            plains.push(at + r.start..at + r.end);
        }
        at += used;
        if used == 0 || at == len {
            break;
        }
    }
    partial.clear();
    partial.extend_from_slice(&buf[at..len]);
    if plains.is_empty() {
        return Ok(());
    }
    if len >= KEEP_READ_FROM && bufpool::Buf::pinnable() {
        let whole = buf.pin();
        for r in plains {
            frames.extend(decode_all(whole.slice(r)).context("malformed frame")?);
        }
    } else {
        for r in plains {
            frames.extend(decode_all(Bytes::copy_from_slice(&buf[r])).context("malformed frame")?);
        }
    }
    Ok(())
}

/// Moves the bytes the session's writer of this path lets it take
/// ([`Session::drive_writer`]): reads the socket's statistics and hands them in, applies
/// the socket options the session wants ([`Session::socket_wants`]), writes the sealed
/// records, and waits on the socket or for a wake-up.
///
/// [`Session::drive_writer`]: mpflex_engine::Session::drive_writer
/// [`Session::socket_wants`]: mpflex_engine::Session::socket_wants
pub(super) async fn path_writer(
    h: SessionHandle,
    p: usize,
    sock: Arc<TcpStream>,
    t: Arc<Transport>,
    generation: u64,
    nonce: u64,
    mut ssthresh: SsthreshReset,
) -> Result<()> {
    let wake = h.with(|sh| sh.paths[p].wake.clone());
    let mut sealer = Sealer::new(nonce, h.rekey, Instant::now());
    // Records are encoded straight into the wire buffer and sealed there in place.
    let mut records: Vec<Range<usize>> = Vec::new();
    // Grows to what the path's writes take (up to about a megabyte on a busy path) and
    // stays at a record or two on an idle one.
    let mut wire = Vec::new();
    let mut lowat = h.with(|sh| sh.sess.socket_wants(p)).lowat;
    set_notsent_lowat(&*sock, lowat)?;
    // The socket's pacing cap as last set: queue control's while it holds the path, else
    // the connection's own.
    let own_cap = if h.pacing { PACING_CAP } else { u64::MAX };
    let mut pace = own_cap;
    let mut bbr = BandwidthReading::of(&sock);
    loop {
        let info = tcp_info(&*sock)?;
        let bandwidth = bbr.read(&sock, &info);
        wire.clear();
        records.clear();
        let taken = h.with(|sh| {
            // A replaced connection takes nothing more: the session counts what a writer
            // takes as sent on the path's current connection, so frames this one wrote
            // to its closing socket would be lost without ever being sent again (the
            // replacement already re-queued what the old connection held).
            if sh.paths[p].generation != generation {
                return None;
            }
            // The writer's debug lines (queue control's steering) name their path: the span
            // is the writer's target, so `mpflex_engine::writer=debug` shows both.
            let _span = tracing::debug_span!(target: "mpflex_engine::writer", "writer", path = p).entered();
            let step = sh
                .sess
                .drive_writer(p, &info, bandwidth, Instant::now(), &mut wire, &mut records);
            let carrying = sh.sess.num_streams() > 0 || !sh.flows.is_empty();
            Some((step, sh.sess.socket_wants(p), carrying))
        });
        let Some((step, wants, carrying)) = taken else {
            bail!("path replaced by a newer connection");
        };
        if wants.lowat != lowat {
            lowat = wants.lowat;
            set_notsent_lowat(&*sock, lowat)?;
        }
        let want = wants.pacing_cap.unwrap_or(own_cap);
        // Small changes are not worth a system call.
        if want.abs_diff(pace) > pace / 8 {
            pace = want;
            set_max_pacing_rate(&*sock, pace)?;
        }
        match step {
            WriterStep::Closed { state } => bail!("path connection closed (TCP state {state})"),
            WriterStep::Full => wait_below_lowat(&sock).await?,
            // Held back by queue control: an interactive frame queued meanwhile must not
            // wait out the retry.
            WriterStep::Throttled { retry } => {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(retry) => {}
                }
            }
            WriterStep::Idle { until } => match until.or_else(|| carrying.then(|| Instant::now() + IDLE_REFRESH)) {
                Some(deadline) => {
                    tokio::select! {
                        _ = wake.notified() => {}
                        _ = tokio::time::sleep_until(deadline.into()) => {}
                    }
                }
                None => wake.notified().await,
            },
            WriterStep::Write { reset_ssthresh } => {
                let before = sealer.rekeys();
                sealer.seal_batch(&t, &mut wire, &records, Instant::now())?;
                if sealer.rekeys() > before {
                    h.with(|sh| sh.paths[p].rekeys.0 += sealer.rekeys() - before);
                }
                if reset_ssthresh && !ssthresh.reset(&*sock) {
                    h.with(|sh| sh.sess.ssthresh_reset_failed(p));
                }
                write_all(&sock, &wire).await?;
            }
        }
    }
}

/// The congestion control's bandwidth estimate, as the session's writer takes it.
struct BandwidthReading {
    /// Only BBR answers `TCP_CC_INFO` with a bandwidth, and a path keeps the congestion
    /// control it was connected with (the slow-start reset switches and switches back
    /// within one call), so a CUBIC path never asks: that read cost about 1.5 % of a busy
    /// server's CPU for nothing (docs/performance.md).
    asks: bool,
    last: Option<u64>,
    read_at: Option<Instant>,
}

impl BandwidthReading {
    fn of(sock: &TcpStream) -> Self {
        let asks = socket2::SockRef::from(sock)
            .tcp_congestion()
            .map(|cc| cc.starts_with(b"bbr"))
            .unwrap_or(true);
        BandwidthReading {
            asks,
            last: None,
            read_at: None,
        }
    }

    /// The estimate, read again once per smoothed round trip ([`BANDWIDTH_MIN_AGE`]).
    fn read(&mut self, sock: &TcpStream, info: &crate::tcpinfo::TcpInfo) -> Option<u64> {
        if self.asks {
            let now = Instant::now();
            let age = Duration::from_micros(info.rtt.into()).max(BANDWIDTH_MIN_AGE);
            if self.read_at.is_none_or(|at| now.saturating_duration_since(at) >= age) {
                self.last = cc_bandwidth(sock);
                self.read_at = Some(now);
            }
        }
        self.last
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
