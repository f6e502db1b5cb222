//! Round-robin: usable paths take turns, one quantum each. A path whose turn it is but
//! which cannot take bytes is skipped, so a blocked path never stalls the others.
//!
//! With N paths the turn goes round all N in index order; a path that is dead (or a backup
//! while a regular path lives) is never a turn holder, so N live paths get a quantum each
//! per round whatever their rates.

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

    /// The paths that send, in order, when every path asks once per round.
    fn rounds(s: &mut RoundRobin, paths: &[PathSnapshot], n: usize) -> Vec<usize> {
        let now = Instant::now();
        let mut order = Vec::new();
        for _ in 0..n {
            for i in 0..paths.len() {
                if s.decide(now, i, paths, &queue(1 << 20), 1 << 20) == Decision::head(QUANTUM) {
                    order.push(i);
                }
            }
        }
        order
    }

    /// Three and five paths take turns in index order; a dead path and a backup are
    /// skipped, a path that is not ready only while it is not.
    #[test]
    fn three_and_five_paths_take_turns() {
        let mut s = RoundRobin::default();
        let three = [path(0, 10), path(1, 50), path(2, 200)];
        assert_eq!(rounds(&mut s, &three, 2), [0, 1, 2, 0, 1, 2]);
        let mut five: Vec<PathSnapshot> = (0..5).map(|i| path(i, 10 + 20 * i as u64)).collect();
        let mut s = RoundRobin::default();
        assert_eq!(rounds(&mut s, &five, 2), [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
        five[1].alive = false;
        five[3].backup = true;
        let mut s = RoundRobin::default();
        assert_eq!(rounds(&mut s, &five, 2), [0, 2, 4, 0, 2, 4]);
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
