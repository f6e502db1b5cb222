//! What each stream's frames carry and where they may go: its traffic class, the paths
//! its policy allows, the scheduler it asks the peer for and the one that places it here,
//! its energy mode.

use mpflex_sched::SchedulerKind;

use super::{SendQueue, ALL_PATHS};
use crate::class::TrafficClass;
use crate::StreamId;

impl SendQueue {
    /// The stream's class: frames of urgent classes are sequenced and sent before bulk
    /// ones from now on.
    pub fn set_class(&mut self, stream: StreamId, class: TrafficClass) {
        if class.is_urgent() {
            self.urgent_streams.insert(stream, class);
        } else {
            self.urgent_streams.remove(&stream);
        }
    }

    /// The paths `stream`'s frames may go on from now on (a bit per path;
    /// [`ALL_PATHS`]: any).
    pub fn set_allowed(&mut self, stream: StreamId, mask: u64) {
        if mask == ALL_PATHS {
            self.allowed.remove(&stream);
        } else {
            self.allowed.insert(stream, mask);
        }
    }

    /// The paths `stream` may use.
    pub fn allowed(&self, stream: StreamId) -> u64 {
        self.allowed.get(&stream).copied().unwrap_or(ALL_PATHS)
    }

    /// The scheduler `stream`'s Open asks the peer for (`None`: the peer's default).
    pub fn set_scheduler_request(&mut self, stream: StreamId, scheduler: Option<SchedulerKind>) {
        match scheduler {
            Some(k) => self.schedulers.insert(stream, k),
            None => self.schedulers.remove(&stream),
        };
    }

    /// The energy mode `stream`'s Open tells the peer (0: the session's, 1: aware, 2: off).
    pub fn set_energy(&mut self, stream: StreamId, energy: u8) {
        self.energy.insert(stream, energy);
    }

    /// Forgets a stream that ended (its frames keep their masks).
    pub fn forget(&mut self, stream: StreamId) {
        self.allowed.remove(&stream);
        self.schedulers.remove(&stream);
        self.energy.remove(&stream);
        self.runs.remove(&stream);
    }

    /// The scheduler that places `stream`'s frames from now on (`None`: the session's).
    pub fn set_runs(&mut self, stream: StreamId, sched: Option<SchedulerKind>) {
        match sched {
            Some(k) => self.runs.insert(stream, k),
            None => self.runs.remove(&stream),
        };
    }

    /// The scheduler that places `stream`'s frames (`None`: the session's).
    pub fn runs(&self, stream: StreamId) -> Option<SchedulerKind> {
        self.runs.get(&stream).copied()
    }

    /// Whether any stream is of an urgent class now.
    pub fn has_urgent_streams(&self) -> bool {
        !self.urgent_streams.is_empty()
    }
}
