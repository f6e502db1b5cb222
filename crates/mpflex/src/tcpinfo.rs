//! The socket side of late binding: reading `TCP_INFO` and `TCP_CC_INFO`, and the socket
//! options path connections use. What the values mean and what follows from them is the
//! engine's ([`mpflex_engine::TcpInfo`], [`mpflex_engine::PathWriter`]).

use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

pub use mpflex_engine::{TcpInfo, INFINITE_SSTHRESH};

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

/// Resets an idle path's slow-start threshold to a new connection's (`tuning.fresh_ssthresh`)
/// when the engine's path writer asks for it ([`mpflex_engine::PathWriter`] says when and
/// why). The congestion control is switched to BBR, whose setup sets the threshold to
/// `TCP_INFINITE_SSTHRESH`, and straight back, which re-initialises the original one (CUBIC's
/// state is reset as for a new connection). Paths on BBR itself are left alone; if BBR is not
/// available the reset turns itself off.
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

    /// Whether this path's threshold can be reset (its congestion control is known and
    /// not BBR, and the reset is enabled).
    pub fn available(&self) -> bool {
        self.cc.is_some()
    }

    /// Whether `info` shows an idle connection the kernel will restart on its next write
    /// and whose threshold is below the initial window.
    pub fn due(info: &TcpInfo) -> bool {
        info.ssthresh_reset_due()
    }

    /// Resets the threshold if [`SsthreshReset::due`]; call right before writing. Returns
    /// whether it did.
    pub fn before_write(&mut self, sock: &impl AsFd, info: &TcpInfo) -> bool {
        Self::due(info) && self.reset(sock)
    }

    /// Resets the threshold now. Returns whether it did; on failure it turns itself off.
    pub fn reset(&mut self, sock: &impl AsFd) -> bool {
        let Some(cc) = &self.cc else {
            return false;
        };
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

fn getsockopt_u32(sock: &impl AsRawFd, level: i32, opt: i32) -> std::io::Result<u32> {
    let mut v = 0u32;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: `v` is a live u32 and `len` its size; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            &mut v as *mut u32 as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(v)
}

/// `TCP_RTO_MAX_MS` (include/uapi/linux/tcp.h, Linux 6.13): the socket's cap on its
/// retransmission timeout, SYN retransmissions included; 1000 to 120000 ms.
const TCP_RTO_MAX_MS: i32 = 44;

/// The socket's cap on its retransmission timeout (the namespace's
/// `net.ipv4.tcp_rto_max_ms` until set); an error on kernels without the option.
pub fn rto_max(sock: &impl AsRawFd) -> std::io::Result<Duration> {
    getsockopt_u32(sock, libc::IPPROTO_TCP, TCP_RTO_MAX_MS).map(|ms| Duration::from_millis(ms.into()))
}

pub fn set_rto_max(sock: &impl AsRawFd, d: Duration) -> std::io::Result<()> {
    setsockopt_u32(sock, libc::IPPROTO_TCP, TCP_RTO_MAX_MS, d.as_millis() as u32)
}

/// `TCP_SYNCNT`: how many times the kernel retransmits this socket's SYN (besides
/// `tcp_syn_linear_timeouts`) before it gives up, in place of `tcp_syn_retries`.
pub fn set_syn_retries(sock: &impl AsRawFd, n: u32) -> std::io::Result<()> {
    setsockopt_u32(sock, libc::IPPROTO_TCP, libc::TCP_SYNCNT, n)
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
/// `TCP_QUICKACK`: acknowledge what has arrived at once instead of delaying the ACK. The
/// kernel leaves quick-ack mode again on its own, so a reader sets it after each read.
pub fn set_quickack(sock: &impl AsRawFd) -> std::io::Result<()> {
    setsockopt_u32(sock, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1)
}

pub fn set_user_timeout(sock: &impl AsRawFd, d: Duration) -> std::io::Result<()> {
    setsockopt_u32(sock, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, d.as_millis() as u32)
}

/// Close with RST instead of FIN (used to propagate a stream reset to an application).
/// Bytes written to `sock` that its peer has not acknowledged yet (SIOCOUTQ); 0 when
/// the query fails.
pub fn unacked(sock: &impl AsRawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (= SIOCOUTQ) writes one int through a valid pointer.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc == 0 {
        n.max(0) as usize
    } else {
        0
    }
}

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
}
