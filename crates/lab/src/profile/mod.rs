//! Network profiles: the seeds' path setups, the papers' rate grids, traces, and custom ones
//! from TOML.
//!
//! [`Profile::resolve`] turns one spec into one profile; [`expand`] also accepts families
//! (`bw-grid`, `ecf-asym`, `ecf-asym-all`, `seed-default-all`, `traces:<dir>`) and
//! comma-separated lists of specs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::link::{Link, LinkParams, QueueLimit, Rate};
use crate::trace::Trace;

/// One path, both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSpec {
    pub name: String,
    pub down: LinkParams,
    pub up: LinkParams,
}

/// Which directions of a path an event applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Server → client.
    Down,
    /// Client → server.
    Up,
    #[default]
    Both,
}

impl Direction {
    /// Indices into `[down, up]` pairs.
    pub fn indices(self) -> &'static [usize] {
        match self {
            Direction::Down => &[0],
            Direction::Up => &[1],
            Direction::Both => &[0, 1],
        }
    }
}

/// What an event does to the selected directions of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Everything queued or in flight is lost; arrivals are dropped until `Up`.
    Down,
    Up,
    /// New parameters from now on; `None` keeps the current value. A new rate replaces a
    /// trace with a constant rate.
    Change {
        rate_kbit: Option<u64>,
        /// One-way delay, like `delay_ms` of a path direction.
        delay: Option<Duration>,
        /// Probability in [0, 1].
        loss: Option<f64>,
    },
}

/// Something that happens to a path at a time after the emulator started.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub at: Duration,
    /// Index into `Profile::paths`.
    pub path: usize,
    pub direction: Direction,
    pub action: Action,
}

impl Event {
    /// Applies the event to one direction's model.
    pub fn apply<P>(&self, link: &mut Link<P>) {
        match &self.action {
            Action::Down => link.set_up(false),
            Action::Up => link.set_up(true),
            Action::Change { rate_kbit, delay, loss } => {
                let mut params = link.params().clone();
                if let Some(k) = rate_kbit {
                    params.rate = Rate::Constant(*k);
                }
                if let Some(d) = delay {
                    params.delay = *d;
                }
                if let Some(l) = loss {
                    params.loss = *l;
                }
                link.set_params(params);
            }
        }
    }
}

/// A set of paths and the events that change them over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub paths: Vec<PathSpec>,
    pub events: Vec<Event>,
}

fn constant(kbit: u64, rtt_ms: u64, queue_ms: u64) -> LinkParams {
    LinkParams {
        delay: Duration::from_micros(rtt_ms * 500),
        jitter: Duration::ZERO,
        rate: Rate::Constant(kbit),
        loss: 0.0,
        queue: QueueLimit::Millis(queue_ms),
    }
}

/// A "wifi" path (RTT 50 ms, 50 ms droptail buffer) and an "lte" path (RTT `lte_rtt` ms,
/// 500 ms buffer) with the given rates in kbit/s.
fn wifi_lte(name: String, wifi: (u64, u64), lte: (u64, u64), lte_rtt: u64) -> Profile {
    wifi_lte_rtts(name, wifi, lte, (50, lte_rtt))
}

/// [`wifi_lte`] with both RTTs given, ms: (WiFi, LTE).
fn wifi_lte_rtts(name: String, wifi: (u64, u64), lte: (u64, u64), rtts: (u64, u64)) -> Profile {
    let (wifi_rtt, lte_rtt) = rtts;
    Profile {
        name,
        paths: vec![
            PathSpec {
                name: "wifi".into(),
                down: constant(wifi.0, wifi_rtt, 50),
                up: constant(wifi.1, wifi_rtt, 50),
            },
            PathSpec {
                name: "lte".into(),
                down: constant(lte.0, lte_rtt, 500),
                up: constant(lte.1, lte_rtt, 500),
            },
        ],
        events: Vec::new(),
    }
}

/// WiFi 7040/2020 kbit/s, RTT 50 ms, 50 ms buffer; LTE 9185/2286 kbit/s, RTT `lte_rtt`,
/// 500 ms buffer (DEMS and MPFlex setups).
pub fn seed_default(lte_rtt: u64) -> Profile {
    let name = if lte_rtt == 70 {
        "seed-default".into()
    } else {
        format!("seed-default-{lte_rtt}")
    };
    wifi_lte(name, (7040, 2020), (9185, 2286), lte_rtt)
}

/// `seed-default-lossy`: seed-default with 1 % random loss on WiFi, both directions, at a
/// stable rate: the path the no-flapping floor describes (a lossy link is not a
/// failing one; its monitor must never demote it).
pub fn seed_default_lossy() -> Profile {
    let mut p = seed_default(70);
    p.name = "seed-default-lossy".into();
    p.paths[0].down.loss = 0.01;
    p.paths[0].up.loss = 0.01;
    p
}

/// `seed-default-wifi20`: seed-default's rates and buffers with WiFi's RTT 20 ms and LTE's
/// 70 ms, the RTTs of MPFlex's TxDelay experiment (Nikravesh et al., "20 ms vs 70 ms";
/// the paper gives no rates, so the rates of its default profile).
pub fn seed_default_wifi20() -> Profile {
    wifi_lte_rtts("seed-default-wifi20".into(), (7040, 2020), (9185, 2286), (20, 70))
}

/// WiFi and LTE as eMPTCP's evaluation saw them (Lim, seed 003): RTT 15 ms on WiFi and
/// 65 ms on LTE (§3.5's measured RTTs), LTE 9 Mbit/s down ([`ENERGY_LTE_KBIT`]) and
/// seed-default's 2286 kbit/s up with a 500 ms buffer; WiFi at `wifi` (kbit/s, both
/// directions) behind a [`ECF_QUEUE_BYTES`] droptail buffer, as ECF's shapers: a buffer in
/// bytes stays one a slow WiFi can drain (50 ms at 0.8 Mbit/s would hold three packets).
fn energy_pair(name: &str, wifi: Rate) -> Profile {
    energy_pair_lte(name, wifi, ENERGY_LTE_KBIT)
}

/// LTE's downlink in the energy profiles, kbit/s.
const ENERGY_LTE_KBIT: u64 = 9000;

/// LTE's downlink in `wifi-good-lte-bad`, kbit/s: below the 8 Mbit/s the thesis' §4.3.1
/// draws between good and bad, at the 5 Mbit/s its mode assumes for an unmeasured LTE
/// link (§4.1.1).
pub const BAD_LTE_KBIT: u64 = 5000;

/// [`energy_pair`] with LTE's downlink at `lte` kbit/s.
fn energy_pair_lte(name: &str, wifi: Rate, lte: u64) -> Profile {
    let wifi_dir = LinkParams {
        delay: Duration::from_micros(15 * 500),
        jitter: Duration::ZERO,
        rate: wifi,
        loss: 0.0,
        queue: QueueLimit::Bytes(ECF_QUEUE_BYTES),
    };
    Profile {
        name: name.into(),
        paths: vec![
            PathSpec {
                name: "wifi".into(),
                down: wifi_dir.clone(),
                up: wifi_dir,
            },
            PathSpec {
                name: "lte".into(),
                down: constant(lte, 65, 500),
                up: constant(2286, 65, 500),
            },
        ],
        events: Vec::new(),
    }
}

/// `wifi-good`: WiFi 20 Mbit/s, LTE 9 Mbit/s ([`energy_pair`]).
pub fn wifi_good() -> Profile {
    energy_pair("wifi-good", Rate::Constant(20_000))
}

/// `wifi-good-lte-bad`: WiFi 20 Mbit/s, LTE 5 Mbit/s ([`BAD_LTE_KBIT`]): the thesis'
/// "Good WiFi & Bad LTE" (§4.3.3, 16 MB: eMPTCP about half MPTCP's energy in about 20 %
/// more time), where `wifi-good`'s LTE at 9 Mbit/s is good.
pub fn wifi_good_lte_bad() -> Profile {
    energy_pair_lte("wifi-good-lte-bad", Rate::Constant(20_000), BAD_LTE_KBIT)
}

/// `wifi-bad`: WiFi 0.8 Mbit/s, LTE 9 Mbit/s ([`energy_pair`]).
pub fn wifi_bad() -> Profile {
    energy_pair("wifi-bad", Rate::Constant(800))
}

/// On-off WiFi's rates, kbit/s: eMPTCP's two states, "<1 Mbps" and ">10 Mbps" (§4.2.3),
/// as `wifi-bad` and `wifi-good`.
pub const ONOFF_KBIT: (u64, u64) = (800, 20_000);
/// How long an on-off trace runs before it repeats, s.
const ONOFF_SECS: u64 = 1200;

/// `wifi-onoff[:<mean s>]`: [`energy_pair`] with WiFi alternating between 0.8 and
/// 20 Mbit/s, each state held for an exponentially distributed time of mean `mean_s`
/// (eMPTCP's evaluation: 40 s), starting slow. A trace from a fixed seed, so every system
/// and every repetition meets the same pattern from its start (traces are rewound per
/// transfer).
pub fn wifi_onoff(mean_s: f64) -> Result<Profile> {
    if !(mean_s.is_finite() && (0.1..=600.0).contains(&mean_s)) {
        bail!("wifi-onoff:<mean s>: {mean_s} is not between 0.1 and 600");
    }
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(25);
    let mut ms = Vec::new();
    let (mut t, mut slow, mut carry) = (0u64, true, 0.0f64);
    while t < ONOFF_SECS * 1000 {
        let u: f64 = rng.gen_range(f64::EPSILON..1.0);
        let hold = ((-u.ln() * mean_s * 1000.0) as u64).max(1);
        let kbit = if slow { ONOFF_KBIT.0 } else { ONOFF_KBIT.1 };
        // 1500-byte opportunities per ms at `kbit`.
        let per_ms = kbit as f64 / 12_000.0;
        for now in t..(t + hold).min(ONOFF_SECS * 1000) {
            carry += per_ms;
            while carry >= 1.0 {
                ms.push(now + 1);
                carry -= 1.0;
            }
        }
        t += hold;
        slow = !slow;
    }
    let name = if mean_s == 40.0 {
        "wifi-onoff".to_string()
    } else {
        format!("wifi-onoff:{mean_s}")
    };
    Ok(energy_pair(&name, Rate::Trace(Trace::from_millis(ms)?)))
}

/// One path of an N-path profile: `name`, (down, up) kbit/s, RTT ms, buffer in ms of its
/// rate.
fn path(name: &str, (down, up): (u64, u64), rtt_ms: u64, queue_ms: u64) -> PathSpec {
    PathSpec {
        name: name.into(),
        down: constant(down, rtt_ms, queue_ms),
        up: constant(up, rtt_ms, queue_ms),
    }
}

/// A wired WAN (cable or DSL): 10000/2000 kbit/s, RTT 30 ms, 100 ms buffer.
fn wired() -> PathSpec {
    path("wired", (10_000, 2000), 30, 100)
}

/// seed-default's WiFi and LTE paths ([`seed_default`]).
fn seed_paths() -> [PathSpec; 2] {
    let [wifi, lte]: [PathSpec; 2] = seed_default(70).paths.try_into().expect("two paths");
    [wifi, lte]
}

/// `three-wan`: a router with three WANs of mixed rates and delays: [`wired`], then
/// seed-default's WiFi (7040/2020 kbit/s, RTT 50 ms, 50 ms buffer) and LTE
/// (9185/2286 kbit/s, RTT 70 ms, 500 ms buffer).
pub fn three_wan() -> Profile {
    let [wifi, lte] = seed_paths();
    Profile {
        name: "three-wan".into(),
        paths: vec![wired(), wifi, lte],
        events: Vec::new(),
    }
}

/// `four-mixed`: `three-wan` and a second, slower and farther cellular link, `lte2`
/// (4000/1000 kbit/s, RTT 120 ms, 500 ms buffer: a weak-signal LTE or a 3G modem).
pub fn four_mixed() -> Profile {
    let mut p = three_wan();
    p.name = "four-mixed".into();
    p.paths.push(path("lte2", (4000, 1000), 120, 500));
    p
}

/// The trace `five-router` replays on its cellular link unless given another, relative to
/// the working directory (the repository's root beside `../shared`): a drive on AT&T's LTE
/// network, 4.6/1.9 Mbit/s on average with outages of several seconds.
pub const FIVE_ROUTER_TRACE: &str = "../shared/traces/ATT-LTE-driving-2016";

/// `five-router[:<trace prefix>]`: five WANs on one router: a fast wired link, `fiber`
/// (20000/10000 kbit/s, RTT 15 ms, 50 ms buffer); a `dsl` line (6000/1000 kbit/s, RTT
/// 40 ms, 200 ms buffer); seed-default's WiFi and LTE; and `lte-trace`, a cellular link
/// replaying `<prefix>.down` / `<prefix>.up` (mahimahi; default [`FIVE_ROUTER_TRACE`]) with
/// RTT 90 ms and a 500 ms buffer.
pub fn five_router(trace: &str) -> Result<Profile> {
    let load = |dir: &str| -> Result<Trace> {
        Trace::load(Path::new(&format!("{trace}.{dir}"))).with_context(|| format!("profile five-router:{trace}"))
    };
    let mut traced = path("lte-trace", (1, 1), 90, 500);
    traced.down.rate = Rate::Trace(load("down")?);
    traced.up.rate = Rate::Trace(load("up")?);
    let [wifi, lte] = seed_paths();
    let name = if trace == FIVE_ROUTER_TRACE {
        "five-router".to_string()
    } else {
        format!(
            "five-router:{}",
            Path::new(trace)
                .file_name()
                .map_or(trace.into(), |n| n.to_string_lossy())
        )
    };
    Ok(Profile {
        name,
        paths: vec![
            path("fiber", (20_000, 10_000), 15, 50),
            path("dsl", (6000, 1000), 40, 200),
            wifi,
            lte,
            traced,
        ],
        events: Vec::new(),
    })
}

/// DEMS's bandwidth grid, in kbit/s: each of WiFi and LTE takes every value (6 x 6 profiles).
pub const BW_GRID_KBIT: [u64; 6] = [2500, 7500, 12_500, 17_500, 22_500, 27_500];

/// ECF's path rates, in kbit/s.
pub const ECF_RATES_KBIT: [u64; 6] = [300, 700, 1100, 1700, 4200, 8600];

/// The fast path's rate in ECF's streaming figures, in kbit/s: `ecf-asym` pairs every
/// [`ECF_RATES_KBIT`] WiFi rate with this LTE rate.
pub const ECF_FAST_KBIT: u64 = 8600;

/// Highest rate a `bw-grid:` / `ecf-asym:` spec accepts, in Mbit/s.
const MAX_MBIT: f64 = 10_000.0;

/// A kbit/s rate as Mbit/s in its shortest decimal form: 2500 → "2.5", 10000 → "10".
fn fmt_mbit(kbit: u64) -> String {
    // kbit / 1000 is the double nearest the decimal, and `{}` prints the shortest string
    // that reads back as that double.
    format!("{}", kbit as f64 / 1000.0)
}

/// `bw-grid:<wifi>x<lte>` (DEMS): WiFi and LTE at the given rates in kbit/s, the same in
/// both directions; WiFi RTT 50 ms with a 50 ms buffer, LTE RTT 70 ms with a 500 ms buffer
/// (the shape of [`seed_default`]). Rates must be > 0.
pub fn bw_grid(wifi_kbit: u64, lte_kbit: u64) -> Result<Profile> {
    symmetric_pair("bw-grid", wifi_kbit, lte_kbit)
}

/// Droptail buffer of ECF's shapers, bytes: see [`ecf_asym`].
pub const ECF_QUEUE_BYTES: u64 = 36_000;

/// `ecf-asym:<wifi>x<lte>` (ECF's asymmetric pairs), shaped like ECF's testbed: rates in
/// kbit/s in both directions, base RTT 20 ms on WiFi and 70 ms on LTE, and one
/// [`ECF_QUEUE_BYTES`] droptail buffer per direction. ECF's Table 5.2 measured RTTs under
/// load that fall with the rate as a fixed queue in the shaper makes them (WiFi 969 ms at
/// 0.3 Mbit/s to 40 ms at 8.6; LTE 858 to 105 ms); a 36 KB queue on these base RTTs gives
/// 980 ms and 53 ms on WiFi, 1030 ms and 103 ms on LTE. (With `bw-grid`'s 50 ms WiFi
/// buffer a 0.3 Mbit/s WiFi path would look like the *fastest* path by RTT, a different
/// experiment from ECF's.) Rates must be > 0.
pub fn ecf_asym(wifi_kbit: u64, lte_kbit: u64) -> Result<Profile> {
    let mut p = symmetric_pair("ecf-asym", wifi_kbit, lte_kbit)?;
    for (path, rtt_ms) in p.paths.iter_mut().zip([20u64, 70]) {
        for l in [&mut path.down, &mut path.up] {
            l.delay = Duration::from_micros(rtt_ms * 500);
            l.queue = QueueLimit::Bytes(ECF_QUEUE_BYTES);
        }
    }
    Ok(p)
}

fn symmetric_pair(family: &str, wifi_kbit: u64, lte_kbit: u64) -> Result<Profile> {
    let name = format!("{family}:{}x{}", fmt_mbit(wifi_kbit), fmt_mbit(lte_kbit));
    if wifi_kbit == 0 || lte_kbit == 0 {
        bail!("profile {name:?}: rates must be > 0");
    }
    Ok(wifi_lte(name, (wifi_kbit, wifi_kbit), (lte_kbit, lte_kbit), 70))
}

/// Parses `<wifi>x<lte>` (Mbit/s, fractions allowed) into kbit/s, rounded to whole kbit/s.
fn parse_pair(spec: &str, rates: &str) -> Result<(u64, u64)> {
    let Some((w, l)) = rates.split_once('x') else {
        bail!("profile {spec:?}: expected <wifi>x<lte> rates in Mbit/s, e.g. 2.5x27.5");
    };
    let one = |what: &str, v: &str| -> Result<u64> {
        let mbit: f64 = v
            .trim()
            .parse()
            .ok()
            .filter(|m: &f64| m.is_finite())
            .with_context(|| format!("profile {spec:?}: {what} rate {v:?} is not a number of Mbit/s"))?;
        if !(mbit > 0.0 && mbit <= MAX_MBIT) {
            bail!("profile {spec:?}: {what} rate {v:?} must be > 0 and at most {MAX_MBIT} Mbit/s");
        }
        let kbit = (mbit * 1000.0).round() as u64;
        if kbit == 0 {
            bail!("profile {spec:?}: {what} rate {v:?} is below 1 kbit/s");
        }
        Ok(kbit)
    };
    Ok((one("wifi", w)?, one("lte", l)?))
}

/// Families [`expand`] knows besides `traces:<dir>`.
const FAMILIES: [&str; 4] = ["bw-grid", "ecf-asym", "ecf-asym-all", "seed-default-all"];

/// Expands a profile spec into profiles, in order:
///
/// - `bw-grid`: the 36 DEMS grid profiles `bw-grid:<w>x<l>` over [`BW_GRID_KBIT`], row-major
///   with the WiFi rate outer (2.5x2.5, 2.5x7.5, …, 27.5x27.5);
/// - `ecf-asym`: the 6 pairs `ecf-asym:<x>x8.6` for x in [`ECF_RATES_KBIT`] (one fast path at
///   8.6 Mbit/s, the other varying, as in ECF's streaming figures);
/// - `ecf-asym-all`: all 36 ordered pairs over [`ECF_RATES_KBIT`], WiFi outer;
/// - `seed-default-all`: `seed-default`, `seed-default-270`, `seed-default-470`;
/// - `traces:<dir>`: `trace:<dir>/<name>` for every `<name>.down` with a matching
///   `<name>.up` in the directory, sorted by name (unpaired files are ignored; no pair at all
///   is an error);
/// - anything else: the single profile [`Profile::resolve`] gives.
///
/// A comma-separated list expands each element and concatenates the results (so paths with
/// commas cannot be used here; duplicates are kept).
pub fn expand(spec: &str) -> Result<Vec<Profile>> {
    if spec.contains(',') {
        let mut all = Vec::new();
        for part in spec.split(',') {
            let part = part.trim();
            if part.is_empty() {
                bail!("profile list {spec:?}: empty element");
            }
            all.extend(expand(part)?);
        }
        return Ok(all);
    }
    let cross = |rows: &[u64], cols: &[u64], f: fn(u64, u64) -> Result<Profile>| -> Result<Vec<Profile>> {
        rows.iter().flat_map(|&w| cols.iter().map(move |&l| f(w, l))).collect()
    };
    match spec {
        "bw-grid" => return cross(&BW_GRID_KBIT, &BW_GRID_KBIT, bw_grid),
        "ecf-asym" => return cross(&ECF_RATES_KBIT, &[ECF_FAST_KBIT], ecf_asym),
        "ecf-asym-all" => return cross(&ECF_RATES_KBIT, &ECF_RATES_KBIT, ecf_asym),
        "seed-default-all" => return Ok([70, 270, 470].into_iter().map(seed_default).collect()),
        _ => {}
    }
    if let Some(dir) = spec.strip_prefix("traces:") {
        let entries = std::fs::read_dir(dir).with_context(|| format!("profile {spec:?}: cannot read {dir:?}"))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.with_context(|| format!("profile {spec:?}: reading {dir:?}"))?;
            let file = entry.file_name();
            let Some(name) = file.to_str().and_then(|f| f.strip_suffix(".down")) else {
                continue;
            };
            if !name.is_empty() && Path::new(dir).join(format!("{name}.up")).is_file() {
                names.push(name.to_string());
            }
        }
        if names.is_empty() {
            bail!("profile {spec:?}: no <name>.down / <name>.up trace pairs in {dir:?}");
        }
        names.sort();
        return names
            .iter()
            .map(|n| {
                let prefix = Path::new(dir).join(n);
                let prefix = prefix.to_str().context("trace path is not UTF-8")?;
                Profile::resolve(&format!("trace:{prefix}")).with_context(|| format!("profile {spec:?}"))
            })
            .collect();
    }
    Ok(vec![Profile::resolve(spec)?])
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirToml {
    #[serde(default)]
    rate_kbit: Option<u64>,
    #[serde(default)]
    trace: Option<PathBuf>,
    delay_ms: f64,
    #[serde(default)]
    jitter_ms: f64,
    #[serde(default)]
    loss_pct: f64,
    #[serde(default)]
    queue_ms: Option<u64>,
    #[serde(default)]
    queue_bytes: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventToml {
    at_ms: u64,
    path: String,
    /// "down", "up" or "change".
    action: String,
    #[serde(default)]
    direction: Direction,
    #[serde(default)]
    rate_kbit: Option<u64>,
    #[serde(default)]
    delay_ms: Option<f64>,
    #[serde(default)]
    loss_pct: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathToml {
    name: String,
    down: DirToml,
    up: DirToml,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileToml {
    name: Option<String>,
    paths: Vec<PathToml>,
    #[serde(default)]
    events: Vec<EventToml>,
}

fn dir_params(d: &DirToml, base: &Path, what: &str) -> Result<LinkParams> {
    let rate = match (&d.rate_kbit, &d.trace) {
        (Some(k), None) if *k > 0 => Rate::Constant(*k),
        (None, Some(t)) => Rate::Trace(Trace::load(&base.join(t)).with_context(|| format!("{what}.trace"))?),
        (Some(0), None) => bail!("{what}.rate_kbit: must be > 0"),
        (None, None) => Rate::Unlimited,
        _ => bail!("{what}: set rate_kbit or trace, not both"),
    };
    if !(0.0..100.0).contains(&d.loss_pct) {
        bail!("{what}.loss_pct: must be in [0, 100)");
    }
    // `contains` is false for NaN too, so `from_secs_f64` below cannot panic.
    if !(0.0..=60_000.0).contains(&d.delay_ms) || !(0.0..=60_000.0).contains(&d.jitter_ms) {
        bail!("{what}.delay_ms / jitter_ms: between 0 and 60000 ms");
    }
    if d.queue_bytes == Some(0) {
        bail!("{what}.queue_bytes: must be > 0");
    }
    let queue = match (d.queue_ms, d.queue_bytes) {
        (Some(ms), None) => QueueLimit::Millis(ms),
        (None, Some(b)) => QueueLimit::Bytes(b),
        (None, None) => QueueLimit::Millis(100),
        _ => bail!("{what}: set queue_ms or queue_bytes, not both"),
    };
    Ok(LinkParams {
        delay: Duration::from_secs_f64(d.delay_ms / 1000.0),
        jitter: Duration::from_secs_f64(d.jitter_ms / 1000.0),
        rate,
        loss: d.loss_pct / 100.0,
        queue,
    })
}

fn event(e: &EventToml, paths: &[PathSpec]) -> Result<Event> {
    let path = paths
        .iter()
        .position(|p| p.name == e.path)
        .with_context(|| format!("path: no path named {:?}", e.path))?;
    let action = match e.action.as_str() {
        "down" | "up" => {
            if e.rate_kbit.is_some() || e.delay_ms.is_some() || e.loss_pct.is_some() {
                bail!("rate_kbit, delay_ms and loss_pct go with action = \"change\" only");
            }
            if e.action == "down" {
                Action::Down
            } else {
                Action::Up
            }
        }
        "change" => {
            if e.rate_kbit.is_none() && e.delay_ms.is_none() && e.loss_pct.is_none() {
                bail!("a change needs rate_kbit, delay_ms and/or loss_pct");
            }
            if e.rate_kbit == Some(0) {
                bail!("rate_kbit: must be > 0 (take the link down instead)");
            }
            if let Some(d) = e.delay_ms {
                if !(0.0..=60_000.0).contains(&d) {
                    bail!("delay_ms: between 0 and 60000");
                }
            }
            if let Some(l) = e.loss_pct {
                if !(0.0..100.0).contains(&l) {
                    bail!("loss_pct: must be in [0, 100)");
                }
            }
            Action::Change {
                rate_kbit: e.rate_kbit,
                delay: e.delay_ms.map(|d| Duration::from_secs_f64(d / 1000.0)),
                loss: e.loss_pct.map(|l| l / 100.0),
            }
        }
        other => bail!("action: {other:?} is not one of down, up, change"),
    };
    Ok(Event {
        at: Duration::from_millis(e.at_ms),
        path,
        direction: e.direction,
        action,
    })
}

impl Profile {
    /// One profile: a built-in or a TOML file.
    ///
    /// Built-ins: `seed-default`, `seed-default-270`, `seed-default-470` ([`seed_default`]),
    /// `seed-default-wifi20`, `seed-default-lossy`, `wifi-good`, `wifi-good-lte-bad`,
    /// `wifi-bad`, `wifi-onoff`; with more than two paths `three-wan`, `four-mixed` and
    /// `five-router[:<trace prefix>]`;
    /// `bw-grid:<wifi>x<lte>` ([`bw_grid`]) and `ecf-asym:<wifi>x<lte>` ([`ecf_asym`]) with
    /// rates in Mbit/s, fractions allowed, rounded to whole kbit/s (the name is normalised
    /// to the shortest decimals: `bw-grid:2.50x27.5` is named `bw-grid:2.5x27.5`);
    /// `trace:<dir>/<name>` for `<name>.down` / `<name>.up` as the LTE path of
    /// `seed-default`. Families of several profiles go through [`expand`].
    pub fn resolve(spec: &str) -> Result<Profile> {
        match spec {
            "seed-default" => return Ok(seed_default(70)),
            "seed-default-270" => return Ok(seed_default(270)),
            "seed-default-470" => return Ok(seed_default(470)),
            "seed-default-wifi20" => return Ok(seed_default_wifi20()),
            "seed-default-lossy" => return Ok(seed_default_lossy()),
            "wifi-good" => return Ok(wifi_good()),
            "wifi-bad" => return Ok(wifi_bad()),
            "wifi-good-lte-bad" => return Ok(wifi_good_lte_bad()),
            "wifi-onoff" => return wifi_onoff(40.0),
            "three-wan" => return Ok(three_wan()),
            "four-mixed" => return Ok(four_mixed()),
            "five-router" => return five_router(FIVE_ROUTER_TRACE),
            _ => {}
        }
        if let Some(trace) = spec.strip_prefix("five-router:") {
            return five_router(trace);
        }
        if let Some(mean) = spec.strip_prefix("wifi-onoff:") {
            let mean: f64 = mean
                .parse()
                .with_context(|| format!("profile {spec:?}: wifi-onoff:<mean holding time, s>"))?;
            return wifi_onoff(mean);
        }
        if let Some(rates) = spec.strip_prefix("bw-grid:") {
            let (w, l) = parse_pair(spec, rates)?;
            return bw_grid(w, l);
        }
        if let Some(rates) = spec.strip_prefix("ecf-asym:") {
            let (w, l) = parse_pair(spec, rates)?;
            return ecf_asym(w, l);
        }
        if let Some(prefix) = spec.strip_prefix("trace:") {
            // trace:<dir/name> uses <name>.down and <name>.up as the LTE path.
            let down =
                Trace::load(Path::new(&format!("{prefix}.down"))).with_context(|| format!("profile {spec:?}"))?;
            let up = Trace::load(Path::new(&format!("{prefix}.up"))).with_context(|| format!("profile {spec:?}"))?;
            let mut p = seed_default(70);
            p.name = format!(
                "trace:{}",
                Path::new(prefix)
                    .file_name()
                    .map_or(prefix.into(), |n| n.to_string_lossy())
            );
            p.paths[1].down.rate = Rate::Trace(down);
            p.paths[1].up.rate = Rate::Trace(up);
            return Ok(p);
        }
        let path = Path::new(spec);
        if !path.exists() {
            if FAMILIES.contains(&spec) || spec.starts_with("traces:") {
                bail!("profile {spec:?} is a family of several profiles; it is accepted where profiles are expanded, or pick one, e.g. bw-grid:2.5x27.5");
            }
            bail!("unknown profile {spec:?}: not a built-in (seed-default, seed-default-270, seed-default-470, seed-default-wifi20, seed-default-lossy, wifi-good, wifi-good-lte-bad, wifi-bad, wifi-onoff[:<mean s>], three-wan, four-mixed, five-router[:<trace prefix>], bw-grid:<wifi>x<lte>, ecf-asym:<wifi>x<lte> in Mbit/s, trace:<path-prefix>; families: bw-grid, ecf-asym, ecf-asym-all, seed-default-all, traces:<dir>) and no such file");
        }
        let text = std::fs::read_to_string(path)?;
        let t: ProfileToml = toml::from_str(&text).with_context(|| format!("profile {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        if t.paths.is_empty() || t.paths.len() > 8 {
            bail!("paths: between 1 and 8 paths");
        }
        let mut paths = Vec::new();
        for (i, p) in t.paths.iter().enumerate() {
            paths.push(PathSpec {
                name: p.name.clone(),
                down: dir_params(&p.down, base, &format!("paths[{i}].down"))?,
                up: dir_params(&p.up, base, &format!("paths[{i}].up"))?,
            });
        }
        let events = t
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| event(e, &paths).with_context(|| format!("events[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        Ok(Profile {
            name: t
                .name
                .unwrap_or_else(|| path.file_stem().unwrap_or_default().to_string_lossy().into()),
            paths,
            events,
        })
    }

    /// Sum over paths of the down (server → client) rate in Mbit/s (1 Mbit = 1000 kbit), as
    /// configured at the start: a trace counts with its mean rate, an unlimited direction
    /// counts as 0, and events are not taken into account.
    pub fn down_capacity_mbit(&self) -> f64 {
        self.paths.iter().filter_map(|p| p.down.bytes_per_sec()).sum::<f64>() * 8.0 / 1e6
    }

    /// Sum over paths of the up (client → server) rate in Mbit/s; like
    /// [`Profile::down_capacity_mbit`].
    pub fn up_capacity_mbit(&self) -> f64 {
        self.paths.iter().filter_map(|p| p.up.bytes_per_sec()).sum::<f64>() * 8.0 / 1e6
    }
}

#[cfg(test)]
mod tests;
