//! Round-robin: usable paths take turns, one quantum each. A path whose turn it is but
//! which cannot take bytes is skipped, so a blocked path never stalls the others.

use std::time::Instant;

use crate::{backups_allowed, Decision, PathSnapshot, QueueView, Scheduler, SchedulerKind};

/// Bytes a path sends per turn: one full data frame (16 KB of payload) with its header.
/// A smaller quantum would have the engine split every frame to fit it.
pub const QUANTUM: usize = 16 * 1024 + 64;

#[derive(Debug, Default)]
pub struct RoundRobin {
    /// Index of the path whose turn it is.
    next: usize,
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &'static str {
        SchedulerKind::RoundRobin.name()
    }

    fn decide(
        &mut self,
        _now: Instant,
        path: usize,
        paths: &[PathSnapshot],
        _q: &QueueView,
        budget: usize,
    ) -> Decision {
        let allow_backup = backups_allowed(paths);
        if !paths[path].usable(allow_backup) {
            return Decision::Wait { until: None };
        }
        let n = paths.len();
        // The first path from `next` on that could send now holds the turn.
        let turn = (0..n)
            .map(|i| (self.next + i) % n)
            .find(|&i| paths[i].usable(allow_backup) && (i == path || (paths[i].ready && paths[i].has_cwnd_space())));
        if turn != Some(path) {
            return Decision::Wait { until: None };
        }
        self.next = (path + 1) % n;
        Decision::head(budget.min(QUANTUM))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{path, queue};

    #[test]
    fn alternates() {
        let now = Instant::now();
        let paths = [path(0, 50), path(1, 70)];
        let mut s = RoundRobin::default();
        assert_eq!(
            s.decide(now, 1, &paths, &queue(1 << 20), 1 << 20),
            Decision::Wait { until: None }
        );
        assert_eq!(
            s.decide(now, 0, &paths, &queue(1 << 20), 1 << 20),
            Decision::head(QUANTUM)
        );
        assert_eq!(
            s.decide(now, 0, &paths, &queue(1 << 20), 1 << 20),
            Decision::Wait { until: None }
        );
        assert_eq!(
            s.decide(now, 1, &paths, &queue(1 << 20), 1 << 20),
            Decision::head(QUANTUM)
        );
    }

    #[test]
    fn skips_a_path_that_cannot_send() {
        let now = Instant::now();
        let mut paths = [path(0, 50), path(1, 70)];
        paths[0].ready = false;
        let mut s = RoundRobin::default();
        assert_eq!(s.decide(now, 1, &paths, &queue(100), 100), Decision::head(100));
        assert_eq!(s.decide(now, 1, &paths, &queue(100), 100), Decision::head(100));
    }
}
