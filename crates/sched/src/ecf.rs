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
    PathSnapshot, QueueView, Scheduler,
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
        "ecf"
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
            // Asked only with `reinject`: the queue is empty and frames are unacknowledged.
            // The fastest path re-sends the oldest frames other paths hold (each once);
            // the others wait for new bytes.
            let (f, _) = self.by_arrival(path, paths, queue, allow_backup);
            if me.usable(allow_backup) && f == Some(path) {
                return Decision::Reinject {
                    end: End::Head,
                    max_bytes: budget,
                    max_age: None,
                    sooner_only: self.cfg.reinject_sooner,
                };
            }
            return Decision::Wait { until: None };
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
        let fp = &paths[f];
        // x_f is strictly faster and not available (else `faster_available`): ECF proper,
        // in integer bytes × nanoseconds like upstream, so boundaries are exact.
        let cw_f = self.fast_window(f, fp);
        let cw_s = self.window_bytes(path, me);
        let k = queue.bytes as u128;
        let (mut k_f, mut k_s) = (k + fp.notsent as u128, k + me.notsent as u128);
        if self.cfg.floor_backlog {
            k_f = k_f.max(cw_f);
            k_s = k_s.max(cw_s);
        }
        let rtt_f = self.rtt(fp).as_nanos();
        // x_s is handed whole frames: what a frame holds beyond one segment crosses x_s at
        // its rate, on top of its RTT.
        let rtt_s = self.arrival(path, me, queue);
        let delta = self.delta(fp, me);
        let d = delta.as_nanos();
        let beta = if self.waiting {
            self.cfg.beta_permille as u128
        } else {
            0
        };
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

        // Windows a write gets now: below the tests' windows after an idle restart, when
        // the path slow-starts back (see `drain_time`).
        let w0_f = self.start_window(fp, cw_f);
        let w0_s = self.start_window(me, cw_s);

        // (1)/(3): multiplied through by 1000·CWND_f in steady state (exact, like upstream).
        let wait_is_slower = if w0_f >= cw_f {
            1000 * (cw_f + k_f) * rtt_f >= (1000 + beta) * cw_f * (rtt_s + d)
        } else {
            1000 * (rtt_f + drain_time(k_f, w0_f, cw_f, rtt_f)) >= (1000 + beta) * (rtt_s + d)
        };
        if wait_is_slower {
            self.waiting = false;
            return slow(self);
        }
        // (2): x_s's time for k against x_f's, at least 2·RTT_f ("x_f takes at least
        // 2RTT_f"); with `fast_completion` the estimate of (1)/(3) when that is longer.
        let fast_time = if self.cfg.fast_completion {
            (rtt_f + drain_time(k_f, w0_f, cw_f, rtt_f)).max(2 * rtt_f)
        } else {
            2 * rtt_f
        };
        let slow_is_faster = if w0_s >= cw_s {
            k_s * rtt_s < cw_s * (fast_time + d)
        } else {
            drain_time(k_s, w0_s, cw_s, rtt_s) < fast_time + d
        };
        if slow_is_faster {
            // Using x_s is faster after all; `waiting` stays as it is (Algorithm 2).
            return slow(self);
        }
        self.waiting = true;
        let since = *self.wait_since.get_or_insert(now);
        let cap = (Duration::from_nanos(rtt_s as u64) + delta) * (1000 + self.cfg.beta_permille) / 1000;
        if now.saturating_duration_since(since) >= cap {
            // x_f has not come back in the time x_s would have needed: stop trusting it.
            return slow(self);
        }
        let until = (now + self.rtt(fp).max(Duration::from_millis(1))).min(since + cap);
        Decision::Wait { until: Some(until) }
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
mod tests {
    use super::*;
    use crate::test_util::path;

    /// A backlog of segment-sized frames: the thesis's packets, so the tests below pin the
    /// published arithmetic; `whole_frames_on_a_slow_path_take_their_time` uses 16 KB ones.
    fn queue(bytes: u64) -> QueueView {
        QueueView {
            bytes,
            frames: bytes.div_ceil(MSS) as usize,
            ..QueueView::default()
        }
    }

    const MSS: u64 = 1448;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn fixed(ms: u64) -> Ecf {
        Ecf::new(EcfConfig {
            delta: Delta::Fixed(Duration::from_millis(ms)),
            ..EcfConfig::default()
        })
    }

    /// x_f (path 0) has a full window and is not ready; x_s (path 1) asks.
    fn fast_full(rtt_f: u64, rtt_s: u64) -> [PathSnapshot; 2] {
        let mut paths = [path(0, rtt_f), path(1, rtt_s)];
        paths[0].in_flight = paths[0].cwnd;
        paths[0].ready = false;
        paths
    }

    fn is_wait(d: Decision) -> bool {
        matches!(d, Decision::Wait { .. })
    }

    /// A WiFi path of 7.04 Mbit/s and 55 ms under BBR keeps two BDPs in its window
    /// (67 segments ≈ 97 KB); LTE (9.185 Mbit/s, RTT 270 ms) asks with a 256 KB backlog.
    /// Read as a rate, the WiFi window says WiFi drains the backlog in ~200 ms, so published
    /// ECF waits; WiFi really needs ~300 ms, longer than one LTE round. With the window capped
    /// at delivery rate · srtt (48 KB) test (1) fails and LTE sends.
    #[test]
    fn window_capped_by_delivery_rate() {
        let now = Instant::now();
        let mut paths = fast_full(55, 270);
        paths[0].cwnd = 67;
        paths[0].in_flight = 67;
        paths[0].delivery_rate = 880_000;
        paths[0].rttvar = Duration::from_millis(5);
        paths[1].cwnd = 120;
        paths[1].delivery_rate = 1_148_000;
        paths[1].rttvar = Duration::from_millis(10);
        // BBR paces at about its bandwidth estimate: the pacing rate caps it the same.
        paths[0].pacing_rate = 900_000;
        let published = EcfConfig {
            rate_cap: false,
            ..EcfConfig::default()
        };
        assert!(is_wait(Ecf::new(published).decide(
            now,
            1,
            &paths,
            &queue(256 * 1024),
            65536
        )));
        assert!(matches!(
            Ecf::default().decide(now, 1, &paths, &queue(256 * 1024), 65536),
            Decision::Send { .. }
        ));
    }

    /// A CUBIC path in slow start delivers half of what its window sends (the samples
    /// lag a doubling window) but paces at twice window / srtt. A state with LTE at 470 ms:
    /// WiFi (x_f) srtt 99 ms, 46 segments, full, 27 KB unsent, 839 KB/s; LTE srtt 487 ms, 17
    /// segments, 13 in flight, delivering 16 KB/s and pacing at 101 KB/s; 541 KB queued in
    /// 16 KB frames. Capped by the delivery rate LTE's window is 7.8 KB, a frame takes it
    /// 1.4 s and ECF waits; by the pacing rate the window stands and LTE sends.
    #[test]
    fn a_window_in_slow_start_is_not_capped_by_its_lagging_delivery_rate() {
        let now = Instant::now();
        let mut paths = fast_full(99, 487);
        paths[0].cwnd = 46;
        paths[0].in_flight = 46;
        paths[0].notsent = 27_430;
        paths[0].delivery_rate = 839_000;
        paths[0].pacing_rate = 807_000;
        paths[1].cwnd = 17;
        paths[1].in_flight = 13;
        paths[1].delivery_rate = 16_000;
        paths[1].pacing_rate = 101_000;
        let q = QueueView {
            bytes: 541_365,
            frames: 33,
            ..QueueView::default()
        };
        assert!(matches!(
            fixed(10).decide(now, 1, &paths, &q, 65536),
            Decision::Send { .. }
        ));
        paths[1].pacing_rate = 0;
        assert!(is_wait(fixed(10).decide(now, 1, &paths, &q, 65536)));
    }

    /// ECF's video case (the paper's 0.3 / 8.6 Mbit/s pair, shaped like its testbed): LTE
    /// 8.6 Mbit/s (srtt 100 ms, window 110 KB, full) is x_f; WiFi 0.3 Mbit/s (srtt 1 s,
    /// window 26 segments ≈ 37.6 KB/s) asks with a 1 MB segment queued in 16 KB frames. LTE drains it in about
    /// (1 + 1 MB/110 KB)·100 ms ≈ 1.0 s; one WiFi round is 1 s if a frame were a packet, so
    /// the published test sends on WiFi — but a 16 KB frame needs another 0.4 s there.
    #[test]
    fn whole_frames_on_a_slow_path_take_their_time() {
        let now = Instant::now();
        let mut paths = fast_full(100, 1000);
        paths[0].cwnd = 76;
        paths[0].in_flight = 76;
        paths[0].rttvar = Duration::from_millis(5);
        paths[1].cwnd = 26;
        paths[1].rttvar = Duration::from_millis(20);
        let q = crate::test_util::queue(1 << 20);
        assert_eq!(q.frames, 64, "16 KB frames");
        let published = EcfConfig {
            frame_time: false,
            ..EcfConfig::default()
        };
        assert!(matches!(
            Ecf::new(published).decide(now, 1, &paths, &q, 65536),
            Decision::Send { .. }
        ));
        assert!(is_wait(Ecf::default().decide(now, 1, &paths, &q, 65536)));
        // Segment-sized frames change nothing.
        assert!(matches!(
            Ecf::default().decide(now, 1, &paths, &queue(1 << 20), 65536),
            Decision::Send { .. }
        ));
    }

    /// The same pair between video segments: WiFi idle, its srtt back at 20 ms from
    /// keepalives, delivering 37.5 KB/s when loaded; LTE idle at 100 ms and 1.1 MB/s. For
    /// 16 KB frames LTE is x_f: WiFi asking waits while LTE is ready, and LTE sends.
    #[test]
    fn idle_slow_path_with_a_short_srtt_is_not_the_fastest_for_frames() {
        let now = Instant::now();
        let mut paths = [path(0, 100), path(1, 20)];
        paths[0].cwnd = 76;
        paths[0].delivery_rate = 1_100_000;
        paths[1].cwnd = 26;
        paths[1].delivery_rate = 37_500;
        let frames = crate::test_util::queue(1 << 20);
        assert!(is_wait(Ecf::default().decide(now, 1, &paths, &frames, 65536)));
        assert_eq!(
            Ecf::default().decide(now, 0, &paths, &frames, 65536),
            Decision::head(65536)
        );
        // Segment-sized frames, or the published order: WiFi has the smaller srtt.
        assert_eq!(
            Ecf::default().decide(now, 1, &paths, &queue(1 << 20), 65536),
            Decision::head(65536)
        );
        let published = EcfConfig {
            frame_time: false,
            ..EcfConfig::default()
        };
        assert!(is_wait(Ecf::new(published).decide(now, 0, &paths, &frames, 65536)));
    }

    /// With nothing left to send, the fastest path re-sends what the others hold; the
    /// slower path waits; the published form never re-sends.
    #[test]
    fn fastest_path_reinjects_once_the_queue_is_empty() {
        let now = Instant::now();
        let paths = [path(0, 100), path(1, 1000)];
        let empty = QueueView::default();
        let mut ecf = Ecf::default();
        assert!(ecf.reinjects());
        assert_eq!(
            ecf.decide(now, 0, &paths, &empty, 65536),
            Decision::Reinject {
                end: End::Head,
                max_bytes: 65536,
                max_age: None,
                sooner_only: true,
            }
        );
        assert!(is_wait(ecf.decide(now, 1, &paths, &empty, 65536)));
        let published = Ecf::new(EcfConfig {
            reinject: false,
            ..EcfConfig::default()
        });
        assert!(!published.reinjects());
    }

    #[test]
    fn thesis_example_waits_for_the_fast_path() {
        // The thesis's example: 10 ms and 100 ms, both CWND 10, one packet left. Waiting takes
        // ~20 ms, the slow path 100 ms. Floored test (2): 100 ≥ 20 + δ, so wait iff δ ≤ 80 ms.
        let now = Instant::now();
        let paths = fast_full(10, 100);
        // Default δ = max(rttvar) = 25 ms (test paths have rttvar = srtt/4).
        let mut s = Ecf::default();
        assert_eq!(
            s.decide(now, 1, &paths, &queue(MSS), 65536),
            Decision::Wait {
                until: Some(now + Duration::from_millis(10))
            }
        );
        assert!(s.waiting);
        assert!(is_wait(fixed(80).decide(now, 1, &paths, &queue(MSS), 65536)));
        // One past the boundary: the slow path sends its window space.
        assert_eq!(
            fixed(81).decide(now, 1, &paths, &queue(MSS), 65536),
            Decision::in_window(End::Head, 10 * MSS as usize)
        );
        // Kernel-like δ is ≥ 100 ms (rttvar_us never below rto_min): does not wait.
        let mut k = Ecf::new(EcfConfig {
            delta: Delta::KernelLike,
            ..EcfConfig::default()
        });
        assert_eq!(k.delta(&paths[0], &paths[1]), Duration::from_millis(100));
        assert!(!is_wait(k.decide(now, 1, &paths, &queue(MSS), 65536)));
    }

    #[test]
    fn literal_formula_sends_the_eleventh_packet() {
        // The thesis's "11th packet": without the floor, (1/10)·100 = 10 ≥ 20 + δ fails.
        let now = Instant::now();
        let mut s = Ecf::new(EcfConfig {
            floor_backlog: false,
            delta: Delta::Fixed(Duration::ZERO),
            ..EcfConfig::default()
        });
        let d = s.decide(now, 1, &fast_full(10, 100), &queue(MSS), 65536);
        assert_eq!(d, Decision::in_window(End::Head, 10 * MSS as usize));
    }

    #[test]
    fn large_backlog_uses_the_slow_path_too() {
        // δ = 0: (1 + k/cw)·10 < 100 ⇔ k < 9 windows.
        let now = Instant::now();
        let paths = fast_full(10, 100);
        let cw = 10 * MSS;
        let mut s = fixed(0);
        assert!(is_wait(s.decide(now, 1, &paths, &queue(8 * cw), 1 << 20)));
        let mut s = fixed(0);
        assert_eq!(
            s.decide(now, 1, &paths, &queue(9 * cw), 1 << 20),
            Decision::in_window(End::Head, cw as usize)
        );
        assert!(!s.waiting);
        // The slow path's chunk is its free window space, and never more than the budget.
        let mut p = paths.clone();
        p[1].in_flight = 4;
        assert_eq!(
            fixed(0).decide(now, 1, &p, &queue(50 * cw), 1 << 20),
            Decision::head(6 * MSS as usize)
        );
        assert_eq!(fixed(0).decide(now, 1, &p, &queue(50 * cw), 1000), Decision::head(1000));
    }

    #[test]
    fn hysteresis_keeps_waiting_until_the_wider_bound_fails() {
        // δ = 0, β = 0.25: (1) holds for k < 9 windows, (3) for k < 11.5 windows.
        let now = Instant::now();
        let paths = fast_full(10, 100);
        let cw = 10 * MSS;
        let mut s = fixed(0);
        assert!(!is_wait(s.decide(now, 1, &paths, &queue(10 * cw), 1 << 20)));
        assert!(is_wait(s.decide(now, 1, &paths, &queue(5 * cw), 1 << 20)));
        assert!(s.waiting);
        assert!(is_wait(s.decide(now, 1, &paths, &queue(10 * cw), 1 << 20)));
        assert!(is_wait(s.decide(now, 1, &paths, &queue(11 * cw), 1 << 20)));
        assert!(!is_wait(s.decide(now, 1, &paths, &queue(12 * cw), 1 << 20)));
        assert!(!s.waiting);
        assert!(!is_wait(s.decide(now, 1, &paths, &queue(10 * cw), 1 << 20)));
    }

    #[test]
    fn second_test_failing_keeps_the_waiting_bit() {
        // RTT 40 / 75 ms, δ = 10 ms. k = 1 window: (1) 80 < 85 holds, (2) 75 ≥ 90 fails.
        let now = Instant::now();
        let paths = fast_full(40, 75);
        let cw = 10 * MSS;
        let mut s = fixed(10);
        s.waiting = true;
        assert!(!is_wait(s.decide(now, 1, &paths, &queue(cw), 1 << 20)));
        assert!(s.waiting, "inner else leaves waiting alone");
        // k = 1.5 windows: (2) 112.5 ≥ 90 holds; (1) 100 < 85 fails without hysteresis but
        // (3) 100 < 106.25 holds with it.
        assert!(is_wait(s.decide(now, 1, &paths, &queue(15 * MSS), 1 << 20)));
        assert!(!is_wait(fixed(10).decide(now, 1, &paths, &queue(15 * MSS), 1 << 20)));
    }

    #[test]
    fn fast_path_with_room_or_asking_behaves_like_minrtt() {
        let now = Instant::now();
        let paths = [path(0, 10), path(1, 100)];
        let mut s = Ecf::default();
        assert_eq!(s.decide(now, 0, &paths, &queue(MSS), 4096), Decision::head(4096));
        assert_eq!(
            s.decide(now, 1, &paths, &queue(MSS), 4096),
            Decision::Wait { until: None }
        );
        // x_f full but still asked (ready): it takes the whole budget.
        let mut p = fast_full(10, 100);
        p[0].ready = true;
        assert_eq!(s.decide(now, 0, &p, &queue(MSS), 4096), Decision::head(4096));
        // Single path.
        assert_eq!(
            s.decide(now, 0, &[path(0, 100)], &queue(MSS), 4096),
            Decision::head(4096)
        );
    }

    #[test]
    fn unsent_bytes_on_the_fast_path_count_against_it() {
        // δ = 0: 8 windows of backlog wait; the same plus 2 windows unsent in x_f's socket
        // make (1) fail: (1 + 10)·10 ≥ 100.
        let now = Instant::now();
        let mut paths = fast_full(10, 100);
        let cw = 10 * MSS;
        assert!(is_wait(fixed(0).decide(now, 1, &paths, &queue(8 * cw), 1 << 20)));
        paths[0].notsent = 2 * cw as u32;
        assert!(!is_wait(fixed(0).decide(now, 1, &paths, &queue(8 * cw), 1 << 20)));
    }

    #[test]
    fn three_paths_compare_fastest_with_the_minrtt_choice() {
        // Proposition 1: x_f = 10 ms (full); 50 ms is MinRTT's pick; 100 ms waits for it.
        let now = Instant::now();
        let mut paths = [path(0, 10), path(1, 50), path(2, 100)];
        paths[0].in_flight = 10;
        paths[0].ready = false;
        let mut s = fixed(0);
        assert_eq!(
            s.decide(now, 2, &paths, &queue(MSS), 4096),
            Decision::Wait { until: None }
        );
        // 50 ms vs 10 ms, one packet: (1) 20 < 50, (2) 50 ≥ 20: wait for x_f.
        assert!(is_wait(s.decide(now, 1, &paths, &queue(MSS), 4096)));
        // With the 50 ms path full too, the 100 ms path is compared with x_f.
        paths[1].in_flight = 10;
        assert!(is_wait(fixed(0).decide(now, 2, &paths, &queue(MSS), 4096)));
        // A dead x_f is ignored: the 50 ms path becomes x_f; the 100 ms path compares with it:
        // (1) 2·50 = 100 < 100 fails, so it sends.
        paths[0].alive = false;
        assert!(!is_wait(fixed(0).decide(now, 2, &paths, &queue(MSS), 4096)));
    }

    #[test]
    fn backups_and_dead_paths() {
        let now = Instant::now();
        let mut paths = fast_full(10, 100);
        // A backup x_f does not count while a regular path is alive.
        paths[0].backup = true;
        assert_eq!(fixed(0).decide(now, 1, &paths, &queue(MSS), 4096), Decision::head(4096));
        assert_eq!(
            fixed(0).decide(now, 0, &paths, &queue(MSS), 4096),
            Decision::Wait { until: None }
        );
        // Never send on a dead path, even the fastest.
        let mut paths = [path(0, 10), path(1, 100)];
        paths[0].alive = false;
        assert_eq!(
            Ecf::default().decide(now, 0, &paths, &queue(MSS), 4096),
            Decision::Wait { until: None }
        );
        // Only backups alive: they are used.
        let mut paths = [path(0, 10), path(1, 100)];
        paths[0].alive = false;
        paths[1].backup = true;
        assert_eq!(
            Ecf::default().decide(now, 1, &paths, &queue(MSS), 4096),
            Decision::head(4096)
        );
    }

    #[test]
    fn wait_is_capped_when_the_fast_path_stalls() {
        // δ = 0, β = 0.25: cap = 1.25 · 100 ms from the start of the wait.
        let t0 = Instant::now();
        let paths = fast_full(10, 100);
        let mut s = fixed(0);
        assert!(is_wait(s.decide(t0, 1, &paths, &queue(MSS), 4096)));
        let t1 = t0 + Duration::from_millis(120);
        assert_eq!(
            s.decide(t1, 1, &paths, &queue(MSS), 4096),
            Decision::Wait {
                until: Some(t0 + Duration::from_millis(125))
            }
        );
        let t2 = t0 + Duration::from_millis(125);
        assert_eq!(
            s.decide(t2, 1, &paths, &queue(MSS), 4096),
            Decision::in_window(End::Head, 4096.min(10 * MSS as usize))
        );
        // A send (here the fast path's) ends the wait; the next one starts afresh.
        assert!(is_wait(s.decide(t2, 1, &paths, &queue(MSS), 4096)));
        let mut back = paths.clone();
        back[0].ready = true;
        back[0].in_flight = 0;
        assert!(!is_wait(s.decide(t2, 0, &back, &queue(MSS), 4096)));
        assert!(s.wait_since.is_none());
    }

    /// After an idle spell the kernel restarts x_s's window at its next write; x_s is handed
    /// what that window sends at once, not the old window's worth (the rest would wait a
    /// whole RTT_s in its socket).
    #[test]
    fn an_idle_slow_path_is_handed_what_its_restarted_window_sends() {
        let now = Instant::now();
        let mut paths = fast_full(10, 100);
        paths[1].cwnd = 57;
        paths[1].restart_cwnd = Some(28);
        // A long backlog: x_f would need many rounds, so x_s sends (test 1).
        let k = queue(2000 * MSS);
        assert_eq!(
            fixed(0).decide(now, 1, &paths, &k, 1 << 20),
            Decision::head(28 * MSS as usize)
        );
        paths[1].restart_cwnd = None;
        assert_eq!(
            fixed(0).decide(now, 1, &paths, &k, 1 << 20),
            Decision::head(57 * MSS as usize)
        );
    }

    #[test]
    fn remembers_the_window_across_an_idle_reset() {
        // δ = 0, 10 ms / 100 ms, backlog 200 segments. With x_f's window 10: (1) 21·10 ≥ 100,
        // send on x_s. With its pre-idle window 40: (1) 6·10 < 100 and (2) 20·100 ≥ 20: wait.
        let t0 = Instant::now();
        let k = queue(200 * MSS);
        let mut idle = [path(0, 10), path(1, 100)];
        idle[0].cwnd = 40;
        let mut busy = fast_full(10, 100); // cwnd 10 after the kernel's restart
        busy[0].in_flight = 10;

        // Idle for 1 s (> RTO ≈ 210 ms), then seen busy with the reset window: remembered.
        let mut s = fixed(0);
        s.decide(t0, 0, &idle, &k, 4096);
        s.decide(t0 + Duration::from_millis(500), 0, &idle, &k, 4096);
        let t1 = t0 + Duration::from_secs(1);
        assert!(is_wait(s.decide(t1, 1, &busy, &k, 4096)));
        assert_eq!(s.mem[0].rec_cwnd, 40);
        // Without the idle history the small window decides.
        assert!(!is_wait(fixed(0).decide(t1, 1, &busy, &k, 4096)));
        // Idle shorter than the RTO: no reset assumed.
        let mut short = fixed(0);
        short.decide(t0, 0, &idle, &k, 4096);
        assert!(!is_wait(short.decide(
            t0 + Duration::from_millis(100),
            1,
            &busy,
            &k,
            4096
        )));
        // The saved window is dropped once the kernel's grows back to it.
        let mut grown = busy.clone();
        grown[0].cwnd = 40;
        grown[0].in_flight = 40;
        s.decide(t1, 1, &grown, &k, 4096);
        assert_eq!(s.mem[0].rec_cwnd, 0);
        assert!(!is_wait(s.decide(t1, 1, &busy, &k, 4096)));
    }

    /// After an idle restart the kernel's first rate samples are the restart's own (a
    /// window of 10 per RTT); the remembered window is capped by the rate before the idle
    /// spell instead, or the rate cap would undo the idle protection.
    #[test]
    fn remembered_window_is_capped_by_the_rate_before_the_idle_spell() {
        let t0 = Instant::now();
        let k = queue(200 * MSS);
        let mut idle = [path(0, 10), path(1, 100)];
        idle[0].cwnd = 40;
        idle[0].delivery_rate = 40 * MSS * 100; // 40 segments per 10 ms
        let mut busy = fast_full(10, 100);
        busy[0].in_flight = 10;
        busy[0].delivery_rate = 10 * MSS * 100; // the restart's 10 per 10 ms
        let mut s = fixed(0);
        s.decide(t0, 0, &idle, &k, 4096);
        let t1 = t0 + Duration::from_secs(1);
        assert!(is_wait(s.decide(t1, 1, &busy, &k, 4096)));
        assert_eq!(s.mem[0].rec_rate, 40 * MSS * 100);
        assert_eq!(s.window_bytes(0, &busy[0]), 40 * MSS as u128);
        // A path that delivered slowly before the idle spell keeps a small window.
        let mut slow = idle.clone();
        slow[0].delivery_rate = 10 * MSS * 100;
        let mut t = fixed(0);
        t.decide(t0, 0, &slow, &k, 4096);
        assert!(!is_wait(t.decide(t1, 1, &busy, &k, 4096)));
    }

    #[test]
    fn path_without_rtt_sample_is_not_waited_for() {
        let now = Instant::now();
        let mut paths = fast_full(10, 100);
        paths[0].srtt = Duration::ZERO;
        assert_eq!(fixed(0).decide(now, 1, &paths, &queue(MSS), 4096), Decision::head(4096));
    }

    /// Near a burst's end x_s is handed bytes only while its window has room. 10 ms / 100 ms,
    /// windows of 10, δ = 0, 100 segments queued: test (1) fails ((1 + 10)·10 ≥ 100), so x_s
    /// sends; the backlog is within one round of the two paths (1,448,000 + 144,800 B/s over
    /// 110 ms = 175,208 bytes). With 4 of its 10 segments in flight x_s takes 6; with a
    /// full window it asks again 100/16 = 6.25 ms later. Far from the end (2000 segments)
    /// it keeps its socket fed as before (one segment beyond a full window).
    #[test]
    fn near_a_bursts_end_the_slow_path_waits_for_window_room() {
        let now = Instant::now();
        let mut paths = fast_full(10, 100);
        let near = queue(100 * MSS);
        paths[1].in_flight = 4;
        assert_eq!(
            fixed(0).decide(now, 1, &paths, &near, 1 << 20),
            Decision::in_window(End::Head, 6 * MSS as usize)
        );
        paths[1].in_flight = 10;
        assert_eq!(
            fixed(0).decide(now, 1, &paths, &near, 1 << 20),
            Decision::Wait {
                until: Some(now + Duration::from_micros(6250))
            }
        );
        let far = queue(2000 * MSS);
        assert_eq!(
            fixed(0).decide(now, 1, &paths, &far, 1 << 20),
            Decision::head(MSS as usize)
        );
    }

    /// The window memory follows every statistics update ([`Scheduler::observe`]), not
    /// only the decisions: a path idle while nothing was queued (so nobody asked) is still
    /// known to have had 40 segments before the kernel restarted it at 10.
    #[test]
    fn observes_idle_windows_without_being_asked() {
        let t0 = Instant::now();
        let k = queue(200 * MSS);
        let mut idle = [path(0, 10), path(1, 100)];
        idle[0].cwnd = 40;
        let mut busy = fast_full(10, 100);
        busy[0].in_flight = 10;
        let mut s = fixed(0);
        s.observe(t0, &idle);
        s.observe(t0 + Duration::from_millis(500), &idle);
        let t1 = t0 + Duration::from_secs(1);
        s.observe(t1, &busy);
        assert_eq!(s.mem[0].rec_cwnd, 40);
        assert!(is_wait(s.decide(t1, 1, &busy, &k, 4096)));
    }

    #[test]
    fn drain_time_counts_slow_start_rounds() {
        // Steady state: k / w rounds, the published k/CWND·RTT.
        assert_eq!(drain_time(100, 10, 10, 1000), 10_000);
        assert_eq!(drain_time(100, 40, 10, 1000), 10_000);
        // From 10 doubling to 40: rounds of 10 and 20, then 170 at 40 a round.
        assert_eq!(drain_time(200, 10, 40, 1000), 1000 + 1000 + 170 * 1000 / 40);
        // Done within slow start: 10, then 15 of the second round's 20.
        assert_eq!(drain_time(25, 10, 40, 1000), 1000 + 15 * 1000 / 20);
        assert_eq!(drain_time(0, 10, 40, 1000), 0);
    }

    /// A traced state at the start of a 256 KB chunk on seed-default (BBR, warm), LTE
    /// asking: WiFi (x_f) srtt 63 ms (base 50), 94 segments, 2 in flight and 30 KB unsent,
    /// delivering 564 KB/s and pacing at 2.5 MB/s (BBR's start-up gain); LTE idle after the
    /// warm-up, whose start-up queue left its srtt at 195 ms (base 70), one control segment
    /// in flight, 1.1 MB/s, restarted to 10 segments; 229 KB queued in 16 KB frames. Read at
    /// 195 ms LTE is slower than WiFi draining a third of the chunk and ECF waits. At its
    /// real RTT LTE sends.
    #[test]
    fn an_idle_path_is_read_at_its_base_rtt_not_the_queue_of_its_last_burst() {
        let now = Instant::now();
        let mut paths = [
            PathSnapshot {
                min_rtt: ms(50),
                rttvar: ms(8),
                cwnd: 94,
                in_flight: 2,
                notsent: 29_966,
                ready: false,
                delivery_rate: 564_000,
                pacing_rate: 2_495_000,
                ..path(0, 63)
            },
            PathSnapshot {
                min_rtt: ms(70),
                rttvar: ms(20),
                cwnd: 164,
                restart_cwnd: Some(10),
                in_flight: 1,
                delivery_rate: 1_112_000,
                pacing_rate: 3_178_000,
                ..path(1, 195)
            },
        ];
        let k = QueueView {
            bytes: 229_782,
            frames: 14,
            ..QueueView::default()
        };
        let stale = EcfConfig {
            idle_rtt: false,
            ..EcfConfig::default()
        };
        assert!(is_wait(Ecf::new(stale).decide(now, 1, &paths, &k, 65536)));
        assert!(matches!(
            Ecf::default().decide(now, 1, &paths, &k, 65536),
            Decision::Send { .. }
        ));
        // Once LTE carries a window its srtt is what counts again.
        paths[1].in_flight = 160;
        assert_eq!(paths[1].rtt_now(), paths[1].srtt);
    }

    /// Later in such a chunk (BBR, 70 ms, warm), LTE asking with 131 KB queued: WiFi (x_f)
    /// srtt 61 ms, 95 segments, 20 in flight and 37 KB unsent, delivering 543 KB/s and
    /// pacing at 2.46 MB/s, 2.89 × its bandwidth estimate of 852 KB/s (BBR's start-up gain);
    /// LTE 43 segments in flight of 164. Capped at the pacing rate WiFi's window reads as
    /// 2.2 MB/s, three times what the 7 Mbit/s link carries, and ECF waits. At BBR's
    /// bandwidth estimate LTE sends.
    #[test]
    fn a_bbr_window_is_read_at_its_bandwidth_estimate_not_its_pacing_rate() {
        let now = Instant::now();
        let mut paths = [
            PathSnapshot {
                min_rtt: ms(50),
                rttvar: ms(8),
                cwnd: 95,
                in_flight: 20,
                notsent: 36_764,
                ready: false,
                delivery_rate: 543_000,
                pacing_rate: 2_463_000,
                ..path(0, 61)
            },
            PathSnapshot {
                min_rtt: ms(70),
                rttvar: ms(20),
                cwnd: 164,
                in_flight: 43,
                notsent: 4_921,
                delivery_rate: 1_112_000,
                pacing_rate: 3_203_000,
                ..path(1, 191)
            },
        ];
        let k = QueueView {
            bytes: 131_304,
            frames: 8,
            ..QueueView::default()
        };
        // Test (2) as published, to see the rate alone.
        let cfg = EcfConfig {
            fast_completion: false,
            ..EcfConfig::default()
        };
        assert!(is_wait(Ecf::new(cfg).decide(now, 1, &paths, &k, 65536)));
        paths[0].bandwidth = 852_000;
        paths[1].bandwidth = 1_108_000;
        assert!(matches!(
            Ecf::new(cfg).decide(now, 1, &paths, &k, 65536),
            Decision::Send { .. }
        ));
        assert!(matches!(
            Ecf::default().decide(now, 1, &paths, &k, 65536),
            Decision::Send { .. }
        ));
    }

    /// Near that chunk's end, LTE asking with 66 KB queued: WiFi (x_f) srtt 73 ms, a window
    /// of 63 KB at its 862 KB/s, 44 segments in flight and 35 KB unsent, so k and its own
    /// queue take it (1 + 101/63) · 73 = 189 ms; LTE, 66 segments in flight at 1.12 MB/s,
    /// would have the 66 KB there in 181 ms. Test (2) with x_f's lower bound (2 · 73 + 15 =
    /// 161 ms) judges LTE slower and waits; with x_f's completion estimate LTE sends.
    #[test]
    fn the_second_test_counts_what_the_fast_path_has_queued() {
        let now = Instant::now();
        let mut paths = [
            PathSnapshot {
                min_rtt: ms(50),
                rttvar: ms(1),
                cwnd: 94,
                in_flight: 44,
                notsent: 34_887,
                ready: false,
                delivery_rate: 667_000,
                pacing_rate: 2_464_000,
                bandwidth: 862_000,
                ..path(0, 73)
            },
            PathSnapshot {
                min_rtt: ms(70),
                rttvar: ms(15),
                cwnd: 164,
                in_flight: 66,
                notsent: 4_908,
                delivery_rate: 1_113_000,
                pacing_rate: 3_203_000,
                bandwidth: 1_120_000,
                ..path(1, 196)
            },
        ];
        let k = QueueView {
            bytes: 65_652,
            frames: 4,
            ..QueueView::default()
        };
        let published = EcfConfig {
            fast_completion: false,
            ..EcfConfig::default()
        };
        assert!(is_wait(Ecf::new(published).decide(now, 1, &paths, &k, 65536)));
        assert!(matches!(
            Ecf::default().decide(now, 1, &paths, &k, 65536),
            Decision::Send { .. }
        ));
        // With WiFi's own queue gone the lower bound stands, and ECF waits.
        paths[0].in_flight = 0;
        paths[0].notsent = 0;
        paths[0].ready = false;
        assert!(is_wait(Ecf::default().decide(now, 1, &paths, &k, 65536)));
    }

    /// A traced state at the start of a 256 KB chunk on seed-default-270 (CUBIC, warm):
    /// WiFi (x_f) idle for 1.1 s before, 53 segments at 857 KB/s, restarted by the kernel to
    /// 10 segments, 29 KB unsent; LTE (x_s) srtt 279 ms, 51 segments, idle and ready; 229 KB
    /// queued in 16 KB frames; `waiting` still set by the end of the warm-up burst. Published
    /// ECF reads WiFi as draining 258 KB at 71 KB per 83 ms round (384 ms) against β-widened
    /// 1.25 · 345 ms and waits, leaving the whole chunk to WiFi. WiFi really restarts at
    /// 14 KB a round and needs 515 ms; and the hysteresis belongs to the burst that set it.
    #[test]
    fn a_restarted_fast_path_slow_starts_and_the_hysteresis_ends_with_the_burst() {
        let t0 = Instant::now();
        let mut idle = [path(0, 83), path(1, 279)];
        for p in idle.iter_mut() {
            p.rttvar = Duration::from_millis(10);
        }
        idle[0].cwnd = 53;
        idle[0].delivery_rate = 857_000;
        idle[0].pacing_rate = 857_000;
        idle[1].cwnd = 51;
        idle[1].delivery_rate = 257_000;
        idle[1].pacing_rate = 300_000;
        let mut busy = idle.clone();
        busy[0].cwnd = 10;
        busy[0].in_flight = 2;
        busy[0].notsent = 29_000;
        busy[0].ready = false;
        busy[0].delivery_rate = 802_000;
        let k = QueueView {
            bytes: 229_000,
            frames: 14,
            ..QueueView::default()
        };
        let t1 = t0 + Duration::from_millis(1100);
        let run = |cfg: EcfConfig, empty_queue_seen: bool| {
            let mut s = Ecf::new(cfg);
            s.observe(t0, &idle);
            s.waiting = true; // set by the end of the previous burst
            if empty_queue_seen {
                s.decide(t0, 0, &idle, &QueueView::default(), 65536);
            }
            s.observe(t1, &busy);
            assert_eq!(s.mem[0].rec_cwnd, 53);
            s.decide(t1, 1, &busy, &k, 65536)
        };
        let published = EcfConfig {
            delta: Delta::Fixed(Duration::from_millis(10)),
            slow_start: false,
            burst_hysteresis: false,
            ..EcfConfig::default()
        };
        assert!(is_wait(run(published, true)));
        // Either change alone sends on LTE.
        let slow_start = EcfConfig {
            slow_start: true,
            ..published
        };
        assert!(!is_wait(run(slow_start, true)));
        let burst = EcfConfig {
            burst_hysteresis: true,
            ..published
        };
        assert!(!is_wait(run(burst, true)));
        // The hysteresis is cleared by the burst's end, not by the new burst itself.
        assert!(is_wait(run(burst, false)));
        assert!(!is_wait(run(EcfConfig::default(), false)));
    }

    /// A remembered window with the kernel's own not yet restarted (or a path never idle)
    /// drains at the published rate: the slow-start rounds apply only below the tests'
    /// window.
    #[test]
    fn slow_start_changes_nothing_without_a_smaller_send_window() {
        let now = Instant::now();
        let paths = fast_full(10, 100);
        for k in [11 * MSS, 30 * MSS, 200 * MSS] {
            let published = EcfConfig {
                slow_start: false,
                ..EcfConfig::default()
            };
            let mut a = Ecf::new(published);
            let mut b = Ecf::default();
            assert_eq!(
                a.decide(now, 1, &paths, &queue(k), 65536),
                b.decide(now, 1, &paths, &queue(k), 65536)
            );
        }
    }
}
