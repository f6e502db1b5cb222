//! The session's energy: the modelled joules each path spent ([`crate::energy`]), and the
//! energy-aware mode ([`crate::emptcp`]) that holds cellular paths back while WiFi
//! suffices.
//!
//! The client decides; the server learns which paths stand by from the `Tier` frames the
//! client sends on each path (an energy standby is [`Tier::EnergyStandby`]),
//! so downloads follow the same choice as uploads, as MPTCP's MP_PRIO carries eMPTCP's.

use std::time::Instant;

use mpflex_wire::Tier;

use super::Session;
use crate::config::Role;
use crate::emptcp::{Decision, EnergyAware, EnergyAwareConfig};
use crate::energy::{Dir, EnergyProfile, LinkKind, PathEnergy};

/// Whether the session uses its cellular paths with energy in mind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EnergyMode {
    /// Every path carries as its tier says.
    #[default]
    Off,
    /// eMPTCP: WiFi first; cellular only when it saves energy per byte.
    Aware,
}

impl EnergyMode {
    pub fn name(self) -> &'static str {
        match self {
            EnergyMode::Off => "off",
            EnergyMode::Aware => "aware",
        }
    }
}

/// The energy-aware mode's state as status shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnergyAwareView {
    /// Whether cellular carries now.
    pub cellular_active: bool,
    /// Predicted WiFi and cellular throughput, Mbit/s.
    pub wifi_mbit: Option<f64>,
    pub cellular_mbit: f64,
    /// Times cellular was woken.
    pub wakes: u64,
}

impl Session {
    fn us(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_micros() as u64
    }

    /// What link `path` runs over, for the energy model and the energy-aware mode.
    pub fn set_path_kind(&mut self, path: usize, kind: LinkKind, now: Instant) {
        self.energy.set_kind(path, kind);
        self.apply_energy(now);
    }

    pub fn path_kind(&self, path: usize) -> LinkKind {
        self.energy.kind(path)
    }

    /// The device model the energy is priced with (and the energy-aware mode decides by).
    pub fn set_energy_profile(&mut self, profile: EnergyProfile) {
        if let Some(a) = &mut self.aware {
            a.set_profile(&profile);
        }
        self.energy.set_profile(profile);
    }

    pub fn energy_profile(&self) -> &EnergyProfile {
        self.energy.profile()
    }

    /// (client) Turns the energy-aware mode on or off (a policy rule's action, or the
    /// configuration). Turning it on holds the cellular paths back until the mode wakes
    /// them; off lets them carry as their tiers say.
    pub fn set_energy_mode(&mut self, mode: EnergyMode, now: Instant) {
        if mode == self.energy_mode() || self.cfg.role != Role::Client {
            return;
        }
        self.aware = match mode {
            EnergyMode::Off => None,
            EnergyMode::Aware => Some(EnergyAware::new(self.aware_cfg, self.energy.profile().clone())),
        };
        self.apply_energy(now);
    }

    /// The energy-aware mode's κ and τ, from the next time it is turned on.
    pub fn set_energy_aware_config(&mut self, cfg: EnergyAwareConfig) {
        self.aware_cfg = cfg;
    }

    pub fn energy_mode(&self) -> EnergyMode {
        if self.aware.is_some() {
            EnergyMode::Aware
        } else {
            EnergyMode::Off
        }
    }

    /// The energy-aware mode's view, while it is on.
    pub fn energy_aware(&self) -> Option<EnergyAwareView> {
        let a = self.aware.as_ref()?;
        let (wifi_mbit, cellular_mbit) = a.predicted();
        Some(EnergyAwareView {
            cellular_active: a.state() == Decision::Both,
            wifi_mbit,
            cellular_mbit,
            wakes: a.wakes,
        })
    }

    /// Whether the energy-aware mode holds `path` back (on a server: the client said so).
    pub fn path_energy_standby(&self, path: usize) -> bool {
        self.paths
            .get(path)
            .is_some_and(|p| p.effective_tier() >= Tier::EnergyStandby)
    }

    /// (client) Whether `path` need not be connected now: the energy-aware mode holds it
    /// back and another path carries. eMPTCP opens its cellular subflow only when the mode
    /// first wakes it (Lim, seed 003 §4.1.5, delayed subflow establishment): the
    /// handshake alone costs a radio promotion and its tail, the price of a whole small
    /// transfer. A path no other can replace is never held back.
    pub fn path_held_back(&self, path: usize) -> bool {
        self.energy_holds(path) && self.paths.others_carry(path)
    }

    /// (client) Whether the energy-aware mode holds `path` back now (whatever else
    /// carries).
    pub fn energy_holds(&self, path: usize) -> bool {
        self.aware.is_some() && self.paths.get(path).is_some_and(|p| p.energy_standby)
    }

    /// Each path's modelled energy so far.
    pub fn energy(&self, now: Instant) -> Vec<PathEnergy> {
        let mut e = self.energy.report(self.us(now));
        e.resize(self.paths.len().max(e.len()), PathEnergy::default());
        e
    }

    /// Bytes that crossed `path` (all of them: control wakes a radio too).
    pub(crate) fn meter_bytes(&mut self, path: usize, dir: Dir, bytes: usize, now: Instant) {
        let t = self.us(now);
        self.energy.record(path, dir, t, bytes as u64);
    }

    /// Stream payload that crossed `path`: what the energy-aware mode counts (keepalives
    /// and acknowledgements are no activity).
    pub(crate) fn note_payload(&mut self, path: usize, dir: Dir, bytes: u64, now: Instant) {
        let t = self.us(now);
        let kind = self.energy.kind(path);
        if let Some(a) = &mut self.aware {
            a.payload(kind, dir, t, bytes);
        }
    }

    /// When the energy-aware mode next decides.
    pub(crate) fn energy_deadline(&self) -> Option<Instant> {
        let t = self.aware.as_ref()?.next_tick()?;
        Some(self.epoch + std::time::Duration::from_micros(t))
    }

    /// Lets the energy-aware mode decide at `now` and applies what it says.
    pub(crate) fn energy_tick(&mut self, now: Instant) {
        let t = self.us(now);
        self.energy.advance(t);
        // The WiFi path's smoothed RTT (the idle test) and its smallest (τ's R_W: the
        // handshake's RTT, the smoothed one until a minimum is known).
        let (rtt, base) = (0..self.paths.len())
            .filter(|&i| self.energy.kind(i) == LinkKind::Wifi)
            .filter_map(|i| self.paths.get(i).filter(|p| p.carries()).map(|p| &p.snap))
            .map(|s| (s.srtt, if s.min_rtt.is_zero() { s.srtt } else { s.min_rtt }))
            .min()
            .unwrap_or_default();
        let Some(a) = &mut self.aware else { return };
        let before = a.state();
        if a.tick(t, rtt.as_micros() as u64, base.as_micros() as u64) != before {
            self.apply_energy(now);
        }
    }

    /// Holds the cellular paths back or lets them carry, as the mode says now.
    fn apply_energy(&mut self, now: Instant) {
        let standby = self.aware.as_ref().is_some_and(|a| a.state() == Decision::Standby);
        for i in 0..self.paths.len().max(self.energy_paths()) {
            let want = standby && self.energy.kind(i) == LinkKind::Cellular;
            if self.paths.get(i).map(|p| p.energy_standby) != Some(want) {
                self.paths.set_energy_standby(i, want, now);
                self.announce_tier(i);
                self.wake();
                tracing::debug!(path = i, standby = want, "energy-aware mode");
            }
        }
    }

    fn energy_paths(&self) -> usize {
        (0..crate::MAX_PATHS)
            .rev()
            .find(|&i| self.energy.kind(i) != LinkKind::Wired)
            .map_or(0, |i| i + 1)
    }
}
