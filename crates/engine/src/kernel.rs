//! The kernel's view of a path connection (`TCP_INFO`) and what the engine reads from it.
//!
//! The driver fills [`TcpInfo`] with `getsockopt(TCP_INFO)`; everything derived from it —
//! the scheduler's [`PathSnapshot`], the window an idle path restarts with, the delivery
//! rate estimate — is decided here, so it is tested without a socket.

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
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    /// Data bytes sent, retransmissions included (Linux 4.19+; 0 before).
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
}

/// The kernel's initial window (`TCP_INIT_CWND`), the floor of a restarted one (a route's
/// `initcwnd` would change it; mpflex does not set one).
pub const INIT_CWND: u32 = 10;

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

    /// What the path holds for the peer: bytes in flight ([`TcpInfo::in_flight_bytes`])
    /// plus those still unsent in the socket.
    pub fn held_bytes(&self) -> u64 {
        self.in_flight_bytes() + self.notsent_bytes as u64
    }

    /// Bytes sent and not yet acknowledged: from the byte counters (sent less
    /// retransmitted less acknowledged) where the kernel keeps them, else the segments in
    /// flight times the MSS — which overstates it when writes are smaller than a segment,
    /// as queue control's are (a 1.9 KB write goes as 1448 + 450 bytes: two segments).
    ///
    /// Never more than the segments in flight times the MSS, which bounds it: the byte
    /// counters drift apart when a segment's transmission fails below TCP. The kernel
    /// counts `tcpi_bytes_sent` before handing the segment to the IP layer; when a local
    /// qdisc drops it (a shaper's full queue) the segment stays unsent and goes again as
    /// new data, counted a second time and never as a retransmission. Measured: 11 MB
    /// "in flight" on an idle socket after a minute of drops at a 40 Mbit/s `tbf`, which
    /// held queue control's limit at its floor and stalled a download for good.
    pub fn in_flight_bytes(&self) -> u64 {
        let by_segments = self.unacked as u64 * self.snd_mss.max(1) as u64;
        if self.bytes_sent > 0 {
            // bytes_acked also counts the SYN's sequence number: at most one byte off.
            self.bytes_sent
                .saturating_sub(self.bytes_retrans)
                .saturating_sub(self.bytes_acked)
                .min(by_segments)
        } else {
            by_segments
        }
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

    /// Whether the kernel will restart this idle connection's window on its next write
    /// (nothing in flight, idle for more than an RTO) while its slow-start threshold is
    /// below the initial window: the moment [`crate::PathWriter`] resets the threshold.
    pub fn ssthresh_reset_due(&self) -> bool {
        self.unacked == 0
            && self.snd_ssthresh < INIT_CWND
            && self.rto > 0
            && self.last_data_sent as u64 * 1000 > self.rto as u64
    }
}

/// `TCP_INFINITE_SSTHRESH` (include/net/tcp.h): the slow-start threshold of a connection
/// that has not yet reduced its window.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// A path's delivery rate for the schedulers. The kernel reports only its latest sample,
/// and a sample taken while the application (here: the scheduler) gave the path less than
/// its window is a lower bound of what the path can deliver, often far below it: a
/// 9 Mbit/s path handed a frame now and then reports 40 KB/s, and a scheduler that reads
/// that as the path's speed keeps it idle, so it never shows more. As in BBR's bandwidth filter, an application-limited sample counts only
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn bytes_in_flight_come_from_the_counters_bounded_by_the_segments() {
        let info = |unacked: u32, sent: u64, retrans: u64, acked: u64| TcpInfo {
            snd_mss: 1448,
            unacked,
            bytes_sent: sent,
            bytes_retrans: retrans,
            bytes_acked: acked,
            ..TcpInfo::default()
        };
        // Two short writes in two segments: the counters are exact, segments overstate.
        assert_eq!(info(2, 1_000_000 + 1900, 0, 1_000_001).in_flight_bytes(), 1899);
        // Three segments hold at most 4344 bytes, whatever the counters say (5000).
        assert_eq!(info(3, 1_000_000, 40_000, 955_000).in_flight_bytes(), 3 * 1448);
        // Counters drifted by sends a local qdisc dropped: nothing is unacknowledged.
        assert_eq!(info(0, 30_000_000, 2_000_000, 17_000_000).in_flight_bytes(), 0);
        assert_eq!(info(10, 30_000_000, 2_000_000, 17_000_000).in_flight_bytes(), 14_480);
        // Without the counters, the segments.
        assert_eq!(info(4, 0, 0, 0).in_flight_bytes(), 4 * 1448);
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

    #[test]
    fn the_threshold_reset_is_due_only_on_an_idle_restart_below_the_initial_window() {
        let mut i = idle(80, 300, 1000);
        i.snd_ssthresh = 7;
        assert!(i.ssthresh_reset_due());
        i.snd_ssthresh = 20;
        assert!(!i.ssthresh_reset_due(), "a threshold from a real burst stays");
        i.snd_ssthresh = 7;
        i.last_data_sent = 200;
        assert!(!i.ssthresh_reset_due(), "not idle for an RTO");
        i.last_data_sent = 1000;
        i.unacked = 1;
        assert!(!i.ssthresh_reset_due(), "data in flight");
    }
}
