//! How often a path's dial sends a SYN while its link gives no answer.
//!
//! Rule: for the first minute of a wait ([`PACED_FOR`]) a path's SYNs leave at most half a
//! second apart ([`GAP`]), whatever the outage's length; the first connection attempt to
//! be answered wins and the others are closed. A link that comes back then carries a SYN
//! within half a second, and the path joins one TCP, Noise and join round trip later:
//! within a second of the link's return wherever those three round trips take less than
//! half a second. After the minute the path's next dial follows the kernel's schedule.
//!
//! The reason: the kernel alone retransmits a SYN a second apart for
//! `net.ipv4.tcp_syn_linear_timeouts` times, then with RFC 6298 (5.5)'s doubling timeout
//! (SYNs at 0, 1, 2, 3, 4, 5, 7, 11, 19, 35, 67 s on Linux's defaults), so a link back at
//! 8 s went unused until 11 s and one back at 20 s until 35 s, while a cellular outage of
//! that length is routine and the user expects the path back about a second after the
//! link. A SYN is 60–80 bytes; against seconds of a lost path, two a second for a minute
//! cost little.
//!
//! How, and what it costs per waiting path:
//! - [`Pace::Capped`], where the kernel takes a per-socket cap on the retransmission
//!   timeout (`TCP_RTO_MAX_MS`, Linux 6.13; its floor is [`CAP`], one second): two
//!   attempts, the second [`GAP`] after the first, each retransmitting its SYN every
//!   second, [`CAPPED_SYN_RETRIES`] times (plus the linear ones) before the kernel gives up:
//!   2 sockets, 2 SYNs a second, for about a minute. Every retransmission belongs to one
//!   socket, so an answer that takes longer than the gap (a long round trip on a link just
//!   back) still connects it. The connection that wins gets the namespace's cap back,
//!   so its data retransmissions back off as usual.
//! - [`Pace::Fresh`], on older kernels: the first attempt keeps the kernel's schedule and
//!   a fresh attempt starts every [`GAP`] beside it, each closed after [`FRESH_LIFE`]
//!   without an answer (its SYN and the kernel's one retransmission of it): at most 1 + 4
//!   sockets and 5 SYNs a second, for the minute.
//! - [`Pace::Kernel`]: one attempt on the kernel's schedule (past the minute, and a
//!   suspect path's probes, which their own interval paces).
//!
//! On a link with neighbours (Ethernet, WiFi) a dark link also leaves the next hop's ARP
//! or NDP unanswered: the SYNs wait for it, the kernel asks a second apart
//! (`retrans_time_ms`) and after three tries fails the attempt with EHOSTUNREACH. In a
//! paced wait such an attempt starts again at once, as the wait's silence it is (its SYN
//! sets off the next neighbour discovery); there the kernel's probes, a second apart, set
//! the pace. A cellular link (wwan, rmnet, ppp) resolves no neighbours.

use std::time::Duration;

/// How long from the start of a wait its SYNs are paced.
pub(super) const PACED_FOR: Duration = Duration::from_secs(60);
/// The longest gap between a paced wait's SYNs.
pub(super) const GAP: Duration = Duration::from_millis(500);
/// The retransmission timeout cap of a [`Pace::Capped`] attempt: the least the kernel
/// takes (`TCP_RTO_MAX_MS`).
pub(super) const CAP: Duration = Duration::from_secs(1);
/// `TCP_SYNCNT` of a capped attempt: a minute of retransmissions at the cap (the kernel
/// adds its `tcp_syn_linear_timeouts` to it). Then the kernel gives up on it (ETIMEDOUT)
/// and the path's next dial, past the minute, is on the kernel's schedule.
pub(super) const CAPPED_SYN_RETRIES: u32 = 60;
/// How long a [`Pace::Fresh`] attempt waits for its answer before it is closed: its SYN
/// and the kernel's retransmission of it a second later, each given a second.
pub(super) const FRESH_LIFE: Duration = Duration::from_secs(2);

/// How a dial paces its SYNs (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pace {
    Kernel,
    Capped,
    Fresh,
}

/// An attempt a dial starts beside its first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Extra {
    /// After the dial's start.
    pub at: Duration,
    /// How long it waits for an answer; `None`: as long as the kernel retransmits.
    pub life: Option<Duration>,
}

impl Pace {
    /// The pace of a dial: `paced` if its wait is in its first minute (or about to
    /// begin), `capped` if the kernel takes `TCP_RTO_MAX_MS`.
    pub fn of(paced: bool, capped: bool) -> Pace {
        match (paced, capped) {
            (false, _) => Pace::Kernel,
            (true, true) => Pace::Capped,
            (true, false) => Pace::Fresh,
        }
    }

    /// Whether the dial's attempts have their retransmission timeout capped at [`CAP`].
    pub fn caps(self) -> bool {
        self == Pace::Capped
    }

    /// The `k`-th attempt beside the first (from 1), if there is one.
    pub fn extra(self, k: u32) -> Option<Extra> {
        match self {
            Pace::Kernel => None,
            Pace::Capped => (k == 1).then_some(Extra { at: GAP, life: None }),
            Pace::Fresh => {
                let at = GAP * k;
                (k >= 1 && at < PACED_FOR).then_some(Extra {
                    at,
                    life: Some(FRESH_LIFE),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When the kernel sends an attempt's SYNs, from its start: a second apart for the
    /// first `linear` + 1 retransmissions, then doubling (classic Linux: `linear` 0), the
    /// first `retries` + `linear` retransmissions; with the cap, a second apart throughout.
    fn kernel_syns(linear: u32, retries: u32, capped: bool) -> Vec<Duration> {
        let (mut at, mut rto) = (Duration::ZERO, Duration::from_secs(1));
        let mut out = vec![at];
        for n in 0..retries + linear {
            at += rto;
            out.push(at);
            if n >= linear && !capped {
                rto *= 2;
            }
        }
        out
    }

    /// Every SYN a dial of `pace` sends (time, attempt) in its first `until`, on a kernel
    /// with `linear` linear timeouts and `tcp_syn_retries` = 6, and each attempt's span.
    fn dial(pace: Pace, linear: u32, until: Duration) -> (Vec<Duration>, Vec<(Duration, Duration)>) {
        let retries = if pace.caps() { CAPPED_SYN_RETRIES } else { 6 };
        let mut starts = vec![(Duration::ZERO, None)];
        let mut k = 1;
        while let Some(e) = pace.extra(k) {
            starts.push((e.at, e.life));
            k += 1;
        }
        let mut syns = Vec::new();
        let mut spans = Vec::new();
        for (start, life) in starts {
            let times = kernel_syns(linear, retries, pace.caps());
            let end = start + life.unwrap_or(*times.last().unwrap() + Duration::from_secs(1));
            for t in times.into_iter().map(|t| start + t).filter(|&t| t < end && t < until) {
                syns.push(t);
            }
            spans.push((start, end));
        }
        syns.sort();
        (syns, spans)
    }

    fn max_gap(syns: &[Duration]) -> Duration {
        syns.windows(2).map(|w| w[1] - w[0]).max().unwrap()
    }

    /// Most SYNs in any second (windows starting at each SYN).
    fn per_second(syns: &[Duration]) -> usize {
        syns.iter()
            .map(|&t| {
                syns.iter()
                    .filter(|&&u| u >= t && u < t + Duration::from_secs(1))
                    .count()
            })
            .max()
            .unwrap()
    }

    /// Most attempts open at once.
    fn open(spans: &[(Duration, Duration)]) -> usize {
        spans
            .iter()
            .map(|&(t, _)| spans.iter().filter(|&&(s, e)| s <= t && t < e).count())
            .max()
            .unwrap()
    }

    #[test]
    fn a_capped_wait_sends_a_syn_every_half_second_from_two_sockets_for_a_minute() {
        for linear in [0, 4] {
            let (syns, spans) = dial(Pace::Capped, linear, PACED_FOR);
            assert!(max_gap(&syns) <= GAP, "linear {linear}: {syns:?}");
            assert_eq!(per_second(&syns), 2, "linear {linear}");
            assert_eq!(open(&spans), 2, "linear {linear}");
            // The kernel gives up on both after the minute (and the linear ones).
            for (s, e) in &spans {
                assert_eq!(*e - *s, CAP * (CAPPED_SYN_RETRIES + linear + 1));
            }
        }
    }

    #[test]
    fn a_wait_without_the_cap_sends_a_syn_every_half_second_from_at_most_five_sockets() {
        for linear in [0, 4] {
            let (syns, spans) = dial(Pace::Fresh, linear, PACED_FOR);
            assert!(max_gap(&syns) <= GAP, "linear {linear}: {syns:?}");
            assert!(per_second(&syns) <= 5, "linear {linear}: {}", per_second(&syns));
            assert!(open(&spans) <= 5, "linear {linear}: {}", open(&spans));
            // No fresh attempt starts past the minute; the first goes on with the kernel.
            assert!(spans[1..].iter().all(|(s, _)| *s < PACED_FOR));
            assert!(spans[0].1 > PACED_FOR);
        }
    }

    #[test]
    fn past_the_minute_and_for_probes_the_kernels_schedule_is_kept() {
        assert_eq!(Pace::of(false, true), Pace::Kernel);
        assert_eq!(Pace::of(false, false), Pace::Kernel);
        assert_eq!(Pace::Kernel.extra(1), None);
        assert!(!Pace::Kernel.caps());
        // The kernel alone: a link back at 8 s waits for the SYN at 11 s.
        let (syns, _) = dial(Pace::Kernel, 4, Duration::from_secs(20));
        let next = syns.iter().find(|&&t| t >= Duration::from_secs(8)).unwrap();
        assert_eq!(*next, Duration::from_secs(11));
    }
}
