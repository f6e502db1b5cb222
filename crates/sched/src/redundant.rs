//! Redundant: every frame goes out on every usable path; the receiver keeps the first
//! copy. Lowest latency under loss or a failing link, at the price of the bytes.
//!
//! With N paths every usable path carries every frame (N copies; the first to arrive
//! counts), so the transfer runs at about the slowest usable path's rate and the latency of
//! the fastest: what redundancy buys with N paths is surviving N − 1 failures, not rate.

use std::time::Instant;

use crate::{backups_allowed, Decision, End, PathSnapshot, QueueView, Scheduler, SchedulerKind};

#[derive(Debug, Default)]
pub struct Redundant;

impl Scheduler for Redundant {
    fn name(&self) -> &'static str {
        SchedulerKind::Redundant.name()
    }

    fn decide(
        &mut self,
        _now: Instant,
        path: usize,
        paths: &[PathSnapshot],
        _q: &QueueView,
        budget: usize,
    ) -> Decision {
        if !paths[path].usable(backups_allowed(paths)) {
            return Decision::Wait { until: None };
        }
        Decision::Send {
            end: End::Head,
            max_bytes: budget,
            duplicate: true,
            exact: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{path, queue};

    #[test]
    fn any_usable_path_sends_and_duplicates() {
        let now = Instant::now();
        let mut paths = [path(0, 50), path(1, 70)];
        let d = Redundant.decide(now, 1, &paths, &queue(10), 10);
        assert_eq!(
            d,
            Decision::Send {
                end: End::Head,
                max_bytes: 10,
                duplicate: true,
                exact: false,
            }
        );
        paths[1].alive = false;
        assert_eq!(
            Redundant.decide(now, 1, &paths, &queue(10), 10),
            Decision::Wait { until: None }
        );
    }

    /// Three and five paths: each usable path sends with copies; a dead one and a backup
    /// (while a regular path lives) do not.
    #[test]
    fn every_usable_path_of_many_duplicates() {
        let now = Instant::now();
        let dup = Decision::Send {
            end: End::Head,
            max_bytes: 10,
            duplicate: true,
            exact: false,
        };
        let three = [path(0, 10), path(1, 50), path(2, 200)];
        for i in 0..3 {
            assert_eq!(Redundant.decide(now, i, &three, &queue(10), 10), dup);
        }
        let mut five: Vec<_> = (0..5).map(|i| path(i, 10 + 20 * i as u64)).collect();
        five[1].alive = false;
        five[3].backup = true;
        let sends: Vec<bool> = (0..5)
            .map(|i| Redundant.decide(now, i, &five, &queue(10), 10) == dup)
            .collect();
        assert_eq!(sends, [true, false, true, false, true]);
    }
}
