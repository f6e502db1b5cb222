//! The MPTCP energy model (Lim, seed 003 ch. 3) and the meter that applies it to the bytes
//! each path carried over time.
//!
//! Model, per interface and direction: a transfer at throughput `B` Mbit/s costs
//! `P(B) = α·B^β` µJ per byte (Table 3.2; ACKs folded into the data direction). While
//! WiFi and cellular carry at the same time the device draws a fraction γ of the sum
//! (§3.4, shared components such as the CPU; γ = 0.8586 on the Galaxy S3, 1 on the
//! Nexus 5). A cellular radio pays a fixed promotion and tail cost each time it leaves
//! its idle state (§3.1.2); WiFi's are negligible (Fig. 3.1, ch. 4). The thesis gives the
//! fixed costs only as a figure, so the default cellular promotion and tail are those of
//! its reference [30] (Huang et al., LTE: promotion 260 ms at 1210 mW, tail 11.6 s at
//! 1060 mW); any of it can be replaced by a profile (see docs/energy.md).
//!
//! The meter is clock-free: times are microseconds on any clock the caller keeps. It
//! cuts time into [`SLOT_US`] slots; a path's throughput in a slot is its bytes over the
//! span they arrived in (at least a tenth of a slot), so the tail of a transfer is priced
//! at the rate it ran at, not diluted by the empty rest of its slot.

/// How a path reaches the network, for its power model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkKind {
    Wifi,
    Cellular,
    /// No radio on the device: modelled as free.
    #[default]
    Wired,
}

impl LinkKind {
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Wifi => "wifi",
            LinkKind::Cellular => "cellular",
            LinkKind::Wired => "wired",
        }
    }
}

/// The direction of a transfer from the device's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Received by the device.
    Down = 0,
    /// Sent by the device.
    Up = 1,
}

/// `P(B) = α·B^β`, µJ per byte at `B` Mbit/s (the thesis' base regression model, §3.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerLaw {
    pub alpha: f64,
    pub beta: f64,
}

/// The lowest throughput the per-byte law is evaluated at (β < 0 makes it grow without
/// bound towards 0; a byte is never priced as if it took longer than at 1 kbit/s).
const MIN_MBIT: f64 = 0.001;

impl PowerLaw {
    pub fn uj_per_byte(&self, mbit: f64) -> f64 {
        self.alpha * mbit.max(MIN_MBIT).powf(self.beta)
    }
}

/// One interface's power model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Radio {
    pub down: PowerLaw,
    pub up: PowerLaw,
    /// Energy of one promotion from idle, J.
    pub promotion_j: f64,
    /// How long the radio stays in its high-power state after its last packet, s.
    pub tail_s: f64,
    /// Power drawn during the tail, W.
    pub tail_w: f64,
}

impl Radio {
    pub fn law(&self, dir: Dir) -> PowerLaw {
        match dir {
            Dir::Down => self.down,
            Dir::Up => self.up,
        }
    }

    /// The fixed cost of one use from idle: promotion plus a full tail (the thesis' C).
    pub fn fixed_j(&self) -> f64 {
        self.promotion_j + self.tail_s * self.tail_w
    }
}

/// A device: its WiFi and cellular models and γ.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyProfile {
    pub name: String,
    pub wifi: Radio,
    pub cellular: Radio,
    /// Fraction of the summed transfer energy drawn while both interfaces carry (§3.4).
    pub gamma: f64,
}

const fn law(alpha: f64, beta: f64) -> PowerLaw {
    PowerLaw { alpha, beta }
}

/// LTE promotion: 260 ms at 1210 mW (Huang et al., the thesis' [30]).
const LTE_PROMOTION_J: f64 = 0.260 * 1.2107;
/// LTE tail: 11.576 s at 1060 mW (the same source; the thesis: "6–12 seconds").
const LTE_TAIL_S: f64 = 11.576;
const LTE_TAIL_W: f64 = 1.060;

/// WiFi: negligible promotion and tail (Fig. 3.1; ch. 4 makes it the default interface
/// for that reason).
const fn wifi(down: PowerLaw, up: PowerLaw) -> Radio {
    Radio {
        down,
        up,
        promotion_j: 0.0,
        tail_s: 0.0,
        tail_w: 0.0,
    }
}

const fn lte(down: PowerLaw, up: PowerLaw) -> Radio {
    Radio {
        down,
        up,
        promotion_j: LTE_PROMOTION_J,
        tail_s: LTE_TAIL_S,
        tail_w: LTE_TAIL_W,
    }
}

impl EnergyProfile {
    /// Samsung Galaxy S3 with LTE: Table 3.2 coefficients, γ = 0.8586 (§3.4). The default.
    pub fn galaxy_s3() -> EnergyProfile {
        EnergyProfile {
            name: "galaxy-s3-lte".into(),
            wifi: wifi(law(4.675, -0.818), law(3.614, -0.662)),
            cellular: lte(law(10.043, -0.891), law(13.344, -0.836)),
            gamma: 0.8586,
        }
    }

    /// Galaxy S3 on 3G (HSDPA column of Table 3.2); fixed costs as LTE's (the thesis
    /// gives none for either).
    pub fn galaxy_s3_hsdpa() -> EnergyProfile {
        EnergyProfile {
            name: "galaxy-s3-hsdpa".into(),
            cellular: lte(law(9.344, -0.929), law(12.529, -0.852)),
            ..Self::galaxy_s3()
        }
    }

    /// LG Nexus 5 with LTE: Table 3.2, γ = 1 (§3.4: no shared portion).
    pub fn nexus5() -> EnergyProfile {
        EnergyProfile {
            name: "nexus5-lte".into(),
            wifi: wifi(law(1.789, -0.542), law(2.642, -0.646)),
            cellular: lte(law(4.679, -0.851), law(7.683, -0.712)),
            gamma: 1.0,
        }
    }

    /// The built-in profile of that name.
    pub fn named(name: &str) -> Option<EnergyProfile> {
        [Self::galaxy_s3(), Self::galaxy_s3_hsdpa(), Self::nexus5()]
            .into_iter()
            .find(|p| p.name == name)
    }

    pub fn radio(&self, kind: LinkKind) -> Option<&Radio> {
        match kind {
            LinkKind::Wifi => Some(&self.wifi),
            LinkKind::Cellular => Some(&self.cellular),
            LinkKind::Wired => None,
        }
    }

    /// Per-byte energy (µJ/B) of `kind` alone at `mbit`.
    pub fn per_byte(&self, kind: LinkKind, dir: Dir, mbit: f64) -> f64 {
        self.radio(kind).map_or(0.0, |r| r.law(dir).uj_per_byte(mbit))
    }

    /// Whole-transfer energy of the multipath model (§3.4), J: `s_w` bytes over WiFi at
    /// `b_w` Mbit/s and `s_c` over cellular at `b_c`, the overlap θ discounted by γ, and
    /// the fixed cost of each interface used (`E_M = E_T + C_W + C_C`).
    pub fn transfer_j(&self, dir: Dir, s_w: u64, b_w: f64, s_c: u64, b_c: f64) -> f64 {
        let (tw, tc) = (s_w as f64 / b_w.max(MIN_MBIT), s_c as f64 / b_c.max(MIN_MBIT));
        let theta = if s_w == 0 || s_c == 0 {
            0.0
        } else {
            tw.min(tc) / tw.max(tc)
        };
        let e_t = (self.per_byte(LinkKind::Wifi, dir, b_w) * s_w as f64
            + self.per_byte(LinkKind::Cellular, dir, b_c) * s_c as f64)
            * 1e-6
            * (1.0 - theta + self.gamma * theta);
        let fixed = |used: bool, r: &Radio| if used { r.fixed_j() } else { 0.0 };
        e_t + fixed(s_w > 0, &self.wifi) + fixed(s_c > 0, &self.cellular)
    }

    /// Per-byte energy (µJ/B) of using both, bytes split in proportion to the rates and
    /// fully overlapping: the large transfer the Energy Information Base assumes
    /// (eMPTCP, ch. 4 §4.1.2).
    pub fn both_per_byte(&self, dir: Dir, b_w: f64, b_c: f64) -> f64 {
        let (b_w, b_c) = (b_w.max(MIN_MBIT), b_c.max(MIN_MBIT));
        self.gamma * (self.per_byte(LinkKind::Wifi, dir, b_w) * b_w + self.per_byte(LinkKind::Cellular, dir, b_c) * b_c)
            / (b_w + b_c)
    }

    /// The cheapest use per byte at WiFi `b_w` and cellular `b_c` Mbit/s (the EIB lookup).
    pub fn cheapest(&self, dir: Dir, b_w: f64, b_c: f64) -> Usage {
        let w = self.per_byte(LinkKind::Wifi, dir, b_w);
        let c = self.per_byte(LinkKind::Cellular, dir, b_c);
        let both = self.both_per_byte(dir, b_w, b_c);
        if w <= both && w <= c {
            Usage::WifiOnly
        } else if c < both {
            Usage::CellularOnly
        } else {
            Usage::Both
        }
    }

    /// One row of the Energy Information Base (Table 4.1): at cellular `b_c`, the WiFi
    /// rates below which cellular alone and from which WiFi alone is cheapest, Mbit/s,
    /// found on a 1 kbit/s grid up to 1 Gbit/s.
    pub fn eib_row(&self, dir: Dir, b_c: f64) -> (f64, f64) {
        let mut cell_only_below = 0.0;
        let mut b_w = 0.01;
        let mut seen_other = false;
        while b_w < 1000.0 {
            match self.cheapest(dir, b_w, b_c) {
                Usage::WifiOnly => return (cell_only_below, b_w),
                Usage::CellularOnly if !seen_other => cell_only_below = b_w + 0.001,
                _ => seen_other = true,
            }
            b_w += 0.001;
        }
        (cell_only_below, f64::INFINITY)
    }
}

impl Default for EnergyProfile {
    fn default() -> Self {
        Self::galaxy_s3()
    }
}

/// What the EIB says to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    WifiOnly,
    Both,
    CellularOnly,
}

/// A direction carrying at most 1/this of the other's bytes in a slot is its
/// acknowledgements and requests, priced within the other's per-byte law.
const ACK_SHARE_INV: u64 = 10;

/// The meter's slot, µs.
pub const SLOT_US: u64 = 250_000;

/// Modelled energy of one path so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PathEnergy {
    /// Bytes priced (both directions).
    pub bytes: u64,
    /// Transfer energy, J, γ applied where it overlapped another radio.
    pub transfer_j: f64,
    /// Promotions and tails, J (a tail still running counts in full: the radio will
    /// draw it whatever happens next).
    pub fixed_j: f64,
    /// Times the radio was promoted from idle.
    pub promotions: u64,
}

impl PathEnergy {
    pub fn total_j(&self) -> f64 {
        self.transfer_j + self.fixed_j
    }
}

/// J per MB (10^6 bytes) of `bytes` for `joules`; 0 without bytes.
pub fn j_per_mb(joules: f64, bytes: u64) -> f64 {
    if bytes == 0 {
        0.0
    } else {
        joules / (bytes as f64 / 1e6)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct SlotUse {
    /// Any packet at all crossed.
    active: bool,
    bytes: [u64; 2],
    first: u64,
    last: u64,
}

#[derive(Debug, Clone, Default)]
struct MeterPath {
    kind: LinkKind,
    slot: SlotUse,
    energy: PathEnergy,
    /// End of the last slot the radio carried in (µs), for its tail.
    active_until: Option<u64>,
}

/// Prices what each path carries, as it carries it.
#[derive(Debug, Clone)]
pub struct Meter {
    profile: EnergyProfile,
    paths: Vec<MeterPath>,
    slot_start: Option<u64>,
}

impl Meter {
    pub fn new(profile: EnergyProfile) -> Meter {
        Meter {
            profile,
            paths: Vec::new(),
            slot_start: None,
        }
    }

    pub fn profile(&self) -> &EnergyProfile {
        &self.profile
    }

    pub fn set_profile(&mut self, profile: EnergyProfile) {
        self.profile = profile;
    }

    fn ensure(&mut self, path: usize) {
        if self.paths.len() <= path {
            self.paths.resize_with(path + 1, MeterPath::default);
        }
    }

    pub fn set_kind(&mut self, path: usize, kind: LinkKind) {
        self.ensure(path);
        self.paths[path].kind = kind;
    }

    pub fn kind(&self, path: usize) -> LinkKind {
        self.paths.get(path).map_or(LinkKind::Wired, |p| p.kind)
    }

    /// `bytes` crossed `path` in direction `dir` at `t_us` (0: a packet without payload,
    /// which wakes a radio but costs no transfer energy). Times must not go backwards by
    /// more than a slot (earlier ones count in the current slot).
    pub fn record(&mut self, path: usize, dir: Dir, t_us: u64, bytes: u64) {
        self.ensure(path);
        self.advance(t_us);
        let s = &mut self.paths[path].slot;
        s.active = true;
        if bytes == 0 {
            return;
        }
        if s.bytes == [0, 0] {
            s.first = t_us;
        }
        s.bytes[dir as usize] += bytes;
        s.last = s.last.max(t_us);
    }

    /// Closes the slots that ended by `t_us`.
    pub fn advance(&mut self, t_us: u64) {
        let start = *self.slot_start.get_or_insert(t_us);
        if t_us >= start + SLOT_US {
            self.close_slot(start);
            // Empty slots in between cost nothing beyond the tails, priced on the next use.
            self.slot_start = Some(t_us - (t_us - start) % SLOT_US);
        }
    }

    fn close_slot(&mut self, start: u64) {
        let end = start + SLOT_US;
        let carried = |k: LinkKind| self.paths.iter().any(|p| p.kind == k && p.slot.bytes != [0, 0]);
        // Slots with only bare packets wake the radio but carry nothing to price.
        let overlap = carried(LinkKind::Wifi) && carried(LinkKind::Cellular);
        let profile = &self.profile;
        for p in &mut self.paths {
            let s = std::mem::take(&mut p.slot);
            if !s.active {
                continue;
            }
            let Some(radio) = profile.radio(p.kind) else {
                p.energy.bytes += s.bytes[0] + s.bytes[1];
                continue;
            };
            let span_s = s.last.saturating_sub(s.first).max(SLOT_US / 10) as f64 / 1e6;
            let mut j = 0.0;
            // A reverse trickle (acknowledgements, requests) rides with the transfer it
            // serves: the thesis folds ACK energy into the data direction (§3.3).
            let [down, up] = s.bytes;
            let folded = |minor: u64, major: u64| minor * ACK_SHARE_INV <= major;
            for dir in [Dir::Down, Dir::Up] {
                let b = s.bytes[dir as usize];
                let skip = match dir {
                    Dir::Down => folded(down, up),
                    Dir::Up => folded(up, down),
                };
                if b > 0 && !skip {
                    let mbit = b as f64 * 8.0 / span_s / 1e6;
                    j += radio.law(dir).uj_per_byte(mbit) * b as f64 * 1e-6;
                }
            }
            if overlap {
                j *= profile.gamma;
            }
            p.energy.bytes += s.bytes[0] + s.bytes[1];
            p.energy.transfer_j += j;
            // The radio: promoted from idle (after a full tail of its last use), or its
            // tail since the last use cut short by this one.
            let tail_us = (radio.tail_s * 1e6) as u64;
            match p.active_until {
                Some(until) if start < until + tail_us => {
                    p.energy.fixed_j += radio.tail_w * start.saturating_sub(until) as f64 / 1e6;
                }
                last => {
                    if last.is_some() {
                        p.energy.fixed_j += radio.tail_w * radio.tail_s;
                    }
                    p.energy.fixed_j += radio.promotion_j;
                    p.energy.promotions += 1;
                }
            }
            p.active_until = Some(end);
        }
    }

    /// Every path's energy up to `t_us`: the current slot priced as if it ended now,
    /// and each radio's running tail in full.
    pub fn report(&self, t_us: u64) -> Vec<PathEnergy> {
        let mut m = self.clone();
        if let Some(start) = m.slot_start {
            m.close_slot(start.min(t_us));
        }
        let profile = &m.profile;
        m.paths
            .iter()
            .map(|p| {
                let mut e = p.energy;
                if let (Some(_), Some(r)) = (p.active_until, profile.radio(p.kind)) {
                    e.fixed_j += r.tail_w * r.tail_s;
                }
                e
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
