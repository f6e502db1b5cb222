//! The WiFi signal as a leading indicator (pure: readings in, verdicts out).
//!
//! WearMan (seed 000 ch. VI) hands a wearable's traffic over *before* its Bluetooth link
//! fails, on RSSI: weak below −90 dBm, back above −85 dBm, the gap between the two
//! thresholds against ping-pong. The same rule for WiFi, with thresholds of common
//! practice: below about −75 dBm an 802.11 link is down to its lowest rates and close to
//! losing its association (the roaming threshold of most client drivers and vendors'
//! coverage designs sit between −70 and −75 dBm), above −70 dBm it is comfortably usable.
//!
//! * **Weak** when the averaged signal stays below `weak_dbm` for [`CONFIRM`] readings in
//!   a row (the kernel's average already smooths over frames; two readings a second
//!   apart rule out a one-off dip), when it fell by `fall_db` or more within `fall`
//!   and is already below `recover_dbm` (walking away: the trend says it will be weak
//!   within seconds, and the handover should be done by then), or when the AP's beacons
//!   were lost since the last reading (the kernel counts each beacon-loss event: the
//!   link is about to drop).
//! * **Recovered** when the signal is at or above `recover_dbm` for [`CONFIRM`] readings
//!   in a row, no fast fall is under way, and the path has been weak for at least
//!   `hold` (a minimum dwell, so a signal hovering around the thresholds never flaps).
//! * A reading without a station (not associated) changes nothing: the link's carrier
//!   goes with it, which the rtnetlink watcher turns into a dead path at once.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::station::Station;

/// Readings in a row a threshold must hold for.
pub const CONFIRM: u32 = 2;

/// The judge's thresholds (`[wifi]` in the client's configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Weak below this averaged signal, dBm.
    pub weak_dbm: i32,
    /// Recovered at or above this one, dBm (above `weak_dbm`: the hysteresis).
    pub recover_dbm: i32,
    /// A fall of this many dB within `fall` is fast.
    pub fall_db: i32,
    pub fall: Duration,
    /// The least time the path stays weak.
    pub hold: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            weak_dbm: -75,
            recover_dbm: -70,
            fall_db: 10,
            fall: Duration::from_secs(3),
            hold: Duration::from_secs(5),
        }
    }
}

/// What a reading changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Unchanged,
    /// The link is weak: why, for the log.
    Weak(String),
    Recovered,
}

/// One WiFi path's judge.
#[derive(Debug, Clone)]
pub struct Judge {
    t: Thresholds,
    weak_since: Option<Instant>,
    /// (time, averaged signal dBm) of the readings within `fall`, oldest first.
    recent: VecDeque<(Instant, i32)>,
    below: u32,
    above: u32,
    beacon_loss: Option<u32>,
}

impl Judge {
    pub fn new(t: Thresholds) -> Self {
        Judge {
            t,
            weak_since: None,
            recent: VecDeque::new(),
            below: 0,
            above: 0,
            beacon_loss: None,
        }
    }

    pub fn weak(&self) -> bool {
        self.weak_since.is_some()
    }

    /// Takes the reading at `now` (`None`: no station, not associated).
    pub fn read(&mut self, now: Instant, station: Option<&Station>) -> Verdict {
        let Some(s) = station else {
            // A new association starts a new series (another AP, another signal).
            self.recent.clear();
            self.below = 0;
            self.above = 0;
            self.beacon_loss = None;
            return Verdict::Unchanged;
        };
        let lost_beacons = match (self.beacon_loss, s.beacon_loss) {
            (Some(before), Some(now)) => now > before,
            _ => false,
        };
        if s.beacon_loss.is_some() {
            self.beacon_loss = s.beacon_loss;
        }
        let Some(dbm) = s.level() else {
            return self.judge(now, None, lost_beacons);
        };
        while self
            .recent
            .front()
            .is_some_and(|&(t, _)| now.saturating_duration_since(t) > self.t.fall)
        {
            self.recent.pop_front();
        }
        self.recent.push_back((now, dbm));
        if dbm < self.t.weak_dbm {
            self.below += 1;
        } else {
            self.below = 0;
        }
        if dbm >= self.t.recover_dbm {
            self.above += 1;
        } else {
            self.above = 0;
        }
        self.judge(now, Some(dbm), lost_beacons)
    }

    fn judge(&mut self, now: Instant, dbm: Option<i32>, lost_beacons: bool) -> Verdict {
        let peak = self.recent.iter().map(|&(_, d)| d).max();
        let fall = match (peak, dbm) {
            (Some(p), Some(d)) if d < self.t.recover_dbm && p - d >= self.t.fall_db => Some(p - d),
            _ => None,
        };
        if self.weak_since.is_none() {
            let why = if lost_beacons {
                Some("beacons from the access point lost".to_string())
            } else if self.below >= CONFIRM {
                Some(format!(
                    "signal {} dBm, below {} dBm for {} readings",
                    dbm.unwrap_or_default(),
                    self.t.weak_dbm,
                    self.below
                ))
            } else {
                fall.map(|f| {
                    format!(
                        "signal fell {f} dB to {} dBm within {:?}",
                        dbm.unwrap_or_default(),
                        self.t.fall
                    )
                })
            };
            if let Some(why) = why {
                self.weak_since = Some(now);
                return Verdict::Weak(why);
            }
            return Verdict::Unchanged;
        }
        let held = self
            .weak_since
            .is_some_and(|t| now.saturating_duration_since(t) >= self.t.hold);
        if held && self.above >= CONFIRM && fall.is_none() && !lost_beacons {
            self.weak_since = None;
            return Verdict::Recovered;
        }
        if lost_beacons {
            // Still failing: the dwell starts again.
            self.weak_since = Some(now);
        }
        Verdict::Unchanged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn station(dbm: i8) -> Station {
        Station {
            signal: Some(dbm),
            signal_avg: Some(dbm),
            ..Station::default()
        }
    }

    /// Feeds one reading a second from `series` (dBm; `None`: not associated), returns
    /// the verdicts other than `Unchanged` with their second.
    fn run(judge: &mut Judge, t0: Instant, from: u64, series: &[Option<i8>]) -> Vec<(u64, Verdict)> {
        series
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let at = from + i as u64;
                let s = d.map(station);
                match judge.read(t0 + Duration::from_secs(at), s.as_ref()) {
                    Verdict::Unchanged => None,
                    v => Some((at, v)),
                }
            })
            .collect()
    }

    fn weak_at(v: &[(u64, Verdict)]) -> Vec<u64> {
        v.iter()
            .filter(|(_, v)| matches!(v, Verdict::Weak(_)))
            .map(|&(t, _)| t)
            .collect()
    }

    fn recovered_at(v: &[(u64, Verdict)]) -> Vec<u64> {
        v.iter()
            .filter(|(_, v)| *v == Verdict::Recovered)
            .map(|&(t, _)| t)
            .collect()
    }

    #[test]
    fn a_signal_that_stays_below_the_threshold_is_weak_and_recovers_above_the_higher_one() {
        let t0 = Instant::now();
        let mut j = Judge::new(Thresholds::default());
        // A slow walk away: −60 to −80 dBm at 2 dB a second (no fast fall), then back.
        let series: Vec<Option<i8>> = (0..=10)
            .map(|i| Some(-60 - 2 * i))
            .chain((0..10).map(|_| Some(-80)))
            .chain((0..10).map(|i| Some(-80 + 2 * i)))
            .chain((0..10).map(|_| Some(-60)))
            .collect();
        let v = run(&mut j, t0, 0, &series);
        // Below −75 from the 8th reading (−76): weak at the second reading in a row.
        assert_eq!(weak_at(&v), vec![9], "{v:?}");
        // −72 (reading 25) is between the thresholds: still weak; −70 at 26, −68 at 27.
        assert_eq!(recovered_at(&v), vec![27], "{v:?}");
    }

    #[test]
    fn a_single_dip_is_no_weakness() {
        let t0 = Instant::now();
        let mut j = Judge::new(Thresholds::default());
        let v = run(&mut j, t0, 0, &[Some(-68), Some(-69), Some(-77), Some(-69), Some(-68)]);
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_fast_fall_is_weak_before_the_threshold() {
        let t0 = Instant::now();
        let mut j = Judge::new(Thresholds::default());
        // −55 to −71 within 2 s: already below −70 and 16 dB down.
        let v = run(&mut j, t0, 0, &[Some(-55), Some(-55), Some(-62), Some(-71)]);
        assert_eq!(weak_at(&v), vec![3], "{v:?}");
        // A fall that stays in good signal (−45 to −60) is nothing.
        let mut j = Judge::new(Thresholds::default());
        let v = run(&mut j, t0, 0, &[Some(-45), Some(-52), Some(-60), Some(-60)]);
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_signal_hovering_around_the_thresholds_never_flaps() {
        let t0 = Instant::now();
        let mut j = Judge::new(Thresholds::default());
        // Alternating −78 / −66 every second for a minute.
        let series: Vec<Option<i8>> = (0..60).map(|i| Some(if i % 2 == 0 { -78 } else { -66 })).collect();
        let v = run(&mut j, t0, 0, &series);
        // −66 → −78 is a 12 dB fall within 3 s to below −70: weak once, and never
        // recovered (never two good readings in a row).
        assert_eq!(weak_at(&v), vec![2], "{v:?}");
        assert!(recovered_at(&v).is_empty(), "{v:?}");
        // Good for two readings right after going weak: held for 5 s all the same.
        let mut j = Judge::new(Thresholds::default());
        let v = run(
            &mut j,
            t0,
            0,
            &[Some(-80), Some(-80), Some(-60), Some(-60), Some(-60), Some(-60)],
        );
        assert_eq!(weak_at(&v), vec![1], "{v:?}");
        assert!(recovered_at(&v).is_empty(), "{v:?}");
        let v = run(&mut j, t0, 6, &[Some(-60)]);
        assert_eq!(recovered_at(&v), vec![6], "{v:?}");
    }

    #[test]
    fn lost_beacons_are_weak_at_once_and_restart_the_dwell() {
        let t0 = Instant::now();
        let mut j = Judge::new(Thresholds::default());
        let with_loss = |n| Station {
            beacon_loss: Some(n),
            ..station(-65)
        };
        assert_eq!(
            j.read(t0, Some(&with_loss(3))),
            Verdict::Unchanged,
            "a count, not a change"
        );
        let v = j.read(t0 + Duration::from_secs(1), Some(&with_loss(4)));
        assert!(matches!(v, Verdict::Weak(ref why) if why.contains("beacons")), "{v:?}");
        let s = |k: u64| t0 + Duration::from_secs(k);
        assert_eq!(j.read(s(4), Some(&with_loss(5))), Verdict::Unchanged);
        for k in 5..9 {
            assert_eq!(j.read(s(k), Some(&with_loss(5))), Verdict::Unchanged, "second {k}");
        }
        assert_eq!(j.read(s(9), Some(&with_loss(5))), Verdict::Recovered);
    }

    #[test]
    fn no_station_changes_nothing_and_starts_a_new_series() {
        let t0 = Instant::now();
        let mut j = Judge::new(Thresholds::default());
        let v = run(&mut j, t0, 0, &[Some(-80), None, Some(-80), None, Some(-60)]);
        assert!(v.is_empty(), "{v:?}");
        assert!(!j.weak());
    }
}
