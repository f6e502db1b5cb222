//! The window a measurement's energy is priced over ([`crate::energy`]).
//!
//! Rule: every system's window holds its own set-up — the connections and paths it opens
//! for the transfer — as well as the transfer. The reason: Lim's dissertation (seed 003)
//! prices a download with everything the device's radios did for it: MPTCP's small
//! downloads cost as much as TCP over LTE because "the device spends energy to establish
//! an LTE subflow" (§3.5), and eMPTCP's saving on them comes from not establishing that
//! subflow (§4.1.5, delayed subflow establishment; §4.3 runs each system anew per
//! download). Kernel TCP, MPTCP and the oracle open their connections inside the
//! transfer, so their window opens with it; an mpflex pair started for the measurement
//! opens its paths (a cellular path's handshake and energy-standby exchange included)
//! before the transfer, so its window opens before the pair starts. A pair kept up for a
//! block (`--keep-mpflex`) was set up before any window: its records carry no energy.

use std::time::Duration;

use crate::emulator::Emulator;
use crate::energy::{kind_of, price, Delivered};
use crate::profile::Profile;
use crate::workload::Fields;

/// Where a measurement's energy window opened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Pricing {
    /// With the transfer: the system sets up its connections inside it.
    AtTransfer,
    /// Before the system's set-up (an mpflex pair started for this measurement), after
    /// waiting this long for quiet links.
    BeforeSetup(Duration),
    /// Not priced: the system was set up before any window.
    Unpriced,
}

impl Pricing {
    /// Whether the transfer opens the window (clears the links' logs) itself.
    pub fn opens_at_transfer(self) -> bool {
        self == Pricing::AtTransfer
    }

    /// The quiet wait before the set-up, if the window opened there.
    pub fn settled_before(self) -> Duration {
        match self {
            Pricing::BeforeSetup(d) => d,
            _ => Duration::ZERO,
        }
    }

    /// The record's name for where the window opened (`energy_window`).
    fn name(self) -> &'static str {
        match self {
            Pricing::AtTransfer => "transfer",
            Pricing::BeforeSetup(_) => "setup",
            Pricing::Unpriced => "none",
        }
    }
}

/// The modelled energy of what the links delivered since the logs were cleared:
/// `energy_j` in all, `energy_path_j` per path, and `energy_window` (where the window
/// opened); none if a log overflowed or the system is [`Pricing::Unpriced`].
pub(super) fn energy_fields(emu: &Emulator, profile: &Profile, pricing: Pricing, f: &mut Fields) {
    if pricing == Pricing::Unpriced {
        return;
    }
    let logs = [emu.payload_logs(0), emu.payload_logs(1)];
    let bare = [emu.bare_logs(0), emu.bare_logs(1)];
    if logs.iter().flatten().any(|l| l.full) {
        return;
    }
    let dir = |d: usize| -> Vec<Delivered<'_>> {
        logs[d]
            .iter()
            .zip(&bare[d])
            .map(|(payload, bare)| Delivered { payload, bare })
            .collect()
    };
    let kinds: Vec<_> = profile.paths.iter().map(|p| kind_of(&p.name)).collect();
    let e = price(&kinds, &dir(0), &dir(1));
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    f.insert("energy_j".into(), round(e.iter().map(|p| p.total_j()).sum()).into());
    f.insert(
        "energy_path_j".into(),
        e.iter().map(|p| round(p.total_j())).collect::<Vec<_>>().into(),
    );
    f.insert("energy_window".into(), pricing.name().into());
}
