//! Path statistics from the kernel (`TCP_INFO`) and late-binding socket options.

use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use mpflex_sched::PathSnapshot;

/// `struct tcp_info` from linux/tcp.h, up to the fields we read.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
}

pub fn tcp_info(sock: &impl AsRawFd) -> std::io::Result<TcpInfo> {
    let mut info = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: `info` is a plain C struct at least `len` bytes long; the kernel writes at
    // most `len` bytes and reports how many.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut TcpInfo as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(info)
}

/// `sizeof(struct tcp_bbr_info)` (include/uapi/linux/inet_diag.h): what `TCP_CC_INFO`
/// returns for BBR. Vegas and DCTCP return 16 bytes, CUBIC and Reno nothing.
const BBR_INFO_LEN: usize = 20;

/// The congestion control's own estimate of the path's bottleneck bandwidth, bytes per
/// second, where it keeps one: BBR's `bbr_bw` (its windowed maximum of delivery-rate
/// samples, the rate its model paces at in steady state; `TCP_CC_INFO`). `None` for a
/// congestion control without such a model (CUBIC), or before BBR has a sample.
pub fn cc_bandwidth(sock: &impl AsRawFd) -> Option<u64> {
    let mut buf = [0u32; 8];
    let mut len = std::mem::size_of_val(&buf) as libc::socklen_t;
    // SAFETY: `buf` is `len` bytes long; the kernel writes at most `len` bytes and reports
    // how many.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CC_INFO,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 || len as usize != BBR_INFO_LEN {
        return None;
    }
    // `bbr_bw_lo`, `bbr_bw_hi`: host-order halves of a u64.
    let bw = buf[0] as u64 | (buf[1] as u64) << 32;
    (bw > 0).then_some(bw)
}

/// The kernel's initial window (`TCP_INIT_CWND`), the floor of a restarted one (a route's
/// `initcwnd` would change it; mpflex does not set one).
const INIT_CWND: u32 = 10;

/// Whether the kernel restarts this connection's window after an idle spell: the network
/// namespace's `net.ipv4.tcp_slow_start_after_idle` is on and the connection's congestion
/// control is not one that sets its rate itself (BBR, which the kernel exempts).
pub fn idle_restart_applies(sock: &impl AsFd) -> bool {
    let on = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_slow_start_after_idle")
        .map(|v| v.trim() != "0")
        .unwrap_or(true);
    let cc = socket2::SockRef::from(sock).tcp_congestion().unwrap_or_default();
    on && !cc.starts_with(b"bbr")
}

impl TcpInfo {
    /// The congestion window the connection's next write will have. Linux shrinks an idle
    /// connection's window lazily, when new data is queued after more than an RTO without
    /// sending (RFC 2861; `tcp_cwnd_restart`): halved ⌈idle / RTO⌉ − 1 times, never below
    /// the initial window (or the old window, if that is smaller).
    /// Until that write `TCP_INFO` shows the old window, which overstates what an idle path
    /// can send at once — by 4x after a 1 s pause on a 270 ms path. Only with nothing in
    /// flight, and only when `idle_restart` (see [`idle_restart_applies`]).
    pub fn cwnd_after_idle(&self, idle_restart: bool) -> u32 {
        let rto_us = self.rto as u64;
        let idle_us = self.last_data_sent as u64 * 1000;
        if !idle_restart || self.unacked != 0 || rto_us == 0 || idle_us <= rto_us {
            return self.snd_cwnd;
        }
        let floor = INIT_CWND.min(self.snd_cwnd);
        let mut cwnd = self.snd_cwnd;
        let mut left = idle_us;
        while left > rto_us && cwnd > floor {
            left -= rto_us;
            cwnd >>= 1;
        }
        cwnd.max(floor)
    }

    /// `tcpi_delivery_rate_app_limited`: the latest delivery-rate sample was taken while
    /// the sender had less to send than its window allowed (bit 0 of the byte after
    /// `tcpi_snd_wscale`/`tcpi_rcv_wscale`).
    pub fn delivery_rate_app_limited(&self) -> bool {
        self.flags & 1 != 0
    }

    /// The scheduler's view; `alive`/`ready`/`backup` are filled by the engine;
    /// `restart_cwnd` is the window the next write gets if the kernel is about to shrink it
    /// ([`TcpInfo::cwnd_after_idle`]).
    pub fn snapshot(&self, id: usize, idle_restart: bool) -> PathSnapshot {
        PathSnapshot {
            id,
            alive: true,
            ready: false,
            backup: false,
            srtt: Duration::from_micros(self.rtt as u64),
            rttvar: Duration::from_micros(self.rttvar as u64),
            // `~0`: no sample yet.
            min_rtt: if self.min_rtt == u32::MAX {
                Duration::ZERO
            } else {
                Duration::from_micros(self.min_rtt as u64)
            },
            cwnd: self.snd_cwnd,
            restart_cwnd: Some(self.cwnd_after_idle(idle_restart)).filter(|&w| w < self.snd_cwnd),
            mss: self.snd_mss.max(1),
            in_flight: self.unacked,
            notsent: self.notsent_bytes,
            delivery_rate: self.delivery_rate,
            // `~0`: no rate set yet (before the first RTT sample).
            pacing_rate: if self.pacing_rate == u64::MAX {
                0
            } else {
                self.pacing_rate
            },
            bandwidth: 0,
            owd_us: None,
            owd_dev_us: 0,
        }
    }
}

/// `TCP_INFINITE_SSTHRESH` (include/net/tcp.h): the slow-start threshold of a connection
/// that has not yet reduced its window.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Gives a path that restarts after an idle spell with a threshold below the initial
/// window the slow-start threshold of a new connection (`tuning.fresh_ssthresh`).
///
/// A persistent path keeps whatever slow-start threshold its last window reduction left,
/// however long ago, while the kernel restarts its *window* after every idle spell longer
/// than an RTO (RFC 2861, kept on, as the MPFlex paper does). A single keepalive lost
/// while the path idles times out and sets the threshold to 0.7 × a restarted window of
/// 10, i.e. 7 segments; the next burst then leaves slow start at 7 and grows by one
/// segment per round trip, and each later restart keeps max(threshold, ¾ window), so the
/// path stays slow transfer after transfer (seen in the lab: a 12.5 Mbit/s, 50 ms path
/// stuck at 20–26 of its 54-segment BDP for a whole 4 MB chunk). A threshold below the
/// initial window comes from a timeout or loss at a window no larger than a restart's
/// (a keepalive, a few frames): it says nothing of the path's capacity, yet starts the
/// next burst below where a new connection would. So when a write finds nothing in
/// flight after more than an RTO without sending — exactly when the kernel restarts the
/// window — and the threshold is below the initial window, it goes back to "none": the
/// congestion control is switched to BBR, whose setup sets it to
/// `TCP_INFINITE_SSTHRESH`, and straight back, which re-initialises the original one
/// (CUBIC's state is reset as for a new connection).
///
/// A threshold from a congestion event of a real burst stays: it is RFC 2861's memory of
/// the path, and dropping it costs (seed-default-270, warm 256 KB: resetting every
/// threshold made DEMS-F 1.10 × and ECF 1.18 × slower: the restarted burst overshot
/// the WiFi buffer again). Congestion controls that do not use the threshold (BBR itself)
/// are left alone; if BBR is not available the reset is off.
#[derive(Debug)]
pub struct SsthreshReset {
    /// The path's congestion control; `None`: off.
    cc: Option<Vec<u8>>,
    /// Resets done (for logs and tests).
    pub count: u64,
}

impl SsthreshReset {
    /// For the connection `sock` with its current congestion control; off unless `enabled`.
    pub fn new(sock: &impl AsFd, enabled: bool) -> Self {
        let cc = enabled
            .then(|| socket2::SockRef::from(sock).tcp_congestion().ok())
            .flatten()
            .map(|mut cc| {
                // The kernel returns the name NUL-padded to TCP_CA_NAME_MAX.
                cc.retain(|&b| b != 0);
                cc
            })
            .filter(|cc| !cc.is_empty() && !cc.starts_with(b"bbr"));
        SsthreshReset { cc, count: 0 }
    }

    /// Whether `info` shows an idle connection the kernel will restart on its next write
    /// and whose threshold is below the initial window.
    pub fn due(info: &TcpInfo) -> bool {
        info.unacked == 0
            && info.snd_ssthresh < INIT_CWND
            && info.rto > 0
            && info.last_data_sent as u64 * 1000 > info.rto as u64
    }

    /// Resets the threshold if [`SsthreshReset::due`]; call right before writing. Returns
    /// whether it did.
    pub fn before_write(&mut self, sock: &impl AsFd, info: &TcpInfo) -> bool {
        let Some(cc) = &self.cc else {
            return false;
        };
        if !Self::due(info) {
            return false;
        }
        let r = socket2::SockRef::from(sock);
        if let Err(e) = r.set_tcp_congestion(b"bbr") {
            tracing::info!("tuning.fresh_ssthresh: cannot switch a path to bbr ({e}); threshold resets off");
            self.cc = None;
            return false;
        }
        if let Err(e) = r.set_tcp_congestion(cc) {
            // Left on BBR, the path still works; say so once and stop.
            tracing::warn!(
                "tuning.fresh_ssthresh: cannot switch a path back to {} ({e}); it stays on bbr",
                String::from_utf8_lossy(cc)
            );
            self.cc = None;
            return false;
        }
        self.count += 1;
        true
    }
}

/// A path's delivery rate for the schedulers. The kernel reports only its latest sample,
/// and a sample taken while the application (here: the scheduler) gave the path less than
/// its window is a lower bound of what the path can deliver, often far below it: a
/// 9 Mbit/s path handed a frame now and then reports 40 KB/s, and a scheduler that reads
/// that as the path's speed keeps it idle, so it never shows more (seen with ECF at a
/// 470 ms RTT). As in BBR's bandwidth filter, an application-limited sample counts only
/// if it raises the estimate; any other sample replaces it.
#[derive(Debug, Default, Clone, Copy)]
pub struct RateEstimate {
    rate: u64,
}

impl RateEstimate {
    /// Takes the sample in `info` and returns the estimate, bytes per second (0: none yet).
    pub fn update(&mut self, info: &TcpInfo) -> u64 {
        if !info.delivery_rate_app_limited() || info.delivery_rate > self.rate {
            self.rate = info.delivery_rate;
        }
        self.rate
    }
}

fn setsockopt_u32(sock: &impl AsRawFd, level: i32, opt: i32, v: u32) -> std::io::Result<()> {
    // SAFETY: passing a pointer to a live u32 and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            &v as *const u32 as *const libc::c_void,
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Wake writers only when less than `bytes` sit unsent in the socket (late binding).
/// Caps the socket's pacing rate (bytes per second). Any cap below "unlimited" also turns
/// on the kernel's internal TCP pacing for congestion controls that do not pace themselves
/// (CUBIC): a window opened while the path was idle then leaves at about the path's rate
/// instead of as one line-rate burst into a small bottleneck buffer.
pub fn set_max_pacing_rate(sock: &impl AsRawFd, bytes_per_sec: u64) -> std::io::Result<()> {
    // SAFETY: passing a pointer to a live u64 and its size (the kernel reads 64 bits).
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &bytes_per_sec as *const u64 as *const libc::c_void,
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub fn set_notsent_lowat(sock: &impl AsRawFd, bytes: u32) -> std::io::Result<()> {
    setsockopt_u32(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes)
}

/// Give up on a connection whose data stays unacknowledged this long.
pub fn set_user_timeout(sock: &impl AsRawFd, d: Duration) -> std::io::Result<()> {
    setsockopt_u32(sock, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, d.as_millis() as u32)
}

/// Close with RST instead of FIN (used to propagate a stream reset to an application).
pub fn set_linger_zero(sock: &impl AsRawFd) -> std::io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: pointer to a live linger struct and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _s = l.accept().unwrap();
        set_notsent_lowat(&c, 16384).unwrap();
        let i = tcp_info(&c).unwrap();
        assert_eq!(i.state, 1, "TCP_ESTABLISHED");
        assert!(i.snd_mss > 0 && i.snd_cwnd > 0);
        let s = i.snapshot(3, idle_restart_applies(&c));
        assert_eq!(s.id, 3);
        assert!(s.mss > 0);
    }

    /// BBR reports its bandwidth estimate once data has been acknowledged; CUBIC has none.
    #[test]
    fn bbr_reports_a_bandwidth_and_cubic_none() {
        use std::io::{Read, Write};
        for cc in ["bbr", "cubic"] {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            socket2::SockRef::from(&c)
                .set_tcp_congestion(cc.as_bytes())
                .unwrap_or_else(|e| panic!("{cc}: {e}"));
            let (mut s, _) = l.accept().unwrap();
            let reader = std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                let mut n = 0;
                while n < 4 << 20 {
                    n += s.read(&mut buf).unwrap();
                }
            });
            (&c).write_all(&vec![7u8; 4 << 20]).unwrap();
            reader.join().unwrap();
            let bw = cc_bandwidth(&c);
            match cc {
                // Loopback delivers gigabytes per second; any sample is well above 1 MB/s.
                "bbr" => assert!(bw.is_some_and(|b| b > 1_000_000), "{bw:?}"),
                _ => assert_eq!(bw, None),
            }
        }
    }

    /// A connection that sent one small message and got it acknowledged had less to send
    /// than its window: the kernel marks its delivery-rate sample application-limited (this
    /// pins the bit's position in `struct tcp_info`).
    #[test]
    fn a_trickle_is_application_limited() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7; 100]).unwrap();
        let mut buf = [0u8; 100];
        s.read_exact(&mut buf).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let i = loop {
            let i = tcp_info(&c).unwrap();
            if i.unacked == 0 && i.delivery_rate > 0 {
                break i;
            }
            assert!(std::time::Instant::now() < deadline, "no delivery-rate sample: {i:?}");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(i.delivery_rate_app_limited(), "{i:?}");
    }

    fn sample(rate: u64, app_limited: bool) -> TcpInfo {
        TcpInfo {
            delivery_rate: rate,
            flags: app_limited as u8,
            ..TcpInfo::default()
        }
    }

    #[test]
    fn application_limited_samples_only_raise_the_rate() {
        let mut r = RateEstimate::default();
        assert_eq!(
            r.update(&sample(30_000, true)),
            30_000,
            "the first sample, whatever it is"
        );
        assert_eq!(r.update(&sample(1_100_000, false)), 1_100_000);
        assert_eq!(r.update(&sample(40_000, true)), 1_100_000, "a trickle is a lower bound");
        assert_eq!(r.update(&sample(1_300_000, true)), 1_300_000, "but it may raise it");
        assert_eq!(
            r.update(&sample(500_000, false)),
            500_000,
            "a busy sample is the path's rate"
        );
    }

    fn idle(cwnd: u32, rto_ms: u32, idle_ms: u32) -> TcpInfo {
        TcpInfo {
            snd_cwnd: cwnd,
            rto: rto_ms * 1000,
            last_data_sent: idle_ms,
            ..TcpInfo::default()
        }
    }

    #[test]
    fn an_idle_window_is_halved_per_rto_after_the_first() {
        // tcp_cwnd_restart: delta = idle time; halve while (delta -= rto) > 0.
        assert_eq!(idle(80, 300, 250).cwnd_after_idle(true), 80, "not idle for an RTO");
        assert_eq!(idle(80, 300, 300).cwnd_after_idle(true), 80, "exactly one RTO");
        assert_eq!(idle(80, 300, 301).cwnd_after_idle(true), 40);
        assert_eq!(idle(80, 300, 601).cwnd_after_idle(true), 20);
        assert_eq!(idle(160, 300, 900).cwnd_after_idle(true), 40);
        assert_eq!(
            idle(80, 300, 10_000).cwnd_after_idle(true),
            10,
            "floor: the initial window"
        );
        assert_eq!(idle(6, 300, 10_000).cwnd_after_idle(true), 6, "a smaller window stays");
        assert_eq!(
            idle(57, 680, 1030).cwnd_after_idle(true),
            28,
            "as traced on a 470 ms path"
        );
    }

    #[test]
    fn busy_or_exempt_windows_are_the_kernels() {
        let mut i = idle(80, 300, 1000);
        assert_eq!(i.cwnd_after_idle(false), 80, "no idle restart (sysctl off or BBR)");
        i.unacked = 3;
        assert_eq!(i.cwnd_after_idle(true), 80, "data in flight: not idle");
    }
}
