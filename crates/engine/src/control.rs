//! What the receiver tells the sender: cumulative data-ACKs, arrival reports and stall
//! notices.
//!
//! ACKs are delayed (at most [`EngineConfig::ack_delay`], or every
//! [`EngineConfig::ack_every_bytes`]) as TCP's are, since every path carries them and a
//! frame per frame would cost the slow path's capacity. Every data frame gets an arrival
//! report (`Owd`): a one-way-delay sample for the sender's DEMS/ECF estimates and a
//! selective acknowledgement, so the sender never re-sends what already waits in our
//! reorder buffer. When frames stuck behind a gap fill most of the session window, a
//! `Stall` asks the sender to re-send the missing frame on another path — MPTCP's
//! opportunistic retransmission (Raiciu et al., NSDI 2012), triggered by the receiver,
//! which is the one that sees the buffer fill.

use std::collections::VecDeque;
use std::time::Instant;

use mpflex_wire::Frame;

use crate::config::EngineConfig;

/// Arrival reports kept for sending at most; older ones are dropped (they are samples).
const MAX_REPORTS: usize = 1024;

#[derive(Debug, Default)]
pub(crate) struct Feedback {
    ack_needed: bool,
    ack_deadline: Option<Instant>,
    unacked_bytes: u64,
    /// Arrival reports and stall notices for the peer.
    reports: VecDeque<Frame>,
    /// The gap a `Stall` was last sent for; one per gap.
    stall_sent_for: Option<u64>,
}

impl Feedback {
    /// An ACK must go at the next chance (the peer may be re-sending because ours got
    /// lost, or a path that carried one died).
    pub fn ack_now(&mut self) {
        self.ack_needed = true;
    }

    /// Reports the arrival of a frame stamped `ts` on `path`, at our clock `now_ts`.
    pub fn report(&mut self, path: usize, seq: u64, ts: u32, now_ts: u32) {
        if self.reports.len() >= MAX_REPORTS {
            self.reports.pop_front();
        }
        self.reports.push_back(Frame::Owd {
            path: path as u8,
            seq,
            ts,
            delay: now_ts.wrapping_sub(ts),
        });
    }

    /// `payload` new bytes arrived. True if an ACK is due at once.
    pub fn on_data(&mut self, payload: u64, now: Instant, cfg: &EngineConfig) -> bool {
        // Frame header bytes count too: a stream of empty frames is acknowledged as well.
        self.unacked_bytes += payload + 16;
        if self.unacked_bytes >= cfg.ack_every_bytes {
            self.ack_needed = true;
            return true;
        }
        if self.ack_deadline.is_none() {
            self.ack_deadline = Some(now + cfg.ack_delay);
        }
        false
    }

    /// Frames behind the gap at `cum` plus unread data fill `buffered` bytes: send one
    /// `Stall` per gap once that reaches the configured share of the session window.
    /// True if one was queued.
    pub fn maybe_stall(&mut self, cum: u64, buffered: u64, cfg: &EngineConfig) -> bool {
        if self.stall_sent_for == Some(cum) {
            return false;
        }
        if (buffered as f64) < cfg.stall_fraction * cfg.session_window as f64 {
            return false;
        }
        self.stall_sent_for = Some(cum);
        self.reports.push_back(Frame::Stall { cum });
        self.ack_needed = true;
        true
    }

    /// The ACK to send now, if one is due (it is then considered sent).
    pub fn take_ack(&mut self, now: Instant, cum: u64) -> Option<Frame> {
        if !self.ack_due(now) {
            return None;
        }
        Some(Frame::Ack { cum })
    }

    fn ack_due(&self, now: Instant) -> bool {
        self.ack_needed || self.ack_deadline.is_some_and(|d| d <= now)
    }

    pub fn ack_sent(&mut self) {
        self.ack_needed = false;
        self.ack_deadline = None;
        self.unacked_bytes = 0;
    }

    /// The delayed ACK's deadline passed: true if it is now due.
    pub fn on_timeout(&mut self, now: Instant) -> bool {
        if self.ack_deadline.is_some_and(|d| d <= now) {
            self.ack_needed = true;
            return true;
        }
        false
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.ack_deadline
    }

    pub fn next_report(&self) -> Option<&Frame> {
        self.reports.front()
    }

    pub fn pop_report(&mut self) -> Option<Frame> {
        self.reports.pop_front()
    }

    pub fn ack_pending(&self) -> bool {
        self.ack_needed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Role;

    #[test]
    fn acks_are_delayed_unless_enough_bytes_arrived() {
        let cfg = EngineConfig::new(Role::Server);
        let t0 = Instant::now();
        let mut f = Feedback::default();
        assert!(!f.on_data(1000, t0, &cfg));
        assert_eq!(f.take_ack(t0, 1000), None, "delayed");
        assert_eq!(f.deadline(), Some(t0 + cfg.ack_delay));
        assert!(f.on_timeout(t0 + cfg.ack_delay));
        assert_eq!(f.take_ack(t0 + cfg.ack_delay, 1000), Some(Frame::Ack { cum: 1000 }));
        f.ack_sent();
        assert!(f.on_data(cfg.ack_every_bytes, t0, &cfg), "a full batch: at once");
    }

    #[test]
    fn one_stall_per_gap() {
        let cfg = EngineConfig::new(Role::Server);
        let mut f = Feedback::default();
        let full = (cfg.session_window as f64 * cfg.stall_fraction) as u64;
        assert!(!f.maybe_stall(7, full - 1, &cfg));
        assert!(f.maybe_stall(7, full, &cfg));
        assert!(!f.maybe_stall(7, full, &cfg), "already asked for this gap");
        assert!(f.maybe_stall(9, full, &cfg));
        assert_eq!(f.pop_report(), Some(Frame::Stall { cum: 7 }));
        assert!(f.ack_pending());
    }

    #[test]
    fn arrival_reports_carry_the_wrapping_delay_and_are_bounded() {
        let mut f = Feedback::default();
        f.report(1, 5, u32::MAX - 10, 20);
        assert_eq!(
            f.pop_report(),
            Some(Frame::Owd {
                path: 1,
                seq: 5,
                ts: u32::MAX - 10,
                delay: 31
            })
        );
        for i in 0..(MAX_REPORTS + 5) {
            f.report(0, i as u64, 0, 0);
        }
        assert_eq!(f.reports.len(), MAX_REPORTS);
    }
}
