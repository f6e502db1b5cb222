//! MinRTT: the path with the smallest smoothed RTT among those with congestion-window
//! space gets the bytes (the Linux MPTCP default scheduler). A slower path sends only while
//! every faster path is full. With paths of unequal delay that spills a transfer's last
//! bytes onto the slow path, where they arrive after the fast path would have delivered
//! them — the case ECF, BLEST and DEMS are built against. It is kept as the baseline.

use std::time::Instant;

use crate::{backups_allowed, faster_available, Decision, PathSnapshot, QueueView, Scheduler};

#[derive(Debug, Default)]
pub struct MinRtt;

impl Scheduler for MinRtt {
    fn name(&self) -> &'static str {
        "minrtt"
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
        let me = &paths[path];
        if !me.usable(allow_backup) {
            return Decision::Wait { until: None };
        }
        // A faster path that is ready and has room takes precedence; it is being asked too.
        if faster_available(paths, path, allow_backup) {
            Decision::Wait { until: None }
        } else {
            Decision::head(budget)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{path, queue};

    #[test]
    fn fastest_ready_path_sends() {
        let now = Instant::now();
        let paths = [path(0, 50), path(1, 70)];
        let mut s = MinRtt;
        assert_eq!(s.decide(now, 0, &paths, &queue(1000), 4096), Decision::head(4096));
        assert_eq!(
            s.decide(now, 1, &paths, &queue(1000), 4096),
            Decision::Wait { until: None }
        );
    }

    #[test]
    fn slow_path_sends_when_fast_path_is_full() {
        let now = Instant::now();
        let mut paths = [path(0, 50), path(1, 70)];
        paths[0].in_flight = 10;
        assert_eq!(MinRtt.decide(now, 1, &paths, &queue(1000), 4096), Decision::head(4096));
        paths[0].in_flight = 0;
        paths[0].ready = false;
        assert_eq!(MinRtt.decide(now, 1, &paths, &queue(1000), 4096), Decision::head(4096));
    }

    #[test]
    fn backup_only_when_no_regular_path() {
        let now = Instant::now();
        let mut paths = [path(0, 80), path(1, 20)];
        paths[1].backup = true;
        assert_eq!(
            MinRtt.decide(now, 1, &paths, &queue(1000), 10),
            Decision::Wait { until: None }
        );
        assert_eq!(MinRtt.decide(now, 0, &paths, &queue(1000), 10), Decision::head(10));
        paths[0].alive = false;
        assert_eq!(MinRtt.decide(now, 1, &paths, &queue(1000), 10), Decision::head(10));
    }
}
