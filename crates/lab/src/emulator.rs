//! The user-space link emulator: per path and direction, one thread moves raw Ethernet
//! frames from one veth (AF_PACKET) through a [`Link`] model to the other veth.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::arrivals::{is_tcp, tcp_payload, PayloadLog};
use crate::link::{Link, LinkStats};
use crate::netns::Topology;
use crate::profile::Profile;

/// Moves the calling thread into a namespace (the shared harness's).
pub use mpflex_netns::try_enter as enter_ns;

const ETH_HDR: usize = 14;

/// One direction's model, shared by its forwarding thread and whoever changes the link
/// (the event schedule, `set_path_up`); a change wakes the thread at once.
pub struct LinkHandle {
    model: Mutex<Link<Vec<u8>>>,
    /// eventfd the forwarding thread polls besides its packet socket.
    wake: OwnedFd,
    /// Every delivered packet's TCP payload and delivery time, since the last clear.
    log: Mutex<PayloadLog>,
    /// When each delivered TCP packet without payload (SYN, ACK, FIN) was delivered, µs
    /// since the Unix epoch, since the last clear (at most [`PayloadLog::LIMIT`]): a
    /// cellular radio wakes for those too (the energy model, [`crate::energy`]).
    bare: Mutex<Vec<u64>>,
}

impl LinkHandle {
    fn new(model: Link<Vec<u8>>) -> Result<LinkHandle> {
        // SAFETY: plain eventfd(2); the fd is owned right away.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            bail!("eventfd: {}", std::io::Error::last_os_error());
        }
        Ok(LinkHandle {
            model: Mutex::new(model),
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            log: Mutex::new(PayloadLog::default()),
            bare: Mutex::new(Vec::new()),
        })
    }

    /// Changes the model and makes its thread recompute its next deadline now, so a
    /// higher rate applies to packets already queued without waiting for a timeout.
    pub fn update<R>(&self, f: impl FnOnce(&mut Link<Vec<u8>>) -> R) -> R {
        let r = f(&mut self.model.lock().unwrap());
        let one: u64 = 1;
        // SAFETY: 8-byte write to our eventfd; a full counter only means a wake is pending.
        unsafe { libc::write(self.wake.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
        r
    }

    pub fn stats(&self) -> LinkStats {
        self.model.lock().unwrap().stats.clone()
    }

    /// When this direction delivered TCP packets without payload since the last clear.
    pub fn bare_log(&self) -> Vec<u64> {
        self.bare.lock().unwrap().clone()
    }

    /// What this direction delivered since its log was last cleared.
    pub fn payload_log(&self) -> PayloadLog {
        self.log.lock().unwrap().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Link<Vec<u8>>> {
        self.model.lock().unwrap()
    }

    fn drain_wake(&self) {
        let mut v: u64 = 0;
        // SAFETY: 8-byte read from our non-blocking eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }
}

pub type SharedLink = Arc<LinkHandle>;
const ETH_P_ALL: u16 = 0x0003;

/// A running emulator; stops and joins its threads on drop.
pub struct Emulator {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// links[path] = [down (server→client), up (client→server)].
    pub links: Vec<[SharedLink; 2]>,
    pub start: Instant,
}

/// An AF_PACKET socket bound to `dev` in the current namespace.
fn packet_socket(dev: &str) -> Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned right away.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (ETH_P_ALL).to_be() as i32) };
    if fd < 0 {
        bail!("AF_PACKET socket: {}", std::io::Error::last_os_error());
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let name = std::ffi::CString::new(dev)?;
    // SAFETY: NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        bail!("no interface {dev}");
    }
    // SAFETY: zeroed sockaddr_ll filled in, size passed.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL.to_be();
    sll.sll_ifindex = ifindex as i32;
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if rc != 0 {
        bail!("bind AF_PACKET to {dev}: {}", std::io::Error::last_os_error());
    }
    // Large buffers: bursts at hundreds of Mbit/s must not be dropped before the model sees them.
    let big: libc::c_int = 8 << 20;
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &big as *const _ as *const libc::c_void,
            4,
        );
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            &big as *const _ as *const libc::c_void,
            4,
        );
    }
    Ok(fd)
}

impl Emulator {
    /// Starts forwarding on every path of `topo` with the parameters of `profile`.
    pub fn start(topo: &Topology, profile: &Profile, seed: u64) -> Result<Emulator> {
        if profile.paths.len() != topo.paths {
            bail!("profile has {} paths, topology {}", profile.paths.len(), topo.paths);
        }
        // Sockets are made on a thread inside the emulator namespace; they stay there.
        let ns = topo.emu_ns.clone();
        let n = topo.paths;
        let socks: Vec<(OwnedFd, OwnedFd)> = std::thread::spawn(move || -> Result<_> {
            enter_ns(&ns)?;
            (0..n)
                .map(|i| Ok((packet_socket(&format!("ec{i}"))?, packet_socket(&format!("es{i}"))?)))
                .collect()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("emulator setup thread panicked"))??;

        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let mut threads = Vec::new();
        let mut links = Vec::new();
        for (i, ((ec, es), spec)) in socks.into_iter().zip(&profile.paths).enumerate() {
            let down = Arc::new(LinkHandle::new(Link::new(
                spec.down.clone(),
                seed ^ (i as u64 * 2 + 1),
            ))?);
            let up = Arc::new(LinkHandle::new(Link::new(spec.up.clone(), seed ^ (i as u64 * 2 + 2)))?);
            let ec = Arc::new(ec);
            let es = Arc::new(es);
            // Upstream: frames the client sends (ec) go to the server side (es).
            threads.push(spawn_dir(
                format!("emu-{i}-up"),
                ec.clone(),
                es.clone(),
                up.clone(),
                start,
                stop.clone(),
            ));
            threads.push(spawn_dir(
                format!("emu-{i}-down"),
                es,
                ec,
                down.clone(),
                start,
                stop.clone(),
            ));
            links.push([down, up]);
        }
        let mut emu = Emulator {
            stop,
            threads,
            links,
            start,
        };
        if !profile.events.is_empty() {
            emu.schedule(profile)?;
        }
        Ok(emu)
    }

    /// Applies the profile's events at their times (relative to `start`) on a thread of
    /// its own.
    fn schedule(&mut self, profile: &Profile) -> Result<()> {
        if let Some(e) = profile.events.iter().find(|e| e.path >= self.links.len()) {
            bail!(
                "event at {:?} names path {}, the profile has {}",
                e.at,
                e.path,
                self.links.len()
            );
        }
        let mut events = profile.events.clone();
        // Stable: events at the same time apply in the order written.
        events.sort_by_key(|e| e.at);
        let links = self.links.clone();
        let start = self.start;
        let stop = self.stop.clone();
        let t = std::thread::Builder::new().name("emu-events".into()).spawn(move || {
            for e in events {
                let at = start + e.at;
                while Instant::now() < at {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep((at - Instant::now()).min(Duration::from_millis(20)));
                }
                for &d in e.direction.indices() {
                    links[e.path][d].update(|l| e.apply(l));
                }
                tracing::info!(path = e.path, at = ?e.at, action = ?e.action, "link event");
            }
        })?;
        self.threads.push(t);
        Ok(())
    }

    /// Statistics per path: [down, up].
    pub fn stats(&self) -> Vec<[LinkStats; 2]> {
        self.links.iter().map(|[d, u]| [d.stats(), u.stats()]).collect()
    }

    /// Bytes delivered so far over every link, both directions.
    pub fn delivered_bytes(&self) -> u64 {
        self.stats().iter().flatten().map(|s| s.delivered_bytes).sum()
    }

    /// Waits until the links are quiet: at most `trickle` bytes delivered (keep-alives,
    /// acknowledgements) over `window`, checked every `window`; gives up after `limit`.
    /// Returns how long it waited. A run's sender may still be draining when its client
    /// has gone: an MPTCP connection closed with data in flight keeps sending for seconds,
    /// and a persistent path empties its socket buffer. The next run must not share the
    /// links with that.
    pub fn wait_quiet(&self, window: Duration, trickle: u64, limit: Duration) -> Duration {
        let start = Instant::now();
        let mut last = self.delivered_bytes();
        loop {
            std::thread::sleep(window);
            let now = self.delivered_bytes();
            if now - last <= trickle || start.elapsed() >= limit {
                return start.elapsed();
            }
            last = now;
        }
    }

    /// Replays every trace-driven link from the beginning of its trace, from now on (see
    /// [`crate::link::Link::rewind_trace`]); constant-rate links are unaffected.
    pub fn rewind_traces(&self) {
        let now = self.start.elapsed();
        for l in self.links.iter().flatten() {
            l.update(|m| m.rewind_trace(now));
        }
    }

    /// Forgets the sojourn and lateness histograms and the small-packet count, so the
    /// next read covers one run.
    pub fn clear_run_stats(&self) {
        for l in self.links.iter().flatten() {
            l.update(|m| {
                m.stats.sojourn.clear();
                m.stats.late.clear();
                m.stats.small = 0;
                m.stats.delivered_bytes = 0;
                m.stats.dropped_queue = 0;
            });
        }
    }

    /// Forgets every direction's payload log, so the next read covers one measurement.
    pub fn clear_payload_logs(&self) {
        for l in self.links.iter().flatten() {
            l.log.lock().unwrap().clear();
            l.bare.lock().unwrap().clear();
        }
    }

    /// Each path's packets without payload in one direction (0 down, 1 up), in path order.
    pub fn bare_logs(&self, direction: usize) -> Vec<Vec<u64>> {
        self.links.iter().map(|l| l[direction].bare_log()).collect()
    }

    /// Each path's payload log in one direction (0 down, 1 up), in path order.
    pub fn payload_logs(&self, direction: usize) -> Vec<PayloadLog> {
        self.links.iter().map(|l| l[direction].payload_log()).collect()
    }

    /// Takes a path down or up in both directions now.
    pub fn set_path_up(&self, path: usize, up: bool) {
        for l in &self.links[path] {
            l.update(|l| l.set_up(up));
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn spawn_dir(
    name: String,
    rx: Arc<OwnedFd>,
    tx: Arc<OwnedFd>,
    link: SharedLink,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            // Sub-millisecond wake-ups: the default 50 µs timer slack is too coarse for
            // RTTs within 1 ms + 2%.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0, 0, 0) };
            forward(&rx, &tx, &link, start, &stop)
        })
        .expect("spawn emulator thread")
}

/// Frames the kernel dropped on `fd` before we read them, since the last call (reading
/// PACKET_STATISTICS resets the kernel's counters).
fn rx_drops(fd: &OwnedFd) -> u64 {
    // SAFETY: zeroed POD struct, its size passed.
    let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            &mut st as *mut libc::tpacket_stats as *mut libc::c_void,
            &mut len,
        )
    };
    if rc == 0 {
        u64::from(st.tp_drops)
    } else {
        0
    }
}

fn forward(rx: &OwnedFd, tx: &OwnedFd, link: &LinkHandle, start: Instant, stop: &AtomicBool) {
    let mut due: Vec<Vec<u8>> = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut last_stats = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = start.elapsed();
        let next = {
            let mut l = link.lock();
            l.poll(now, &mut due);
            for f in &due {
                l.count_bytes(f.len().saturating_sub(ETH_HDR) as u64);
            }
            l.next_event()
        };
        let mut io_drops = 0;
        let payloads: Vec<u32> = due.iter().map(|f| tcp_payload(f)).filter(|&n| n > 0).collect();
        let bare = due.iter().filter(|f| is_tcp(f) && tcp_payload(f) == 0).count();
        for f in due.drain(..) {
            // SAFETY: sending a complete frame on a bound packet socket.
            let r = unsafe { libc::send(tx.as_raw_fd(), f.as_ptr() as *const libc::c_void, f.len(), 0) };
            if r < 0 {
                io_drops += 1;
            }
        }
        if bare > 0 {
            let at = crate::units::unix_us();
            let mut log = link.bare.lock().unwrap();
            let room = PayloadLog::LIMIT.saturating_sub(log.len()).min(bare);
            log.extend(std::iter::repeat_n(at, room));
        }
        if !payloads.is_empty() {
            let at = crate::units::unix_us();
            let mut log = link.log.lock().unwrap();
            for n in payloads {
                log.push(at, n);
            }
        }
        // A syscall per loop would cost throughput; ten times a second is enough.
        if last_stats.elapsed() >= Duration::from_millis(100) {
            last_stats = Instant::now();
            io_drops += rx_drops(rx);
        }
        if io_drops > 0 {
            link.lock().stats.dropped_io += io_drops;
        }
        let wait = next
            .map(|t| t.saturating_sub(start.elapsed()))
            .unwrap_or(Duration::from_millis(20))
            .min(Duration::from_millis(20));
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: wait.as_nanos() as i64,
        };
        let mut pfd = [
            libc::pollfd {
                fd: rx.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: link.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two pollfds, a valid timespec.
        let n = unsafe { libc::ppoll(pfd.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if n <= 0 {
            continue;
        }
        if pfd[1].revents != 0 {
            // The model changed: loop round to poll it and recompute the deadline.
            link.drain_wake();
        }
        if pfd[0].revents == 0 {
            continue;
        }
        // Take everything waiting.
        loop {
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: buffer and address sizes passed.
            let r = unsafe {
                libc::recvfrom(
                    rx.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if r <= 0 {
                break;
            }
            // Our own transmissions on this device come back as OUTGOING: skip them.
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let frame = buf[..r as usize].to_vec();
            let size = (r as usize).saturating_sub(ETH_HDR) as u64;
            link.lock().push(start.elapsed(), frame, size);
        }
    }
}
