//! MinRTT: the path with the smallest smoothed RTT among those with congestion-window
//! space gets the bytes (the Linux MPTCP default scheduler). A slower path sends only while
//! every faster path is full. With paths of unequal delay that spills a transfer's last
//! bytes onto the slow path, where they arrive after the fast path would have delivered
//! them — the case ECF, BLEST and DEMS are built against. It is kept as the baseline.
//!
//! With any number of paths the rule is the same: paths rank by srtt, and a path sends
//! only while every faster usable path is full (or not ready), so with N paths the k-th
//! fastest carries once the k − 1 faster ones are full.

use std::time::Instant;

use crate::{
    backups_allowed, faster_available, faster_probing, Decision, PathSnapshot, QueueView, Scheduler, SchedulerKind,
};

#[derive(Debug, Default)]
pub struct MinRtt;

impl Scheduler for MinRtt {
    fn name(&self) -> &'static str {
        SchedulerKind::MinRtt.name()
    }

    fn decide(&mut self, _now: Instant, path: usize, paths: &[PathSnapshot], q: &QueueView, budget: usize) -> Decision {
        let allow_backup = backups_allowed(paths);
        let me = &paths[path];
        if !me.usable(allow_backup) {
            return Decision::Wait { until: None };
        }
        // A faster path that is ready and has room takes precedence; it is being asked too.
        // So does one whose window is only BBR's minimum-RTT probe, for a backlog it
        // carries soon after the probe.
        if faster_available(paths, path, allow_backup) || faster_probing(paths, path, allow_backup, q) {
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

    /// The faster path's window is BBR's minimum-RTT probe (four segments, paced at a
    /// rate that sends 60 per round trip): the slower path waits for it while the backlog
    /// is a stream's, and takes the overflow of a bulk backlog. A path without a bandwidth
    /// estimate (not BBR) or paced at 1.2 times its window is full as ever.
    #[test]
    fn a_faster_path_probing_its_rtt_is_waited_for_unless_the_backlog_is_bulk() {
        let now = Instant::now();
        let mut paths = [path(0, 50), path(1, 70)];
        paths[0].cwnd = 4;
        paths[0].in_flight = 4;
        paths[0].pacing_rate = 60 * 1448 * 20; // 60 segments per 50 ms
        assert!(!paths[0].probing_rtt(), "no bandwidth estimate: not BBR");
        paths[0].bandwidth = 60 * 1448 * 20;
        assert!(paths[0].probing_rtt());
        let wait = Decision::Wait { until: None };
        assert_eq!(MinRtt.decide(now, 1, &paths, &queue(1000), 4096), wait);
        assert_eq!(
            MinRtt.decide(now, 1, &paths, &queue(8 << 20), 4096),
            Decision::head(4096),
            "bulk overflows"
        );
        let sustained = QueueView {
            sustained: true,
            ..queue(1000)
        };
        assert_eq!(
            MinRtt.decide(now, 1, &paths, &sustained, 4096),
            Decision::head(4096),
            "a sustained backlog overflows, however little of it is queued"
        );
        paths[0].pacing_rate = 4 * 1448 * 20 * 6 / 5;
        assert!(!paths[0].probing_rtt());
        assert_eq!(MinRtt.decide(now, 1, &paths, &queue(1000), 4096), Decision::head(4096));
    }

    /// Five paths listed out of RTT order (30, 10, 50, 20, 40 ms): the 10 ms one sends;
    /// as the faster ones fill up (a full path's socket holds its backlog: it is not
    /// ready), the next fastest does; the slowest only once all four faster paths are full.
    #[test]
    fn five_paths_fill_in_rtt_order() {
        let now = Instant::now();
        let mut paths: Vec<PathSnapshot> = [30, 10, 50, 20, 40]
            .iter()
            .enumerate()
            .map(|(i, &ms)| path(i, ms))
            .collect();
        let q = queue(1 << 20);
        let senders = |paths: &[PathSnapshot]| -> Vec<usize> {
            // Only a ready path is asked (late binding).
            (0..paths.len())
                .filter(|&i| paths[i].ready && MinRtt.decide(now, i, paths, &q, 4096) == Decision::head(4096))
                .collect()
        };
        assert_eq!(senders(&paths), [1]);
        for (full, next) in [(1, 3), (3, 0), (0, 4), (4, 2)] {
            paths[full].in_flight = paths[full].cwnd;
            paths[full].ready = false;
            assert_eq!(senders(&paths), [next], "with {full} full");
        }
        // Three paths, the fastest dead: the next one takes its place.
        let mut three = [path(0, 10), path(1, 20), path(2, 30)];
        three[0].alive = false;
        assert_eq!(senders(&three), [1]);
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
