//! `[wifi]` (client): the WiFi signal as a leading indicator of a path's failure
//! (docs/paths.md, "Proactive handover").

use std::time::Duration;

use anyhow::{bail, Result};
use serde::Deserialize;

use crate::links::wifi::judge::Thresholds;

/// The client's `[wifi]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WifiConfig {
    /// Read the signal of each path whose interface is WiFi from nl80211 and treat the
    /// path as degraded while it is weak. Interfaces that are not WiFi, or a kernel
    /// without nl80211, are left alone.
    pub signal_hint: bool,
    /// Weak below this averaged signal, dBm.
    pub weak_dbm: i32,
    /// Recovered at or above this one, dBm; above `weak_dbm` (the hysteresis).
    pub recover_dbm: i32,
    /// A fall of this many dB within `fall_ms` to below `recover_dbm` is weak at once.
    pub fall_db: i32,
    pub fall_ms: u64,
    /// The least time a weak path stays degraded, ms.
    pub hold_ms: u64,
    /// How often the signal is read, ms.
    pub poll_ms: u64,
}

impl Default for WifiConfig {
    fn default() -> Self {
        let t = Thresholds::default();
        WifiConfig {
            signal_hint: true,
            weak_dbm: t.weak_dbm,
            recover_dbm: t.recover_dbm,
            fall_db: t.fall_db,
            fall_ms: t.fall.as_millis() as u64,
            hold_ms: t.hold.as_millis() as u64,
            poll_ms: 1000,
        }
    }
}

impl WifiConfig {
    pub fn validate(&self) -> Result<()> {
        // A received signal is between about −100 dBm (the noise floor) and −10 dBm
        // (next to the access point); a threshold outside that never or always fires.
        for (key, v) in [("weak_dbm", self.weak_dbm), ("recover_dbm", self.recover_dbm)] {
            if !(-100..=-10).contains(&v) {
                bail!("wifi.{key}: {v} dBm is not a WiFi signal level (expected -100 to -10, e.g. -75)");
            }
        }
        if self.recover_dbm <= self.weak_dbm {
            bail!(
                "wifi.recover_dbm: must be above wifi.weak_dbm ({} <= {}): the gap keeps a path from flapping",
                self.recover_dbm,
                self.weak_dbm
            );
        }
        if !(1..=60).contains(&self.fall_db) {
            bail!("wifi.fall_db: {} dB (expected 1 to 60, e.g. 10)", self.fall_db);
        }
        if self.poll_ms < 100 || self.poll_ms > 60_000 {
            bail!("wifi.poll_ms: {} (expected 100 to 60000 ms)", self.poll_ms);
        }
        if self.fall_ms < self.poll_ms {
            bail!(
                "wifi.fall_ms: must be at least wifi.poll_ms ({} < {}): a fall is seen across readings",
                self.fall_ms,
                self.poll_ms
            );
        }
        if self.hold_ms < self.poll_ms {
            bail!(
                "wifi.hold_ms: must be at least wifi.poll_ms ({} < {})",
                self.hold_ms,
                self.poll_ms
            );
        }
        Ok(())
    }

    pub fn thresholds(&self) -> Thresholds {
        Thresholds {
            weak_dbm: self.weak_dbm,
            recover_dbm: self.recover_dbm,
            fall_db: self.fall_db,
            fall: Duration::from_millis(self.fall_ms),
            hold: Duration::from_millis(self.hold_ms),
        }
    }

    pub fn poll(&self) -> Duration {
        Duration::from_millis(self.poll_ms)
    }

    pub fn hold(&self) -> Duration {
        Duration::from_millis(self.hold_ms)
    }
}
