//! Workloads: a server in the server namespace and clients in the client namespace, over
//! plain TCP, kernel MPTCP, or SOCKS5 (mpflex). Both run as `mpflex-lab` subcommands.
//!
//! Requests are 8 bytes, big-endian: the top byte is the operation, the low 56 bits its
//! argument.
//! * `0` download: the server sends `arg` bytes (`chunk`, `shortflows`, `video`, `bulk`
//!   down with a huge `arg`, the small exchanges of `upload-ping`).
//! * `1` upload: the server reads `arg` bytes (or until the client's EOF), reporting the
//!   count every 250 ms as 16-byte records (count, 0) and the final one as (count, 1).
//! * `2` stream: another 8 bytes follow (the duration in ms); the server sends 1000-byte
//!   messages (sequence number, send time in ns since the Unix epoch) at `arg` kbit/s for
//!   that long, then closes (`handover`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

pub const IPPROTO_MPTCP: i32 = 262;

fn proto(mptcp: bool) -> Protocol {
    if mptcp {
        Protocol::from(IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    }
}

/// Serves chunk requests until killed.
pub fn serve(listen: SocketAddr, mptcp: bool, cc: Option<&str>) -> Result<()> {
    let s = Socket::new(Domain::for_address(listen), Type::STREAM, Some(proto(mptcp)))
        .context("socket (is MPTCP enabled? sysctl net.mptcp.enabled)")?;
    // The sender's congestion control decides a download; accepted sockets inherit it.
    if let Some(cc) = cc {
        s.set_tcp_congestion(cc.as_bytes())
            .with_context(|| format!("congestion control {cc:?}"))?;
    }
    s.set_reuse_address(true)?;
    s.bind(&listen.into())?;
    s.listen(1024)?;
    let l: TcpListener = s.into();
    let zeros = vec![0u8; 1 << 20];
    let zeros: &'static [u8] = Box::leak(zeros.into_boxed_slice());
    for conn in l.incoming() {
        let Ok(mut c) = conn else { continue };
        std::thread::spawn(move || {
            let _ = c.set_nodelay(true);
            let mut req = [0u8; 8];
            while c.read_exact(&mut req).is_ok() {
                let (op, arg) = split_request(u64::from_be_bytes(req));
                let ok = match op {
                    OP_DOWNLOAD => send_zeros(&mut c, zeros, arg),
                    OP_UPLOAD => sink(&mut c, arg),
                    OP_STREAM => {
                        let mut d = [0u8; 8];
                        c.read_exact(&mut d).is_ok() && stream(&mut c, arg, u64::from_be_bytes(d)).is_ok()
                    }
                    _ => false,
                };
                if !ok {
                    return;
                }
            }
        });
    }
    Ok(())
}

pub const OP_DOWNLOAD: u8 = 0;
pub const OP_UPLOAD: u8 = 1;
pub const OP_STREAM: u8 = 2;
/// "Until the connection ends", for downloads and uploads without a fixed size.
pub const UNTIL_EOF: u64 = (1 << 56) - 1;
/// Size of a `stream` message.
pub const MESSAGE: usize = 1000;

pub fn make_request(op: u8, arg: u64) -> [u8; 8] {
    ((op as u64) << 56 | arg.min(UNTIL_EOF)).to_be_bytes()
}

fn split_request(r: u64) -> (u8, u64) {
    ((r >> 56) as u8, r & UNTIL_EOF)
}

fn send_zeros(c: &mut TcpStream, zeros: &[u8], n: u64) -> bool {
    let mut left = n as usize;
    while left > 0 {
        let k = left.min(zeros.len());
        if c.write_all(&zeros[..k]).is_err() {
            return false;
        }
        left -= k;
    }
    true
}

/// Reads up to `n` bytes (or to EOF), reporting progress; true if the connection may
/// carry another request.
fn sink(c: &mut TcpStream, n: u64) -> bool {
    let Ok(mut w) = c.try_clone() else { return false };
    let got = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let reporter = {
        let (got, done) = (got.clone(), done.clone());
        let mut w = w.try_clone().expect("clone");
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(250));
                let mut rec = [0u8; 16];
                rec[..8].copy_from_slice(&got.load(Ordering::SeqCst).to_be_bytes());
                if done.load(Ordering::SeqCst) || w.write_all(&rec).is_err() {
                    return;
                }
            }
        })
    };
    let mut buf = vec![0u8; 256 * 1024];
    let mut eof = false;
    while got.load(Ordering::SeqCst) < n {
        let want = (n - got.load(Ordering::SeqCst)).min(buf.len() as u64) as usize;
        match c.read(&mut buf[..want]) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(k) => {
                got.fetch_add(k as u64, Ordering::SeqCst);
            }
            Err(_) => {
                eof = true;
                break;
            }
        }
    }
    done.store(true, Ordering::SeqCst);
    let _ = reporter.join();
    let mut rec = [0u8; 16];
    rec[..8].copy_from_slice(&got.load(Ordering::SeqCst).to_be_bytes());
    rec[15] = 1;
    w.write_all(&rec).is_ok() && !eof
}

pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Sends numbered, timestamped messages at `kbit` kbit/s for `ms` milliseconds.
fn stream(c: &mut TcpStream, kbit: u64, ms: u64) -> std::io::Result<()> {
    let interval = Duration::from_secs_f64(MESSAGE as f64 * 8.0 / (kbit.max(1) as f64 * 1000.0));
    let start = Instant::now();
    let end = start + Duration::from_millis(ms);
    let mut msg = [0u8; MESSAGE];
    let mut seq = 0u64;
    loop {
        let due = start + interval * seq as u32;
        if due >= end {
            break;
        }
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        msg[..8].copy_from_slice(&seq.to_be_bytes());
        msg[8..16].copy_from_slice(&unix_ns().to_be_bytes());
        c.write_all(&msg)?;
        seq += 1;
    }
    c.shutdown(std::net::Shutdown::Write)
}

/// How the client reaches the server.
#[derive(Debug, Clone)]
pub enum Via {
    Tcp { bind: Option<SocketAddr> },
    Mptcp,
    Socks(SocketAddr),
}

pub fn connect(server: SocketAddr, via: &Via) -> Result<TcpStream> {
    let s = match via {
        Via::Tcp { bind } => {
            let s = Socket::new(Domain::for_address(server), Type::STREAM, Some(Protocol::TCP))?;
            if let Some(b) = bind {
                s.bind(&SockAddr::from(*b))?;
            }
            s.connect_timeout(&server.into(), Duration::from_secs(20))?;
            s.into()
        }
        Via::Mptcp => {
            let s = Socket::new(
                Domain::for_address(server),
                Type::STREAM,
                Some(Protocol::from(IPPROTO_MPTCP)),
            )?;
            s.connect_timeout(&server.into(), Duration::from_secs(20))?;
            s.into()
        }
        Via::Socks(proxy) => {
            let mut s = TcpStream::connect_timeout(proxy, Duration::from_secs(5))?;
            s.set_nodelay(true)?;
            s.write_all(&[5, 1, 0])?;
            let mut r = [0u8; 2];
            s.read_exact(&mut r)?;
            let mut req = vec![5, 1, 0];
            match server {
                SocketAddr::V4(a) => {
                    req.push(1);
                    req.extend_from_slice(&a.ip().octets());
                }
                SocketAddr::V6(a) => {
                    req.push(4);
                    req.extend_from_slice(&a.ip().octets());
                }
            }
            req.extend_from_slice(&server.port().to_be_bytes());
            s.write_all(&req)?;
            let mut rep = [0u8; 10];
            s.read_exact(&mut rep)?;
            if rep[1] != 0 {
                bail!("SOCKS5 reply {}", rep[1]);
            }
            s
        }
    };
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    Ok(s)
}

/// Requests `size` bytes and reads them all.
pub fn request(s: &mut TcpStream, size: u64) -> Result<()> {
    s.write_all(&make_request(OP_DOWNLOAD, size))?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut left = size as usize;
    while left > 0 {
        let n = s.read(&mut buf[..left.min(256 * 1024)])?;
        if n == 0 {
            bail!("connection closed with {left} bytes missing");
        }
        left -= n;
    }
    Ok(())
}

/// `total` bytes split by `share` (of the first part, 0..=1): (first, rest), the first
/// rounded to the nearest byte, the two adding up to `total`.
pub fn split(total: u64, share: f64) -> (u64, u64) {
    let first = ((total as f64 * share.clamp(0.0, 1.0)).round() as u64).min(total);
    (first, total - first)
}

/// One measurement: `fresh` connects first (and the time includes it), otherwise the
/// request goes on `warm`, an established connection.
pub fn timed(server: SocketAddr, via: &Via, size: u64, warm: Option<&mut TcpStream>) -> Result<Duration> {
    let t = Instant::now();
    match warm {
        Some(s) => request(s, size)?,
        None => {
            let mut s = connect(server, via)?;
            request(&mut s, size)?;
        }
    }
    Ok(t.elapsed())
}

/// What a workload client measured, as JSON fields merged into the run's record.
pub type Fields = serde_json::Map<String, serde_json::Value>;

fn fields(pairs: Vec<(&str, serde_json::Value)>) -> Fields {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn mbit(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64().max(1e-9) / 1e6
}

/// Goodput is measured after this much of a bulk transfer (slow start and the first
/// queue fill are not what `bulk` asks about); the whole-run average is reported too.
pub const BULK_SKIP: Duration = Duration::from_secs(2);

/// `bulk` download for `secs`: reads as fast as the server sends.
pub fn bulk_down(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let mut s = connect(server, via)?;
    s.write_all(&make_request(OP_DOWNLOAD, UNTIL_EOF))?;
    let mut buf = vec![0u8; 256 * 1024];
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let (mut total, mut at_skip) = (0u64, None);
    while Instant::now() < end {
        s.set_read_timeout(Some((end - Instant::now()).max(Duration::from_millis(1))))?;
        match s.read(&mut buf) {
            Ok(0) => bail!("server closed the bulk download after {total} bytes"),
            Ok(n) => total += n as u64,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
        }
        let t = start.elapsed();
        if at_skip.is_none() && t >= BULK_SKIP {
            at_skip = Some((t, total));
        }
    }
    let elapsed = start.elapsed();
    let (t0, b0) = at_skip.unwrap_or((Duration::ZERO, 0));
    Ok(fields(vec![
        ("goodput_mbit", mbit(total - b0, elapsed - t0).into()),
        ("average_mbit", mbit(total, elapsed).into()),
        ("bytes", total.into()),
    ]))
}

/// The upload receiver's progress reports: (when, bytes so far).
type Progress = Vec<(Instant, u64)>;

/// Reads the sink's progress records until the final one; returns (time, count) samples
/// and the final count.
fn progress(mut r: TcpStream) -> Result<(Progress, u64)> {
    r.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut samples = Vec::new();
    let mut rec = [0u8; 16];
    loop {
        r.read_exact(&mut rec).context("upload progress")?;
        let count = u64::from_be_bytes(rec[..8].try_into().unwrap());
        if rec[15] == 1 {
            return Ok((samples, count));
        }
        samples.push((Instant::now(), count));
    }
}

/// Writes zeros on `s` for `secs`, then half-closes; returns the receiver's progress
/// samples, the final count and when the receiver reported it.
fn upload_for(mut s: TcpStream, secs: f64) -> Result<(Progress, u64, Instant)> {
    s.write_all(&make_request(OP_UPLOAD, UNTIL_EOF))?;
    let reader = {
        let r = s.try_clone()?;
        std::thread::spawn(move || progress(r))
    };
    let zeros = vec![0u8; 64 * 1024];
    let end = Instant::now() + Duration::from_secs_f64(secs);
    s.set_write_timeout(Some(Duration::from_millis(200)))?;
    while Instant::now() < end {
        match s.write(&zeros) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
        }
    }
    s.shutdown(std::net::Shutdown::Write)?;
    let (samples, total) = reader
        .join()
        .map_err(|_| anyhow::anyhow!("progress reader panicked"))??;
    Ok((samples, total, Instant::now()))
}

/// Upload goodput from the receiver's progress: after [`BULK_SKIP`] until the last
/// report before the sender stopped.
fn upload_goodput(start: Instant, secs: f64, samples: &[(Instant, u64)], total: u64, done: Instant) -> (f64, f64) {
    let stop = start + Duration::from_secs_f64(secs);
    let first = samples.iter().find(|(t, _)| *t >= start + BULK_SKIP);
    let last = samples.iter().rev().find(|(t, _)| *t <= stop);
    let steady = match (first, last) {
        (Some(a), Some(b)) if b.0 > a.0 => mbit(b.1 - a.1, b.0 - a.0),
        _ => mbit(total, done - start),
    };
    (steady, mbit(total, done - start))
}

/// `bulk` upload for `secs`.
pub fn bulk_up(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let s = connect(server, via)?;
    let start = Instant::now();
    let (samples, total, done) = upload_for(s, secs)?;
    let (steady, avg) = upload_goodput(start, secs, &samples, total, done);
    Ok(fields(vec![
        ("goodput_mbit", steady.into()),
        ("average_mbit", avg.into()),
        ("bytes", total.into()),
    ]))
}

/// The objects of a `shortflows` bundle: 10 × 10–100 KB.
pub fn shortflow_sizes() -> Vec<u64> {
    (1..=10).map(|k| k * 10 * 1024).collect()
}

/// `shortflows`: the bundle sequentially (`par` false) or all at once. `fresh`: a new
/// connection per object, included in the time; `warm`: connections opened, used once
/// and idle for a second before the clock starts.
pub fn shortflows(server: SocketAddr, via: &Via, par: bool, warm: bool) -> Result<Fields> {
    let sizes = shortflow_sizes();
    let conns = if !warm {
        sizes.iter().map(|_| None).collect::<Vec<Option<TcpStream>>>()
    } else {
        let n = if par { sizes.len() } else { 1 };
        let mut v = Vec::new();
        for _ in 0..n {
            let mut c = connect(server, via)?;
            request(&mut c, 16 * 1024)?;
            v.push(Some(c));
        }
        std::thread::sleep(Duration::from_secs(1));
        v
    };
    let t = Instant::now();
    let mut per_object = Vec::new();
    if par {
        let results: Vec<Result<Duration>> = std::thread::scope(|sc| {
            let hs: Vec<_> = sizes
                .iter()
                .zip(conns)
                .map(|(&size, mut c)| sc.spawn(move || timed(server, via, size, c.as_mut())))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("worker panicked"))))
                .collect()
        });
        for r in results {
            per_object.push(r?.as_secs_f64() * 1000.0);
        }
    } else {
        let mut warm_conn = conns.into_iter().next().flatten();
        for &size in &sizes {
            per_object.push(timed(server, via, size, warm_conn.as_mut())?.as_secs_f64() * 1000.0);
        }
    }
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    Ok(fields(vec![
        ("completion_ms", ms.into()),
        ("objects", (sizes.len() as u64).into()),
        ("bytes", sizes.iter().sum::<u64>().into()),
        ("object_ms", per_object.into()),
    ]))
}

/// The bit-rate ladder of the ECF streaming experiments, Mbit/s.
pub const LADDER: [f64; 6] = [0.26, 0.64, 1.00, 1.60, 4.14, 8.47];
/// Seconds of video per segment.
pub const SEGMENT_S: f64 = 5.0;
/// The player stops fetching while this much video is buffered ...
pub const BUFFER_MAX_S: f64 = 30.0;
/// ... starts (and resumes after a stall) playing once this much is.
pub const PLAY_AFTER_S: f64 = 10.0;

/// The ideal average bit rate for an aggregate capacity: the highest ladder rate not above
/// it (the ECF evaluation's definition).
pub fn ideal_bitrate(capacity_mbit: f64) -> f64 {
    LADDER
        .iter()
        .copied()
        .filter(|&r| r <= capacity_mbit)
        .fold(LADDER[0], f64::max)
}

/// The ABR: the highest rate not above the harmonic mean of the last three segments'
/// throughputs, with a 20% safety margin while the buffer is below [`PLAY_AFTER_S`].
pub fn choose_rate(throughputs: &[f64], buffer_s: f64) -> usize {
    let recent = &throughputs[throughputs.len().saturating_sub(3)..];
    if recent.is_empty() {
        return 0;
    }
    let hm = recent.len() as f64 / recent.iter().map(|t| 1.0 / t.max(1e-6)).sum::<f64>();
    let budget = if buffer_s < PLAY_AFTER_S { 0.8 * hm } else { hm };
    LADDER.iter().rposition(|&r| r <= budget).unwrap_or(0)
}

/// The buffer-based ABR's reservoir: at or below this much buffered video it fetches the
/// lowest rate.
pub const RESERVOIR_S: f64 = 10.0;
/// Its cushion: the rate rises linearly with the buffer above the reservoir and is the
/// highest once the buffer reaches reservoir + cushion.
pub const CUSHION_S: f64 = 10.0;

/// Which rule picks each segment's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abr {
    /// Buffer-based (Huang et al., SIGCOMM 2014, the ABR of ECF's evaluation): BBA-0's
    /// rate map with its hysteresis, after a startup phase (as in their BBA-1/2) that follows
    /// [`choose_rate`] until the map asks for more or a download took longer than the
    /// segment plays.
    Buffer,
    /// Throughput-based: [`choose_rate`] for every segment.
    Rate,
}

/// BBA-0's rate map: the ladder index for `buffer_s` seconds buffered, given the previous
/// index. Below the reservoir the lowest rate, above reservoir + cushion the highest; in
/// between the rate f(B) rises linearly, and the index changes only when f(B) passes the
/// next rung up (then the highest rung below f(B)) or falls to the next rung down (then
/// the lowest rung above f(B)).
pub fn bba_rate(buffer_s: f64, prev: usize) -> usize {
    let top = LADDER.len() - 1;
    if buffer_s <= RESERVOIR_S {
        return 0;
    }
    if buffer_s >= RESERVOIR_S + CUSHION_S {
        return top;
    }
    let f = LADDER[0] + (buffer_s - RESERVOIR_S) / CUSHION_S * (LADDER[top] - LADDER[0]);
    let up = LADDER[(prev + 1).min(top)];
    let down = LADDER[prev.saturating_sub(1)];
    if prev < top && f >= up {
        LADDER.iter().rposition(|&r| r < f).unwrap_or(0)
    } else if prev > 0 && f <= down {
        LADDER.iter().position(|&r| r > f).unwrap_or(top)
    } else {
        prev
    }
}

/// An ABR's state across segments.
#[derive(Debug, Clone)]
pub struct AbrState {
    abr: Abr,
    /// [`Abr::Buffer`]'s startup phase is on.
    startup: bool,
    /// The last rate picked (ladder index).
    q: usize,
}

impl AbrState {
    pub fn new(abr: Abr) -> Self {
        AbrState {
            abr,
            startup: abr == Abr::Buffer,
            q: 0,
        }
    }

    /// The ladder index of the next segment, from the segments' throughputs so far
    /// (Mbit/s) and the seconds buffered.
    pub fn choose(&mut self, throughputs: &[f64], buffer_s: f64) -> usize {
        let by_rate = choose_rate(throughputs, buffer_s);
        self.q = match self.abr {
            Abr::Rate => by_rate,
            Abr::Buffer => {
                let map = bba_rate(buffer_s, self.q);
                if self.startup && map <= by_rate {
                    by_rate
                } else {
                    self.startup = false;
                    map
                }
            }
        };
        self.q
    }

    /// A segment took `took` to download: slower than it plays ends the startup phase.
    pub fn downloaded(&mut self, took: Duration) {
        if took.as_secs_f64() > SEGMENT_S {
            self.startup = false;
        }
    }
}

/// `video`: a DASH-like player over one persistent connection for `secs` seconds of video.
/// Stalls count the times playback ran dry after it started; `stall_ms` is the time spent
/// rebuffering (the initial buffering is `startup_ms`).
pub fn video(server: SocketAddr, via: &Via, secs: f64, abr: Abr) -> Result<Fields> {
    struct Player {
        buffer: f64,
        playing: bool,
        clock: Instant,
        stalled_at: Option<Instant>,
        stalls: u32,
        stall: Duration,
    }
    impl Player {
        /// Plays until `now`.
        fn play(&mut self, now: Instant) {
            let dt = (now - self.clock).as_secs_f64();
            if self.playing {
                if self.buffer >= dt {
                    self.buffer -= dt;
                } else {
                    self.stalled_at = Some(self.clock + Duration::from_secs_f64(self.buffer));
                    self.buffer = 0.0;
                    self.playing = false;
                    self.stalls += 1;
                }
            }
            self.clock = now;
        }
    }
    let segments = (secs / SEGMENT_S).ceil().max(1.0) as usize;
    let start = Instant::now();
    let mut c = connect(server, via)?;
    let mut throughputs = Vec::new();
    let mut rates = Vec::new();
    let mut segment_ms = Vec::new();
    let mut p = Player {
        buffer: 0.0,
        playing: false,
        clock: start,
        stalled_at: None,
        stalls: 0,
        stall: Duration::ZERO,
    };
    let mut started_at: Option<Duration> = None;
    let mut player_abr = AbrState::new(abr);
    for seg in 0..segments {
        // Wait for room in the buffer.
        p.play(Instant::now());
        if p.playing && p.buffer > BUFFER_MAX_S - SEGMENT_S {
            std::thread::sleep(Duration::from_secs_f64(p.buffer - (BUFFER_MAX_S - SEGMENT_S)));
            p.play(Instant::now());
        }
        let q = player_abr.choose(&throughputs, p.buffer);
        let bytes = (LADDER[q] * 1e6 / 8.0 * SEGMENT_S) as u64;
        let t = Instant::now();
        request(&mut c, bytes)?;
        let now = Instant::now();
        let took = now - t;
        player_abr.downloaded(took);
        throughputs.push(mbit(bytes, took));
        segment_ms.push(took.as_secs_f64() * 1000.0);
        rates.push(LADDER[q]);
        p.play(now);
        p.buffer += SEGMENT_S;
        if !p.playing && (p.buffer >= PLAY_AFTER_S || seg + 1 == segments) {
            p.playing = true;
            match p.stalled_at.take() {
                Some(at) => p.stall += now - at,
                None => {
                    started_at.get_or_insert(now - start);
                }
            }
        }
    }
    let avg = rates.iter().sum::<f64>() / rates.len() as f64;
    Ok(fields(vec![
        ("bitrate_mbit", avg.into()),
        ("segments", (segments as u64).into()),
        ("stalls", p.stalls.into()),
        ("stall_ms", (p.stall.as_secs_f64() * 1000.0).into()),
        (
            "startup_ms",
            started_at.map_or(0.0, |d| d.as_secs_f64() * 1000.0).into(),
        ),
        ("rates_mbit", rates.into()),
        ("segment_ms", segment_ms.into()),
        ("completion_ms", (start.elapsed().as_secs_f64() * 1000.0).into()),
    ]))
}

fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[((s.len() - 1) as f64 * q).round() as usize]
}

/// Size of the small responses of `upload-ping`.
pub const PING_BYTES: u64 = 1024;

/// `upload-ping`: a bulk upload for `secs` with a small request/response every 100 ms on
/// a second connection; the small exchanges' latency is the result (QCUT's experiment).
pub fn upload_ping(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let mut ping = connect(server, via)?;
    request(&mut ping, PING_BYTES)?;
    let up = connect(server, via)?;
    let start = Instant::now();
    let uploader = std::thread::spawn(move || upload_for(up, secs));
    let mut rtts = Vec::new();
    let mut failures = 0u32;
    let mut k = 0u32;
    // The first second is the upload's slow start; pings are kept from then on.
    while start.elapsed() < Duration::from_secs_f64(secs) {
        k += 1;
        let due = start + Duration::from_millis(100) * k;
        if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        let t = Instant::now();
        match request(&mut ping, PING_BYTES) {
            Ok(()) if t >= start + Duration::from_secs(1) => rtts.push(t.elapsed().as_secs_f64() * 1000.0),
            Ok(()) => {}
            Err(_) => {
                failures += 1;
                ping = connect(server, via)?;
            }
        }
    }
    let (samples, total, done) = uploader.join().map_err(|_| anyhow::anyhow!("uploader panicked"))??;
    let (steady, avg) = upload_goodput(start, secs, &samples, total, done);
    Ok(fields(vec![
        ("ping_p50_ms", percentile(&rtts, 0.5).into()),
        ("ping_p90_ms", percentile(&rtts, 0.9).into()),
        ("ping_p99_ms", percentile(&rtts, 0.99).into()),
        ("ping_max_ms", percentile(&rtts, 1.0).into()),
        ("pings", (rtts.len() as u64).into()),
        ("ping_failures", failures.into()),
        ("goodput_mbit", steady.into()),
        ("average_mbit", avg.into()),
    ]))
}

/// `handover`: a constant `kbit` kbit/s stream for `secs` while the runner takes a path
/// down and up; reports the longest gap between arrivals and the bytes that never came.
pub fn handover(server: SocketAddr, via: &Via, secs: f64, kbit: u64) -> Result<Fields> {
    let mut s = connect(server, via)?;
    let ms = (secs * 1000.0) as u64;
    s.write_all(&make_request(OP_STREAM, kbit))?;
    s.write_all(&ms.to_be_bytes())?;
    let start = Instant::now();
    // Sent for `secs`; whatever has not arrived within a grace period after that is lost.
    let deadline = start + Duration::from_millis(ms) + Duration::from_secs(30);
    let mut msg = [0u8; MESSAGE];
    let mut received = 0u64;
    let mut next_seq = 0u64;
    let mut last_arrival = None::<Instant>;
    let mut max_gap = Duration::ZERO;
    let mut delays = Vec::new();
    let mut out_of_order = 0u64;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s.set_read_timeout(Some(left))?;
        match s.read_exact(&mut msg) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break,
            Err(_) => break, // reset: what is missing counts as lost
        }
        let now = Instant::now();
        let seq = u64::from_be_bytes(msg[..8].try_into().unwrap());
        let sent = u64::from_be_bytes(msg[8..16].try_into().unwrap());
        if seq != next_seq {
            out_of_order += 1;
        }
        next_seq = seq + 1;
        received += 1;
        delays.push(unix_ns().saturating_sub(sent) as f64 / 1e6);
        if let Some(l) = last_arrival {
            max_gap = max_gap.max(now - l);
        }
        last_arrival = Some(now);
    }
    let interval = MESSAGE as f64 * 8.0 / (kbit.max(1) as f64 * 1000.0);
    let expected = (ms as f64 / 1000.0 / interval).ceil() as u64;
    Ok(fields(vec![
        ("max_gap_ms", (max_gap.as_secs_f64() * 1000.0).into()),
        (
            "lost_bytes",
            (expected.saturating_sub(received) * MESSAGE as u64).into(),
        ),
        ("received_bytes", (received * MESSAGE as u64).into()),
        ("rate_kbit", kbit.into()),
        ("delay_p50_ms", percentile(&delays, 0.5).into()),
        ("delay_max_ms", percentile(&delays, 1.0).into()),
        ("out_of_order", out_of_order.into()),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_adds_up_to_the_total() {
        assert_eq!(split(1 << 20, 0.25), (262_144, 786_432));
        assert_eq!(split(1 << 20, 1.0), (1 << 20, 0));
        assert_eq!(split(1 << 20, 0.0), (0, 1 << 20));
        assert_eq!(split(1000, 1.0 / 3.0), (333, 667));
        assert_eq!(split(10, 1.5), (10, 0));
    }

    #[test]
    fn requests_round_trip() {
        for (op, arg) in [
            (OP_DOWNLOAD, 0),
            (OP_UPLOAD, UNTIL_EOF),
            (OP_STREAM, 2000),
            (OP_DOWNLOAD, 1 << 40),
        ] {
            assert_eq!(split_request(u64::from_be_bytes(make_request(op, arg))), (op, arg));
        }
        // An old-style chunk request (the size alone) is a download.
        assert_eq!(split_request(4 << 20), (OP_DOWNLOAD, 4 << 20));
    }

    #[test]
    fn abr_and_ideal() {
        assert_eq!(ideal_bitrate(8.9), 8.47);
        assert_eq!(ideal_bitrate(8.4), 4.14);
        assert_eq!(ideal_bitrate(0.1), 0.26);
        assert_eq!(choose_rate(&[], 0.0), 0);
        // Full buffer: the harmonic mean itself is the budget.
        assert_eq!(LADDER[choose_rate(&[8.6, 8.8, 8.7], 20.0)], 8.47);
        // Low buffer: 20% margin.
        assert_eq!(LADDER[choose_rate(&[8.6, 8.8, 8.7], 5.0)], 4.14);
        // One slow segment pulls the harmonic mean down hard.
        assert_eq!(LADDER[choose_rate(&[9.0, 9.0, 1.0], 20.0)], 1.60);
    }

    #[test]
    fn buffer_based_rate_map() {
        let top = LADDER.len() - 1;
        // Reservoir and upper reservoir.
        assert_eq!(bba_rate(0.0, top), 0);
        assert_eq!(bba_rate(RESERVOIR_S, 3), 0);
        assert_eq!(bba_rate(RESERVOIR_S + CUSHION_S, 0), top);
        assert_eq!(bba_rate(29.0, 2), top);
        // Halfway, f(B) = 0.26 + 0.5·8.21 = 4.365: up from 1.60 to the highest rung below
        // it (4.14); down from 8.47 only to the lowest rung above it (8.47 stays: 4.365 is
        // not at or below 4.14); from 4.14 nothing moves.
        let mid = RESERVOIR_S + CUSHION_S / 2.0;
        assert_eq!(LADDER[bba_rate(mid, 3)], 4.14);
        assert_eq!(LADDER[bba_rate(mid, top)], 8.47);
        assert_eq!(LADDER[bba_rate(mid, 4)], 4.14);
        // f(B) = 1.0 at 10.9 s. A little above it, 4.14 steps down to the lowest rung
        // above f(B) (1.60).
        let b = RESERVOIR_S + (1.0 - 0.26) / (8.47 - 0.26) * CUSHION_S;
        assert_eq!(LADDER[bba_rate(b + 0.2, 4)], 1.60);
        // ... and 0.64 does not step up until f(B) reaches 1.0, then to the rung below it.
        assert_eq!(LADDER[bba_rate(b - 0.01, 1)], 0.64);
        assert_eq!(LADDER[bba_rate(b + 0.3, 1)], 1.0);
    }

    #[test]
    fn buffer_based_startup_follows_throughput_until_the_map_asks_for_more() {
        let mut a = AbrState::new(Abr::Buffer);
        // No history, empty buffer: both rules say the lowest rate, and startup goes on.
        assert_eq!(a.choose(&[], 0.0), 0);
        // 3.7 Mbit/s measured, 5 s buffered: the throughput rule (0.8 × 3.7) picks 1.60
        // where the map still says 0.26.
        assert_eq!(LADDER[a.choose(&[3.7], 5.0)], 1.60);
        // 12 s buffered, no margin: the harmonic mean 4.58 picks 4.14; the map says 1.60.
        assert_eq!(LADDER[a.choose(&[3.7, 6.0], 12.0)], 4.14);
        // 19 s buffered: the map's f = 7.65 is below the next rung (8.47), so it keeps
        // 4.14, as does the throughput rule: still startup.
        assert_eq!(LADDER[a.choose(&[3.7, 6.0, 6.0], 19.0)], 4.14);
        // 21 s: the map says 8.47, more than throughput allows: the map takes over for good.
        assert_eq!(LADDER[a.choose(&[6.0, 6.0, 6.0], 21.0)], 8.47);
        assert_eq!(LADDER[a.choose(&[9.0, 9.0, 9.0], 5.0)], 0.26);
        // A download slower than real time ends startup too.
        let mut b = AbrState::new(Abr::Buffer);
        assert_eq!(LADDER[b.choose(&[3.7], 5.0)], 1.60);
        b.downloaded(Duration::from_secs(6));
        assert_eq!(LADDER[b.choose(&[3.7, 3.7], 5.0)], 0.26);
        // The throughput ABR has no phases.
        let mut r = AbrState::new(Abr::Rate);
        assert_eq!(LADDER[r.choose(&[9.0, 9.0, 9.0], 5.0)], 4.14);
    }

    /// Each operation against a real server on loopback.
    #[test]
    fn operations_on_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        std::thread::spawn(move || serve(addr, false, None));
        let via = Via::Tcp { bind: None };
        let mut ok = false;
        for _ in 0..50 {
            if TcpStream::connect(addr).is_ok() {
                ok = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ok, "server did not start");
        let f = bulk_down(addr, &via, 0.5).unwrap();
        assert!(f["bytes"].as_u64().unwrap() > 1 << 20, "{f:?}");
        let f = bulk_up(addr, &via, 0.6).unwrap();
        assert!(f["bytes"].as_u64().unwrap() > 1 << 20, "{f:?}");
        assert!(f["goodput_mbit"].as_f64().unwrap() > 10.0, "{f:?}");
        let f = shortflows(addr, &via, true, false).unwrap();
        assert_eq!(f["objects"], 10);
        assert_eq!(f["object_ms"].as_array().unwrap().len(), 10);
        let f = handover(addr, &via, 0.5, 8000).unwrap();
        assert_eq!(f["lost_bytes"], 0, "{f:?}");
        assert_eq!(f["received_bytes"], 500_000, "{f:?}");
        assert_eq!(f["out_of_order"], 0);
        let f = video(addr, &via, 10.0, Abr::Buffer).unwrap();
        assert_eq!(f["segments"], 2);
        assert_eq!(f["segment_ms"].as_array().unwrap().len(), 2);
        assert_eq!(f["stalls"], 0, "{f:?}");
        let f = upload_ping(addr, &via, 1.5).unwrap();
        assert!(f["pings"].as_u64().unwrap() >= 3, "{f:?}");
    }
}
