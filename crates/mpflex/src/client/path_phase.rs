//! A client path's supervisor as a state machine: the phases its task goes through
//! (waiting for a usable link, dialling, joined, pausing after a failure) and one function
//! per transition. Pure: [`super::path_tasks`] does the waiting, dialling and running and
//! feeds what happened here; the tests below drive every transition without a socket.

use std::time::{Duration, Instant};

use crate::links::plan::Target;
use crate::links::table::Binding;
use crate::status::snapshot::DialState;

/// After a connection that ended, the pause before the first re-dial; each further end
/// in a row (a connection that did not run [`HEALTHY_RUN`]) doubles it, up to
/// [`MAX_RESTART`]. Short: the link may well be back, and a dial over a dark link is not
/// lost, it waits for the kernel's retransmitted SYN to be answered.
pub(super) const FIRST_RESTART: Duration = Duration::from_millis(100);
/// The longest pause before re-dialling after a connection that ended.
pub(super) const MAX_RESTART: Duration = Duration::from_secs(1);
/// The pause after the first dial in a row that failed; each further failure doubles it,
/// up to [`MAX_RETRY`]. A dial fails only when it is refused, has no route, or the kernel
/// has given up retransmitting its SYN (`net.ipv4.tcp_syn_retries`): a link that is
/// merely dark does not fail it. The kernel's initial SYN retransmission timeout (RFC 6298
/// (2.1)) as the first step keeps a dial that fails at once from becoming a SYN storm.
pub(super) const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest pause between failed dials: it bounds how late a path whose route or
/// server came back without a link event (which re-aims the path at once) is dialled
/// again, while a path that keeps failing costs one SYN and one log line per pause.
pub(super) const MAX_RETRY: Duration = Duration::from_secs(30);
/// An attempt whose connection ran this long worked: its end is no failure in a row with
/// the ones before it, and the next pause is [`FIRST_RESTART`] again.
pub(super) const HEALTHY_RUN: Duration = Duration::from_secs(10);

/// At the start, how long a path the energy-aware mode holds back lets another path with
/// a usable link join first (and so hold it back for good): by then the other path's SYN
/// and the kernel's first retransmission of it (RFC 6298's initial timeout) went
/// unanswered, so that path waits for its link and this one is needed.
pub(super) const START_GRACE: Duration = Duration::from_secs(2);

/// One attempt at a connection: when it started and how many attempts failed in a row
/// before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Attempt {
    pub since: Instant,
    pub failures: u32,
}

/// Where a path's task is. `C` is the connection it runs (a dialled and joined path
/// connection in the client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Phase<C> {
    /// The target says wait (its link is not usable): no connection, nothing to dial.
    Waiting,
    /// Dialling from `bind`: connect, handshake, join the session.
    Dialing { bind: Binding, at: Attempt },
    /// Carrying the session's data on `conn`, dialled or a probe's that got through.
    Joined { conn: C, at: Attempt },
    /// The last attempt failed or its connection ended: no dial before `until`.
    Backoff { until: Instant, failures: u32 },
    /// The energy-aware mode holds the path back while another path carries: no
    /// connection until the mode wakes it or nothing else carries (eMPTCP opens its
    /// cellular subflow only then: Lim, seed 003 §4.1.5).
    Held { failures: u32 },
}

/// What the task does on a transition beside entering the next phase.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ask {
    Nothing,
    /// Take the path down in the session now: its connection is over, so what it held is
    /// sent again on the other paths without waiting for a timeout.
    DropPath,
}

/// The pause before re-dialling after a connection ended, `failures` attempts in a row
/// having failed or ended early before it.
pub(super) fn restart_pause(failures: u32) -> Duration {
    FIRST_RESTART
        .checked_mul(1 << failures.min(16))
        .map_or(MAX_RESTART, |d| d.min(MAX_RESTART))
}

/// The pause after a failed dial, `failures` attempts in a row having failed before it:
/// [`FIRST_RETRY`] doubled per failure up to [`MAX_RETRY`], then drawn from the upper half
/// of that by `jitter` (in [0, 1)): paths and clients that failed together (a server that
/// restarted, a route that went for all) do not re-dial in step ("equal jitter"
/// exponential backoff).
pub(super) fn retry_pause(failures: u32, jitter: f64) -> Duration {
    let full = FIRST_RETRY
        .checked_mul(1 << failures.min(16))
        .map_or(MAX_RETRY, |d| d.min(MAX_RETRY));
    full.mul_f64(1.0 - jitter.clamp(0.0, 1.0) / 2.0)
}

impl<C> Phase<C> {
    /// The target read afresh: wait, take over `probe`'s connection, or dial.
    pub fn aim(target: &Target, failures: u32, probe: Option<C>, now: Instant) -> Self {
        let Target::Dial(bind) = target else {
            return Phase::Waiting;
        };
        let at = Attempt { since: now, failures };
        match probe {
            Some(conn) => Phase::Joined { conn, at },
            None => Phase::Dialing { bind: bind.clone(), at },
        }
    }

    /// Waiting or Backoff → a new target: aim at it, the backoff afresh; no connection to
    /// take down.
    pub fn retarget(target: &Target, now: Instant) -> (Self, Ask) {
        (Phase::aim(target, 0, None, now), Ask::Nothing)
    }

    /// Dialing, Joined or Backoff → a probe dialled beside the silent connection got
    /// through: the path continues on it, and the backoff starts afresh.
    pub fn probe_through(target: &Target, conn: C, now: Instant) -> Self {
        Phase::aim(target, 0, Some(conn), now)
    }

    /// Dialing → held back (see [`Phase::Held`]) if `held`; any other phase stays.
    pub fn hold(self, held: bool) -> Self {
        match self {
            Phase::Dialing { at, .. } if held => Phase::Held { failures: at.failures },
            p => p,
        }
    }

    /// Held → let go (the mode woke the path, or nothing else carries): aim again, the
    /// failures in a row kept.
    pub fn released(target: &Target, failures: u32, now: Instant) -> Self {
        Phase::aim(target, failures, None, now)
    }

    /// Backoff → its pause is over: the next attempt, one more failure in a row.
    pub fn pause_over(target: &Target, failures: u32, now: Instant) -> Self {
        Phase::aim(target, failures + 1, None, now)
    }
}

impl Attempt {
    /// Dialing or Joined → a new target: this connection is over (the path goes down in
    /// the session at once), the backoff starts afresh.
    pub fn retarget<C>(self, target: &Target, now: Instant) -> (Phase<C>, Ask) {
        (Phase::aim(target, 0, None, now), Ask::DropPath)
    }

    /// Dialing → the dial got through: run its connection.
    pub fn dialled<C>(self, conn: C) -> Phase<C> {
        Phase::Joined { conn, at: self }
    }

    /// Joined → the connection ended: pause before the next attempt, longer with each
    /// early end in a row, afresh after a connection that ran [`HEALTHY_RUN`].
    pub fn ended<C>(self, now: Instant) -> Phase<C> {
        let failures = if now.saturating_duration_since(self.since) > HEALTHY_RUN {
            0
        } else {
            self.failures
        };
        Phase::Backoff {
            until: now + restart_pause(failures),
            failures,
        }
    }

    /// Dialing → the dial failed (refused, no route, the kernel gave up on its SYN, no
    /// answer to the handshake): pause before the next one, backed off
    /// ([`retry_pause`], `jitter` in [0, 1)).
    pub fn failed<C>(self, now: Instant, jitter: f64) -> Phase<C> {
        Phase::Backoff {
            until: now + retry_pause(self.failures, jitter),
            failures: self.failures,
        }
    }
}

impl<C> Phase<C> {
    /// Where the path's dial stands in this phase, for the status: none once joined, or
    /// while there is nothing to dial (the link's state or the hold says why).
    pub fn dial_state(&self) -> Option<DialState> {
        match self {
            Phase::Dialing { .. } => Some(DialState::Dialing),
            Phase::Backoff { .. } => Some(DialState::Retrying),
            Phase::Waiting | Phase::Joined { .. } | Phase::Held { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::links::table::Unusable;

    fn dial() -> Target {
        Target::Dial(Binding {
            device: Some("wlan0".into()),
            source: None,
        })
    }

    fn wait() -> Target {
        Target::Wait(Unusable::NoCarrier)
    }

    fn bind() -> Binding {
        let Target::Dial(b) = dial() else { unreachable!() };
        b
    }

    fn at(since: Instant, failures: u32) -> Attempt {
        Attempt { since, failures }
    }

    #[test]
    fn a_target_that_waits_is_waited_for() {
        let now = Instant::now();
        assert_eq!(Phase::<&str>::aim(&wait(), 3, None, now), Phase::Waiting);
        // A probe's connection over a link that went is dropped with it.
        assert_eq!(Phase::aim(&wait(), 0, Some("probe"), now), Phase::Waiting);
    }

    #[test]
    fn a_target_that_dials_is_dialled_keeping_the_failures_in_a_row() {
        let now = Instant::now();
        assert_eq!(
            Phase::<&str>::aim(&dial(), 2, None, now),
            Phase::Dialing {
                bind: bind(),
                at: at(now, 2)
            }
        );
    }

    #[test]
    fn a_dial_that_gets_through_is_run() {
        let now = Instant::now();
        assert_eq!(
            at(now, 1).dialled("conn"),
            Phase::Joined {
                conn: "conn",
                at: at(now, 1)
            }
        );
    }

    #[test]
    fn an_early_end_pauses_longer_with_each_in_a_row_up_to_the_maximum() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_millis(5);
        let pauses: Vec<Duration> = (0..6)
            .map(|f| match at(t0, f).ended::<&str>(now) {
                Phase::Backoff { until, failures } => {
                    assert_eq!(failures, f);
                    until - now
                }
                p => panic!("{p:?}"),
            })
            .collect();
        let ms = |m| Duration::from_millis(m);
        assert_eq!(pauses, [ms(100), ms(200), ms(400), ms(800), MAX_RESTART, MAX_RESTART]);
        assert_eq!(restart_pause(u32::MAX), MAX_RESTART);
    }

    #[test]
    fn a_failed_dial_backs_off_exponentially_with_jitter_up_to_the_cap() {
        let s = Duration::from_secs;
        // Without jitter (its draw at 0): the full step, doubling from the first to the cap.
        let full: Vec<Duration> = (0..8).map(|f| retry_pause(f, 0.0)).collect();
        assert_eq!(full, [s(1), s(2), s(4), s(8), s(16), s(30), s(30), s(30)]);
        assert_eq!(retry_pause(u32::MAX, 0.0), MAX_RETRY);
        // The jitter takes at most half of a step, never more, never less than nothing.
        for f in 0..8 {
            for j in [0.0, 0.25, 0.5, 0.999] {
                let p = retry_pause(f, j);
                assert!(p <= full[f as usize] && p > full[f as usize] / 2, "{f} {j}: {p:?}");
            }
        }
        assert_eq!(retry_pause(3, 0.5), Duration::from_secs(6));
        assert_eq!(retry_pause(3, 7.0), Duration::from_secs(4));
        assert_eq!(retry_pause(3, -1.0), Duration::from_secs(8));
        // As a transition: the failures in a row are kept, and the next dial counts one more.
        let now = Instant::now();
        assert_eq!(
            at(now, 2).failed::<&str>(now, 0.0),
            Phase::Backoff {
                until: now + s(4),
                failures: 2
            }
        );
        // A dial that failed long after it started (the kernel gave up on its SYN) is
        // still a failure: no healthy run resets it.
        let late = now + HEALTHY_RUN * 20;
        assert_eq!(
            at(now, 2).failed::<&str>(late, 0.0),
            Phase::Backoff {
                until: late + s(4),
                failures: 2
            }
        );
    }

    #[test]
    fn the_status_names_a_dial_and_a_pause_only() {
        let now = Instant::now();
        assert_eq!(
            Phase::<&str>::aim(&dial(), 0, None, now).dial_state(),
            Some(DialState::Dialing)
        );
        assert_eq!(
            at(now, 0).failed::<&str>(now, 0.0).dial_state(),
            Some(DialState::Retrying)
        );
        assert_eq!(at(now, 0).dialled("conn").dial_state(), None);
        assert_eq!(Phase::<&str>::Waiting.dial_state(), None);
        assert_eq!(Phase::<&str>::Held { failures: 0 }.dial_state(), None);
    }

    #[test]
    fn a_connection_that_ran_long_enough_ends_with_the_first_pause() {
        let t0 = Instant::now();
        let now = t0 + HEALTHY_RUN + Duration::from_millis(1);
        assert_eq!(
            at(t0, 4).ended::<&str>(now),
            Phase::Backoff {
                until: now + FIRST_RESTART,
                failures: 0
            }
        );
        // Exactly the healthy run is not beyond it.
        let now = t0 + HEALTHY_RUN;
        assert_eq!(
            at(t0, 4).ended::<&str>(now),
            Phase::Backoff {
                until: now + MAX_RESTART,
                failures: 4
            }
        );
    }

    #[test]
    fn the_end_of_a_pause_dials_again_one_failure_further() {
        let now = Instant::now();
        assert_eq!(
            Phase::<&str>::pause_over(&dial(), 2, now),
            Phase::Dialing {
                bind: bind(),
                at: at(now, 3)
            }
        );
        assert_eq!(Phase::<&str>::pause_over(&wait(), 2, now), Phase::Waiting);
    }

    #[test]
    fn a_probe_that_gets_through_is_run_with_the_backoff_afresh() {
        let now = Instant::now();
        assert_eq!(
            Phase::probe_through(&dial(), "probe", now),
            Phase::Joined {
                conn: "probe",
                at: at(now, 0)
            }
        );
        assert_eq!(Phase::probe_through(&wait(), "probe", now), Phase::Waiting);
    }

    #[test]
    fn a_new_target_drops_the_connection_and_starts_the_backoff_afresh() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(1);
        let fresh = Phase::<&str>::Dialing {
            bind: bind(),
            at: at(now, 0),
        };
        // Dialing or Joined: the attempt is over, and the path goes down in the session.
        assert_eq!(at(t0, 3).retarget(&dial(), now), (fresh.clone(), Ask::DropPath));
        assert_eq!(
            at(t0, 3).retarget::<&str>(&wait(), now),
            (Phase::Waiting, Ask::DropPath)
        );
        // Waiting or Backoff: nothing to take down.
        assert_eq!(Phase::retarget(&dial(), now), (fresh, Ask::Nothing));
        assert_eq!(Phase::<&str>::retarget(&wait(), now), (Phase::Waiting, Ask::Nothing));
    }

    #[test]
    fn a_held_path_dials_nothing_until_let_go() {
        let now = Instant::now();
        let dialing = Phase::<&str>::aim(&dial(), 2, None, now);
        assert_eq!(dialing.clone().hold(false), dialing);
        assert_eq!(dialing.hold(true), Phase::Held { failures: 2 });
        // Only a dial is held: a joined connection, a pause or a wait stay what they are.
        let joined = at(now, 0).dialled("conn");
        assert_eq!(joined.clone().hold(true), joined);
        assert_eq!(Phase::<&str>::Waiting.hold(true), Phase::Waiting);
        let paused = at(now, 1).ended::<&str>(now);
        assert_eq!(paused.clone().hold(true), paused);
        // Let go: the dial, with the failures in a row it had; or a wait if the link went.
        assert_eq!(
            Phase::<&str>::released(&dial(), 2, now),
            Phase::Dialing {
                bind: bind(),
                at: at(now, 2)
            }
        );
        assert_eq!(Phase::<&str>::released(&wait(), 2, now), Phase::Waiting);
    }
}
