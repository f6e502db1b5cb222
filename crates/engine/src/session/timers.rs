//! The session's clocks: the delayed ACK, path timeouts, suspicion, probes and keepalives.

use std::time::{Duration, Instant};

use super::{Event, Session};
use crate::paths::PathCheck;

impl Session {
    /// The next instant [`Session::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.feedback.deadline(),
            self.paths.next_timeout(&self.cfg, self.load()),
            self.dgrams.release_at(self.gap_wait()),
            self.energy_deadline(),
            self.paths.next_hint_release(),
            self.ack_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// How much later than its earliest path a path may deliver a bulk datagram and
    /// still take it ([`crate::datagram::placement_slack`]), from the spread of the
    /// carrying paths' RTTs as this side's kernel measures them.
    pub(crate) fn placement_slack(&self) -> Duration {
        let rtts = || self.paths.iter().filter(|p| p.carries()).map(|p| p.snap.srtt);
        let spread = match (rtts().max(), rtts().min()) {
            (Some(hi), Some(lo)) => hi - lo,
            _ => Duration::ZERO,
        };
        crate::datagram::placement_slack(spread)
    }

    /// How long a missing bulk datagram is waited for while no path is seen to have lost
    /// it ([`crate::datagram::gap_wait`]), from the slowest up path's RTT.
    pub(crate) fn gap_wait(&self) -> Duration {
        let slowest = self.paths.iter().filter(|p| p.is_up()).map(|p| p.snap.srtt).max();
        crate::datagram::gap_wait(slowest.unwrap_or_default())
    }

    /// A bit for each path that is up.
    pub(crate) fn up_mask(&self) -> u64 {
        self.paths
            .iter()
            .filter(|p| p.is_up())
            .fold(0, |m, p| m | (1 << p.snap.id))
    }

    /// When the peer's silence on acknowledgements ends the session, if it may: only
    /// while a path is up (a dark spell is the paths' timeout's to judge, not the peer's).
    fn ack_deadline(&self) -> Option<Instant> {
        if self.gave_up || self.up_mask() == 0 {
            return None;
        }
        self.send.ack_waiting_since().map(|t| t + self.cfg.ack_timeout)
    }

    /// A peer that acknowledges nothing while data waits for it and a path is up holds
    /// this side's send buffer for nothing: the session is closed with
    /// `CloseCode::NoProgress` (a peer that reads and never acknowledges would otherwise
    /// pin [`crate::EngineConfig::send_buffer`] for the session's life).
    fn check_ack_progress(&mut self, now: Instant) {
        if self.up_mask() == 0 {
            self.send.restart_ack_clock(now);
            return;
        }
        if self.ack_deadline().is_some_and(|d| now >= d) {
            self.gave_up = true;
            tracing::warn!(
                timeout_ms = self.cfg.ack_timeout.as_millis() as u64,
                held = self.send.held_bytes(),
                "the peer acknowledged nothing while data waited; closing the session"
            );
            self.close(mpflex_wire::CloseCode::NoProgress);
            self.events.push_back(Event::GaveUp {
                code: mpflex_wire::CloseCode::NoProgress,
            });
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        self.check_ack_progress(now);
        let mut ready = Vec::new();
        self.dgrams.release(now, self.gap_wait(), &mut ready);
        self.events
            .extend(ready.into_iter().map(|(flow, data)| Event::Datagram { flow, data }));
        if self.feedback.on_timeout(now) {
            self.wake();
        }
        self.energy_tick(now);
        if self.paths.release_due_hints(now) {
            tracing::info!("link hint cleared after its hold; the path takes new data again");
            for i in 0..self.paths.len() {
                self.announce_tier(i);
            }
            self.restate_control();
            self.wake();
        }
        let load = self.load();
        for i in 0..self.paths.len() {
            match self.paths.check(i, now, &self.cfg, load) {
                PathCheck::TimedOut => {
                    self.events.push_back(Event::PathTimedOut(i));
                    self.path_down(i);
                    continue;
                }
                PathCheck::Stuck => self.on_stuck(i, now),
                PathCheck::Hedge => {
                    self.paths.hedged(i);
                    // Frames the peer reported but cannot acknowledge yet are not copied.
                    let n = self.copy_elsewhere(i);
                    if n > 0 {
                        self.wake();
                        tracing::debug!(path = i, frames = n, "path quiet; copying what it holds elsewhere");
                    }
                }
                PathCheck::Probe => {
                    self.paths.probed(i, now);
                    self.events.push_back(Event::ProbePath(i));
                }
                PathCheck::Fine => {}
            }
            if self.paths.keepalive(i, now, &self.cfg, load) {
                self.wake_path(i);
            }
        }
    }

    /// Path `i` held data without a sign of life for too long. Frames the peer reported
    /// but cannot acknowledge yet (a gap elsewhere holds its cumulative ACK back), with
    /// nothing unacknowledged in its socket, are not stuck here. Otherwise, do not wait for
    /// the path timeout: what this path holds goes out on the others now, session control
    /// goes on them too, it carries nothing new until it answers, and the driver probes it.
    fn on_stuck(&mut self, i: usize, now: Instant) {
        let kernel = self.paths.get(i).is_some_and(|p| p.kernel.unacked > 0);
        if !kernel && !self.send.holds_unreported(i) {
            self.paths.progress(i, now);
            return;
        }
        // Re-sending is for another path to carry: with none up, the frames would queue
        // again behind themselves on a connection that delivers them anyway, and a peer
        // that never reports would have its whole window sent again at every check.
        let elsewhere = self.paths.iter().enumerate().any(|(j, p)| j != i && p.is_up());
        let n = if elsewhere { self.send.lost_on(i) } else { 0 };
        self.paths.mark_suspect(i, now);
        self.paths.probed(i, now);
        self.events.push_back(Event::ProbePath(i));
        // An ACK or window update handed to the silent path may never arrive.
        self.restate_control();
        self.wake();
        tracing::debug!(
            path = i,
            frames = n,
            "path silent while holding data; re-sending elsewhere and probing it"
        );
    }

    /// Whether anything is waiting to be sent on any path.
    pub fn has_pending(&self) -> bool {
        self.send.has_pending()
            || self.feedback.ack_pending()
            || self.flow.update_needed
            || !self.windows_needed.is_empty()
    }
}
