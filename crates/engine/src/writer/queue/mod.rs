//! Queue control: the byte limit on what a path holds, steered by the queue its bytes
//! meet (QCUT-D's rule, Pan et al., applied to every path in user space), as a state
//! machine of [`QueuePhase`]s with one function per transition. The story of how each rule was
//! found is in docs/history/writer.md.

use std::time::{Duration, Instant};

use super::PathWriter;
use crate::kernel::{TcpInfo, INIT_CWND};
use crate::owd::BASE_WINDOW;

/// The largest change of the limit per steering step (a factor of 1 ± this): the queue
/// it reads answers a change one round trip later, so a step that corrected the whole
/// error at once would overshoot.
pub(super) const MAX_STEP: f64 = 0.25;

/// How the limit grows per steering step during the ramp while interactive traffic is
/// there to protect.
const RAMP_STEP: f64 = 1.5;

/// Slow start's own growth per round trip: how the limit grows per step during the ramp
/// with nothing to protect (the eager ramp), and how far that ramp leads the window.
const SLOW_START_GAIN: f64 = 2.0;

/// The eager ramp's full-pipe test (BBR's, Cardwell et al.): the path's delivery rate
/// still grows while it rises by this factor per steering step at least.
const RAMP_GROWTH: f64 = 1.25;

/// Steps without that growth after which the eager ramp ends even with no queue shown
/// (BBR leaves its start-up after three such rounds).
const RAMP_FLAT_STEPS: u32 = 3;

/// A standing queue of this many aims shows a full link: the direct cut's threshold, the
/// eager ramp's brake, and a queue the ramp's transient does not explain.
const FULL_QUEUE: u32 = 2;

/// The share of the limit a path must hold for a queue it reads to be its own bytes', and
/// for the eager ramp to keep its lead over the window.
const USED_SHARE: f64 = 0.5;

/// The limit never falls below this many segments: below it every loss is a timeout.
const FLOOR_SEGMENTS: f64 = 4.0;

/// A path holding more than its limit plus this many segments holds bytes the limit did
/// not let through (a response's unheld start, a cut not yet drained).
const BEYOND_SEGMENTS: f64 = 4.0;

/// Under queue control, how much faster than the rate its limit stands for a path may
/// pace its bytes (see [`PathWriter::pacing_cap`]).
const PACE_GAIN: f64 = 1.25;

/// The shortest time between two steering steps.
const STEER_EVERY_MIN: Duration = Duration::from_millis(20);

/// How far the one-way queue reading looks back: the lowest delay of the last two 50 ms
/// windows ([`crate::owd::QueueDelay`]).
const READING_LAG: Duration = Duration::from_millis(100);

/// How many steering steps the peak rate sample is kept for.
const PEAK_STEPS: u32 = 2;

/// The queue reading queue control steers to, as a fraction of its target: a frame
/// meets the queue plus the bursts around it (a segment in transmission and the reading's
/// lag), so steering the reading to the target itself left interactive frames waiting
/// more than the target.
pub const STEER_AIM: f64 = 0.6;

/// With nothing to protect, how long before the one-way reading would lose its base a
/// held path drains its queue to read it again (see [`PathWriter::base_probe`]).
const BASE_PROBE_LEAD: Duration = Duration::from_secs(2);

/// How often a held path drains its queue so the one-way base delay is read again:
/// within each of the queue reading's base windows (with nothing to protect, at most).
const BASE_PROBE_EVERY: Duration = BASE_WINDOW.saturating_sub(BASE_PROBE_LEAD);

/// A path whose congestion window drained it this recently needs no base probe: the
/// window's drain refreshed the base. A little longer than BBR's 10 s between its own
/// minimum-RTT probes, so those replace ours rather than come on top of them, and no
/// longer than the base's history.
const DRAIN_LOOKBACK: Duration = BASE_WINDOW.saturating_add(Duration::from_secs(2));

/// How many smoothed RTTs a base probe lasts, and at least how long (BBR's minimum-RTT
/// probe lasts 200 ms).
const BASE_PROBE_RTTS: u32 = 2;
const BASE_PROBE_MIN: Duration = Duration::from_millis(200);

/// The share of its limit a path holds during a base probe: well below its pipe, so the
/// queue drains in a few milliseconds rather than at the margin between two rates.
pub(super) const BASE_PROBE_SHARE: f64 = 0.5;

/// Queue control's phase on one path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueuePhase {
    /// Not engaged (or no target): bulk bytes are not held.
    Off,
    /// Engaged, and the limit has met no queue yet: it grows as slow start does.
    Ramp(RampTest),
    /// The limit follows the queue the path's bytes meet.
    Steady,
    /// The path holds [`BASE_PROBE_SHARE`] of its limit until `until`, so its queue
    /// drains and the one-way base delay is read again.
    BaseProbe { until: Instant },
}

/// The eager ramp's full-pipe test: bytes acknowledged at the last steering step and
/// when (none before the ramp's first step), the best delivery rate over a step so far
/// (bytes per second), and the steps since it last grew by [`RAMP_GROWTH`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RampTest {
    acked: Option<(u64, Instant)>,
    best: f64,
    flat: u32,
}

/// The queue a steering step reads.
#[derive(Debug, Clone, Copy)]
struct Reading {
    /// The lower of the two readings (both err high).
    queue: Duration,
    /// The kernel's smoothed RTT above its minimum, plus the socket's unsent bytes.
    rtt_queue: Duration,
    /// The socket's unsent bytes at the path's rate.
    unsent: Duration,
}

fn segments(info: &TcpInfo, n: f64) -> f64 {
    n * info.snd_mss.max(1) as f64
}

fn min_rtt_known(info: &TcpInfo) -> bool {
    info.min_rtt != 0 && info.min_rtt != u32::MAX
}

impl PathWriter {
    /// Queue control's phase now.
    pub fn phase(&self) -> QueuePhase {
        self.phase
    }

    /// Queue control's byte limit now (None: not engaged).
    pub fn queue_limit(&self) -> Option<u64> {
        (self.phase != QueuePhase::Off).then_some(self.limit as u64)
    }

    fn ramping(&self) -> bool {
        matches!(self.phase, QueuePhase::Ramp(_))
    }

    /// The ramp with nothing to protect: it grows as slow start does, from what the path
    /// holds, and ends on a queue only once the delivery rate stops growing.
    fn eager(&self) -> bool {
        self.ramping() && !self.protecting
    }

    /// Off → Ramp: queue control engages. The limit starts at rate × (min RTT + target)
    /// ([`PathWriter::initial_limit`]); with nothing to protect, at what the path holds
    /// if that is more (up to its window), so the limit takes over from slow start where
    /// it is instead of halving what the path has in flight.
    pub(super) fn engage(&mut self, info: &TcpInfo) {
        let initial = self.initial_limit(info);
        let held = info.held_bytes().min(info.snd_cwnd as u64 * info.snd_mss as u64) as f64;
        self.limit = if self.protecting { initial } else { initial.max(held) };
        self.limited = false;
        self.phase = QueuePhase::Ramp(RampTest::default());
    }

    /// Any → Off: queue control disengages; the next engagement starts afresh.
    pub(super) fn disengage(&mut self) {
        self.phase = QueuePhase::Off;
        self.next_probe = None;
    }

    /// Ramp → Steady: the limit met the path's pipe (a queue of its own bytes, or a
    /// delivery rate that stopped growing).
    fn end_ramp(&mut self) {
        if self.ramping() {
            self.phase = QueuePhase::Steady;
        }
    }

    /// Where the limit starts when queue control engages: rate × (min RTT + target), the
    /// bytes that fill the path's pipe plus the target's worth of queue (QCUT-D's rule).
    /// Before the kernel has a rate or a minimum RTT, the initial window: a path that
    /// never carried bulk must not meet its first bulk burst unlimited, or slow start
    /// fills a deep buffer before the steering sees it. Never less than the initial window
    /// (a path that carried only small exchanges has a rate estimate far below its
    /// link's), nor more than the congestion window (the same estimate can also be far
    /// above it).
    fn initial_limit(&self, info: &TcpInfo) -> f64 {
        let window = segments(info, INIT_CWND as f64);
        if self.delivery_rate == 0 || !min_rtt_known(info) {
            return window;
        }
        let horizon = Duration::from_micros(info.min_rtt as u64) + self.queue_target;
        let cwnd = segments(info, info.snd_cwnd as f64);
        (self.delivery_rate as f64 * horizon.as_secs_f64())
            .min(cwnd)
            .max(window)
    }

    /// Steers the limit toward the target by the queue the path's bytes meet, at most
    /// once per smoothed RTT (and [`STEER_EVERY_MIN`]). `owd_queue` is the standing queue
    /// from the peer's arrival reports (one-way, this direction only).
    ///
    /// The limit starts from the delivery rate, but under queue control the path is
    /// application-limited by design and the kernel's application-limited samples only
    /// ever raise that estimate; so the limit is corrected by the queue it produces:
    /// bytes held = rate × (min RTT + queue), hence the limit that gives the aim is this
    /// one scaled by (min RTT + aim) / (min RTT + queue). Half of that correction (in log
    /// terms) is applied per step, at most ±[`MAX_STEP`]: the queue answers a change one
    /// round trip later.
    ///
    /// While, or just after, the congestion window held the path below the limit (BBR's
    /// minimum-RTT probe, a loss's recovery, a base probe), the readings show a drained
    /// queue for a smoothed RTT plus their own look-back: until then the limit may fall
    /// but not rise (`settling`), or the drained queue is read as room.
    pub fn steer(&mut self, owd_queue: Option<Duration>, info: &TcpInfo, now: Instant) {
        if self.queue_target.is_zero() || !min_rtt_known(info) || self.phase == QueuePhase::Off {
            return;
        }
        let limit = self.limit;
        let eager = self.eager();
        // A window below the limit during the eager ramp is slow start behind a limit
        // that leads it by design, not a probe's or a recovery's drain.
        if !eager && segments(info, info.snd_cwnd as f64) < limit {
            self.window_bound = Some(now);
            self.window_drained = Some(now);
        }
        let min_rtt = Duration::from_micros(info.min_rtt as u64);
        let srtt = Duration::from_micros(info.rtt as u64);
        self.base_probe(srtt, now);
        let limit = if eager && self.ramp_started() {
            self.brake_ramp(owd_queue, info, limit, srtt.saturating_sub(min_rtt))
        } else {
            limit
        };
        // A step shows in the reading only after the bytes it let through have crossed
        // the path and the smoothed RTT has taken them in.
        let every = srtt.max(min_rtt).max(STEER_EVERY_MIN);
        if self.steered.is_some_and(|t| now.saturating_duration_since(t) < every) {
            return;
        }
        let reading = self.reading(owd_queue, info, eager);
        self.steered = Some(now);
        let limited = std::mem::take(&mut self.limited);
        let held = info.held_bytes() as f64;
        // Only a queue the limit's own bytes made steers it: while the path holds more
        // than the limit let through, the queue is of other bytes, and the limit neither
        // falls nor ends its ramp on it.
        let beyond = held > limit + segments(info, BEYOND_SEGMENTS);
        let transient = self.ramp_transitions(reading.queue, info, limited, beyond, now);
        let settling = self
            .window_bound
            .is_some_and(|t| now.saturating_duration_since(t) < every + READING_LAG);
        let step = self.step_factor(min_rtt, reading.queue, limited, settling);
        // Nor does a queue read while the limit held nothing back and the path held less
        // than half of it: the path's own bytes did not make it.
        let unused = !limited && held < limit * USED_SHARE;
        let step = if beyond || unused { step.max(1.0) } else { step };
        tracing::debug!(
            limit,
            step,
            queue_ms = reading.queue.as_secs_f64() * 1e3,
            owd_queue_ms = owd_queue.map(|q| q.as_secs_f64() * 1e3),
            rtt_queue_ms = reading.rtt_queue.as_secs_f64() * 1e3,
            unsent_ms = reading.unsent.as_secs_f64() * 1e3,
            rate = self.delivery_rate,
            sample = info.delivery_rate,
            held,
            beyond,
            limited,
            settling,
            cwnd = info.snd_cwnd,
            min_rtt_us = info.min_rtt,
            srtt_us = info.rtt,
            phase = ?self.phase,
            "steer"
        );
        let fresh_sample = self.note_peak_sample(info, every, now);
        let eager = self.eager();
        let keep_lead = eager && transient && held >= limit * USED_SHARE;
        if step < 1.0 || limited || keep_lead {
            let mut next = limit * step;
            if eager {
                next = self.eager_lead(next, limit, held, info, keep_lead);
            }
            let cut = !settling && !beyond && !transient && fresh_sample.is_some();
            if cut && reading.queue >= self.steady_aim() * FULL_QUEUE {
                next = next.min(self.direct_cut(min_rtt, reading.queue, held));
            }
            self.limit = next.max(segments(info, FLOOR_SEGMENTS));
        }
    }

    /// The queue reading the ramp's transitions are read against: [`STEER_AIM`] of the
    /// target.
    fn aim(&self) -> Duration {
        self.queue_target.mul_f64(STEER_AIM)
    }

    /// The queue reading steering aims at once the ramp is over: [`STEER_AIM`] of the
    /// target while interactive traffic is there to protect (a frame meets the reading
    /// plus the segment in transmission and the reading's lag, and those must fit in the
    /// target); with nothing to protect, the target itself. Then no frame waits behind
    /// the queue, and the limit's job is to have it within the target when one comes
    /// (the steps after take it to the lower aim). The readings also carry delay that is
    /// no queue — a full segment's serialisation at the bottleneck, which the small
    /// packets behind the minimum RTT did not take (6 ms at 2 Mbit/s), a delayed
    /// acknowledgement, a link's jitter — and steered to [`STEER_AIM`] of the target with
    /// that in the reading, a slow path holds less than its bandwidth-delay product and
    /// its link idles (docs/latency.md, "Bulk alone").
    fn steady_aim(&self) -> Duration {
        if self.protecting {
            self.aim()
        } else {
            self.queue_target
        }
    }

    /// Whether the ramp has taken its first steering step (its first readings still carry
    /// the queue slow start built before queue control engaged).
    fn ramp_started(&self) -> bool {
        matches!(self.phase, QueuePhase::Ramp(RampTest { acked: Some(_), .. }))
    }

    /// The queue this step reads: the lower of the one-way reading and the kernel's
    /// smoothed RTT above its minimum (which also carries the reverse direction's queue),
    /// plus the socket's unsent bytes at the path's rate (they wait there too, for the
    /// window or the pacer). Not those during the eager ramp: its limit leads the window
    /// by a round trip by design, so bytes wait in the socket for slow start's next round,
    /// not behind a full pipe.
    fn reading(&self, owd_queue: Option<Duration>, info: &TcpInfo, eager: bool) -> Reading {
        let unsent = if self.delivery_rate > 0 && !eager {
            Duration::from_secs_f64(info.notsent_bytes as f64 / self.delivery_rate as f64)
        } else {
            Duration::ZERO
        };
        let rtt_queue = Duration::from_micros(info.rtt.saturating_sub(info.min_rtt) as u64) + unsent;
        let queue = owd_queue.map_or(rtt_queue, |q| q.min(rtt_queue));
        Reading {
            queue,
            rtt_queue,
            unsent,
        }
    }

    /// The ramp's transitions at a steering step; returns whether the queue read is the
    /// ramp's transient (with nothing to protect, a queue read while the delivery rate
    /// still grows: slow start's bursts, not a full pipe — unless it is a full queue, but
    /// at the ramp's first step even that is the queue slow start built before). The ramp
    /// ends on a queue of half the aim made by bytes the limit held back, or with nothing
    /// to protect after [`RAMP_FLAT_STEPS`] steps without growth.
    fn ramp_transitions(&mut self, queue: Duration, info: &TcpInfo, limited: bool, beyond: bool, now: Instant) -> bool {
        let first = matches!(self.phase, QueuePhase::Ramp(RampTest { acked: None, .. }));
        let growing = self.ramp_growing(info, limited, now);
        let aim = self.aim();
        let transient = growing && !self.protecting && (first || queue < aim * FULL_QUEUE);
        if queue >= aim / 2 && limited && !beyond && !transient {
            self.end_ramp();
        }
        if let QueuePhase::Ramp(test) = self.phase {
            if !self.protecting && test.flat >= RAMP_FLAT_STEPS {
                self.end_ramp();
            }
        }
        transient
    }

    /// The factor this step applies to the limit: during the ramp, while the limit binds,
    /// the ramp's growth (the correction assumes a limit near the pipe, and until the
    /// path shows a queue by how much it is below cannot be read); else half the
    /// correction toward the aim, within ±[`MAX_STEP`]. No rise while `settling`.
    fn step_factor(&self, min_rtt: Duration, queue: Duration, limited: bool, settling: bool) -> f64 {
        let step = if self.ramping() && limited {
            if self.protecting {
                RAMP_STEP
            } else {
                SLOW_START_GAIN
            }
        } else {
            let want = (min_rtt + self.steady_aim()).as_secs_f64() / (min_rtt + queue).as_secs_f64();
            want.sqrt().clamp(1.0 - MAX_STEP, 1.0 + MAX_STEP)
        };
        if settling {
            step.min(1.0)
        } else {
            step
        }
    }

    /// Keeps the largest delivery-rate sample (not application-limited) of the last
    /// [`PEAK_STEPS`] steps; returns this reading's sample if it is one.
    fn note_peak_sample(&mut self, info: &TcpInfo, every: Duration, now: Instant) -> Option<u64> {
        let fresh = (info.delivery_rate > 0 && !info.delivery_rate_app_limited()).then_some(info.delivery_rate);
        if let Some(r) = fresh {
            if self
                .peak_sample
                .is_none_or(|(p, t)| r >= p || now.saturating_duration_since(t) > every * PEAK_STEPS)
            {
                self.peak_sample = Some((r, now));
            }
        }
        fresh
    }

    /// The eager ramp's limit: it leads the window's own slow start by its next round
    /// trip (twice the window) and no further; and during the ramp's transient, at least
    /// twice what the path holds within that lead (`keep_lead`), since slow start doubles
    /// per round trip whether or not the limit quite bound.
    fn eager_lead(&self, next: f64, limit: f64, held: f64, info: &TcpInfo, keep_lead: bool) -> f64 {
        let lead = SLOW_START_GAIN * segments(info, info.snd_cwnd as f64);
        let next = next.min(lead.max(limit));
        if keep_lead {
            next.max(lead.min(SLOW_START_GAIN * held))
        } else {
            next
        }
    }

    /// The direct cut at a full queue: the link is full, so the kernel's rate sample (the
    /// largest of the last steps, since a sample across a pause in the sending reads low)
    /// is the bottleneck's rate, and QCUT-D's rule gives the limit directly — rate × (min
    /// RTT + aim). With nothing to protect, not below the rate the held bytes show
    /// either (Little's law, held / (min RTT + queue)): a sample of a path that carried
    /// only a scheduler's overflow reads far below its link.
    fn direct_cut(&self, min_rtt: Duration, queue: Duration, held: f64) -> f64 {
        let mut rate = self.peak_sample.map_or(0, |(r, _)| r) as f64;
        if !self.protecting {
            rate = rate.max(held / (min_rtt + queue).as_secs_f64());
        }
        rate * (min_rtt + self.steady_aim()).as_secs_f64()
    }

    /// Eager Ramp → Steady between two steering steps, at the path's first real queue: a
    /// reading of a full queue while the path holds at least [`USED_SHARE`] of the limit
    /// (paced, slow start queues at the bottleneck only once its window is past half the
    /// pipe, so that is the pipe filling, not a burst). A step comes once per smoothed
    /// RTT and the ramp doubles the limit at each; waiting for the next one lets slow
    /// start overfill a deep buffer. The limit then stops at what the path holds, never
    /// below, and the next step's cut takes it to the target. Returns the limit from here.
    fn brake_ramp(&mut self, owd_queue: Option<Duration>, info: &TcpInfo, limit: f64, rtt_queue: Duration) -> f64 {
        let queue = owd_queue.map_or(rtt_queue, |q| q.min(rtt_queue));
        let held = info.held_bytes() as f64;
        if queue < self.aim() * FULL_QUEUE || held < limit * USED_SHARE {
            return limit;
        }
        self.end_ramp();
        let next = limit.min(held).max(segments(info, FLOOR_SEGMENTS));
        self.limit = next;
        tracing::debug!(limit = next, held, queue_ms = queue.as_secs_f64() * 1e3, "ramp braked");
        next
    }

    /// Whether the delivery rate over the last step grew by [`RAMP_GROWTH`] over the best
    /// of the ramp's earlier steps (counting the steps it did not). A step in which the
    /// limit did not bind says nothing of the pipe and is not counted.
    fn ramp_growing(&mut self, info: &TcpInfo, limited: bool, now: Instant) -> bool {
        let QueuePhase::Ramp(test) = &mut self.phase else {
            return true;
        };
        let prev = test.acked.replace((info.bytes_acked, now));
        let Some((acked, t)) = prev.filter(|_| limited) else {
            return true;
        };
        let secs = now.saturating_duration_since(t).as_secs_f64();
        if secs <= 0.0 {
            return true;
        }
        let rate = info.bytes_acked.saturating_sub(acked) as f64 / secs;
        if rate >= test.best * RAMP_GROWTH {
            test.best = rate;
            test.flat = 0;
            true
        } else {
            test.best = test.best.max(rate);
            test.flat += 1;
            false
        }
    }

    /// Steady → BaseProbe → Steady. The one-way reading's base is the lowest delay of the
    /// last base windows, and a path held at its aim never drains: its base would rise by
    /// the least queue of a window, and the steering let the queue grow by as much,
    /// window after window. So once per [`BASE_PROBE_EVERY`] the path holds
    /// [`BASE_PROBE_SHARE`] of its limit for [`BASE_PROBE_RTTS`] smoothed RTTs (at least
    /// [`BASE_PROBE_MIN`]) — LEDBAT++'s periodic slowdown, BBR's minimum-RTT probe —
    /// unless its congestion window drained it within [`DRAIN_LOOKBACK`]. With nothing
    /// to protect, a probe that falls due waits until [`BASE_PROBE_LEAD`] before the
    /// reading would lose its base ([`PathWriter::set_base_kept_until`]), or until
    /// interactive traffic comes: a drained sample lives a base window or two, and a
    /// probe costs the transfer part of the path's rate for its duration, so one made
    /// while the base is still held reads nothing new at the cost of throughput that is
    /// then the only thing to protect. While interactive traffic is there, the probe's
    /// drained queue is also its frames' (and without a one-way reading there is no base
    /// to keep). During the probe (and a reading's lag after it) the limit does not rise:
    /// the drained queue is the probe's, not room.
    fn base_probe(&mut self, srtt: Duration, now: Instant) {
        if self.ramping() {
            return;
        }
        let Some(due) = self.next_probe else {
            self.next_probe = Some(now + BASE_PROBE_EVERY);
            return;
        };
        let over = match self.phase {
            QueuePhase::BaseProbe { until } => now >= until,
            _ => true,
        };
        let needed = self.protecting || self.base_kept.is_none_or(|until| now + BASE_PROBE_LEAD >= until);
        if over && now >= due && needed {
            self.next_probe = Some(now + BASE_PROBE_EVERY);
            let drained = self
                .window_drained
                .is_some_and(|t| now.saturating_duration_since(t) < DRAIN_LOOKBACK);
            if !drained {
                self.start_probe(now + (srtt * BASE_PROBE_RTTS).max(BASE_PROBE_MIN));
            }
        }
        match self.phase {
            QueuePhase::BaseProbe { until } if now < until => self.window_bound = Some(now),
            QueuePhase::BaseProbe { .. } => self.phase = QueuePhase::Steady,
            _ => {}
        }
    }

    /// Steady → BaseProbe until `until`.
    fn start_probe(&mut self, until: Instant) {
        self.phase = QueuePhase::BaseProbe { until };
        self.base_probes += 1;
        tracing::debug!(probes = self.base_probes, "base probe");
    }

    /// The pacing cap the path's socket should have under queue control, bytes per
    /// second (None: the socket's own). The limit stands for a rate — limit / (min RTT +
    /// aim) — and once it has met a queue the socket paces at most [`PACE_GAIN`] times
    /// that. Not while the limit ramps: the rate it stands for is then below the link's
    /// by design. A path held below its congestion window is application-limited, and its
    /// congestion control paces by an estimate nothing corrects (BBR never leaves its
    /// start-up): each write of the bytes one ACK freed then reaches the bottleneck as a
    /// burst and overflows a shallow buffer. QCUT shapes the device's traffic to the
    /// link's rate for the same reason.
    pub fn pacing_cap(&self) -> Option<u64> {
        if self.phase == QueuePhase::Off || self.min_rtt.is_zero() || self.ramping() {
            return None;
        }
        let horizon = self.min_rtt + self.aim();
        Some((PACE_GAIN * self.limit / horizon.as_secs_f64()) as u64)
    }

    /// The limit a budget holds bulk bytes to now: halved during a base probe.
    pub(super) fn holding_limit(&self) -> Option<u64> {
        let limit = self.queue_limit()?;
        Some(if matches!(self.phase, QueuePhase::BaseProbe { .. }) {
            (limit as f64 * BASE_PROBE_SHARE) as u64
        } else {
            limit
        })
    }
}

#[cfg(test)]
mod eager_tests;
#[cfg(test)]
mod tests;
