//! DEMS, decoupled multipath scheduling for chunk downloads (Y. E. Guo, A. Nikravesh,
//! Z. M. Mao, F. Qian, S. Sen, "Accelerating Multipath Transport Through Balanced Subflow
//! Completion", MobiCom 2017).
//!
//! The chunk is whatever is queued (the paper's non-API mode). The path with the smaller
//! one-way delay sends it from the head; the path with the larger one-way delay sends it
//! from the tail, and stops when the bytes still unsent, D, fall below
//! `(ΔOWD − δ) · BW_small` (Eq. 9, with Alg. 1's δ): the fast path delivers the rest no
//! later than the slow path could, so both paths finish together at the receiver.
//!
//! * **DEMS-B** (`dems-b`): δ = 0 and no reinjection.
//! * **DEMS-S** (`dems-s`): once every byte is sent, both paths keep re-sending the other
//!   path's unacknowledged frames in their own direction (the small-OWD path upwards from
//!   the meeting point, the large-OWD path downwards) until all are acknowledged.
//! * **DEMS-F** (`dems-f`, also `dems`): δ = k·deviation of ΔOWD, k = 1. The large-OWD path
//!   keeps sending new bytes until D < (ΔOWD − δ)·BW_small (Alg. 1 line 16); once
//!   everything is sent, the small-OWD path re-sends the other path's frames that were sent
//!   no longer than ΔOWD + δ ago (Eq. 11, Alg. 1 lines 11–13). All duplicates travel on the
//!   small-OWD path, about 2δ·BW₁BW₂/(BW₁+BW₂) bytes (Eq. 13).
//!
//! Decisions made for mpflex, where the paper leaves the choice open (the measurements
//! behind them are in `docs/schedulers/dems.md`):
//!
//! * **OWD** comes from the peer's `Owd` feedback: sender timestamps at (re)transmission, the
//!   receiver's arrival clock, binned per path by bytes in flight at send time (10 KB bins,
//!   EWMA α = 0.25), read at the path's current bytes in flight. The engine keeps that
//!   estimator; this module sees `owd_us` / `owd_dev_us` in the snapshot. Only ΔOWD is used,
//!   so the clock offset cancels. Until both paths have feedback (a fresh session), ΔOWD and
//!   the deviation fall back to half the kernel's srtt and rttvar of each path.
//! * **δ** = k × the average of the two paths' mean absolute OWD deviations (the
//!   dissertation's procedure, read as a deviation in time units, not a variance).
//! * **Roles** are recomputed on every call; the directions are fixed by role (small = head,
//!   large = tail). If the roles swap mid-chunk, the path that is now slower sends from the
//!   tail: both ends still move towards each other, so nothing is sent twice by it.
//! * **ΔOWD − δ ≤ 0** (paths indistinguishable within their noise): the large-OWD path sends
//!   new bytes from the tail while any remain (the threshold is ≤ 0), but does not go on to
//!   re-send the other path's bytes after the meeting point as Alg. 1 read literally would;
//!   duplicates stay the small-OWD path's job, bounded by its ΔOWD + δ window.
//! * **More than two paths.** The paper designs for two and sketches the rest (§8,
//!   "Limitation"): a path stops "if the remaining data in the meta buffer can be
//!   delivered earlier by some other subflows with smaller OWD", so that the largest-OWD
//!   path finishes sending first and the smallest-OWD one last, and all arrive together.
//!   mpflex's rule: the smallest-OWD path alone takes the head (the two-way split keeps
//!   one in-order front, which the receiver delivers from); every other path works from
//!   the tail, and stops when the bytes still unsent, D, fall below what all the paths of
//!   smaller OWD deliver in the time it trails them, `Σ_j (ΔOWD_ij − δ_ij)⁺ · BW_j`
//!   ([`Dems::stop_threshold`]; Eq. 9 summed over the faster paths, each pair with its
//!   own δ). With two paths that is Eq. 9 itself. The tail paths take the tail bytes in
//!   the order they ask (interleaved but decoupled, as §8 suggests), and since the
//!   threshold grows with a path's OWD they stop in the order of their OWDs, largest
//!   first. The horizon below counts every usable path's rate. The small path's
//!   reinjection window (DEMS-F) is the largest ΔOWD + δ among the others; in DEMS-S
//!   every tail path re-sends downwards.
//! * **Growing chunk:** bytes queued during a transfer join the tail (the queue is a deque);
//!   D is always the current unsent count, so the stop rule follows the chunk as it grows.
//! * **Bandwidth** of the small path: the kernel's delivery-rate estimate, or cwnd·mss/srtt
//!   before it has one.
//! * A large-OWD path takes at most D − threshold bytes per decision (at least one frame), so a
//!   large batch cannot overshoot the stop point.
//! * **Endless streams** (a bulk upload, a long download the application keeps feeding):
//!   the queue never ends, so "the tail" is the newest byte. Sent from there, the large
//!   path's bytes wait in the receiver's reorder buffer until the small path reaches them;
//!   the gap grows until the stream's flow-control window (4 MB) is full of them, and the
//!   application receives data seconds late, its in-order goodput well below the paths'
//!   capacity. So a chunk end is in reach only when the backlog is at most what the
//!   paths deliver in one round of the two, `(Σ BW)·(srtt_small + srtt_large)` over every
//!   usable path ([`Dems::horizon`]; each BW the larger of window/srtt and the delivery
//!   rate; with two paths `BW_small + BW_large`); above it
//!   the large path takes from the head like MinRTT, and from the tail (with the stop rule)
//!   once the rest fits. The horizon is at least twice the stop threshold, so the stop rule
//!   always has room. `horizon = false` is the paper's rule.
//! * **Tail bytes fit the window.** Eq. 9 assumes a byte the large-OWD path takes arrives
//!   ΔOWD after the small path's would. Under late binding a path's socket accepts bytes
//!   beyond its congestion window; those leave only when a round of acknowledgements has
//!   come back, a whole srtt later (after an idle spell the kernel restarts the window at
//!   as little as 10 segments, so this happens at the start of every chunk after a pause).
//!   So the large-OWD path takes tail bytes only while the window a write now gets has room,
//!   and at most that room; without room it waits a few ms and the stop rule is applied
//!   again to what is then left (the paper's kernel scheduler likewise only uses a subflow
//!   with window space). Beyond the horizon the large path's head bytes are held to its
//!   window the same way: a chunk on paths that never carried data looks endless (their
//!   rates are the initial window's), and head bytes queued behind the slow path's initial
//!   window hold the whole chunk back by its round trips, since the receiver delivers in
//!   order.
//! * **Head bytes of a slower path fit the window.** The one-way delay a path reports
//!   includes what its frames waited in its own socket, so in slow start the path given
//!   the most bytes reads as the slower one and the roles swap back and forth within a
//!   chunk (about four times a 256 KB chunk on two paths of ≥ 12.5 Mbit/s). When the head
//!   role falls to a path whose srtt is not the shortest, head bytes written beyond its
//!   window leave a round of that longer srtt later, and the receiver, delivering in
//!   order, waits for them. So such a path takes head bytes only within its window, like
//!   the tail path; the path with the shortest round trip keeps taking whatever it is
//!   offered. (Reading the delay at the bytes on the wire instead, without the socket's
//!   backlog, was measured too and made those chunks slower: docs/schedulers/dems.md.)

use std::time::{Duration, Instant};

use crate::{backups_allowed, send_within_window, Decision, End, PathSnapshot, QueueView, Scheduler, SchedulerKind};

/// Which reinjection DEMS uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemsVariant {
    /// DEMS-B: balanced split, no reinjection.
    Basic,
    /// DEMS-S: re-send everything unacknowledged after the paths meet.
    Simple,
    /// DEMS-F: adaptive reinjection, δ = k·deviation(ΔOWD).
    Full,
}

#[derive(Debug, Clone)]
pub struct Dems {
    variant: DemsVariant,
    /// δ = k · deviation of ΔOWD (the paper uses k = 1).
    pub k: f64,
    /// Work from the tail only when the backlog is within one round of both paths (see
    /// the module notes); `false`: always, as in the paper.
    pub horizon: bool,
}

impl Dems {
    pub fn new(variant: DemsVariant) -> Self {
        Dems {
            variant,
            k: 1.0,
            horizon: true,
        }
    }
}

/// A path's one-way delay and its deviation, seconds: from feedback if `measured`, else from
/// the kernel's RTT.
fn owd(p: &PathSnapshot, measured: bool) -> (f64, f64) {
    if measured {
        (p.owd_us.unwrap_or(0) as f64 / 1e6, p.owd_dev_us as f64 / 1e6)
    } else {
        (p.srtt.as_secs_f64() / 2.0, p.rttvar.as_secs_f64() / 2.0)
    }
}

/// Bytes per second the small-OWD path delivers.
fn bandwidth(p: &PathSnapshot) -> f64 {
    if p.delivery_rate > 0 {
        p.delivery_rate as f64
    } else {
        let srtt = p.srtt.as_secs_f64().max(1e-4);
        p.cwnd.max(1) as f64 * p.mss.max(1) as f64 / srtt
    }
}

impl Dems {
    /// ΔOWD (seconds) of `large` over `small` and δ for the pair.
    fn delta(&self, small: &PathSnapshot, large: &PathSnapshot, measured: bool) -> (f64, f64) {
        let (o_s, d_s) = owd(small, measured);
        let (o_l, d_l) = owd(large, measured);
        let delta = if self.variant == DemsVariant::Full {
            self.k * (d_s + d_l) / 2.0
        } else {
            0.0
        };
        ((o_l - o_s).max(0.0), delta)
    }

    /// How far back (seconds) the fastest path re-sends what the other paths sent: the
    /// largest ΔOWD + δ over them (Eq. 11).
    fn reinject_window(&self, small: &PathSnapshot, usable: &[&PathSnapshot], measured: bool) -> f64 {
        usable
            .iter()
            .filter(|p| p.id != small.id)
            .map(|p| {
                let (d, delta) = self.delta(small, p, measured);
                d + delta
            })
            .fold(0.0, f64::max)
    }
}

impl Scheduler for Dems {
    fn name(&self) -> &'static str {
        match self.variant {
            DemsVariant::Basic => SchedulerKind::DemsB,
            DemsVariant::Simple => SchedulerKind::DemsS,
            DemsVariant::Full => SchedulerKind::DemsF,
        }
        .name()
    }

    fn reinjects(&self) -> bool {
        self.variant != DemsVariant::Basic
    }

    fn decide(&mut self, now: Instant, path: usize, paths: &[PathSnapshot], q: &QueueView, budget: usize) -> Decision {
        let wait = Decision::Wait { until: None };
        let allow_backup = backups_allowed(paths);
        let me = &paths[path];
        if !me.usable(allow_backup) {
            return wait;
        }
        let usable: Vec<&PathSnapshot> = paths.iter().filter(|p| p.usable(allow_backup)).collect();
        if usable.len() < 2 {
            return if q.bytes > 0 { Decision::head(budget) } else { wait };
        }
        // Feedback-based OWD only when every usable path has it (offsets must match).
        let measured = usable.iter().all(|p| p.owd_us.is_some());
        let small = usable
            .iter()
            .min_by(|a, b| owd(a, measured).0.total_cmp(&owd(b, measured).0).then(a.id.cmp(&b.id)))
            .expect("two usable paths");
        if small.id == me.id {
            if q.bytes > 0 {
                // Head bytes on a path whose round trip is not the shortest go only
                // within its window (see the module notes, "Head bytes of a slower path").
                if usable.iter().any(|p| p.srtt < me.srtt) {
                    return send_within_window(now, me, End::Head, budget);
                }
                return Decision::head(budget);
            }
            return match self.variant {
                DemsVariant::Basic => wait,
                DemsVariant::Simple => Decision::Reinject {
                    end: End::Head,
                    max_bytes: budget,
                    max_age: None,
                    sooner_only: false,
                },
                DemsVariant::Full => Decision::Reinject {
                    end: End::Head,
                    max_bytes: budget,
                    max_age: Some(Duration::from_secs_f64(self.reinject_window(small, &usable, measured))),
                    sooner_only: false,
                },
            };
        }
        // The asking path has a larger OWD: it works from the tail (Eq. 9 / Alg. 1 l. 15–18).
        if q.bytes > 0 {
            return self.tail(now, me, small, &usable, measured, q, budget);
        }
        match self.variant {
            DemsVariant::Simple => Decision::Reinject {
                end: End::Tail,
                max_bytes: budget,
                max_age: None,
                sooner_only: false,
            },
            _ => wait,
        }
    }
}

impl Dems {
    /// Bytes still unsent below which `me` stops taking tail bytes: what the paths of
    /// smaller OWD together deliver in the time `me` trails each of them,
    /// `Σ_j (ΔOWD_j − δ_j)⁺ · BW_j` (Eq. 9 summed over the faster paths, §8's rule for
    /// more than two paths; with two paths Eq. 9 itself, a non-positive one read as 0).
    fn stop_threshold(&self, me: &PathSnapshot, usable: &[&PathSnapshot], measured: bool) -> f64 {
        usable
            .iter()
            .filter(|p| p.id != me.id)
            .map(|p| {
                let (d, delta) = self.delta(p, me, measured);
                (d - delta).max(0.0) * bandwidth(p)
            })
            .sum()
    }

    /// A larger-OWD path's decision while bytes are queued: from the tail with the stop
    /// rule within the horizon, from the head (within its window) beyond it.
    #[allow(clippy::too_many_arguments)]
    fn tail(
        &self,
        now: Instant,
        me: &PathSnapshot,
        small: &PathSnapshot,
        usable: &[&PathSnapshot],
        measured: bool,
        q: &QueueView,
        budget: usize,
    ) -> Decision {
        // A bulk transfer that the bound on bytes ahead of the paths holds back
        // (`QueueView::sustained`): the queue here is a window onto a backlog whose end
        // the application has not written yet. There is no tail to work from, and the
        // threshold would compare ΔOWD's bytes with a window of the bound's size: the
        // slow path would wait for an end that stays ahead for as long as the transfer
        // lasts. It sends from the head, as beyond the horizon.
        if q.sustained {
            return send_within_window(now, me, End::Head, budget);
        }
        let threshold = self.stop_threshold(me, usable, measured);
        if self.horizon {
            let round = (small.srtt + me.srtt).as_secs_f64();
            // Each path's rate as the larger of its window per srtt and the kernel's
            // delivery rate: after an idle spell the delivery rate is the last sample,
            // often an application-limited trickle, which would shrink the horizon to
            // nothing. Every usable path drains the backlog, so every one counts.
            let rates: f64 = usable.iter().map(|p| p.rate_estimate()).sum();
            let reach = (rates * round).max(2.0 * threshold);
            if q.bytes as f64 > reach {
                // From the head too only what its window sends now: behind a full
                // window head bytes wait a round of the slow path's srtt, and the
                // receiver's in-order delivery with them (a chunk on paths that never
                // carried data looks endless: their rates are the initial window's).
                return send_within_window(now, me, End::Head, budget);
            }
        }
        let left = q.bytes as f64 - threshold;
        if threshold <= 0.0 || left >= 0.0 {
            let max_bytes = if threshold <= 0.0 {
                budget
            } else {
                (left.round() as usize).clamp(1, budget.max(1))
            };
            // Only what its window sends now: a byte behind a full window leaves a
            // round later and arrives a whole srtt after ΔOWD says.
            return send_within_window(now, me, End::Tail, max_bytes);
        }
        Decision::Wait { until: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{path, queue};

    /// The seed-default profile with LTE inflated to 270 ms (seed-default-270): WiFi
    /// 7040 kbit/s, RTT 50 ms; LTE 9185 kbit/s, RTT 270 ms. OWDs from feedback (with a clock
    /// offset of 5 s that must cancel): 25 ms and 135 ms, so ΔOWD = 110 ms. Windows of
    /// about one BDP, 30 and 214 segments, all free.
    fn seed_270() -> [PathSnapshot; 2] {
        let mut wifi = path(0, 50);
        wifi.cwnd = 30;
        wifi.delivery_rate = 7_040_000 / 8;
        wifi.owd_us = Some(5_000_000 + 25_000);
        wifi.owd_dev_us = 4_000;
        let mut lte = path(1, 270);
        lte.cwnd = 214;
        lte.delivery_rate = 9_185_000 / 8;
        lte.owd_us = Some(5_000_000 + 135_000);
        lte.owd_dev_us = 16_000;
        [wifi, lte]
    }

    fn tail(max_bytes: usize) -> Decision {
        Decision::in_window(End::Tail, max_bytes)
    }

    /// Under the bound on bytes ahead a bulk transfer shows only a window of its backlog
    /// (here 60 KB, below ΔOWD·BW_wifi = 96,800 bytes): the slow path sends from the head
    /// instead of waiting for a tail that is not there yet.
    #[test]
    fn a_backlog_held_back_is_no_tail_to_wait_for() {
        let now = Instant::now();
        let paths = seed_270();
        let mut s = Dems::new(DemsVariant::Full);
        assert_eq!(
            s.decide(now, 1, &paths, &queue(60_000), 65536),
            Decision::Wait { until: None },
            "a chunk's last 60 KB: the slow path stops"
        );
        let held = QueueView {
            sustained: true,
            ..queue(60_000)
        };
        assert_eq!(
            s.decide(now, 1, &paths, &held, 65536),
            Decision::in_window(End::Head, 65536)
        );
    }

    #[test]
    fn small_owd_path_sends_from_the_head() {
        let now = Instant::now();
        let paths = seed_270();
        for v in [DemsVariant::Basic, DemsVariant::Simple, DemsVariant::Full] {
            let mut s = Dems::new(v);
            assert_eq!(s.decide(now, 0, &paths, &queue(1 << 20), 65536), Decision::head(65536));
            assert_eq!(s.decide(now, 0, &paths, &queue(100), 65536), Decision::head(65536));
        }
    }

    /// Eq. 9 worked through: ΔOWD·BW_wifi = 0.110 s × 880,000 B/s = 96,800 bytes. The LTE
    /// path sends from the tail while more than that is unsent, at most the excess per
    /// decision, and stops below it.
    #[test]
    fn basic_stop_rule_is_eq_9() {
        let now = Instant::now();
        let paths = seed_270();
        let mut s = Dems::new(DemsVariant::Basic);
        assert_eq!(s.decide(now, 1, &paths, &queue(600_000), 65536), tail(65536));
        // 120,000 unsent: only 23,200 may go from the tail.
        assert_eq!(s.decide(now, 1, &paths, &queue(120_000), 65536), tail(23_200));
        assert_eq!(
            s.decide(now, 1, &paths, &queue(96_000), 65536),
            Decision::Wait { until: None }
        );
        // After the meeting point DEMS-B does nothing more on either path.
        assert_eq!(
            s.decide(now, 0, &paths, &queue(0), 65536),
            Decision::Wait { until: None }
        );
        assert_eq!(
            s.decide(now, 1, &paths, &queue(0), 65536),
            Decision::Wait { until: None }
        );
    }

    /// DEMS-F: δ = (4 + 16)/2 = 10 ms, so the LTE path goes on until D < (110 − 10) ms ×
    /// 880,000 B/s = 88,000 bytes, and afterwards the WiFi path re-sends what LTE sent within
    /// ΔOWD + δ = 120 ms.
    #[test]
    fn full_widens_the_overlap_by_delta_on_both_sides() {
        let now = Instant::now();
        let paths = seed_270();
        let mut s = Dems::new(DemsVariant::Full);
        assert_eq!(s.decide(now, 1, &paths, &queue(96_000), 65536), tail(8_000));
        assert_eq!(
            s.decide(now, 1, &paths, &queue(87_000), 65536),
            Decision::Wait { until: None }
        );
        assert_eq!(
            s.decide(now, 0, &paths, &queue(0), 65536),
            Decision::Reinject {
                end: End::Head,
                max_bytes: 65536,
                max_age: Some(Duration::from_millis(120)),
                sooner_only: false,
            }
        );
        // The large-OWD path never re-sends in DEMS-F.
        assert_eq!(
            s.decide(now, 1, &paths, &queue(0), 65536),
            Decision::Wait { until: None }
        );
    }

    #[test]
    fn simple_reinjects_everything_in_both_directions() {
        let now = Instant::now();
        let paths = seed_270();
        let mut s = Dems::new(DemsVariant::Simple);
        assert!(s.reinjects());
        assert!(!Dems::new(DemsVariant::Basic).reinjects());
        let all = |end| Decision::Reinject {
            end,
            max_bytes: 4096,
            max_age: None,
            sooner_only: false,
        };
        assert_eq!(s.decide(now, 0, &paths, &queue(0), 4096), all(End::Head));
        assert_eq!(s.decide(now, 1, &paths, &queue(0), 4096), all(End::Tail));
    }

    /// Roles follow the OWD estimates, not the path order or the RTT, and swap when the
    /// estimates do.
    #[test]
    fn roles_follow_owd_and_can_swap() {
        let now = Instant::now();
        let mut paths = seed_270();
        paths[0].owd_us = Some(300_000);
        paths[1].owd_us = Some(100_000);
        let mut s = Dems::new(DemsVariant::Basic);
        // LTE takes the head, within its window: its round trip is not the shortest.
        assert_eq!(
            s.decide(now, 1, &paths, &queue(600_000), 1000),
            Decision::in_window(End::Head, 1000)
        );
        assert_eq!(s.decide(now, 0, &paths, &queue(600_000), 1000), tail(1000));
    }

    /// A head path whose srtt is not the shortest waits for window room instead of
    /// queueing head bytes in its socket; the shortest-RTT path in the head role takes
    /// whatever it is offered, window or not.
    #[test]
    fn head_bytes_of_a_slower_path_fit_its_window() {
        let now = Instant::now();
        let mut paths = seed_270();
        paths[0].owd_us = Some(300_000);
        paths[1].owd_us = Some(100_000);
        paths[1].in_flight = paths[1].cwnd;
        let mut s = Dems::new(DemsVariant::Full);
        assert!(matches!(
            s.decide(now, 1, &paths, &queue(600_000), 65536),
            Decision::Wait { until: Some(_) }
        ));
        // The roles the other way round: WiFi, the shortest round trip, at the head with a
        // full window still takes the head.
        let mut paths = seed_270();
        paths[0].in_flight = paths[0].cwnd;
        assert_eq!(s.decide(now, 0, &paths, &queue(600_000), 65536), Decision::head(65536));
    }

    /// Without feedback on every path, half the srtt stands in for the OWD (a fresh session).
    #[test]
    fn falls_back_to_half_rtt_without_feedback() {
        let now = Instant::now();
        let mut paths = seed_270();
        paths[1].owd_us = None;
        let mut s = Dems::new(DemsVariant::Basic);
        // srtt 50 and 270 ms: ΔOWD = 110 ms again, same threshold as Eq. 9 above.
        assert_eq!(s.decide(now, 1, &paths, &queue(120_000), 65536), tail(23_200));
    }

    /// An endless stream: while the backlog exceeds what both paths deliver in one round of
    /// the two, (880,000 + 1,148,125) B/s × (50 + 270) ms = 649,000 bytes, the large-OWD
    /// path sends from the head; from there on from the tail. The paper's rule (no
    /// horizon) always takes the tail.
    #[test]
    fn a_backlog_beyond_one_round_is_not_a_chunk_end() {
        let now = Instant::now();
        let paths = seed_270();
        for v in [DemsVariant::Basic, DemsVariant::Simple, DemsVariant::Full] {
            let mut s = Dems::new(v);
            let head = Decision::in_window(End::Head, 65536);
            assert_eq!(s.decide(now, 1, &paths, &queue(649_001), 65536), head);
            assert_eq!(s.decide(now, 1, &paths, &queue(4 << 20), 65536), head);
            assert_eq!(s.decide(now, 1, &paths, &queue(649_000), 65536), tail(65536));
            s.horizon = false;
            assert_eq!(s.decide(now, 1, &paths, &queue(4 << 20), 65536), tail(65536));
        }
        // After an idle spell the kernel's delivery rate may be a trickle; the window per
        // srtt still counts: 100 segments per 50 ms and per 270 ms, 2,896,000 + 536,296 B/s
        // over 320 ms is 1,098,414 bytes.
        let mut idle = seed_270();
        for p in &mut idle {
            p.delivery_rate = 1000;
            p.cwnd = 100;
        }
        let mut s = Dems::new(DemsVariant::Basic);
        assert_eq!(s.decide(now, 1, &idle, &queue(1_098_000), 65536), tail(65536));
        assert_eq!(
            s.decide(now, 1, &idle, &queue(1_099_000), 65536),
            Decision::in_window(End::Head, 65536)
        );
        // The horizon never falls below twice the stop threshold: with 1 ms RTTs the round
        // is tiny, but the LTE path still works from the tail up to 2 × 96,800 bytes (one
        // segment at a time: its window is one segment).
        let mut fast = seed_270();
        for p in &mut fast {
            p.srtt = Duration::from_millis(1);
            p.cwnd = 1;
        }
        let mut s = Dems::new(DemsVariant::Basic);
        assert_eq!(s.decide(now, 1, &fast, &queue(193_500), 65536), tail(1448));
        // Beyond it from the head, and there too only what its window sends now.
        assert_eq!(
            s.decide(now, 1, &fast, &queue(193_700), 65536),
            Decision::in_window(End::Head, 1448)
        );
    }

    /// Paths that have never carried data (a traced seed-default-470 state): no OWD
    /// feedback, no delivery rate, initial windows. Their rates are the initial window's,
    /// 237 and 34 KB/s, so the horizon is about 144 KB and a 256 KB chunk counts as
    /// endless; the LTE path then takes from the head, but only the room its window has
    /// (here 3 segments), not a batch that would wait rounds of 470 ms in its socket, and
    /// nothing while the window is full.
    #[test]
    fn head_bytes_of_a_new_slow_path_fit_its_window() {
        let now = Instant::now();
        let mut wifi = path(0, 61);
        wifi.in_flight = 6;
        let mut lte = path(1, 472);
        lte.cwnd = 11;
        lte.in_flight = 8;
        let paths = [wifi.clone(), lte.clone()];
        for v in [DemsVariant::Basic, DemsVariant::Simple, DemsVariant::Full] {
            let mut s = Dems::new(v);
            assert_eq!(
                s.decide(now, 1, &paths, &queue(196_881), 19_801),
                Decision::in_window(End::Head, 3 * 1448),
                "{v:?}"
            );
            let mut full = lte.clone();
            full.in_flight = 11;
            let paths = [wifi.clone(), full];
            assert!(
                matches!(
                    s.decide(now, 1, &paths, &queue(196_881), 19_801),
                    Decision::Wait { until: Some(_) }
                ),
                "{v:?}"
            );
        }
    }

    /// When δ swallows ΔOWD the large path sends until the queue is empty, and then stops.
    #[test]
    fn nonpositive_threshold_sends_all_but_does_not_reinject() {
        let now = Instant::now();
        let mut paths = seed_270();
        paths[0].owd_dev_us = 300_000;
        let mut s = Dems::new(DemsVariant::Full);
        assert_eq!(s.decide(now, 1, &paths, &queue(10), 65536), tail(65536));
        assert_eq!(
            s.decide(now, 1, &paths, &queue(0), 65536),
            Decision::Wait { until: None }
        );
    }

    #[test]
    fn one_path_alone_sends_everything_from_the_head() {
        let now = Instant::now();
        let mut paths = seed_270();
        paths[0].alive = false;
        let mut s = Dems::new(DemsVariant::Full);
        assert_eq!(s.decide(now, 1, &paths, &queue(10), 65536), Decision::head(65536));
        assert_eq!(
            s.decide(now, 1, &paths, &queue(0), 65536),
            Decision::Wait { until: None }
        );
        assert_eq!(
            s.decide(now, 0, &paths, &queue(10), 65536),
            Decision::Wait { until: None }
        );
    }

    /// Three paths: the smallest OWD takes the head; each other path works from the tail
    /// and stops when what the paths of smaller OWD deliver in the time it trails them
    /// covers the bytes left (§8).
    #[test]
    fn three_paths() {
        let now = Instant::now();
        let [wifi, lte] = seed_270();
        let mut mid = path(2, 100);
        mid.cwnd = 40;
        mid.owd_us = Some(5_000_000 + 50_000);
        let paths = [wifi, lte, mid];
        let mut s = Dems::new(DemsVariant::Basic);
        assert_eq!(s.decide(now, 0, &paths, &queue(100_000), 1000), Decision::head(1000));
        // Path 2 trails only WiFi: ΔOWD 25 ms × 880,000 B/s = 22,000 bytes.
        assert_eq!(s.decide(now, 2, &paths, &queue(50_000), 65536), tail(28_000));
        // Path 1 (LTE) trails WiFi by 110 ms (96,800 bytes) and path 2 by 85 ms at its
        // 40 segments per 100 ms, 579,200 B/s (49,232 bytes): it stops at 146,032, not at
        // WiFi's 96,800 alone, whose share path 2 also delivers.
        let usable: Vec<&PathSnapshot> = paths.iter().collect();
        assert_eq!(s.stop_threshold(&paths[1], &usable, true).round(), 146_032.0);
        assert_eq!(s.decide(now, 1, &paths, &queue(150_000), 65536), tail(3_968));
        assert_eq!(
            s.decide(now, 1, &paths, &queue(146_000), 65536),
            Decision::Wait { until: None }
        );
        // Path 2 goes on, at most its window's room (40 segments).
        assert_eq!(s.decide(now, 2, &paths, &queue(146_000), 65536), tail(57_920));
    }

    /// Five paths with OWDs 90, 135, 40, 25 and 60 ms (the smallest is not the first in
    /// the list), windows of 1000 segments, delivery rates 500, 1000, 2000, 1000 and
    /// 250 KB/s.
    fn five() -> Vec<PathSnapshot> {
        [
            (180, 90, 500_000),
            (270, 135, 1_000_000),
            (80, 40, 2_000_000),
            (50, 25, 1_000_000),
            (120, 60, 250_000),
        ]
        .iter()
        .enumerate()
        .map(|(i, &(srtt, owd_ms, rate))| {
            let mut p = path(i, srtt);
            p.cwnd = 1000;
            p.delivery_rate = rate;
            p.owd_us = Some(5_000_000 + owd_ms * 1000);
            p
        })
        .collect()
    }

    /// The 25 ms path takes the head; the others' stop thresholds grow with their OWD, so
    /// they stop taking the tail largest first; when the head path dies the next smallest
    /// takes the head and the thresholds follow.
    #[test]
    fn five_paths_stop_from_the_tail_largest_owd_first() {
        let now = Instant::now();
        let paths = five();
        let usable: Vec<&PathSnapshot> = paths.iter().collect();
        let mut s = Dems::new(DemsVariant::Basic);
        // Σ (ΔOWD × BW) over the paths of smaller OWD:
        // 40 ms: 15 × 1,000; 60 ms: 35 × 1,000 + 20 × 2,000;
        // 90 ms: 65 × 1,000 + 50 × 2,000 + 30 × 250;
        // 135 ms: 110 × 1,000 + 95 × 2,000 + 75 × 250 + 45 × 500 (ms × bytes per ms).
        let thresholds: Vec<f64> = [2, 4, 0, 1]
            .iter()
            .map(|&i| s.stop_threshold(&paths[i], &usable, true).round())
            .collect();
        assert_eq!(thresholds, [15_000.0, 75_000.0, 172_500.0, 341_250.0]);
        let q = queue(100_000);
        assert_eq!(s.decide(now, 3, &paths, &q, 65536), Decision::head(65536));
        assert_eq!(s.decide(now, 2, &paths, &q, 65536), tail(65536));
        assert_eq!(s.decide(now, 4, &paths, &q, 65536), tail(25_000));
        let wait = Decision::Wait { until: None };
        assert_eq!(s.decide(now, 0, &paths, &q, 65536), wait);
        assert_eq!(s.decide(now, 1, &paths, &q, 65536), wait);
        // The head path gone: the 40 ms one takes the head, the 60 ms one trails it alone.
        let mut paths = five();
        paths[3].alive = false;
        assert_eq!(s.decide(now, 2, &paths, &q, 65536), Decision::head(65536));
        assert_eq!(s.decide(now, 4, &paths, &q, 65536), tail(60_000));
    }

    /// After the last byte is sent, with five paths: DEMS-F's head path re-sends what the
    /// others sent within the largest ΔOWD + δ (110 ms, δ = 0 here); DEMS-S's head path
    /// re-sends upwards and every tail path downwards.
    #[test]
    fn five_paths_reinject_as_two_do() {
        let now = Instant::now();
        let paths = five();
        let mut f = Dems::new(DemsVariant::Full);
        let Decision::Reinject {
            end: End::Head,
            max_bytes: 4096,
            max_age: Some(age),
            sooner_only: false,
        } = f.decide(now, 3, &paths, &queue(0), 4096)
        else {
            panic!("the head path re-sends");
        };
        assert!(
            age.abs_diff(Duration::from_millis(110)) < Duration::from_micros(1),
            "{age:?}"
        );
        for i in [0, 1, 2, 4] {
            assert_eq!(
                f.decide(now, i, &paths, &queue(0), 4096),
                Decision::Wait { until: None }
            );
        }
        let mut simple = Dems::new(DemsVariant::Simple);
        for (i, end) in [
            (3, End::Head),
            (0, End::Tail),
            (1, End::Tail),
            (2, End::Tail),
            (4, End::Tail),
        ] {
            assert_eq!(
                simple.decide(now, i, &paths, &queue(0), 4096),
                Decision::Reinject {
                    end,
                    max_bytes: 4096,
                    max_age: None,
                    sooner_only: false,
                }
            );
        }
    }

    /// Tail bytes fit the window a write now gets. LTE with 200 of its 214 segments in
    /// flight takes 14 segments' worth from the tail, not the 65,536 the stop rule allows;
    /// with a full window (or unsent bytes filling it) it sends nothing and asks again a
    /// sixteenth of its srtt later (270 ms / 16 ≈ 16.9 ms, capped at 10 ms); after an idle
    /// spell the restart window (10 segments) is the one that counts.
    #[test]
    fn tail_bytes_fit_the_window_they_leave_with() {
        let now = Instant::now();
        let mut paths = seed_270();
        let mut s = Dems::new(DemsVariant::Full);
        paths[1].in_flight = 200;
        assert_eq!(s.decide(now, 1, &paths, &queue(600_000), 65536), tail(14 * 1448));
        paths[1].notsent = 14 * 1448;
        let later = Decision::Wait {
            until: Some(now + Duration::from_millis(10)),
        };
        assert_eq!(s.decide(now, 1, &paths, &queue(600_000), 65536), later);
        paths[1].notsent = 0;
        paths[1].in_flight = 214;
        assert_eq!(s.decide(now, 1, &paths, &queue(600_000), 65536), later);
        // Idle: nothing in flight, the kernel will restart the window at 10 segments.
        paths[1].in_flight = 0;
        paths[1].restart_cwnd = Some(10);
        assert_eq!(s.decide(now, 1, &paths, &queue(600_000), 65536), tail(14_480));
        // Past the stop point nothing changes: it waits for new bytes, not for room.
        assert_eq!(
            s.decide(now, 1, &paths, &queue(80_000), 65536),
            Decision::Wait { until: None }
        );
        // The head path is not limited by its window (late binding keeps its socket fed).
        paths[0].in_flight = 30;
        assert_eq!(s.decide(now, 0, &paths, &queue(600_000), 65536), Decision::head(65536));
    }
}
