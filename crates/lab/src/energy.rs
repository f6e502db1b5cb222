//! Modelled energy of a measurement (`energy_j` in records): what each emulated link
//! delivered, packet by packet, priced with mpflex's own energy model
//! ([`mpflex_engine::energy`], Lim's MPTCP energy model, seed 003 ch. 3) on the default
//! device profile (Galaxy S3 with LTE).
//!
//! Rule: every system is priced from the links, not from what it reports. The reason: the
//! links see kernel MPTCP's subflows, single-path TCP and mpflex's paths alike, so the
//! figures compare. Packets without payload (handshakes, ACKs) count as radio activity
//! (a cellular radio wakes for a subflow's SYN) but carry no transfer energy: the model's
//! per-byte laws fold ACKs into the data direction (§3.3).

use mpflex_engine::energy::{Dir, EnergyProfile, LinkKind, Meter, PathEnergy};

use crate::arrivals::PayloadLog;

/// The kind of link a profile's path is, by its name: `wifi*` WiFi; `lte*`, `cell*`,
/// `3g*`, `5g*` and `wwan*` cellular; anything else wired (free).
pub fn kind_of(name: &str) -> LinkKind {
    let n = name.to_ascii_lowercase();
    if n.starts_with("wifi") || n.starts_with("wlan") {
        LinkKind::Wifi
    } else if ["lte", "cell", "3g", "5g", "wwan"].iter().any(|p| n.starts_with(p)) {
        LinkKind::Cellular
    } else {
        LinkKind::Wired
    }
}

/// One direction of one path: payload arrivals and bare packets.
pub struct Delivered<'a> {
    pub payload: &'a PayloadLog,
    pub bare: &'a [u64],
}

/// Each path's energy for what was delivered down (`[path]`) and up, ending at the last
/// packet (running tails counted in full).
pub fn price(kinds: &[LinkKind], down: &[Delivered<'_>], up: &[Delivered<'_>]) -> Vec<PathEnergy> {
    let mut events: Vec<(u64, usize, Dir, u64)> = Vec::new();
    for (dir, logs) in [(Dir::Down, down), (Dir::Up, up)] {
        for (i, d) in logs.iter().enumerate() {
            events.extend(d.payload.entries.iter().map(|&(t, n)| (t, i, dir, n as u64)));
            events.extend(d.bare.iter().map(|&t| (t, i, dir, 0)));
        }
    }
    events.sort_by_key(|e| e.0);
    let mut m = Meter::new(EnergyProfile::default());
    for (i, k) in kinds.iter().enumerate() {
        m.set_kind(i, *k);
    }
    for &(t, i, dir, n) in &events {
        m.record(i, dir, t, n);
    }
    let end = events.last().map_or(0, |e| e.0);
    let mut r = m.report(end);
    r.resize(kinds.len().max(r.len()), PathEnergy::default());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name() {
        assert_eq!(kind_of("wifi"), LinkKind::Wifi);
        assert_eq!(kind_of("lte"), LinkKind::Cellular);
        assert_eq!(kind_of("eth"), LinkKind::Wired);
    }

    /// A bare SYN on LTE wakes its radio: promotion and a full tail, no bytes.
    #[test]
    fn a_handshake_alone_pays_the_cellular_fixed_cost() {
        let mut wifi = PayloadLog::default();
        for i in 0..100 {
            wifi.push(1_000_000 + i * 1000, 1448);
        }
        let none = PayloadLog::default();
        let down = [
            Delivered {
                payload: &wifi,
                bare: &[],
            },
            Delivered {
                payload: &none,
                bare: &[1_000_500],
            },
        ];
        let up = [
            Delivered {
                payload: &none,
                bare: &[],
            },
            Delivered {
                payload: &none,
                bare: &[],
            },
        ];
        let r = price(&[LinkKind::Wifi, LinkKind::Cellular], &down, &up);
        let c = EnergyProfile::default().cellular;
        assert_eq!((r[1].promotions, r[1].bytes), (1, 0));
        assert!((r[1].total_j() - c.fixed_j()).abs() < 1e-9);
        assert!(r[0].transfer_j > 0.0 && r[0].fixed_j == 0.0);
    }
}
