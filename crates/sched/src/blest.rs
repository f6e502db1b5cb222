//! BLEST, BLocking ESTimation (S. Ferlin, Ö. Alay, O. Mehani, R. Boreli, "BLEST: Blocking
//! Estimation-based MPTCP Scheduler for Heterogeneous Networks", IFIP Networking 2016).
//!
//! Bytes sent on a slow path hold flow-control window until they arrive; if they hold so much
//! that the fast path runs out of window during the slow path's RTT, the connection blocks.
//! Before the slow path x_s sends, BLEST estimates what the fastest path x_f could send during
//! one RTT_s, growing its window by one segment per RTT_f (Reno congestion avoidance), with
//! `r = RTT_s / RTT_f`:
//!
//! `X = MSS_f · (CWND_f + (r − 1)/2) · r`
//!
//! and waits for x_f if `λ·X > W − MSS_s·(inflight_s + 1)`, W being the send window.
//!
//! Decisions made for mpflex:
//!
//! * **W.** mpflex's window is the session flow-control window. [`QueueView::send_window`] is
//!   what is left of it (the bytes the sender may still put on paths: unsent queue plus unused
//!   credit), so the paper's W is that plus every live path's bytes in its socket
//!   (`in_flight·mss + notsent`). Taking the slow path's own bytes off again,
//!   `W − MSS_s·inflight_s = send_window + Σ_{live p ≠ s} (in_flight_p·mss_p + notsent_p)`:
//!   other paths' bytes are acknowledged, and their window recycled, within RTT_s; the slow
//!   path's are already missing from `send_window`. An unknown window (`u64::MAX`) never
//!   blocks: BLEST is then MinRTT.
//! * **The "+1 segment"** is the chunk itself: x_s sends at most
//!   `W − slow bytes − λ·X` (what a per-segment kernel scheduler would let through before the
//!   test failed), at most its free congestion-window space and the budget, and waits when
//!   that is below one MSS.
//! * **λ** starts at 1 and stays in [1, 1.3]. The paper raises it when the connection was
//!   blocked by the window and lowers it otherwise; mpflex has no per-packet blocking signal,
//!   so once per slow-path RTT λ rises by 0.04 if any decision in that period saw the unused
//!   flow-control credit (`send_window − queue.bytes`) below one MSS — the application blocked
//!   on the window — and falls by 0.01 otherwise. [`BlestConfig::adaptive`] = false pins λ.
//! * **Paths.** x_f is the fastest usable path with an RTT sample, ready or not; the asking
//!   path is x_s if MinRTT would pick it, otherwise it waits like MinRTT. If the asking path is
//!   x_f (or has no RTT sample) it sends the whole budget.
//! * **More than two paths.** The paper estimates two subflows. What blocks is the shared
//!   window running out while x_s's bytes are outstanding, and during RTT_s every path
//!   faster than x_s sends into that window, not only x_f: X is summed over every usable
//!   path j with a smaller srtt than x_s, each with its own `r_j = RTT_s / RTT_j`
//!   (`X = Σ_j MSS_j · (CWND_j + (r_j − 1)/2) · r_j`, [`Blest::faster_bytes`]). With two
//!   paths that is the paper's X. A path slower than x_s (or without an RTT sample)
//!   waits for x_s's round like any byte in it and is not counted. So with N paths the
//!   slowest ones are the first kept out when the window is tight, the fastest last.
//! * **Waiting** returns `until` = now + RTT_f: x_f should have had an RTT's worth of ACKs.

use std::time::{Duration, Instant};

use crate::{backups_allowed, cwnd_room, faster_available, fastest, queued_on_path, Decision, PathSnapshot};
use crate::{QueueView, Scheduler, SchedulerKind};

/// BLEST parameters; the defaults are the paper's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlestConfig {
    /// λ at start.
    pub lambda: f64,
    pub lambda_min: f64,
    pub lambda_max: f64,
    /// λ step after a period with window blocking, and after one without.
    pub step_up: f64,
    pub step_down: f64,
    /// Adapt λ; `false` keeps it at `lambda`.
    pub adaptive: bool,
}

impl Default for BlestConfig {
    fn default() -> Self {
        BlestConfig {
            lambda: 1.0,
            lambda_min: 1.0,
            lambda_max: 1.3,
            step_up: 0.04,
            step_down: 0.01,
            adaptive: true,
        }
    }
}

#[derive(Debug)]
pub struct Blest {
    cfg: BlestConfig,
    lambda: f64,
    /// Window blocking seen since the last λ update.
    blocked: bool,
    last_update: Option<Instant>,
}

impl Default for Blest {
    fn default() -> Self {
        Blest::new(BlestConfig::default())
    }
}

impl Blest {
    pub fn new(cfg: BlestConfig) -> Self {
        Blest {
            cfg,
            lambda: cfg.lambda,
            blocked: false,
            last_update: None,
        }
    }

    /// Current λ.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    fn adapt(&mut self, now: Instant, me: &PathSnapshot, paths: &[PathSnapshot], queue: &QueueView) {
        if !self.cfg.adaptive {
            return;
        }
        if queue.send_window != u64::MAX && queue.send_window.saturating_sub(queue.bytes) < me.mss.max(1) as u64 {
            self.blocked = true;
        }
        let period = paths
            .iter()
            .filter(|p| p.alive)
            .map(|p| p.srtt)
            .max()
            .unwrap_or_default()
            .max(Duration::from_millis(1));
        match self.last_update {
            Some(t) if now.saturating_duration_since(t) < period => {}
            Some(_) => {
                let step = if self.blocked {
                    self.cfg.step_up
                } else {
                    -self.cfg.step_down
                };
                self.lambda = (self.lambda + step).clamp(self.cfg.lambda_min, self.cfg.lambda_max);
                self.blocked = false;
                self.last_update = Some(now);
            }
            None => self.last_update = Some(now),
        }
    }

    /// Bytes x_f can send during one RTT of x_s (the paper's X, before λ).
    pub fn fast_bytes(fast: &PathSnapshot, slow: &PathSnapshot) -> f64 {
        let r = slow.srtt.as_nanos() as f64 / fast.srtt.as_nanos().max(1) as f64;
        fast.mss.max(1) as f64 * (fast.cwnd.max(1) as f64 + (r - 1.0) / 2.0) * r
    }

    /// Bytes every usable path faster than `slow` (smaller srtt, with a sample) can send
    /// during one RTT of it: X summed over them (see the module notes, "More than two
    /// paths"); with two paths [`Blest::fast_bytes`] of x_f.
    pub fn faster_bytes(slow: usize, paths: &[PathSnapshot], allow_backup: bool) -> f64 {
        let s = &paths[slow];
        paths
            .iter()
            .enumerate()
            .filter(|&(i, p)| i != slow && p.usable(allow_backup) && !p.srtt.is_zero() && p.srtt < s.srtt)
            .map(|(_, p)| Self::fast_bytes(p, s))
            .sum()
    }
}

impl Scheduler for Blest {
    fn name(&self) -> &'static str {
        SchedulerKind::Blest.name()
    }

    fn decide(
        &mut self,
        now: Instant,
        path: usize,
        paths: &[PathSnapshot],
        queue: &QueueView,
        budget: usize,
    ) -> Decision {
        let allow_backup = backups_allowed(paths);
        let me = &paths[path];
        if !me.usable(allow_backup) {
            return Decision::Wait { until: None };
        }
        self.adapt(now, me, paths, queue);
        if faster_available(paths, path, allow_backup) {
            return Decision::Wait { until: None };
        }
        let f = match fastest(paths, allow_backup) {
            Some(f) if f != path && paths[f].srtt < me.srtt => f,
            _ => return Decision::head(budget),
        };
        let chunk = cwnd_room(me, me.send_cwnd()).min(budget);
        if queue.send_window == u64::MAX {
            return Decision::head(chunk);
        }
        let fp = &paths[f];
        let recycled: u64 = paths
            .iter()
            .enumerate()
            .filter(|&(i, p)| i != path && p.alive)
            .map(|(_, p)| queued_on_path(p))
            .sum();
        let window = queue.send_window.saturating_add(recycled) as f64;
        let room = window - self.lambda * Self::faster_bytes(path, paths, allow_backup);
        if room < me.mss.max(1) as f64 {
            let until = now + fp.srtt.max(Duration::from_millis(1));
            return Decision::Wait { until: Some(until) };
        }
        Decision::head(chunk.min(room as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{path, queue, queue_win};

    const MSS: u64 = 1448;

    fn fixed(lambda: f64) -> Blest {
        Blest::new(BlestConfig {
            lambda,
            adaptive: false,
            ..BlestConfig::default()
        })
    }

    /// x_f: 10 ms, window 10 full, not ready. x_s: 40 ms, 5 segments in flight, asking.
    fn pair() -> [PathSnapshot; 2] {
        let mut paths = [path(0, 10), path(1, 40)];
        paths[0].in_flight = 10;
        paths[0].ready = false;
        paths[1].in_flight = 5;
        paths
    }

    #[test]
    fn fast_bytes_formula() {
        // r = 4: X = MSS · (10 + 3/2) · 4 = 46 MSS.
        let p = pair();
        assert_eq!(Blest::fast_bytes(&p[0], &p[1]), (46 * MSS) as f64);
        // Equal RTTs: one window.
        assert_eq!(Blest::fast_bytes(&p[0], &p[0]), (10 * MSS) as f64);
    }

    #[test]
    fn waits_when_the_window_would_block_the_fast_path() {
        // W = w + 10 MSS (x_f) + 5 MSS (x_s); room = W − 5 MSS − 46 MSS = w − 36 MSS.
        // Wait iff room < 1 MSS, i.e. w < 37 MSS.
        let now = Instant::now();
        let p = pair();
        let mut s = fixed(1.0);
        let w = 37 * MSS;
        assert_eq!(
            s.decide(now, 1, &p, &queue_win(1000, w - 1), 1 << 20),
            Decision::Wait {
                until: Some(now + Duration::from_millis(10))
            }
        );
        // Exactly one segment of room: one segment goes.
        assert_eq!(
            s.decide(now, 1, &p, &queue_win(1000, w), 1 << 20),
            Decision::head(MSS as usize)
        );
        // Plenty of window: the slow path's free congestion-window space (5 MSS), or the budget.
        assert_eq!(
            s.decide(now, 1, &p, &queue_win(1000, 1 << 20), 1 << 20),
            Decision::head(5 * MSS as usize)
        );
        assert_eq!(
            s.decide(now, 1, &p, &queue_win(1000, 1 << 20), 100),
            Decision::head(100)
        );
        // Between: room of 3 MSS limits the chunk.
        assert_eq!(
            s.decide(now, 1, &p, &queue_win(1000, 39 * MSS), 1 << 20),
            Decision::head(3 * MSS as usize)
        );
    }

    #[test]
    fn more_held_by_the_slow_path_means_waiting() {
        // A session window of 52 MSS in all. x_f holds 10 MSS; x_s 5 MSS in flight leaves 37
        // MSS, room 37 + 10 − 46 = 1 MSS: send. 9 in flight leave 33: wait. Unsent bytes in
        // x_s's socket hold window the same way.
        let now = Instant::now();
        let total = 52 * MSS;
        let mut p = pair();
        let q = |p: &[PathSnapshot]| queue_win(1000, total - p.iter().map(queued_on_path).sum::<u64>());
        assert_eq!(
            fixed(1.0).decide(now, 1, &p, &q(&p), 1 << 20),
            Decision::head(MSS as usize)
        );
        p[1].in_flight = 9;
        assert!(matches!(
            fixed(1.0).decide(now, 1, &p, &q(&p), 1 << 20),
            Decision::Wait { .. }
        ));
        p[1].in_flight = 5;
        p[1].notsent = 4 * MSS as u32;
        assert!(matches!(
            fixed(1.0).decide(now, 1, &p, &q(&p), 1 << 20),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn lambda_scales_the_estimate() {
        // w = 60 000: λ = 1 leaves 60 000 + 10 MSS − 46 MSS ≈ 7 872 B; λ = 1.3 needs 59.8 MSS.
        let now = Instant::now();
        let p = pair();
        let q = queue_win(1000, 60_000);
        assert!(!matches!(
            fixed(1.0).decide(now, 1, &p, &q, 1 << 20),
            Decision::Wait { .. }
        ));
        assert!(matches!(
            fixed(1.3).decide(now, 1, &p, &q, 1 << 20),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn unknown_window_never_blocks() {
        let now = Instant::now();
        let p = pair();
        assert_eq!(
            Blest::default().decide(now, 1, &p, &queue(1 << 30), 1 << 20),
            Decision::head(5 * MSS as usize)
        );
    }

    #[test]
    fn lambda_adapts_once_per_slow_rtt() {
        let t0 = Instant::now();
        let p = pair();
        let mut s = Blest::default();
        assert_eq!(s.lambda(), 1.0);
        // Credit exhausted (window == queue): blocked.
        s.decide(t0, 1, &p, &queue_win(5000, 5000), 1 << 20);
        s.decide(
            t0 + Duration::from_millis(20),
            1,
            &p,
            &queue_win(1000, 1 << 20),
            1 << 20,
        );
        assert_eq!(s.lambda(), 1.0, "no update within one slow RTT (40 ms)");
        s.decide(
            t0 + Duration::from_millis(40),
            1,
            &p,
            &queue_win(1000, 1 << 20),
            1 << 20,
        );
        assert!((s.lambda() - 1.04).abs() < 1e-9);
        // A period without blocking: back down, never below 1.
        s.decide(
            t0 + Duration::from_millis(80),
            1,
            &p,
            &queue_win(1000, 1 << 20),
            1 << 20,
        );
        assert!((s.lambda() - 1.03).abs() < 1e-9);
        for i in 3..20 {
            s.decide(t0 + Duration::from_millis(40 * i), 1, &p, &queue(1000), 1 << 20);
        }
        assert_eq!(s.lambda(), 1.0);
        // Sustained blocking: capped at 1.3.
        for i in 20..40 {
            s.decide(
                t0 + Duration::from_millis(40 * i),
                1,
                &p,
                &queue_win(1000, 1000),
                1 << 20,
            );
        }
        assert!((s.lambda() - 1.3).abs() < 1e-9);
    }

    #[test]
    fn fastest_path_and_minrtt_precedence() {
        let now = Instant::now();
        let p = pair();
        // x_f asking sends the budget whatever the window.
        let mut ready = p.clone();
        ready[0].ready = true;
        assert_eq!(
            fixed(1.0).decide(now, 0, &ready, &queue_win(1000, 0), 4096),
            Decision::head(4096)
        );
        // A faster path ready with room is being asked: the slow one waits.
        let paths = [path(0, 10), path(1, 40)];
        assert_eq!(
            fixed(1.0).decide(now, 1, &paths, &queue_win(1000, 1 << 30), 4096),
            Decision::Wait { until: None }
        );
    }

    #[test]
    fn backups_and_dead_paths() {
        let now = Instant::now();
        let mut p = pair();
        // Dead x_f: the slow path is alone and sends the budget.
        p[0].alive = false;
        assert_eq!(
            fixed(1.0).decide(now, 1, &p, &queue_win(1000, 0), 4096),
            Decision::head(4096)
        );
        // Never a dead asking path.
        assert_eq!(
            fixed(1.0).decide(now, 0, &p, &queue(1000), 4096),
            Decision::Wait { until: None }
        );
        // A backup x_f is not waited for while the regular path is alive; a backup asking waits.
        let mut p = pair();
        p[0].backup = true;
        assert_eq!(
            fixed(1.0).decide(now, 1, &p, &queue_win(1000, 0), 4096),
            Decision::head(4096)
        );
        assert_eq!(
            fixed(1.0).decide(now, 0, &p, &queue(1000), 4096),
            Decision::Wait { until: None }
        );
    }

    #[test]
    fn three_paths_count_every_faster_path() {
        // 10 ms (full), 20 ms (full), 40 ms asking. X: the 10 ms path's 46 MSS, and the
        // 20 ms path's (r = 2) MSS · (10 + 1/2) · 2 = 21 MSS, 67 MSS in all.
        // W = w + 10 + 10 + 5 MSS; room = w + 20 MSS − 67 MSS = w − 47 MSS.
        let now = Instant::now();
        let mut p = vec![path(0, 10), path(1, 20), path(2, 40)];
        for q in &mut p[..2] {
            q.in_flight = 10;
            q.ready = false;
        }
        p[2].in_flight = 5;
        assert_eq!(Blest::faster_bytes(2, &p, false), (67 * MSS) as f64);
        let mut s = fixed(1.0);
        assert!(matches!(
            s.decide(now, 2, &p, &queue_win(1000, 47 * MSS), 1 << 20),
            Decision::Wait { .. }
        ));
        assert_eq!(
            s.decide(now, 2, &p, &queue_win(1000, 48 * MSS), 1 << 20),
            Decision::head(MSS as usize)
        );
        // The middle path, asking, counts only the 10 ms one (r = 2: 21 MSS), as with two
        // paths: W = w + 10 + 10 + 5 MSS less its own 10, room = w + 15 − 21 = w − 6 MSS.
        p[1].ready = true;
        p[0].in_flight = 10;
        assert_eq!(Blest::faster_bytes(1, &p, false), (21 * MSS) as f64);
        assert!(matches!(
            s.decide(now, 1, &p, &queue_win(1000, 6 * MSS), 1 << 20),
            Decision::Wait { .. }
        ));
        // A dead faster path is not counted.
        p[0].alive = false;
        assert_eq!(Blest::faster_bytes(2, &p, false), (21 * MSS) as f64);
    }

    /// Five paths: 10, 20, 40, 80 and 160 ms. X of the 80 ms path sums the three faster
    /// ones; the slowest path is the first kept out as the window tightens, the fastest
    /// never.
    #[test]
    fn five_paths_keep_the_slowest_out_first() {
        let now = Instant::now();
        let mut p: Vec<PathSnapshot> = [10, 20, 40, 80, 160]
            .iter()
            .enumerate()
            .map(|(i, &ms)| path(i, ms))
            .collect();
        for q in &mut p {
            q.in_flight = 10;
            q.ready = false;
        }
        // X for the 80 ms path: r = 8, 4, 2 → (10 + 3.5)·8 + (10 + 1.5)·4 + (10 + 0.5)·2
        // = 108 + 46 + 21 = 175 MSS.
        assert_eq!(Blest::faster_bytes(3, &p, false), (175 * MSS) as f64);
        assert_eq!(Blest::faster_bytes(0, &p, false), 0.0);
        // A window where the 80 ms path may send but the 160 ms one may not: the 80 ms path
        // needs w + 35 MSS (the others' bytes) − 175 MSS ≥ 1 MSS, i.e. w ≥ 141 MSS; the
        // 160 ms path's X (r = 16, 8, 4, 2) is 280 + 108 + 46 + 21 = 455 MSS.
        assert_eq!(Blest::faster_bytes(4, &p, false), (455 * MSS) as f64);
        let w = queue_win(1000, 141 * MSS);
        let mut s = fixed(1.0);
        for (i, q) in p.iter_mut().enumerate() {
            q.ready = i >= 3;
        }
        p[4].in_flight = 5;
        p[3].in_flight = 5;
        // With the 80 ms path ready and holding room, the 160 ms one waits for it (MinRTT).
        assert_eq!(s.decide(now, 4, &p, &w, 1 << 20), Decision::Wait { until: None });
        assert_eq!(s.decide(now, 3, &p, &w, 1 << 20), Decision::head(MSS as usize));
        p[3].ready = false;
        p[3].in_flight = 10;
        assert!(matches!(
            s.decide(now, 4, &p, &w, 1 << 20),
            Decision::Wait { until: Some(_) }
        ));
        // The fastest path always sends.
        p[0].ready = true;
        p[0].in_flight = 0;
        assert_eq!(s.decide(now, 0, &p, &queue_win(1000, 0), 4096), Decision::head(4096));
    }
}
