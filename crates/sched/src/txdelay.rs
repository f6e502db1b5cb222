//! TxDelay, MPFlex's buffer-aware scheduler (A. Nikravesh, Y. Guo, F. Qian, Z. M. Mao,
//! S. Sen, "An In-depth Understanding of Multipath TCP on Mobile Devices: Measurement and
//! System Design", MobiCom 2016, §"Use case: buffer-aware scheduling").
//!
//! When the low-RTT path's window is full, MinRTT spills onto the high-RTT path although the
//! bytes would have arrived sooner by queueing behind the low-RTT path. TxDelay sends on the
//! path with the smallest expected delivery time, **whatever its window state**:
//!
//! `srtt + B / (cwnd·mss / srtt)`
//!
//! Decisions made for mpflex:
//!
//! * **B** (the paper's sender-buffer occupancy) = `notsent + in_flight·mss`: everything
//!   handed to the path's socket and not yet acknowledged, which a new byte queues behind.
//!   mpflex's own unassigned queue is not counted (it is shared, and its head is the byte
//!   being placed). A path that is not ready has a backed-up socket,
//!   which the kernel only lets happen with a full window, so its B is taken as at least
//!   `cwnd·mss` even if the (periodically sampled) snapshot shows less.
//! * **The delay term starts from the path's minimum RTT** ([`Base`]), not its srtt. B
//!   counts the bytes in flight, and srtt counts the queue those bytes built at the
//!   bottleneck a second time; and srtt changes only with new samples, so a path that went
//!   idle after building a queue keeps the inflated value for as long as it stays idle —
//!   which this rule then makes forever: a path whose slow-start overshoot once queued
//!   bytes is never chosen again. `srtt + B/rate` read literally is `txdelay-srtt`. An
//!   unknown minimum (0) falls back to srtt. Keeping srtt and counting only the unsent part
//!   of B instead does not help: the idle path's stale srtt then competes with even less.
//!   The measurements are in `docs/schedulers/txdelay.md`.
//! * **Rate** = [`PathSnapshot::rate_estimate`]: `cwnd·mss/srtt` as published, with the
//!   kernel's delivery-rate estimate as a floor, as elsewhere in mpflex.
//! * The asking path sends (the whole budget) iff its expected time is no later than every
//!   other usable path's, ready or not: a not-ready fast path still wins if its queue drains
//!   sooner than the asking path delivers. Ties go to the asking path. Paths without an RTT
//!   sample (`srtt == 0`) cannot be estimated and are ignored as rivals; an asking path without
//!   one sends (like MinRTT, which ranks it first).
//! * When another path wins, `Wait { until }`: `None` if the winner is ready (it is being
//!   asked, and the engine wakes waiting paths once it sends); otherwise the time the winner
//!   needs to drain B at its rate (at least 1 ms), by when it is certainly asking again.
//! * Under late binding a saturated path holds at most `in_flight + notsent_lowat` bytes, so
//!   for a bulk backlog TxDelay keeps an idle slower path idle whenever
//!   `min_rtt_s ≥ min_rtt_f + srtt_f + lowat/rate_f` (`txdelay-srtt`: with srtts, and an
//!   idle path's srtt frozen at its last sample); the paper's early binding let B_f grow
//!   until the slow path won. That is the per-message rule; ECF is the backlog-aware
//!   choice.
//! * **Any number of paths.** The rule is a minimum over all usable paths with an RTT
//!   sample, so with N paths each byte goes to the path that delivers it first; a path
//!   takes bytes while its queue keeps it the earliest, and with N comparable paths all
//!   of them do.

use std::time::{Duration, Instant};

use crate::{backups_allowed, queued_on_path, Decision, PathSnapshot, QueueView, Scheduler, SchedulerKind};

/// The delay a byte handed to a path takes on top of draining B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Base {
    /// The path's minimum RTT (`tcpi_min_rtt`; srtt until there is one). Config name
    /// `txdelay`.
    #[default]
    MinRtt,
    /// The smoothed RTT, as the formula reads (config name `txdelay-srtt`).
    Srtt,
}

#[derive(Debug, Default)]
pub struct TxDelay {
    base: Base,
}

impl TxDelay {
    pub fn new(base: Base) -> Self {
        TxDelay { base }
    }

    /// Bytes a new byte on `p` queues behind (B).
    fn queued(p: &PathSnapshot) -> u64 {
        let b = queued_on_path(p);
        if p.ready {
            b
        } else {
            b.max(p.cwnd as u64 * p.mss.max(1) as u64)
        }
    }

    /// The delay term for `p` ([`Base`]).
    fn base(&self, p: &PathSnapshot) -> Duration {
        match self.base {
            Base::MinRtt if !p.min_rtt.is_zero() => p.min_rtt.min(p.srtt),
            _ => p.srtt,
        }
    }

    /// Expected time until a byte handed to `p` now is delivered, in seconds.
    pub fn expected_delay(&self, p: &PathSnapshot) -> f64 {
        self.base(p).as_secs_f64() + Self::queued(p) as f64 / p.rate_estimate()
    }
}

impl Scheduler for TxDelay {
    fn name(&self) -> &'static str {
        match self.base {
            Base::MinRtt => SchedulerKind::TxDelay,
            Base::Srtt => SchedulerKind::TxDelaySrtt,
        }
        .name()
    }

    fn decide(
        &mut self,
        now: Instant,
        path: usize,
        paths: &[PathSnapshot],
        _queue: &QueueView,
        budget: usize,
    ) -> Decision {
        let allow_backup = backups_allowed(paths);
        let me = &paths[path];
        if !me.usable(allow_backup) {
            return Decision::Wait { until: None };
        }
        if me.srtt.is_zero() {
            return Decision::head(budget);
        }
        let mine = self.expected_delay(me);
        let winner = paths
            .iter()
            .enumerate()
            .filter(|&(i, p)| i != path && p.usable(allow_backup) && !p.srtt.is_zero())
            .map(|(i, p)| (self.expected_delay(p), i))
            .filter(|&(d, _)| d < mine)
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let Some((_, w)) = winner else {
            return Decision::head(budget);
        };
        let wp = &paths[w];
        if wp.ready {
            return Decision::Wait { until: None };
        }
        let drain = Duration::from_micros((Self::queued(wp) as f64 / wp.rate_estimate() * 1e6).round() as u64);
        Decision::Wait {
            until: Some(now + drain.max(Duration::from_millis(1))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{path, queue};

    const MSS: u32 = 1448;
    /// The default TxDelay (minimum-RTT base).
    fn txd() -> TxDelay {
        TxDelay::default()
    }

    #[test]
    fn an_idle_path_is_judged_by_its_minimum_rtt_not_a_stale_srtt() {
        // LTE (70 ms propagation) has drained after a slow-start overshoot and idles with
        // srtt 300 ms; WiFi (55 ms, srtt 95 ms) has a full 55-segment window and
        // 35 KB unsent at 850 KB/s: 95 + (55·1448 + 35 000)/850 000 = 230 ms.
        let now = Instant::now();
        let mut paths = [path(0, 95), path(1, 300)];
        paths[0].min_rtt = Duration::from_millis(55);
        paths[0].cwnd = 55;
        paths[0].in_flight = 55;
        paths[0].notsent = 35_000;
        paths[0].delivery_rate = 850_000;
        paths[0].ready = false;
        paths[1].min_rtt = Duration::from_millis(70);
        paths[1].cwnd = 127;
        paths[1].delivery_rate = 1_100_000;
        // The literal formula keeps LTE idle (300 > 230 ms) ...
        let mut literal = TxDelay::new(Base::Srtt);
        assert!(matches!(
            literal.decide(now, 1, &paths, &queue(1 << 20), 4096),
            Decision::Wait { .. }
        ));
        // ... by its minimum RTT it sends (70 < 55 + 135 ms).
        assert_eq!(
            txd().decide(now, 1, &paths, &queue(1 << 20), 4096),
            Decision::head(4096)
        );
        // Without a minimum-RTT sample both read srtt.
        paths[1].min_rtt = Duration::ZERO;
        assert!(matches!(
            txd().decide(now, 1, &paths, &queue(1 << 20), 4096),
            Decision::Wait { .. }
        ));
        assert_eq!(txd().name(), "txdelay");
        assert_eq!(literal.name(), "txdelay-srtt");
    }

    #[test]
    fn the_minimum_rtt_never_exceeds_srtt() {
        let mut p = path(0, 20);
        p.min_rtt = Duration::from_millis(30);
        assert!((txd().expected_delay(&p) - 0.020).abs() < 1e-12);
        p.min_rtt = Duration::from_millis(10);
        assert!((txd().expected_delay(&p) - 0.010).abs() < 1e-12);
        assert!((TxDelay::new(Base::Srtt).expected_delay(&p) - 0.020).abs() < 1e-12);
    }

    #[test]
    fn expected_delay_formula() {
        // 20 ms, 10 × 1448 B window: rate 724 000 B/s. A full window plus 2 windows unsent
        // is 3 windows = 60 ms of draining, 80 ms in all.
        let mut p = path(0, 20);
        assert!((txd().expected_delay(&p) - 0.020).abs() < 1e-12);
        p.in_flight = 10;
        p.notsent = 20 * MSS;
        assert!((txd().expected_delay(&p) - 0.080).abs() < 1e-12);
        // The kernel's delivery rate is a floor: twice the window rate halves the drain.
        p.delivery_rate = 2 * 724_000;
        assert!((txd().expected_delay(&p) - 0.050).abs() < 1e-12);
        // A path that is not ready holds at least a full window, whatever the sample says.
        let mut q = path(0, 20);
        q.ready = false;
        assert!((txd().expected_delay(&q) - 0.040).abs() < 1e-12);
        q.in_flight = 10;
        q.notsent = 20 * MSS;
        assert!((txd().expected_delay(&q) - 0.080).abs() < 1e-12);
    }

    #[test]
    fn queues_behind_the_fast_path_where_minrtt_spills() {
        // The paper's buffer-aware case, paths of 20 and 70 ms: WiFi's window is full (not
        // ready), LTE has room. WiFi: 20 + 20 = 40 ms < 70 ms, so LTE waits (MinRTT would send on it).
        let now = Instant::now();
        let mut paths = [path(0, 20), path(1, 70)];
        paths[0].in_flight = 10;
        paths[0].ready = false;
        assert_eq!(
            crate::MinRtt.decide(now, 1, &paths, &queue(1000), 4096),
            Decision::head(4096)
        );
        assert_eq!(
            txd().decide(now, 1, &paths, &queue(1000), 4096),
            Decision::Wait {
                until: Some(now + Duration::from_millis(20))
            }
        );
        // Once WiFi holds a full window plus more than 1.5 windows unsent (> 70 ms), LTE wins.
        paths[0].notsent = 14 * MSS;
        assert!(matches!(
            txd().decide(now, 1, &paths, &queue(1000), 4096),
            Decision::Wait { .. }
        ));
        paths[0].notsent = 16 * MSS;
        assert_eq!(txd().decide(now, 1, &paths, &queue(1000), 4096), Decision::head(4096));
    }

    #[test]
    fn the_fast_path_sends_whatever_its_window() {
        let now = Instant::now();
        let mut paths = [path(0, 20), path(1, 70)];
        paths[0].in_flight = 10;
        assert_eq!(txd().decide(now, 0, &paths, &queue(1000), 4096), Decision::head(4096));
        // Idle paths: the lower RTT wins; the loser waits for the ready winner (no timer).
        let paths = [path(0, 20), path(1, 70)];
        assert_eq!(txd().decide(now, 0, &paths, &queue(1000), 4096), Decision::head(4096));
        assert_eq!(
            txd().decide(now, 1, &paths, &queue(1000), 4096),
            Decision::Wait { until: None }
        );
    }

    #[test]
    fn a_loaded_low_rtt_path_loses_to_an_idle_one() {
        // 20 ms path with 4 windows queued: 20 + 80 = 100 ms; the 70 ms path is idle.
        let now = Instant::now();
        let mut paths = [path(0, 20), path(1, 70)];
        paths[0].in_flight = 10;
        paths[0].notsent = 30 * MSS;
        assert_eq!(txd().decide(now, 1, &paths, &queue(1000), 4096), Decision::head(4096));
        assert_eq!(
            txd().decide(now, 0, &paths, &queue(1000), 4096),
            Decision::Wait { until: None }
        );
    }

    #[test]
    fn three_paths_pick_the_earliest() {
        // 10 ms with 3 windows queued (40 ms), 30 ms idle (30 ms), 50 ms idle: 30 ms sends.
        let now = Instant::now();
        let mut paths = [path(0, 10), path(1, 30), path(2, 50)];
        paths[0].in_flight = 10;
        paths[0].notsent = 20 * MSS;
        paths[0].ready = false;
        assert_eq!(txd().decide(now, 1, &paths, &queue(1000), 4096), Decision::head(4096));
        assert_eq!(
            txd().decide(now, 2, &paths, &queue(1000), 4096),
            Decision::Wait { until: None }
        );
        // With the 30 ms path busy too (30 + 30 = 60 ms), the 10 ms path is best and not
        // ready: wait until it drains its 3 windows (30 ms).
        paths[1].in_flight = 10;
        paths[1].ready = false;
        assert_eq!(
            txd().decide(now, 2, &paths, &queue(1000), 4096),
            Decision::Wait {
                until: Some(now + Duration::from_millis(30))
            }
        );
    }

    /// Five paths: the earliest expected delivery wins, whichever path it is; when the
    /// winner fills up the next earliest takes over.
    #[test]
    fn five_paths_pick_the_earliest() {
        // 10 ms with 50 segments queued (10 + 50 = 60 ms), 30 ms with 5 in flight
        // (30 + 15 = 45 ms), then 40, 60 and 80 ms idle: the 40 ms path sends.
        let now = Instant::now();
        let mut paths: Vec<PathSnapshot> = [10, 30, 40, 60, 80]
            .iter()
            .enumerate()
            .map(|(i, &ms)| path(i, ms))
            .collect();
        paths[0].in_flight = 10;
        paths[0].notsent = 40 * MSS;
        paths[0].ready = false;
        paths[1].in_flight = 5;
        let senders = |paths: &[PathSnapshot]| -> Vec<usize> {
            (0..5)
                .filter(|&i| txd().decide(now, i, paths, &queue(1000), 4096) == Decision::head(4096))
                .collect()
        };
        assert_eq!(senders(&paths), [2]);
        assert_eq!(
            txd().decide(now, 4, &paths, &queue(1000), 4096),
            Decision::Wait { until: None }
        );
        // The 40 ms path with a full window (40 + 40 = 80 ms): the 30 ms one (45 ms) sends.
        paths[2].in_flight = 10;
        paths[2].ready = false;
        assert_eq!(senders(&paths), [1]);
    }

    #[test]
    fn a_stale_sample_of_a_busy_path_is_not_trusted() {
        // 50 ms path not ready but sampled empty: 50 + 50 = 100 ms > 70 ms, the other sends;
        // once it is ready (and empty) again it wins.
        let now = Instant::now();
        let mut paths = [path(0, 50), path(1, 70)];
        paths[0].ready = false;
        assert_eq!(txd().decide(now, 1, &paths, &queue(1000), 10), Decision::head(10));
        paths[0].ready = true;
        assert_eq!(
            txd().decide(now, 1, &paths, &queue(1000), 10),
            Decision::Wait { until: None }
        );
    }

    #[test]
    fn ties_go_to_the_asking_path() {
        let now = Instant::now();
        let paths = [path(0, 40), path(1, 40)];
        assert_eq!(txd().decide(now, 0, &paths, &queue(1000), 10), Decision::head(10));
        assert_eq!(txd().decide(now, 1, &paths, &queue(1000), 10), Decision::head(10));
    }

    #[test]
    fn backups_dead_paths_and_missing_samples() {
        let now = Instant::now();
        // A faster backup is not a rival while a regular path lives, and never sends.
        let mut paths = [path(0, 80), path(1, 20)];
        paths[1].backup = true;
        assert_eq!(txd().decide(now, 0, &paths, &queue(1000), 10), Decision::head(10));
        assert_eq!(
            txd().decide(now, 1, &paths, &queue(1000), 10),
            Decision::Wait { until: None }
        );
        paths[0].alive = false;
        assert_eq!(txd().decide(now, 1, &paths, &queue(1000), 10), Decision::head(10));
        assert_eq!(
            txd().decide(now, 0, &paths, &queue(1000), 10),
            Decision::Wait { until: None }
        );
        // A dead faster path is no rival.
        let mut paths = [path(0, 20), path(1, 70)];
        paths[0].alive = false;
        assert_eq!(txd().decide(now, 1, &paths, &queue(1000), 10), Decision::head(10));
        // No RTT sample: not a rival; an asking path without one sends.
        let mut paths = [path(0, 20), path(1, 70)];
        paths[0].srtt = Duration::ZERO;
        assert_eq!(txd().decide(now, 1, &paths, &queue(1000), 10), Decision::head(10));
        assert_eq!(txd().decide(now, 0, &paths, &queue(1000), 10), Decision::head(10));
    }
}
