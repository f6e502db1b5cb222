//! ECF, Earliest Completion First (Y.-s. Lim, E. M. Nahum, D. Towsley, R. J. Gibbens, "ECF: An
//! MPTCP Path Scheduler to Manage Heterogeneous Paths", CoNEXT 2017; Y.-s. Lim, PhD thesis,
//! UMass Amherst 2017, ch. 5, Algorithm 2).
//!
//! When the fastest path x_f (smallest srtt) has no room, MinRTT spills the backlog onto a
//! slower path x_s that does; if x_f would have finished the whole backlog sooner, that
//! leaves x_f idle and the transfer waiting for x_s. ECF compares the two completion times
//! and declines x_s while waiting for x_f is faster. With k bytes unassigned (`queue.bytes`):
//!
//! 1. `(1 + k/CWND_f)·RTT_f < (1 + waiting·β)·(RTT_s + δ)` — waiting for x_f and draining
//!    k on it beats one RTT of x_s; `waiting` (kept here, per session) adds the β
//!    hysteresis once ECF has decided to wait, and is cleared only when this test fails;
//! 2. `(k/CWND_s)·RTT_s ≥ 2·RTT_f + δ` — x_s would not finish k sooner than x_f could.
//!
//! Both hold ⇒ wait for x_f; otherwise x_s sends. Decisions made for mpflex (where
//! [`EcfConfig`] has a switch for one, `false` is the published form; the measurements
//! behind them are in `docs/schedulers/ecf.md`):
//!
//! * **Units and the floor.** k and the windows are compared in bytes (`cwnd·mss`), and k is
//!   never counted as less than one window in either test (upstream `mptcp_ecf.c` does the
//!   same): the literal formula sends the thesis's own "11th packet" on the 100 ms path
//!   of its 10 ms / 100 ms example. [`EcfConfig::floor_backlog`] = false gives the literal
//!   form. Bytes already unsent in a path's socket (`notsent`) are added to that path's k:
//!   under late binding they are ahead of the backlog on that path (the kernel scheduler
//!   has no such queue).
//! * **δ** = max(σ_f, σ_s) ([`Delta::Mdev`], the default) with σ = `rttvar` of the snapshot,
//!   i.e. `tcpi_rttvar`, the smoothed mean deviation with no floor (a few ms). The kernel's
//!   `rttvar_us` that the thesis and upstream used never drops below `rto_min` (200 ms), which
//!   makes δ ≥ 100 ms and stops ECF waiting in the thesis's 10 ms / 100 ms example;
//!   [`Delta::KernelLike`] approximates that (`max(4·σ, 200 ms)/2`, upstream's
//!   `rttvar_us >> 1`) and [`Delta::Fixed`] pins a constant, for comparisons.
//! * **Saved cwnd (upstream's `rec_snd_cwnd`).** Linux halves cwnd per RTO of idleness
//!   (RFC 2861), lazily at the next transmit, so `TCP_INFO` still shows the old window while
//!   the path is idle. ECF remembers a path's window while it is idle (nothing in flight or
//!   unsent), watching every statistics update ([`Scheduler::observe`]), not only its own
//!   decisions (a fast path that idles while nothing is queued is never asked); when the
//!   path is next seen busy after an idle spell longer than its RTO estimate
//!   (`srtt + max(4·rttvar, 200 ms)`) with a smaller window, the old one is kept as
//!   `rec_cwnd`, and `max(cwnd, rec_cwnd)` feeds the decisions until the kernel's window grows
//!   back to it. Only ECF's arithmetic uses it; the kernel's window is untouched.
//! * **Slow start after an idle restart** ([`EcfConfig::slow_start`]). With the remembered
//!   window, `k/CWND_f` reads the first round after an idle spell as a full window, but
//!   the kernel restarts it from 10 segments (or half per RTO) and slow-starts back, so
//!   the published form overstates how fast a restarted x_f drains k. When the window a
//!   write gets now ([`PathSnapshot::send_cwnd`]) is below the tests' window, k's drain
//!   time counts rounds from it, doubling up to that window ([`drain_time`]); in steady
//!   state the published integer form stands. The same for x_s in test (2).
//! * **The hysteresis ends with the burst** ([`EcfConfig::burst_hysteresis`]). `waiting` is
//!   cleared when the queue is empty or every path idle: a chunk that follows a pause does
//!   not inherit the β-widened bound of the previous burst's last decisions, which would
//!   keep x_s out of the new chunk's first decisions for a reason that no longer holds.
//! * **An idle path's RTT** ([`EcfConfig::idle_rtt`]). The kernel's srtt changes only with
//!   new samples: a path that idles after its last burst queued bytes keeps that queue in
//!   its srtt, although it has drained, and ECF would read it as slower than it is. ECF
//!   reads every RTT as [`PathSnapshot::rtt_now`]: at most the path's minimum RTT plus
//!   `rttvar` plus the time the bytes already on it take at its rate, never above srtt —
//!   srtt on a busy path.
//! * **x_f's completion in test (2)** ([`EcfConfig::fast_completion`]). The thesis bounds
//!   x_f's time for k from below by `2·RTT_f` (one round to become available, one to send
//!   k: a backlog within one window). Under late binding x_f's socket holds unsent bytes
//!   ahead of k, and a larger k takes x_f more rounds; the bound then judges x_s slower
//!   than an x_f that cannot finish sooner either. mpflex uses the estimate of test (1),
//!   `(1 + k_f/CWND_f)·RTT_f` (with the slow-start drain time after an idle restart),
//!   where it is longer.
//! * **More than two paths** (Proposition 1): x_f is the fastest usable path with an RTT
//!   sample, ready or not; x_s is the asking path, provided MinRTT would pick it (no faster
//!   path is ready with window space — otherwise that path is being asked and this one
//!   waits, like MinRTT). If the asking path is x_f, or has no RTT sample, it sends, like
//!   MinRTT. A not-ready x_f is *not* a reason to fall back to MinRTT: under late binding a
//!   path stops being ready exactly when its window is full and its socket holds
//!   `notsent_lowat` bytes, i.e. ECF's "x_f is not available", the case ECF exists for.
//! * **Waiting** answers `Wait { until }` with `until` = now + RTT_f (x_f should be available
//!   within one of its RTTs; the engine also re-asks on every change). A wait is capped at
//!   `(1 + β)·(RTT_s + δ)` from its start (the slow path would have been done by then, so the
//!   premise is falsified — a stalled x_f): past it x_s sends anyway.
//! * **Window as a rate.** ECF reads `CWND/RTT` as the rate a path drains its backlog at.
//!   That holds for a loss-based window in steady state, but BBR keeps two BDPs in its window
//!   (cwnd gain 2) and any window measured against a smaller srtt overstates the rate, so
//!   ECF would wait for a fast path that cannot deliver that fast. When the kernel has a
//!   rate, mpflex caps each window at `rate · srtt` (at least one MSS) for both tests
//!   ([`EcfConfig::rate_cap`]; `false` is the published form), the rate being the larger
//!   of the delivery and pacing rates ([`PathSnapshot::sending_rate`]). The delivery rate
//!   alone lags a window in slow start (its samples trail a doubling window by up to half),
//!   which would read a slow path that is still growing as slower than it is and keep it
//!   from ever growing; the pacing rate of a window-based congestion control is 1.2–2 ×
//!   window / srtt, so for it the cap never binds. x_f's window is also capped at BBR's
//!   bandwidth estimate ([`PathSnapshot::bandwidth`]): in its start-up BBR paces at up to
//!   2.89 × that estimate, which the pacing-rate cap lets through. Not x_s's: a path ECF
//!   keeps to little traffic has an estimate of that little, and read at it would stay
//!   out. A remembered window (above) is capped by the rate of the path before its idle
//!   spell: the restart's first samples (a window of 10 per RTT) would otherwise undo the
//!   idle protection.
//! * **Frames, not packets.** ECF's x_s round is one RTT because a packet's own
//!   transmission time is negligible. mpflex hands paths whole frames (up to 16 KB): on a
//!   0.3 Mbit/s path one frame takes 0.4 s to cross. RTT_s in test (1) and in the wait cap
//!   is therefore `srtt_s + (frame − MSS)·srtt_s / CWND_s` with the queue's mean frame size
//!   ([`EcfConfig::frame_time`]; `false` is the published form). For the same reason x_f,
//!   and MinRTT's "a faster path is ready", order paths by when the next frame would
//!   arrive, `srtt + (frame − MSS)·srtt / CWND` — srtt itself for segment-sized frames. An
//!   idle 0.3 Mbit/s path whose keepalives have brought its srtt back to the base RTT is
//!   not the fastest path for a 16 KB frame.
//! * **Tail reinjection** ([`EcfConfig::reinject`], on by default; `false` is the published
//!   scheduler alone). ECF's evaluation ran with MPTCP's opportunistic retransmission on.
//!   mpflex's equivalent: once nothing is left to send, the fastest path (by arrival)
//!   re-sends, oldest first, the frames other paths hold and the peer has neither
//!   acknowledged nor reported, each at most once. A slow path's last frames (or one in
//!   loss recovery, its RTO doubling over a 1 s RTT) then no longer hold a burst's end;
//!   the copies cost only idle capacity of the fast path. Only frames the copy brings
//!   sooner are copied ([`EcfConfig::reinject_sooner`], `sooner_only` of
//!   [`Decision::Reinject`]): the engine's one-way-delay estimate at each path's bytes in
//!   flight says when the frame is due over the path that holds it and when a copy would
//!   be; frames about to arrive anyway (most of a fast path's last window) are left alone,
//!   frames stuck in a slow path's queue or behind a loss are copied. Copying every held
//!   frame costs duplicate bytes for no gain in completion time.
//! * **`max_bytes`.** x_f (or a MinRTT fallback) gets the whole budget. When x_s sends after
//!   the comparison it gets only its free window space (at least one MSS): the test judged
//!   one round of x_s, and bytes beyond its window would sit in its socket, deciding early.
//!   Near a burst's end (the backlog within one round of x_f and x_s) x_s takes bytes only
//!   while the window a write now gets has room, and otherwise asks again a few ms later:
//!   a frame behind a full window leaves a round later, after everything x_f carries. Far
//!   from the end the one segment beyond a full window keeps x_s's socket fed.

use std::time::{Duration, Instant};

use crate::{
    backups_allowed, cwnd_room, faster_available, fastest, send_within_window, within_one_round, Decision, End,
    PathSnapshot, QueueView, Scheduler, SchedulerKind,
};

/// How δ is derived from the two paths' RTT variation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    /// max(σ_f, σ_s) with σ the snapshot's `rttvar` (`tcpi_rttvar`, mean deviation).
    Mdev,
    /// max over both paths of `max(4·rttvar, 200 ms) / 2`: upstream's `rttvar_us >> 1` with
    /// the kernel's `rto_min` floor.
    KernelLike,
    /// A constant.
    Fixed(Duration),
}

/// ECF parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcfConfig {
    /// Hysteresis β in thousandths (the thesis's β = 0.25 is 250).
    pub beta_permille: u32,
    pub delta: Delta,
    /// Count the backlog as at least one congestion window in both tests (as upstream
    /// `mptcp_ecf.c` does; the literal test sends the thesis's own "11th packet" on the slow
    /// path). `false` is the thesis's literal Algorithm 2.
    pub floor_backlog: bool,
    /// Cap each window at what the path delivers in one srtt (`delivery_rate · srtt`).
    pub rate_cap: bool,
    /// Count, in x_s's round, the time the rest of a whole frame beyond one segment takes
    /// at x_s's rate (window / srtt).
    pub frame_time: bool,
    /// Once nothing is left to send, the fastest path re-sends what the other paths still
    /// hold unacknowledged (MPTCP's opportunistic retransmission, on in ECF's evaluation).
    pub reinject: bool,
    /// Re-send only frames the copy would bring sooner, or that are overdue
    /// ([`Decision::Reinject`]'s `sooner_only`); `false` copies every frame once.
    pub reinject_sooner: bool,
    /// A path whose window was restarted after idleness drains k in slow start, from the
    /// window a write gets now doubling up to the tests' window, not at the remembered
    /// window from the first round ([`drain_time`]). `false`: the published `k/CWND`.
    pub slow_start: bool,
    /// The β hysteresis ends with the burst: once the queue is empty (or every path idle)
    /// the next burst starts without it. `false`: `waiting` persists until test (1)
    /// fails, however long the session idles (Algorithm 2 read literally).
    pub burst_hysteresis: bool,
    /// Read an idle path's RTT as [`PathSnapshot::rtt_now`] (at most `min_rtt + rttvar`
    /// once nothing is in flight or unsent) instead of its `srtt`, which keeps the queue of
    /// the path's last burst until new samples arrive. `false`: `srtt` throughout.
    pub idle_rtt: bool,
    /// Test (2) compares x_s's time for k with x_f's completion estimate of test (1),
    /// `(1 + k_f/CWND_f)·RTT_f`, instead of its lower bound `2·RTT_f` (the same for a
    /// backlog within one window of x_f). `false`: the published `2·RTT_f + δ`.
    pub fast_completion: bool,
}

impl Default for EcfConfig {
    fn default() -> Self {
        EcfConfig {
            beta_permille: 250,
            delta: Delta::Mdev,
            floor_backlog: true,
            rate_cap: true,
            frame_time: true,
            reinject: true,
            reinject_sooner: true,
            slow_start: true,
            burst_hysteresis: true,
            idle_rtt: true,
            fast_completion: true,
        }
    }
}

/// Linux's `TCP_RTO_MIN`.
const RTO_MIN: Duration = Duration::from_millis(200);

/// Per path: the window seen while idle, and the window saved across an idle reset.
#[derive(Debug, Clone, Copy, Default)]
struct CwndMemory {
    idle_since: Option<Instant>,
    idle_cwnd: u32,
    rec_cwnd: u32,
    /// The delivery rate seen while idle (the last sample of the busy spell before it),
    /// and the one kept with `rec_cwnd`: the remembered window is capped by the rate it
    /// delivered at, not by the slow samples of the restart.
    idle_rate: u64,
    rec_rate: u64,
}

#[derive(Debug, Default)]
pub struct Ecf {
    cfg: EcfConfig,
    /// ECF decided to wait for x_f and no first-test failure has happened since.
    waiting: bool,
    /// When the current continuous wait began (cleared by any send).
    wait_since: Option<Instant>,
    mem: Vec<CwndMemory>,
}

impl Ecf {
    pub fn new(cfg: EcfConfig) -> Self {
        Ecf { cfg, ..Ecf::default() }
    }

    /// The RTT ECF counts for a path: [`PathSnapshot::rtt_now`] with
    /// [`EcfConfig::idle_rtt`], else `srtt`.
    fn rtt(&self, p: &PathSnapshot) -> Duration {
        if self.cfg.idle_rtt {
            p.rtt_now()
        } else {
            p.srtt
        }
    }

    /// The window in bytes for the tests: the kernel's, or the one saved across an idle
    /// reset if larger, each capped by the delivery rate of its time (over the RTT ECF
    /// counts for the path, so that window / RTT stays that rate).
    fn window_bytes(&self, i: usize, p: &PathSnapshot) -> u128 {
        let mss = p.mss.max(1) as u128;
        let rtt = self.rtt(p);
        let capped = |cwnd: u32, rate: u64| {
            let w = cwnd.max(1) as u128 * mss;
            if self.cfg.rate_cap && rate > 0 && !rtt.is_zero() {
                w.min(window_at(rate, rtt, mss))
            } else {
                w
            }
        };
        let now = capped(p.cwnd, p.sending_rate());
        match self.mem.get(i) {
            Some(m) if m.rec_cwnd > p.cwnd => now.max(capped(m.rec_cwnd, m.rec_rate)),
            _ => now,
        }
    }

    /// x_f's window for the tests: [`Ecf::window_bytes`], and with `rate_cap`, where the
    /// congestion control models the bottleneck (BBR), at most what its bandwidth estimate
    /// (at least the delivery rate) carries in an RTT. BBR paces at up to 2.89 × that
    /// estimate in its start-up, which the pacing-rate cap lets through, so a fast path's
    /// window would read as several times its link's rate. Only x_f's: its estimate comes
    /// from the traffic it carries, while an x_s kept to little traffic has an estimate of
    /// that little, which would keep it out for good.
    fn fast_window(&self, f: usize, fp: &PathSnapshot) -> u128 {
        let w = self.window_bytes(f, fp);
        if !self.cfg.rate_cap || fp.bandwidth == 0 {
            return w;
        }
        w.min(window_at(
            fp.bandwidth.max(fp.delivery_rate),
            self.rtt(fp),
            fp.mss.max(1) as u128,
        ))
    }

    fn track_windows(&mut self, now: Instant, paths: &[PathSnapshot]) {
        if self.mem.len() < paths.len() {
            self.mem.resize(paths.len(), CwndMemory::default());
        }
        for (m, p) in self.mem.iter_mut().zip(paths) {
            if !p.alive {
                *m = CwndMemory::default();
                continue;
            }
            if p.in_flight == 0 && p.notsent == 0 {
                m.idle_since.get_or_insert(now);
                m.idle_cwnd = m.idle_cwnd.max(p.cwnd);
                m.idle_rate = m.idle_rate.max(p.sending_rate());
                continue;
            }
            if let Some(since) = m.idle_since.take() {
                let rto = p.srtt + (4 * p.rttvar).max(RTO_MIN);
                if now.saturating_duration_since(since) > rto && p.cwnd < m.idle_cwnd {
                    m.rec_cwnd = m.rec_cwnd.max(m.idle_cwnd);
                    m.rec_rate = m.rec_rate.max(m.idle_rate);
                }
                m.idle_cwnd = 0;
                m.idle_rate = 0;
            }
            if p.cwnd >= m.rec_cwnd {
                m.rec_cwnd = 0;
                m.rec_rate = 0;
            }
        }
        if paths.iter().all(|p| !p.alive || (p.in_flight == 0 && p.notsent == 0)) {
            self.end_burst();
        }
    }

    /// The burst is over (queue empty or every path idle): with `burst_hysteresis`, its β
    /// hysteresis ends with it.
    fn end_burst(&mut self) {
        if self.cfg.burst_hysteresis {
            self.waiting = false;
            self.wait_since = None;
        }
    }

    fn delta(&self, f: &PathSnapshot, s: &PathSnapshot) -> Duration {
        match self.cfg.delta {
            Delta::Mdev => f.rttvar.max(s.rttvar),
            Delta::KernelLike => {
                let k = |p: &PathSnapshot| (4 * p.rttvar).max(RTO_MIN) / 2;
                k(f).max(k(s))
            }
            Delta::Fixed(d) => d,
        }
    }

    /// When the next frame would arrive over a path: its srtt, and with
    /// [`EcfConfig::frame_time`] what the frame holds beyond one segment at the path's rate
    /// (window / srtt). With segment-sized frames this is the srtt: MinRTT's and the
    /// thesis's order.
    fn arrival(&self, i: usize, p: &PathSnapshot, queue: &QueueView) -> u128 {
        let srtt = self.rtt(p).as_nanos();
        if !self.cfg.frame_time || queue.frames == 0 {
            return srtt;
        }
        let frame = (queue.bytes / queue.frames as u64) as u128;
        let extra = frame.saturating_sub(p.mss.max(1) as u128);
        srtt + extra * srtt / self.window_bytes(i, p).max(1)
    }

    /// x_f by [`Ecf::arrival`] among usable paths with an RTT sample, and whether a path
    /// arriving sooner than `me` is ready with window space (MinRTT's reason to wait).
    fn by_arrival(
        &self,
        me: usize,
        paths: &[PathSnapshot],
        queue: &QueueView,
        allow_backup: bool,
    ) -> (Option<usize>, bool) {
        let mine = self.arrival(me, &paths[me], queue);
        let mut best: Option<(u128, usize)> = None;
        let mut faster = false;
        for (i, p) in paths.iter().enumerate() {
            if !p.usable(allow_backup) || p.srtt.is_zero() {
                continue;
            }
            let a = self.arrival(i, p, queue);
            if best.is_none_or(|(b, _)| a < b) {
                best = Some((a, i));
            }
            if i != me && p.ready && p.has_cwnd_space() && a < mine {
                faster = true;
            }
        }
        (best.map(|(_, i)| i), faster)
    }

    /// The window, in bytes, a path sends its next round with: the one a write gets now
    /// ([`PathSnapshot::send_cwnd`]), at most the tests' `window` and at least one MSS. Below
    /// `window` only when the kernel restarted the window after idleness (or the window
    /// shrank) while [`Ecf::window_bytes`] still counts the remembered one, or, without
    /// `slow_start`, never.
    fn start_window(&self, p: &PathSnapshot, window: u128) -> u128 {
        if !self.cfg.slow_start {
            return window;
        }
        let mss = p.mss.max(1) as u128;
        (p.send_cwnd().max(1) as u128 * mss).clamp(mss.min(window), window)
    }

    fn send(&mut self, max_bytes: usize) -> Decision {
        self.wait_since = None;
        Decision::head(max_bytes)
    }
}

impl Scheduler for Ecf {
    fn name(&self) -> &'static str {
        SchedulerKind::Ecf.name()
    }

    fn reinjects(&self) -> bool {
        self.cfg.reinject
    }

    fn observe(&mut self, now: Instant, paths: &[PathSnapshot]) {
        self.track_windows(now, paths);
    }

    fn decide(
        &mut self,
        now: Instant,
        path: usize,
        paths: &[PathSnapshot],
        queue: &QueueView,
        budget: usize,
    ) -> Decision {
        self.track_windows(now, paths);
        let allow_backup = backups_allowed(paths);
        let me = &paths[path];
        if queue.bytes == 0 {
            self.end_burst();
            return self.reinject_tail(path, paths, queue, budget, allow_backup);
        }
        let (f, faster) = if self.cfg.frame_time {
            self.by_arrival(path, paths, queue, allow_backup)
        } else {
            (
                fastest(paths, allow_backup),
                faster_available(paths, path, allow_backup),
            )
        };
        if !me.usable(allow_backup) || faster {
            return Decision::Wait { until: None };
        }
        let f = match f {
            Some(f) if f != path && self.arrival(f, &paths[f], queue) < self.arrival(path, me, queue) => f,
            // This path is x_f, or nothing to compare with: MinRTT.
            _ => return self.send(budget),
        };
        // A bulk transfer the bound on bytes ahead of the paths holds back
        // (`QueueView::sustained`): k is a window onto a backlog the application has not
        // handed over yet, not what is left, and x_s waiting for x_f to drain it would
        // wait for as long as the transfer lasts. The backlog is not ending: x_s sends,
        // as ECF's rule does for a large k. Nor when the application holds more than the
        // second of the paths' rate already queued (`QueueView::withheld`): k is at least
        // that second, and the rest is not in view yet.
        if queue.sustained || queue.withheld {
            self.waiting = false;
            self.wait_since = None;
            return send_within_window(now, me, End::Head, budget);
        }
        self.slow_or_wait(now, path, f, paths, queue, budget)
    }
}

impl Ecf {
    /// Asked only with `reinject`: the queue is empty and frames are unacknowledged. The
    /// fastest path re-sends the oldest frames other paths hold (each once); the others
    /// wait for new bytes.
    fn reinject_tail(
        &self,
        path: usize,
        paths: &[PathSnapshot],
        queue: &QueueView,
        budget: usize,
        allow_backup: bool,
    ) -> Decision {
        let (f, _) = self.by_arrival(path, paths, queue, allow_backup);
        if paths[path].usable(allow_backup) && f == Some(path) {
            return Decision::Reinject {
                end: End::Head,
                max_bytes: budget,
                max_age: None,
                sooner_only: self.cfg.reinject_sooner,
            };
        }
        Decision::Wait { until: None }
    }

    /// ECF proper, x_s = `path` against x_f = `f` (strictly faster and not available,
    /// else `faster_available`): x_s sends when waiting for x_f is slower (test 1) or x_s
    /// would finish k sooner (test 2); otherwise it waits for x_f, at most
    /// `(1 + β)·(RTT_s + δ)` from the wait's start.
    fn slow_or_wait(
        &mut self,
        now: Instant,
        path: usize,
        f: usize,
        paths: &[PathSnapshot],
        queue: &QueueView,
        budget: usize,
    ) -> Decision {
        let (fp, me) = (&paths[f], &paths[path]);
        let race = self.race(path, f, paths, queue);
        // What x_s is handed: the room in the window it sends with now. Not the window
        // remembered across an idle reset: that one is for comparing completion times;
        // bytes beyond the kernel's real window wait a whole RTT_s in the socket.
        let slow_chunk = cwnd_room(me, me.send_cwnd()).min(budget);
        // Near the burst's end x_s takes bytes only while its window has room: a frame
        // behind a full window leaves a round later, after everything x_f carries.
        let near_end = within_one_round(queue.bytes, fp, me);
        let slow = |ecf: &mut Ecf| {
            ecf.wait_since = None;
            if near_end {
                send_within_window(now, me, End::Head, budget)
            } else {
                Decision::head(slow_chunk)
            }
        };
        let beta = if self.waiting {
            self.cfg.beta_permille as u128
        } else {
            0
        };
        if race.wait_is_slower(beta) {
            self.waiting = false;
            return slow(self);
        }
        if race.slow_is_faster(self.cfg.fast_completion) {
            // Using x_s is faster after all; `waiting` stays as it is (Algorithm 2).
            return slow(self);
        }
        self.waiting = true;
        let since = *self.wait_since.get_or_insert(now);
        let cap = (Duration::from_nanos(race.rtt_s as u64) + race.delta) * (1000 + self.cfg.beta_permille) / 1000;
        if now.saturating_duration_since(since) >= cap {
            // x_f has not come back in the time x_s would have needed: stop trusting it.
            return slow(self);
        }
        let until = (now + self.rtt(fp).max(Duration::from_millis(1))).min(since + cap);
        Decision::Wait { until: Some(until) }
    }

    /// The terms of ECF's two tests for x_s = `path` and x_f = `f`, in integer bytes ×
    /// nanoseconds like upstream, so boundaries are exact.
    fn race(&self, path: usize, f: usize, paths: &[PathSnapshot], queue: &QueueView) -> Race {
        let (fp, me) = (&paths[f], &paths[path]);
        let cw_f = self.fast_window(f, fp);
        let cw_s = self.window_bytes(path, me);
        let k = queue.bytes as u128;
        let (mut k_f, mut k_s) = (k + fp.notsent as u128, k + me.notsent as u128);
        if self.cfg.floor_backlog {
            k_f = k_f.max(cw_f);
            k_s = k_s.max(cw_s);
        }
        let delta = self.delta(fp, me);
        Race {
            cw_f,
            cw_s,
            k_f,
            k_s,
            // Windows a write gets now: below the tests' windows after an idle restart,
            // when the path slow-starts back (see `drain_time`).
            w0_f: self.start_window(fp, cw_f),
            w0_s: self.start_window(me, cw_s),
            rtt_f: self.rtt(fp).as_nanos(),
            // x_s is handed whole frames: what a frame holds beyond one segment crosses
            // x_s at its rate, on top of its RTT.
            rtt_s: self.arrival(path, me, queue),
            d: delta.as_nanos(),
            delta,
        }
    }
}

/// The terms of ECF's tests: windows (cw), backlogs (k, each path's own unsent bytes
/// added), start windows (w0), RTTs in nanoseconds, and δ.
struct Race {
    cw_f: u128,
    cw_s: u128,
    k_f: u128,
    k_s: u128,
    w0_f: u128,
    w0_s: u128,
    rtt_f: u128,
    rtt_s: u128,
    d: u128,
    delta: Duration,
}

impl Race {
    /// Tests (1)/(3): waiting for x_f and draining k on it takes at least one round of
    /// x_s, `(1 + waiting·β)·(RTT_s + δ)`; multiplied through by 1000·CWND_f in steady
    /// state (exact, like upstream), in slow-start rounds after an idle restart.
    fn wait_is_slower(&self, beta: u128) -> bool {
        let (cw_f, k_f, w0_f, rtt_f) = (self.cw_f, self.k_f, self.w0_f, self.rtt_f);
        if w0_f >= cw_f {
            1000 * (cw_f + k_f) * rtt_f >= (1000 + beta) * cw_f * (self.rtt_s + self.d)
        } else {
            1000 * (rtt_f + drain_time(k_f, w0_f, cw_f, rtt_f)) >= (1000 + beta) * (self.rtt_s + self.d)
        }
    }

    /// Test (2): x_s's time for k against x_f's, at least 2·RTT_f ("x_f takes at least
    /// 2RTT_f"); with `fast_completion` the estimate of (1)/(3) when that is longer.
    fn slow_is_faster(&self, fast_completion: bool) -> bool {
        let rtt_f = self.rtt_f;
        let fast_time = if fast_completion {
            (rtt_f + drain_time(self.k_f, self.w0_f, self.cw_f, rtt_f)).max(2 * rtt_f)
        } else {
            2 * rtt_f
        };
        if self.w0_s >= self.cw_s {
            self.k_s * self.rtt_s < self.cw_s * (fast_time + self.d)
        } else {
            drain_time(self.k_s, self.w0_s, self.cw_s, self.rtt_s) < fast_time + self.d
        }
    }
}

/// What `rate` (bytes per second) carries in `rtt`, at least one segment of `mss` bytes: a
/// window read as a rate.
fn window_at(rate: u64, rtt: Duration, mss: u128) -> u128 {
    (rate as u128 * rtt.as_nanos() / 1_000_000_000).max(mss)
}

/// Nanoseconds a path needs to put `k` bytes on the wire, in rounds of `rtt` (what
/// ECF's `k/CWND·RTT` is in steady state), when it starts from a window of `w0` bytes that
/// doubles every round (slow start) until it reaches `w`. The last round counts the
/// fraction of its window that `k` fills, as the steady-state formula does.
fn drain_time(k: u128, w0: u128, w: u128, rtt: u128) -> u128 {
    let w = w.max(1);
    let mut window = w0.clamp(1, w);
    let mut left = k;
    let mut time = 0;
    while window < w {
        if left <= window {
            return time + left * rtt / window;
        }
        left -= window;
        time += rtt;
        window = (2 * window).min(w);
    }
    time + left * rtt / w
}

#[cfg(test)]
mod tests;
