//! Redundant: every frame goes out on every usable path; the receiver keeps the first
//! copy. Lowest latency under loss or a failing link, at the price of the bytes.

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
}
