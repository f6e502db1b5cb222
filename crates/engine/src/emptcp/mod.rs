//! Energy-aware path use (eMPTCP, Lim, seed 003 ch. 4): WiFi first; cellular carries only
//! once a burst has moved κ bytes or lasted τ, while data is flowing, and while the
//! Energy Information Base says both links together cost less per byte than WiFi alone
//! at the predicted rates; it stands by again when that stops being true (with the
//! thesis' 10 % hysteresis) or the burst ends.
//!
//! Clock-free: times are microseconds on the caller's clock. The session feeds it the
//! payload each path carries and asks [`EnergyAware::tick`] whether cellular should carry.
//!
//! Rules and reasons:
//! - κ = 1 MB (§4.1.4): "MPTCP is rarely more energy efficient than single path TCP when
//!   downloading a smaller sized file".
//! - τ, for slow WiFi where κ may never be reached, follows the thesis' Eq. 4.1: long
//!   enough for slow start to reach the WiFi path's bandwidth-delay product and then for
//!   φ = 10 bandwidth samples one RTT apart, τ = R_W · (log₂((B_W·R_W + W_init)/W_init) + φ),
//!   with R_W the WiFi path's RTT as its handshake measured it (the smallest RTT seen, the
//!   thesis' sampling interval), B_W the predicted WiFi rate and W_init ten segments. The
//!   thesis' 3 s ("τ ≥ 2.67 s" on its WiFi) is the ceiling (`tau_us`). φ·R_W is time to
//!   observe the link: our predictor sees it in [`SAMPLE_US`] slots and decides after
//!   [`MIN_SAMPLES`] of them at the earliest, at least φ·R_W whenever R_W ≤ 50 ms.
//! - Idle never wakes cellular (§4.1.4): a burst must have carried payload within the last
//!   estimated RTT, even after τ.
//! - The EIB assumes a large transfer (§4.1.2): it compares per-byte energies, never the
//!   remaining size, which nobody knows.
//! - Hysteresis (§4.1.3): WiFi-only takes over from both at 1.1 × the WiFi-only threshold,
//!   both from WiFi-only below 0.9 × it; with the threshold monotone, that is the EIB
//!   read at the predicted WiFi rate divided by 1.1 (resp. 0.9).
//! - Cellular-only is never chosen (§4.1.3: "the expected gain is not much more than using
//!   both"): where the EIB says it, both carry.
//! - Bandwidth prediction (§4.1.1): Holt's double exponential smoothing per interface kind
//!   (the thesis names Holt-Winters without constants; these are ours), sampled every
//!   [`SAMPLE_US`] from slots in which the interface was busy for at least half the slot
//!   (an app-limited or half-empty slot says nothing of the link's rate). An interface
//!   never sampled is assumed at [`PRIOR_MBIT`] so that it can be probed; one suspended
//!   keeps its old prediction.
//! - A session outlives the thesis' connections, so κ and τ count per burst: a burst ends
//!   after [`BURST_GAP_US`] without payload, and cellular stands by again then (its radio's
//!   tail runs out meanwhile; a later burst starts WiFi first like a new connection).

use crate::energy::{Dir, EnergyProfile, LinkKind, Usage};

/// κ: bytes a burst moves over WiFi before cellular may carry (§4.1.4).
pub const KAPPA: u64 = 1_000_000;
/// The ceiling of τ, the time a burst runs before cellular may carry even below κ, µs
/// (§4.1.4: the thesis' τ = 3 s).
pub const TAU_US: u64 = 3_000_000;
/// φ of Eq. 4.1: the bandwidth samples, one RTT apart, τ leaves room for.
pub const PHI: f64 = 10.0;
/// W_init of Eq. 4.1: the initial congestion window, bytes (Linux's ten segments).
pub const W_INIT_BYTES: f64 = 10.0 * 1448.0;
/// The thesis' 10 % safety factor on the EIB's thresholds (§4.1.3).
pub const HYSTERESIS: f64 = 0.1;
/// Throughput assumed for an interface never sampled, Mbit/s (§4.1.1: "e.g., 5 Mbps").
pub const PRIOR_MBIT: f64 = 5.0;
/// The predictor's sampling interval, µs.
pub const SAMPLE_US: u64 = 250_000;
/// A burst ends after this long without payload, µs.
pub const BURST_GAP_US: u64 = 1_000_000;
/// The longest pause between arrivals in a sample that measures the link, µs (a 16 KB
/// frame takes 160 ms at 0.8 Mbit/s).
const MAX_GAP_US: u64 = 200_000;
/// Valid samples of WiFi a decision needs.
pub const MIN_SAMPLES: u32 = 2;
/// Holt's smoothing constants (level, trend).
const HOLT_LEVEL: f64 = 0.5;
const HOLT_TREND: f64 = 0.2;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnergyAwareConfig {
    pub kappa: u64,
    pub tau_us: u64,
    pub hysteresis: f64,
    pub prior_mbit: f64,
}

impl Default for EnergyAwareConfig {
    fn default() -> Self {
        EnergyAwareConfig {
            kappa: KAPPA,
            tau_us: TAU_US,
            hysteresis: HYSTERESIS,
            prior_mbit: PRIOR_MBIT,
        }
    }
}

/// Holt's linear (double exponential) smoothing of throughput samples, Mbit/s.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Holt {
    level: f64,
    trend: f64,
    samples: u32,
}

impl Holt {
    pub fn update(&mut self, x: f64) {
        if self.samples == 0 {
            self.level = x;
            self.trend = 0.0;
        } else {
            let prev = self.level;
            self.level = HOLT_LEVEL * x + (1.0 - HOLT_LEVEL) * (self.level + self.trend);
            self.trend = HOLT_TREND * (self.level - prev) + (1.0 - HOLT_TREND) * self.trend;
        }
        self.samples += 1;
    }

    /// The next sample's forecast; `None` before any sample.
    pub fn forecast(&self) -> Option<f64> {
        (self.samples > 0).then(|| (self.level + self.trend).max(0.0))
    }

    pub fn samples(&self) -> u32 {
        self.samples
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    bytes: u64,
    /// Bytes of the first arrival: they came over the time before `first`.
    first_bytes: u64,
    first: u64,
    last: u64,
    max_gap: u64,
}

#[derive(Debug, Clone, Copy)]
struct Burst {
    start: u64,
    wifi_bytes: u64,
    bytes: [u64; 2],
}

impl Burst {
    fn new(start: u64) -> Self {
        Burst {
            start,
            wifi_bytes: 0,
            bytes: [0, 0],
        }
    }
}

/// Where the controller stands, one transition function each way: no burst
/// ([`EnergyAware::end_burst`]), a burst WiFi carries alone
/// ([`EnergyAware::start_burst`], [`EnergyAware::stand_by`]), or a burst both carry
/// ([`EnergyAware::wake_cellular`]). Cellular carries only inside a burst.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No payload for [`BURST_GAP_US`]: the next burst starts WiFi first.
    Idle,
    /// A burst WiFi carries alone: not yet due (κ, τ), idle, or the EIB says WiFi alone.
    Standby(Burst),
    /// A burst both links carry.
    Both(Burst),
}

/// Whether cellular carries, and why it changed last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Cellular stands by: WiFi carries alone.
    Standby,
    /// Both carry.
    Both,
}

/// The controller of one session (all its paths: promotion and tail are paid per radio,
/// not per connection).
#[derive(Debug, Clone)]
pub struct EnergyAware {
    cfg: EnergyAwareConfig,
    profile: EnergyProfile,
    phase: Phase,
    last_payload: Option<u64>,
    sample_start: Option<u64>,
    /// This sample's bytes, per interface kind (WiFi, cellular).
    sample: [Sample; 2],
    predict: [Holt; 2],
    /// The WiFi path's smallest RTT, µs (0: unknown): Eq. 4.1's R_W.
    wifi_base_rtt_us: u64,
    /// Times cellular was woken.
    pub wakes: u64,
}

fn slot(kind: LinkKind) -> Option<usize> {
    match kind {
        LinkKind::Wifi => Some(0),
        LinkKind::Cellular => Some(1),
        LinkKind::Wired => None,
    }
}

impl EnergyAware {
    pub fn new(cfg: EnergyAwareConfig, profile: EnergyProfile) -> EnergyAware {
        EnergyAware {
            cfg,
            profile,
            phase: Phase::Idle,
            last_payload: None,
            sample_start: None,
            sample: [Sample::default(); 2],
            predict: [Holt::default(); 2],
            wifi_base_rtt_us: 0,
            wakes: 0,
        }
    }

    pub fn state(&self) -> Decision {
        match self.phase {
            Phase::Both(_) => Decision::Both,
            Phase::Idle | Phase::Standby(_) => Decision::Standby,
        }
    }

    /// The burst under way, if any.
    fn burst(&self) -> Option<Burst> {
        match self.phase {
            Phase::Idle => None,
            Phase::Standby(b) | Phase::Both(b) => Some(b),
        }
    }

    /// Payload with no burst under way: a burst starts, WiFi first (idle → standby).
    fn start_burst(&mut self, t_us: u64) -> &mut Burst {
        if let Phase::Idle = self.phase {
            self.phase = Phase::Standby(Burst::new(t_us));
        }
        match &mut self.phase {
            Phase::Standby(b) | Phase::Both(b) => b,
            Phase::Idle => unreachable!("a burst was just started"),
        }
    }

    /// The burst is due and the EIB says both links cost less per byte: cellular is
    /// woken (standby → both).
    fn wake_cellular(&mut self) {
        if let Phase::Standby(b) = self.phase {
            self.phase = Phase::Both(b);
            self.wakes += 1;
        }
    }

    /// The EIB says WiFi alone costs less again, past the hysteresis: cellular stands by
    /// for the rest of the burst (both → standby).
    fn stand_by(&mut self) {
        if let Phase::Both(b) = self.phase {
            self.phase = Phase::Standby(b);
        }
    }

    /// No payload for [`BURST_GAP_US`]: the burst is over and cellular stands by (any
    /// phase → idle).
    fn end_burst(&mut self) {
        self.phase = Phase::Idle;
    }

    /// Predicted throughput of WiFi and cellular, Mbit/s (cellular's prior if never
    /// sampled).
    pub fn predicted(&self) -> (Option<f64>, f64) {
        (
            self.predict[0].forecast(),
            self.predict[1].forecast().unwrap_or(self.cfg.prior_mbit),
        )
    }

    /// `bytes` of payload crossed a path of `kind` in `dir` at `t_us`.
    pub fn payload(&mut self, kind: LinkKind, dir: Dir, t_us: u64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.roll(t_us);
        if self
            .last_payload
            .is_some_and(|t| t_us.saturating_sub(t) >= BURST_GAP_US)
        {
            self.end_burst();
        }
        let b = self.start_burst(t_us);
        b.bytes[dir as usize] += bytes;
        if kind == LinkKind::Wifi {
            b.wifi_bytes += bytes;
        }
        self.last_payload = Some(t_us);
        if let Some(i) = slot(kind) {
            let s = &mut self.sample[i];
            if s.bytes == 0 {
                s.first = t_us;
                s.first_bytes = bytes;
            } else {
                s.max_gap = s.max_gap.max(t_us.saturating_sub(s.last));
            }
            s.bytes += bytes;
            s.last = s.last.max(t_us);
        }
    }

    /// Closes the sampling interval if it ended by `t_us`, feeding the predictors.
    fn roll(&mut self, t_us: u64) {
        let start = *self.sample_start.get_or_insert(t_us);
        if t_us < start + SAMPLE_US {
            return;
        }
        for i in 0..2 {
            let s = std::mem::take(&mut self.sample[i]);
            let span = s.last.saturating_sub(s.first);
            // Busy for at least half the interval without a pause: the rate is the link's,
            // not the app's.
            if s.bytes > s.first_bytes && span >= SAMPLE_US / 2 && s.max_gap <= MAX_GAP_US {
                self.predict[i].update((s.bytes - s.first_bytes) as f64 * 8.0 / span as f64);
            }
        }
        self.sample_start = Some(t_us - (t_us - start) % SAMPLE_US);
    }

    /// τ now, µs: Eq. 4.1 at the WiFi path's base RTT and predicted rate, at most the
    /// configured ceiling (the ceiling while either is unknown).
    pub fn tau_us(&self) -> u64 {
        match self.predict[0].forecast() {
            Some(b_w) if self.wifi_base_rtt_us > 0 => tau_eq_4_1(self.wifi_base_rtt_us, b_w).min(self.cfg.tau_us),
            _ => self.cfg.tau_us,
        }
    }

    /// The decision at `t_us`; `rtt_us` is the WiFi path's smoothed RTT (the idle test),
    /// `base_rtt_us` its smallest (τ's R_W; 0 if unknown).
    pub fn tick(&mut self, t_us: u64, rtt_us: u64, base_rtt_us: u64) -> Decision {
        self.wifi_base_rtt_us = base_rtt_us;
        self.roll(t_us);
        let since_payload = self.last_payload.map_or(u64::MAX, |t| t_us.saturating_sub(t));
        if since_payload >= BURST_GAP_US {
            self.end_burst();
            return self.state();
        }
        // Payload arrives a frame at a time (up to 16 KB: 160 ms at 0.8 Mbit/s), so the
        // gaps a busy link leaves between arrivals count as activity too.
        let idle = since_payload > rtt_us.max(MAX_GAP_US);
        let Some(burst) = self.burst() else {
            return self.state();
        };
        let (Some(b_w), b_c) = self.predicted() else {
            return self.state();
        };
        if self.predict[0].samples() < MIN_SAMPLES {
            return self.state();
        }
        let dir = if burst.bytes[1] > burst.bytes[0] {
            Dir::Up
        } else {
            Dir::Down
        };
        let due = burst.wifi_bytes >= self.cfg.kappa || t_us.saturating_sub(burst.start) >= self.tau_us();
        // Standing by, cellular wakes only when due and not idle.
        let state = self.state();
        if state == Decision::Standby && (!due || idle) {
            return state;
        }
        match (state, self.decide(state, dir, b_w, b_c)) {
            (Decision::Standby, Decision::Both) => self.wake_cellular(),
            (Decision::Both, Decision::Standby) => self.stand_by(),
            _ => {}
        }
        self.state()
    }

    /// The EIB's word with the hysteresis, from `state`, at predicted WiFi `b_w` and
    /// cellular `b_c` Mbit/s.
    pub fn decide(&self, state: Decision, dir: Dir, b_w: f64, b_c: f64) -> Decision {
        let factor = match state {
            Decision::Standby => 1.0 - self.cfg.hysteresis,
            Decision::Both => 1.0 + self.cfg.hysteresis,
        };
        if self.wifi_only(dir, b_w / factor, b_c) {
            Decision::Standby
        } else {
            Decision::Both
        }
    }

    fn wifi_only(&self, dir: Dir, b_w: f64, b_c: f64) -> bool {
        self.profile_cheapest(dir, b_w, b_c) == Usage::WifiOnly
    }

    fn profile_cheapest(&self, dir: Dir, b_w: f64, b_c: f64) -> Usage {
        self.profile.cheapest(dir, b_w, b_c)
    }

    /// The model the EIB is read from (the session's energy profile).
    pub fn set_profile(&mut self, profile: &EnergyProfile) {
        self.profile = profile.clone();
    }

    /// When [`EnergyAware::tick`] next has something to decide: the end of the sampling
    /// interval, or the burst's τ and end.
    pub fn next_tick(&self) -> Option<u64> {
        let burst = self.burst()?;
        let start = self.sample_start?;
        Some((start + SAMPLE_US).min(burst.start + self.tau_us()).max(start))
    }
}

/// Eq. 4.1's bound on τ, µs: slow start's rounds to the bandwidth-delay product plus φ
/// samples, one RTT each, for a WiFi path of RTT `r_w_us` and rate `b_w_mbit`.
pub fn tau_eq_4_1(r_w_us: u64, b_w_mbit: f64) -> u64 {
    let r_w = r_w_us as f64 / 1e6;
    let bdp = b_w_mbit.max(0.0) * 1e6 / 8.0 * r_w;
    let rounds = ((bdp + W_INIT_BYTES) / W_INIT_BYTES).log2();
    (r_w * (rounds + PHI) * 1e6).round() as u64
}

#[cfg(test)]
mod tests;
