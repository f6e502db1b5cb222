//! A sequenced frame until the peer acknowledges it.

use std::time::Instant;

use mpflex_sched::SchedulerKind;
use mpflex_wire::Frame;

use super::ALL_PATHS;
use crate::class::{ClassLatency, TrafficClass};

/// A sequenced frame the peer has not yet acknowledged.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub frame: Frame,
    /// Paths currently holding a copy that may still arrive.
    pub on_paths: u64,
    /// Sent at least once.
    pub sent: bool,
    /// When a copy was last handed to a path.
    pub last_sent: Option<Instant>,
    /// The peer reported its arrival (it waits in the peer's reorder buffer): no copy of
    /// it is needed any more, whatever happens to the paths.
    pub received: bool,
    /// When the earliest copy is expected at the peer: the session clock (µs) at sending
    /// plus the path's one-way-delay estimate at its bytes in flight then. It carries the
    /// clock offset of every OWD estimate, so it compares only with other such times.
    /// `None` while the path had no estimate.
    pub eta_us: Option<i64>,
    /// The stream's class when the frame was sequenced.
    pub class: TrafficClass,
    /// The paths that may carry the frame (a bit per path): its stream's policy when it
    /// was sequenced ([`SendQueue::set_allowed`]); every path by default.
    pub allowed: u64,
    /// The scheduler that places the frame: its stream's policy's, or `None`: the
    /// session's.
    pub sched: Option<SchedulerKind>,
    /// A copy was queued on a second path as a hedge (small interactive frame).
    pub hedged: bool,
    /// When the application's bytes were queued; `None` once the frame's latency was
    /// recorded (or for frames that carry no application bytes of their own).
    pub(super) queued: Option<Instant>,
}

impl Outgoing {
    pub(super) fn new(frame: Frame, class: TrafficClass, queued: Option<Instant>) -> Self {
        Outgoing {
            frame,
            on_paths: 0,
            sent: false,
            last_sent: None,
            received: false,
            eta_us: None,
            class,
            allowed: ALL_PATHS,
            sched: None,
            hedged: false,
            queued,
        }
    }

    /// Whether `path` may carry the frame.
    pub fn allowed_on(&self, path: usize) -> bool {
        self.allowed & (1u64 << path) != 0
    }

    /// Records how long the frame's bytes took from the application to the peer (its
    /// first arrival report or acknowledgement), once.
    pub(super) fn arrived(&mut self, now: Instant, stats: &mut ClassLatency) {
        if let Some(q) = self.queued.take() {
            stats.record(self.class, now.saturating_duration_since(q));
        }
    }

    /// Sent, not reported by the peer, and no path holds a copy: it must go again.
    pub(super) fn orphaned(&self) -> bool {
        self.on_paths == 0 && self.sent && !self.received
    }
}
