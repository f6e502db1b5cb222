//! What a path says while its dials go unanswered, and what it says when one fails.
//!
//! Rule: a SYN that goes unanswered is the link's doing until the kernel itself gives up
//! on it. The SYN goes again, every half second for the first minute of the wait
//! ([`super::syn_pace`]), then as the kernel retransmits it (a doubling timeout, RFC 6298
//! (5.5), `tcp_syn_retries` times), and a link that comes back meanwhile carries the next
//! one; so meanwhile the log says the path waits for its link (once per wait, then a
//! reminder now and then), and only the kernel's ETIMEDOUT, or a route that is missing,
//! gets the hint to check the route and the server's firewall. The reason: a cellular
//! link dark for seconds is routine, and blaming a firewall for it sends the user looking
//! in the wrong place.

use std::time::{Duration, Instant};

use super::syn_pace::PACED_FOR;

/// The kernel's initial retransmission timeout for a SYN (RFC 6298 (2.1), Linux's
/// `TCP_TIMEOUT_INIT`): a dial unanswered this long lost its SYN or the answer (or
/// crosses a link with a longer round trip), and the kernel sends the SYN again.
pub(super) const SYN_RTO: Duration = Duration::from_secs(1);

/// How often, at most, the log reminds that a path still waits for its link.
pub(super) const REMINDER: Duration = Duration::from_secs(60);

/// What the log says now of a path's unanswered dial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Say {
    Nothing,
    /// The wait began: said once per wait.
    Waiting,
    /// Still waiting, this long since the wait began.
    StillWaiting(Duration),
}

/// One path's wait for its link: since when its dials go unanswered, across attempts (a
/// dial the kernel gave up on and the next one are one wait), and when it was last said.
#[derive(Debug, Default)]
pub(super) struct LinkWait {
    since: Option<Instant>,
    said: Option<Instant>,
}

impl LinkWait {
    /// A dial started at `started` has had no answer by `now`: what to say. Nothing before
    /// the SYN's first retransmission timeout; then that the path waits, once; then a
    /// reminder every [`REMINDER`] at most.
    pub fn unanswered(&mut self, started: Instant, now: Instant) -> Say {
        if now.saturating_duration_since(started) < SYN_RTO {
            return Say::Nothing;
        }
        let since = *self.since.get_or_insert(started);
        match self.said {
            None => {
                self.said = Some(now);
                Say::Waiting
            }
            Some(said) if now.saturating_duration_since(said) >= REMINDER => {
                self.said = Some(now);
                Say::StillWaiting(now.saturating_duration_since(since))
            }
            Some(_) => Say::Nothing,
        }
    }

    /// A dial got an answer (its TCP connection is up): the wait is over. How long it was,
    /// if it was said.
    pub fn answered(&mut self, now: Instant) -> Option<Duration> {
        let since = self.since.take();
        self.said.take().and(since).map(|s| now.saturating_duration_since(s))
    }

    /// Whether a wait was said and is not over.
    pub fn said(&self) -> bool {
        self.said.is_some()
    }

    /// Whether a dial starting `now` is in its wait's first [`PACED_FOR`] (a dial with no
    /// wait yet starts one), and so paces its SYNs ([`super::syn_pace`]).
    pub fn paced(&self, now: Instant) -> bool {
        self.since.is_none_or(|s| now.saturating_duration_since(s) < PACED_FOR)
    }
}

/// Why a connection attempt failed, as far as what to tell the user goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    /// Nothing listens at the address (ECONNREFUSED).
    Refused,
    /// The kernel gave up retransmitting the SYN (ETIMEDOUT).
    KernelGaveUp,
    /// No route to the server over this link (ENETUNREACH, EHOSTUNREACH).
    NoRoute,
    Other,
}

impl Failure {
    pub fn of(e: &std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            return Failure::Refused;
        }
        match e.raw_os_error() {
            Some(libc::ETIMEDOUT) => Failure::KernelGaveUp,
            Some(libc::ENETUNREACH | libc::EHOSTUNREACH) => Failure::NoRoute,
            _ => Failure::Other,
        }
    }

    /// What the user can do about it.
    pub fn hint(self) -> &'static str {
        match self {
            Failure::Refused => "nothing listens there: is `mpflex server` running with this address in its listen?",
            Failure::KernelGaveUp => {
                "the kernel gave up retransmitting the SYN (after a minute of them, then net.ipv4.tcp_syn_retries): \
                 if the link is up, check the route over this link and that the server's firewall lets the port in"
            }
            Failure::NoRoute => {
                "no route to the server over this link: check the link's address and routes (`ip route get` \
                 the server's address from the path's source)"
            }
            Failure::Other => "check the server address and the route over this link",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_said_once_after_the_first_retransmission_then_reminded_now_and_then() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut w = LinkWait::default();
        // Before the SYN's first retransmission timeout: an answer may still be on its way.
        assert_eq!(w.unanswered(t0, t0 + ms(999)), Say::Nothing);
        assert!(!w.said());
        assert_eq!(w.unanswered(t0, t0 + SYN_RTO), Say::Waiting);
        // Not again at every tick of the same dial, nor at the next dial's (the kernel gave
        // up on the first, the path dials again: one wait).
        assert_eq!(w.unanswered(t0, t0 + ms(3000)), Say::Nothing);
        let t1 = t0 + ms(20_000);
        assert_eq!(w.unanswered(t1, t1 + ms(1500)), Say::Nothing);
        // A reminder once REMINDER has passed since the last word, with the whole wait.
        let r = t0 + SYN_RTO + REMINDER;
        assert_eq!(w.unanswered(t0, r), Say::StillWaiting(r - t0));
        assert_eq!(w.unanswered(t0, r + ms(1000)), Say::Nothing);
        // The answer ends the wait and says how long it was; the next wait is said anew.
        assert_eq!(w.answered(r + ms(2000)), Some(r + ms(2000) - t0));
        assert!(!w.said());
        let t2 = r + ms(10_000);
        assert_eq!(w.unanswered(t2, t2 + SYN_RTO), Say::Waiting);
    }

    #[test]
    fn a_wait_is_paced_for_its_first_minute_across_dials() {
        let t0 = Instant::now();
        let mut w = LinkWait::default();
        assert!(w.paced(t0));
        assert_eq!(w.unanswered(t0, t0 + SYN_RTO), Say::Waiting);
        // A later dial of the same wait (the kernel gave up on the first) is paced while
        // the wait is in its first minute, not after.
        assert!(w.paced(t0 + PACED_FOR - Duration::from_millis(1)));
        assert!(!w.paced(t0 + PACED_FOR));
        // The next wait is paced anew.
        w.answered(t0 + PACED_FOR * 2);
        assert!(w.paced(t0 + PACED_FOR * 2));
    }

    #[test]
    fn an_answer_before_anything_was_said_ends_no_wait() {
        let t0 = Instant::now();
        let mut w = LinkWait::default();
        assert_eq!(w.unanswered(t0, t0 + Duration::from_millis(200)), Say::Nothing);
        assert_eq!(w.answered(t0 + Duration::from_millis(300)), None);
    }

    #[test]
    fn only_the_kernel_giving_up_or_a_missing_route_points_at_the_route_and_firewall() {
        let os = std::io::Error::from_raw_os_error;
        assert_eq!(Failure::of(&os(libc::ETIMEDOUT)), Failure::KernelGaveUp);
        assert_eq!(Failure::of(&os(libc::ENETUNREACH)), Failure::NoRoute);
        assert_eq!(Failure::of(&os(libc::EHOSTUNREACH)), Failure::NoRoute);
        assert_eq!(Failure::of(&os(libc::ECONNREFUSED)), Failure::Refused);
        assert_eq!(Failure::of(&os(libc::EADDRNOTAVAIL)), Failure::Other);
        assert!(Failure::KernelGaveUp.hint().contains("firewall"));
        assert!(Failure::NoRoute.hint().contains("route"));
        for f in [Failure::Refused, Failure::NoRoute, Failure::Other] {
            assert!(!f.hint().contains("firewall"), "{f:?}");
        }
    }
}
