//! Markdown tables and plots from a results file.
//!
//! `chunk`: median (p10–p90) completion per system and size, ratios to `mptcp` and
//! `oracle`, the fluid bound beside them. The other workloads: one table per (profile,
//! congestion control, workload, variant, mode), one row per system, median (p10–p90) of
//! each measure over the repetitions and the ratio of medians to `mptcp`.
//!
//! [`plots`] draws the same groups as SVG and PNG files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use crate::runner::{human, WORKLOADS};

#[derive(Debug, Clone, serde::Deserialize)]
struct Rec {
    system: String,
    profile: String,
    /// Results written before there were other workloads have none: `chunk`.
    #[serde(default = "chunk")]
    workload: String,
    #[serde(default)]
    variant: Option<String>,
    mode: String,
    cc: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    completion_ms: Option<f64>,
    #[serde(default)]
    goodput_mbit: Option<f64>,
    #[serde(default)]
    p: Option<f64>,
    #[serde(default)]
    bytes_per_path: Option<Vec<u64>>,
    #[serde(default)]
    dup_bytes: Option<u64>,
    #[serde(default = "yes")]
    idle_restart: bool,
    #[serde(default)]
    bound_ms: Option<f64>,
    #[serde(default)]
    capacity_mbit: Option<f64>,
    #[serde(default)]
    ideal_mbit: Option<f64>,
    /// The workload client's own fields (see `workload`), and anything unknown.
    #[serde(flatten)]
    extra: serde_json::Map<String, Value>,
}

fn yes() -> bool {
    true
}

fn chunk() -> String {
    "chunk".into()
}

impl Rec {
    /// A finite number among the workload's fields (`null`, as NaN is written, is none).
    fn field(&self, key: &str) -> Option<f64> {
        self.extra.get(key).and_then(Value::as_f64).filter(|v| v.is_finite())
    }

    /// The mode, with the idle-restart setting when it is not the kernel default.
    fn mode_label(&self) -> String {
        if self.idle_restart {
            self.mode.clone()
        } else {
            format!("{}, no idle restart", self.mode)
        }
    }
}

fn load(path: &Path) -> Result<Vec<Rec>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut recs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r = serde_json::from_str::<Rec>(line).with_context(|| format!("{}:{}", path.display(), i + 1))?;
        if r.workload == "chunk" && r.completion_ms.is_none() {
            anyhow::bail!("{}:{}: chunk record without completion_ms", path.display(), i + 1);
        }
        recs.push(r);
    }
    oracle_static(&mut recs);
    Ok(recs)
}

/// The records of several results files. Where a group (profile, workload, variant,
/// congestion control, mode) has records in more than one file, only the last file's are
/// kept: a point rerun with newer code replaces the older run, and every ratio the
/// report takes stays within one run, side by side.
fn load_files(paths: &[PathBuf]) -> Result<Vec<Rec>> {
    type Key = (String, String, Option<String>, String, String);
    let key = |r: &Rec| {
        (
            r.profile.clone(),
            r.workload.clone(),
            r.variant.clone(),
            r.cc.clone(),
            r.mode_label(),
        )
    };
    let mut newest: BTreeMap<Key, usize> = BTreeMap::new();
    let mut per_file = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let recs = load(p)?;
        for r in &recs {
            newest.insert(key(r), i);
        }
        per_file.push(recs);
    }
    Ok(per_file
        .into_iter()
        .enumerate()
        .flat_map(|(i, recs)| recs.into_iter().map(move |r| (i, r)))
        .filter(|(i, r)| newest[&key(r)] == *i)
        .map(|(_, r)| r)
        .collect())
}

/// The files' names, for messages.
fn names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The oracle as the best *static* split. Each repetition of an oracle point measures
/// several shares (`oracle_shares`: [share, ms] pairs, in `warm` mode since 2026-11-25
/// [share, ms, warm-up ms]; from the second repetition on the
/// first one's best share and its two neighbours). Per cell, among the shares measured in
/// every repetition, the one with the lowest median is chosen, and each repetition's
/// completion and share become that share's: one transfer per repetition at one fixed
/// split, as every other system is measured. Records without the pairs (written before
/// 2026-11-24) keep the per-repetition best, a minimum over three noisy transfers, which
/// is biased low against a single transfer of any other system. The chosen share's
/// warm-up time, where recorded, becomes the record's `warmup_ms`.
fn oracle_static(recs: &mut [Rec]) {
    /// Share in ‰ -> (ms, warm-up ms) of one record; the smallest time if a share repeats.
    fn pairs(r: &Rec) -> Option<BTreeMap<i64, (f64, Option<f64>)>> {
        let list = r.extra.get("oracle_shares")?.as_array()?;
        let mut m: BTreeMap<i64, (f64, Option<f64>)> = BTreeMap::new();
        for v in list {
            let (Some(p), Some(ms)) = (v.get(0).and_then(Value::as_f64), v.get(1).and_then(Value::as_f64)) else {
                continue;
            };
            let warm_up = v.get(2).and_then(Value::as_f64);
            let e = m.entry((p * 1000.0).round() as i64).or_insert((ms, warm_up));
            if ms < e.0 {
                *e = (ms, warm_up);
            }
        }
        (!m.is_empty()).then_some(m)
    }
    /// Per record (its index): share in ‰ -> (ms, warm-up ms).
    type Reps = Vec<(usize, BTreeMap<i64, (f64, Option<f64>)>)>;
    let mut cells: BTreeMap<Cell, Reps> = BTreeMap::new();
    for (i, r) in recs.iter().enumerate() {
        if r.system != "oracle" {
            continue;
        }
        if let Some(m) = pairs(r) {
            let key = (
                r.profile.clone(),
                r.cc.clone(),
                r.mode_label(),
                r.size,
                r.system.clone(),
            );
            cells.entry(key).or_default().push((i, m));
        }
    }
    for reps in cells.values() {
        let best = reps[0]
            .1
            .keys()
            .filter(|k| reps.iter().all(|(_, m)| m.contains_key(k)))
            .map(|&k| {
                let v: Vec<f64> = reps.iter().map(|(_, m)| m[&k].0).collect();
                (quantile(&v, 0.5), k)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        if let Some((_, k)) = best {
            for (i, m) in reps {
                let (ms, warm_up) = m[&k];
                recs[*i].completion_ms = Some(ms);
                recs[*i].p = Some(k as f64 / 1000.0);
                if let Some(w) = warm_up {
                    recs[*i].extra.insert("warmup_ms".into(), w.into());
                }
            }
        }
    }
}

/// (profile, congestion control, mode).
type Group = (String, String, String);
/// size -> system -> completion times.
type BySize = BTreeMap<u64, BTreeMap<String, Vec<f64>>>;
/// (profile, congestion control, mode, size, system).
type Cell = (String, String, String, u64, String);

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    s[i]
}

/// Baselines first (single-path TCP, mptcp, oracle), mpflex last.
fn order_systems(mut s: Vec<String>) -> Vec<String> {
    s.sort();
    s.dedup();
    s.sort_by_key(|x| (x.starts_with("mpflex"), x == "oracle", x == "mptcp", x.clone()));
    s
}

/// Chunk completion times: (profile, cc, mode) -> size -> system -> samples.
fn chunk_groups(recs: &[&Rec]) -> BTreeMap<Group, BySize> {
    let mut groups: BTreeMap<Group, BySize> = BTreeMap::new();
    for r in recs {
        if let Some(ms) = r.completion_ms {
            groups
                .entry((r.profile.clone(), r.cc.clone(), r.mode_label()))
                .or_default()
                .entry(r.size)
                .or_default()
                .entry(r.system.clone())
                .or_default()
                .push(ms);
        }
    }
    groups
}

fn chunk_systems(sizes: &BySize) -> Vec<String> {
    order_systems(sizes.values().flat_map(|m| m.keys().cloned()).collect())
}

/// The chunk tables and their footnote (empty without chunk records).
fn chunk_tables(recs: &[&Rec]) -> String {
    if recs.is_empty() {
        return String::new();
    }
    let groups = chunk_groups(recs);
    let mut bounds: BTreeMap<(String, u64), f64> = BTreeMap::new();
    let mut shares: BTreeMap<Cell, Vec<f64>> = BTreeMap::new();
    let mut dups: BTreeMap<Cell, Vec<f64>> = BTreeMap::new();
    // Warm mode: the warm-up's time, and warm-up + chunk, per record.
    let mut warm_ups: BTreeMap<Cell, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for r in recs {
        if let Some(b) = r.bound_ms {
            bounds.insert((r.profile.clone(), r.size), b);
        }
        let key = (
            r.profile.clone(),
            r.cc.clone(),
            r.mode_label(),
            r.size,
            r.system.clone(),
        );
        if let Some(p) = r.p {
            shares.entry(key.clone()).or_default().push(p);
        }
        if let (Some(w), Some(ms)) = (r.field("warmup_ms"), r.completion_ms) {
            let e = warm_ups.entry(key.clone()).or_default();
            e.0.push(w);
            e.1.push(w + ms);
        }
        if let Some(b) = &r.bytes_per_path {
            let total: u64 = b.iter().sum();
            if total > 0 {
                shares.entry(key.clone()).or_default().push(b[0] as f64 / total as f64);
                if let Some(d) = r.dup_bytes {
                    dups.entry(key).or_default().push(d as f64 / total as f64);
                }
            }
        }
    }
    let mut md = String::new();
    for ((profile, cc, mode), sizes) in &groups {
        let systems = chunk_systems(sizes);
        md += &format!("\n### {profile}, {cc}, {mode} — chunk completion, ms: median (p10–p90)\n\n");
        md += "| chunk |";
        for s in &systems {
            md += &format!(" {s} |");
        }
        md += " bound |";
        for s in systems.iter().filter(|s| s.starts_with("mpflex")) {
            md += &format!(" {s} / mptcp | {s} / oracle |");
        }
        md += "\n|---|";
        for _ in &systems {
            md += "---|";
        }
        md += "---|";
        for _ in systems.iter().filter(|s| s.starts_with("mpflex")) {
            md += "---|---|";
        }
        md += "\n";
        for (size, by) in sizes {
            md += &format!("| {} |", human(*size));
            for s in &systems {
                match by.get(s) {
                    Some(v) if !v.is_empty() => {
                        let key = (profile.clone(), cc.clone(), mode.clone(), *size, s.clone());
                        let dup = dups
                            .get(&key)
                            .map(|x| format!(", dup {:.1}%", 100.0 * quantile(x, 0.5)))
                            .unwrap_or_default();
                        let share = shares
                            .get(&key)
                            .map(|x| format!(" [p={:.0}%{dup}]", 100.0 * quantile(x, 0.5)))
                            .unwrap_or_default();
                        md += &format!(
                            " {:.0} ({:.0}–{:.0}){share} |",
                            quantile(v, 0.5),
                            quantile(v, 0.1),
                            quantile(v, 0.9)
                        )
                    }
                    _ => md += " – |",
                }
            }
            match bounds.get(&(profile.clone(), *size)) {
                Some(b) => md += &format!(" {b:.0} |"),
                None => md += " – |",
            }
            let med = |name: &str| by.get(name).filter(|v| !v.is_empty()).map(|v| quantile(v, 0.5));
            for s in systems.iter().filter(|s| s.starts_with("mpflex")) {
                let m = med(s);
                let r = |b: Option<f64>| match (m, b) {
                    (Some(a), Some(b)) => format!("**{:.2}**", a / b),
                    _ => "–".into(),
                };
                md += &format!(" {} | {} |", r(med("mptcp")), r(med("oracle")));
            }
            md += "\n";
        }
        md += &warm_up_table(profile, cc, mode, sizes, &systems, &warm_ups);
    }
    md += "\n[p=…] is the share of bytes on the first path (oracle: the best static split; mpflex: \
           measured at the client, in `warm` mode including the 1 MB warm-up); dup is the share of \
           bytes the client received twice.\n";
    md
}

/// Warm mode, where the records carry `warmup_ms`: per size and system the median time of
/// the 1 MB warm-up and of warm-up + chunk (empty without warm-up times).
fn warm_up_table(
    profile: &str,
    cc: &str,
    mode: &str,
    sizes: &BySize,
    systems: &[String],
    warm_ups: &BTreeMap<Cell, (Vec<f64>, Vec<f64>)>,
) -> String {
    let cell = |size: u64, s: &str| warm_ups.get(&(profile.into(), cc.into(), mode.into(), size, s.into()));
    if !sizes.keys().any(|&z| systems.iter().any(|s| cell(z, s).is_some())) {
        return String::new();
    }
    let mut md =
        format!("\n#### {profile}, {cc}, {mode} — the 1 MB warm-up / warm-up + chunk, ms: median\n\n| chunk |");
    for s in systems {
        md += &format!(" {s} |");
    }
    md += "\n|---|";
    md += &"---|".repeat(systems.len());
    md += "\n";
    for size in sizes.keys() {
        md += &format!("| {} |", human(*size));
        for s in systems {
            md += &match cell(*size, s) {
                Some((w, t)) => format!(" {:.0} / {:.0} |", quantile(w, 0.5), quantile(t, 0.5)),
                None => " – |".into(),
            };
        }
        md += "\n";
    }
    md
}

/// Median and the p10–p90 range of some samples.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Dist {
    med: f64,
    lo: f64,
    hi: f64,
}

impl Dist {
    fn of(v: &[f64]) -> Option<Dist> {
        let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        (!v.is_empty()).then(|| Dist {
            med: quantile(&v, 0.5),
            lo: quantile(&v, 0.1),
            hi: quantile(&v, 0.9),
        })
    }

    fn scaled(self, k: f64) -> Dist {
        Dist {
            med: self.med * k,
            lo: self.lo * k,
            hi: self.hi * k,
        }
    }
}

/// A per-record measure.
type Metric = fn(&Rec) -> Option<f64>;

fn goodput(r: &Rec) -> Option<f64> {
    r.goodput_mbit
}

fn completion(r: &Rec) -> Option<f64> {
    r.completion_ms
}

fn pct_of_capacity(r: &Rec) -> Option<f64> {
    Some(r.goodput_mbit? / r.capacity_mbit.filter(|c| *c > 0.0)? * 100.0)
}

fn bitrate(r: &Rec) -> Option<f64> {
    r.field("bitrate_mbit")
}

fn pct_of_ideal(r: &Rec) -> Option<f64> {
    Some(bitrate(r)? / r.ideal_mbit.filter(|c| *c > 0.0)? * 100.0)
}

fn ping_p50(r: &Rec) -> Option<f64> {
    r.field("ping_p50_ms")
}

fn ping_p90(r: &Rec) -> Option<f64> {
    r.field("ping_p90_ms")
}

fn ping_p99(r: &Rec) -> Option<f64> {
    r.field("ping_p99_ms")
}

fn max_gap(r: &Rec) -> Option<f64> {
    r.field("max_gap_ms")
}

/// `handover`: the stream's delivered rate. The record's `goodput_mbit` when the runner
/// measured one, else from the bytes received over the run.
fn handover_goodput(r: &Rec) -> Option<f64> {
    match (r.goodput_mbit, r.field("received_bytes"), r.completion_ms) {
        (Some(g), _, _) if g > 0.0 => Some(g),
        (_, Some(b), Some(ms)) if ms > 0.0 => Some(b * 8.0 / (ms / 1000.0) / 1e6),
        (g, _, _) => g,
    }
}

fn values(rs: &[&Rec], f: Metric) -> Vec<f64> {
    rs.iter().filter_map(|r| f(r)).filter(|v| v.is_finite()).collect()
}

fn dist(rs: &[&Rec], f: Metric) -> Option<Dist> {
    Dist::of(&values(rs, f))
}

fn cell(d: Option<Dist>, prec: usize) -> String {
    match d {
        Some(d) => format!("{:.p$} ({:.p$}–{:.p$})", d.med, d.lo, d.hi, p = prec),
        None => "–".into(),
    }
}

fn median_of(rs: &[&Rec], f: Metric) -> Option<f64> {
    dist(rs, f).map(|d| d.med)
}

/// Records of one system in one group.
type BySystem<'a> = BTreeMap<String, Vec<&'a Rec>>;

/// Ratio of this system's median to mptcp's, bold, or "–".
fn ratio_cell(by: &BySystem, rs: &[&Rec], f: Metric) -> String {
    let base = by.get("mptcp").and_then(|m| median_of(m, f));
    match (median_of(rs, f), base) {
        (Some(a), Some(b)) if b != 0.0 => format!("**{:.2}**", a / b),
        _ => "–".into(),
    }
}

/// Median share of the bytes on each path, "61% / 39%".
fn path_shares(rs: &[&Rec]) -> String {
    let mut per: Vec<Vec<f64>> = Vec::new();
    for r in rs {
        let Some(b) = &r.bytes_per_path else { continue };
        let total: u64 = b.iter().sum();
        if total == 0 {
            continue;
        }
        if per.len() < b.len() {
            per.resize(b.len(), Vec::new());
        }
        for (i, x) in b.iter().enumerate() {
            per[i].push(*x as f64 / total as f64 * 100.0);
        }
    }
    if per.is_empty() {
        return "–".into();
    }
    per.iter()
        .map(|v| format!("{:.0}%", quantile(v, 0.5)))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// (workload's place in [`WORKLOADS`], profile, cc, variant, mode).
type Key = (usize, String, String, Option<String>, String);

fn workload_groups<'a>(recs: &[&'a Rec]) -> BTreeMap<Key, BySystem<'a>> {
    let mut groups: BTreeMap<Key, BySystem> = BTreeMap::new();
    for r in recs {
        let Some(w) = WORKLOADS.iter().position(|w| *w == r.workload) else {
            continue;
        };
        groups
            .entry((w, r.profile.clone(), r.cc.clone(), r.variant.clone(), r.mode_label()))
            .or_default()
            .entry(r.system.clone())
            .or_default()
            .push(r);
    }
    groups
}

/// "bulk down" / "video".
fn workload_label(key: &Key) -> String {
    match &key.3 {
        Some(v) => format!("{} {v}", WORKLOADS[key.0]),
        None => WORKLOADS[key.0].to_string(),
    }
}

/// The group's median of a per-record number (capacity, ideal rate), if any record has it.
fn group_median(by: &BySystem, f: Metric) -> Option<f64> {
    let all: Vec<&Rec> = by.values().flatten().copied().collect();
    median_of(&all, f)
}

fn table(md: &mut String, title: &str, head: &[&str], rows: &[Vec<String>]) {
    *md += &format!("\n### {title}\n\n|");
    for h in head {
        *md += &format!(" {h} |");
    }
    *md += "\n|";
    for _ in head {
        *md += "---|";
    }
    *md += "\n";
    for row in rows {
        *md += "|";
        for c in row {
            *md += &format!(" {c} |");
        }
        *md += "\n";
    }
}

fn rows(by: &BySystem, row: impl Fn(&[&Rec]) -> Vec<String>) -> Vec<Vec<String>> {
    order_systems(by.keys().cloned().collect())
        .into_iter()
        .map(|s| {
            let mut r = vec![s.clone()];
            r.extend(row(&by[&s][..]));
            r
        })
        .collect()
}

fn workload_table(key: &Key, by: &BySystem) -> String {
    let (_, profile, cc, _, mode) = key;
    let what = workload_label(key);
    let head = format!("{profile}, {cc}, {what}, {mode}");
    let mut md = String::new();
    match WORKLOADS[key.0] {
        "bulk" => {
            let cap = group_median(by, |r| r.capacity_mbit)
                .map(|c| format!(", capacity {c:.1} Mbit/s"))
                .unwrap_or_default();
            table(
                &mut md,
                &format!("{head}{cap} — goodput: median (p10–p90)"),
                &[
                    "system",
                    "goodput, Mbit/s",
                    "% of capacity",
                    "goodput / mptcp",
                    "whole-run average, Mbit/s",
                    "bytes per path",
                ],
                &rows(by, |rs| {
                    vec![
                        cell(dist(rs, goodput), 1),
                        cell(dist(rs, pct_of_capacity), 0),
                        ratio_cell(by, rs, goodput),
                        cell(dist(rs, |r| r.field("average_mbit")), 1),
                        path_shares(rs),
                    ]
                }),
            );
        }
        "shortflows" => {
            let all: Vec<&Rec> = by.values().flatten().copied().collect();
            let objects = median_of(&all, |r| r.field("objects"))
                .map(|n| format!(", {n:.0} objects"))
                .unwrap_or_default();
            let bytes = median_of(&all, |r| r.field("bytes"))
                .map(|b| format!(", {} in all", human(b as u64)))
                .unwrap_or_default();
            table(
                &mut md,
                &format!("{head}{objects}{bytes} — bundle completion: median (p10–p90)"),
                &[
                    "system",
                    "bundle completion, ms",
                    "completion / mptcp",
                    "object completion, ms: median (p90)",
                ],
                &rows(by, |rs| {
                    let objects: Vec<f64> = rs
                        .iter()
                        .filter_map(|r| r.extra.get("object_ms").and_then(Value::as_array))
                        .flatten()
                        .filter_map(Value::as_f64)
                        .collect();
                    let obj = if objects.is_empty() {
                        "–".into()
                    } else {
                        format!("{:.0} ({:.0})", quantile(&objects, 0.5), quantile(&objects, 0.9))
                    };
                    vec![cell(dist(rs, completion), 0), ratio_cell(by, rs, completion), obj]
                }),
            );
        }
        "video" => {
            let ideal = group_median(by, |r| r.ideal_mbit)
                .map(|c| format!(", ideal {c:.2} Mbit/s"))
                .unwrap_or_default();
            let cap = group_median(by, |r| r.capacity_mbit)
                .map(|c| format!(" (capacity {c:.1} Mbit/s)"))
                .unwrap_or_default();
            table(
                &mut md,
                &format!("{head}{ideal}{cap} — median (p10–p90)"),
                &[
                    "system",
                    "average bit rate, Mbit/s",
                    "% of ideal",
                    "bit rate / mptcp",
                    "stalls",
                    "stall time, ms",
                    "startup, ms",
                ],
                &rows(by, |rs| {
                    vec![
                        cell(dist(rs, bitrate), 2),
                        cell(dist(rs, pct_of_ideal), 0),
                        ratio_cell(by, rs, bitrate),
                        cell(dist(rs, |r| r.field("stalls")), 0),
                        cell(dist(rs, |r| r.field("stall_ms")), 0),
                        cell(dist(rs, |r| r.field("startup_ms")), 0),
                    ]
                }),
            );
        }
        "upload-ping" => {
            let cap = group_median(by, |r| r.capacity_mbit)
                .map(|c| format!(", upload capacity {c:.1} Mbit/s"))
                .unwrap_or_default();
            table(
                &mut md,
                &format!("{head}{cap} — per-run ping percentiles and goodput: median over runs (p10–p90)"),
                &[
                    "system",
                    "ping p50, ms",
                    "ping p90, ms",
                    "ping p99, ms",
                    "p99 / mptcp",
                    "upload goodput, Mbit/s",
                    "% of capacity",
                    "pings (failed)",
                ],
                &rows(by, |rs| {
                    let pings: f64 = values(rs, |r| r.field("pings")).iter().sum();
                    let failed: f64 = values(rs, |r| r.field("ping_failures")).iter().sum();
                    vec![
                        cell(dist(rs, ping_p50), 0),
                        cell(dist(rs, ping_p90), 0),
                        cell(dist(rs, ping_p99), 0),
                        ratio_cell(by, rs, ping_p99),
                        cell(dist(rs, goodput), 1),
                        cell(dist(rs, pct_of_capacity), 0),
                        format!("{pings:.0} ({failed:.0})"),
                    ]
                }),
            );
        }
        "handover" => {
            let rate = group_median(by, |r| r.field("rate_kbit"))
                .map(|k| format!(", {k:.0} kbit/s stream"))
                .unwrap_or_default();
            table(
                &mut md,
                &format!("{head}{rate} — median (p10–p90)"),
                &[
                    "system",
                    "max gap, ms",
                    "max gap / mptcp",
                    "lost bytes",
                    "goodput, Mbit/s",
                    "delay p50, ms",
                ],
                &rows(by, |rs| {
                    vec![
                        cell(dist(rs, max_gap), 0),
                        ratio_cell(by, rs, max_gap),
                        cell(dist(rs, |r| r.field("lost_bytes")), 0),
                        cell(dist(rs, handover_goodput), 2),
                        cell(dist(rs, |r| r.field("delay_p50_ms")), 0),
                    ]
                }),
            );
        }
        _ => {}
    }
    md
}

/// Chunk completion transposed: per profile and congestion control one table, one row per
/// system, one column per mode and size, each cell the median in ms and its ratio to
/// `baseline`'s median in the same column. With a dozen schedulers the per-mode tables of
/// [`report`] (a column per system, with spread and shares) are too wide to read.
pub fn by_system(path: &Path, baseline: &str) -> Result<String> {
    by_system_files(&[path.to_path_buf()], baseline)
}

/// [`by_system`] over several results files (see [`report_files`]).
pub fn by_system_files(paths: &[PathBuf], baseline: &str) -> Result<String> {
    let recs = load_files(paths)?;
    // (profile, cc) -> (mode, size) -> system -> samples.
    type Cols = BTreeMap<(String, u64), BTreeMap<String, Vec<f64>>>;
    let mut groups: BTreeMap<(String, String), Cols> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.workload == "chunk") {
        if let Some(ms) = r.completion_ms {
            groups
                .entry((r.profile.clone(), r.cc.clone()))
                .or_default()
                .entry((r.mode_label(), r.size))
                .or_default()
                .entry(r.system.clone())
                .or_default()
                .push(ms);
        }
    }
    if groups.is_empty() {
        anyhow::bail!("{}: no chunk results", names(paths));
    }
    let mut md = String::new();
    for ((profile, cc), cols) in &groups {
        let systems = order_systems(cols.values().flat_map(|m| m.keys().cloned()).collect());
        md += &format!("\n### {profile}, {cc} — median chunk completion, ms (× {baseline})\n\n| system |");
        for (mode, size) in cols.keys() {
            md += &format!(" {mode} {} |", human(*size));
        }
        md += "\n|---|";
        md += &"---|".repeat(cols.len());
        md += "\n";
        for s in &systems {
            md += &format!("| {s} |");
            for by in cols.values() {
                let med = |name: &str| by.get(name).filter(|v| !v.is_empty()).map(|v| quantile(v, 0.5));
                md += &match (med(s), med(baseline)) {
                    (None, _) => " – |".to_string(),
                    (Some(m), Some(b)) if s != baseline => format!(" {m:.0} ({:.2}) |", m / b),
                    (Some(m), _) => format!(" {m:.0} |"),
                };
            }
            md += "\n";
        }
    }
    Ok(md)
}

/// Markdown tables for every workload in the results file at `path`: chunk first (as
/// before other workloads existed), then bulk, shortflows, video, upload-ping, handover.
pub fn report(path: &Path) -> Result<String> {
    report_files(&[path.to_path_buf()])
}

/// [`report`] over several results files. A group (profile, workload, variant, congestion
/// control, mode) found in more than one file is taken from the last of them only, so a
/// rerun replaces a point and ratios never mix runs. Chunk points of a two-rate family
/// (`bw-grid:<w>x<l>`, `ecf-asym:<w>x<l>`) are also tabulated as grids ([`grid_tables`]).
pub fn report_files(paths: &[PathBuf]) -> Result<String> {
    let recs = load_files(paths)?;
    let chunks: Vec<&Rec> = recs.iter().filter(|r| r.workload == "chunk").collect();
    let mut md = chunk_tables(&chunks);
    md += &grid_tables(&chunks);
    let others: Vec<&Rec> = recs.iter().filter(|r| r.workload != "chunk").collect();
    for (key, by) in &workload_groups(&others) {
        md += &workload_table(key, by);
    }
    let mut unknown: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &others {
        if !WORKLOADS.contains(&r.workload.as_str()) {
            *unknown.entry(r.workload.as_str()).or_default() += 1;
        }
    }
    for (w, n) in unknown {
        md += &format!("\n{n} record(s) of unknown workload {w:?} left out.\n");
    }
    Ok(md)
}

// ---------------------------------------------------------------------------------------
// Grids of a two-rate family

/// The systems a grid's ratios are against: the lower of their medians.
const GRID_BASELINES: [&str; 2] = ["mptcp", "oracle"];
/// The floor a grid cell is counted against.
const GRID_FLOOR: f64 = 1.05;

/// A point of a two-rate family: (family, first rate, second rate) in kbit/s, from a
/// profile name such as `bw-grid:12.5x2.5`.
fn grid_point(profile: &str) -> Option<(&str, u64, u64)> {
    let (family, rates) = profile.split_once(':')?;
    let (a, b) = rates.split_once('x')?;
    let kbit = |s: &str| {
        let v = s.parse::<f64>().ok()?;
        (v.is_finite() && v > 0.0).then(|| (v * 1000.0).round() as u64)
    };
    (!family.is_empty()).then_some((family, kbit(a)?, kbit(b)?))
}

fn mbit(kbit: u64) -> String {
    format!("{}", kbit as f64 / 1000.0)
}

/// (first rate, second rate) -> a system's median / the lower baseline median.
type GridCells = BTreeMap<(u64, u64), f64>;
/// (family, cc, mode) -> system -> size -> cells; families with at least two points.
type Grids = BTreeMap<Group, BTreeMap<String, BTreeMap<u64, GridCells>>>;

fn grids(chunks: &[&Rec]) -> Grids {
    let mut out: Grids = BTreeMap::new();
    let mut points: BTreeMap<Group, std::collections::BTreeSet<(u64, u64)>> = BTreeMap::new();
    for ((profile, cc, mode), sizes) in &chunk_groups(chunks) {
        let Some((family, a, b)) = grid_point(profile) else {
            continue;
        };
        let key = (family.to_string(), cc.clone(), mode.clone());
        for (size, by) in sizes {
            let med = |name: &str| by.get(name).and_then(|v| Dist::of(v)).map(|d| d.med);
            let Some(base) = GRID_BASELINES.iter().filter_map(|s| med(s)).reduce(f64::min) else {
                continue;
            };
            if base <= 0.0 {
                continue;
            }
            for system in by.keys().filter(|s| !GRID_BASELINES.contains(&s.as_str())) {
                if let Some(m) = med(system) {
                    points.entry(key.clone()).or_default().insert((a, b));
                    out.entry(key.clone())
                        .or_default()
                        .entry(system.clone())
                        .or_default()
                        .entry(*size)
                        .or_default()
                        .insert((a, b), m / base);
                }
            }
        }
    }
    out.retain(|k, _| points.get(k).is_some_and(|p| p.len() >= 2));
    out
}

/// The rates of each axis present in some cells: (first path's, second path's).
fn grid_axes<'a>(cells: impl Iterator<Item = &'a GridCells>) -> (Vec<u64>, Vec<u64>) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for c in cells {
        for &(a, b) in c.keys() {
            xs.push(a);
            ys.push(b);
        }
    }
    for v in [&mut xs, &mut ys] {
        v.sort_unstable();
        v.dedup();
    }
    (xs, ys)
}

/// Markdown grids for every two-rate family with two or more points: per system and size,
/// rows = the first path's rate, columns = the second's, each cell the system's median
/// completion over the lower of `mptcp`'s and `oracle`'s medians of the same point (same
/// run), with a line counting the cells within [`GRID_FLOOR`].
fn grid_tables(chunks: &[&Rec]) -> String {
    let mut md = String::new();
    for ((family, cc, mode), systems) in &grids(chunks) {
        let (xs, ys) = grid_axes(systems.values().flat_map(|s| s.values()));
        md += &format!(
            "\n### {family} grid, {cc}, {mode} — median chunk completion × min(mptcp, oracle)\n\n\
             Rows: the first path's rate, columns: the second path's, Mbit/s (`{family}:<row>x<column>`); \
             – not measured.\n"
        );
        for system in order_systems(systems.keys().cloned().collect()) {
            for (size, cells) in &systems[&system] {
                let mut v: Vec<f64> = cells.values().copied().collect();
                v.sort_by(|a, b| a.total_cmp(b));
                let within = v.iter().filter(|&&r| r <= GRID_FLOOR).count();
                let ((wa, wb), worst) = cells
                    .iter()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(k, r)| (*k, *r))
                    .expect("a grid has cells");
                md += &format!(
                    "\n**{system}, {}**: {within} of {} cells ≤ {GRID_FLOOR:.2}; median {:.2}, worst {worst:.2} ({} × {})\n\n|  |",
                    human(*size),
                    v.len(),
                    quantile(&v, 0.5),
                    mbit(wa),
                    mbit(wb)
                );
                for y in &ys {
                    md += &format!(" {} |", mbit(*y));
                }
                md += "\n|---|";
                md += &"---|".repeat(ys.len());
                md += "\n";
                for x in &xs {
                    md += &format!("| **{}** |", mbit(*x));
                    for y in &ys {
                        md += &match cells.get(&(*x, *y)) {
                            Some(r) if *r > GRID_FLOOR => format!(" **{r:.2}** |"),
                            Some(r) => format!(" {r:.2} |"),
                            None => " – |".into(),
                        };
                    }
                    md += "\n";
                }
            }
        }
    }
    md
}

// ---------------------------------------------------------------------------------------
// Plots

/// The font the plots' text is drawn with, unless `MPFLEX_LAB_FONT` names another.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const PLOT_SIZE: (u32, u32) = (1024, 640);
/// Tableau 20 (the ten strong colours first, then their light partners): one colour per
/// system, in the file's system order; a file with every system and baseline needs more
/// than ten.
const COLOURS: [(u8, u8, u8); 20] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
    (174, 199, 232),
    (255, 187, 120),
    (152, 223, 138),
    (255, 152, 150),
    (197, 176, 213),
    (196, 156, 148),
    (247, 182, 210),
    (199, 199, 199),
    (219, 219, 141),
    (158, 218, 229),
];

/// One bar per series in each category, with p10–p90 whiskers, and an optional
/// horizontal reference line.
struct Bars {
    title: String,
    y_desc: String,
    categories: Vec<String>,
    /// (label, colour index, one value per category).
    series: Vec<(String, usize, Vec<Option<Dist>>)>,
    hline: Option<(f64, String)>,
}

/// Empirical CDFs, one line per series.
struct Cdf {
    title: String,
    x_desc: String,
    series: Vec<(String, usize, Vec<f64>)>,
}

/// Heat maps of ratios over a two-rate grid, one panel per size.
struct Heat {
    title: String,
    /// Rates (kbit/s) of the rows (first path) and columns (second path).
    rows: Vec<u64>,
    cols: Vec<u64>,
    /// (panel title, cells).
    panels: Vec<(String, GridCells)>,
}

enum Chart {
    Bars(Bars),
    Cdf(Cdf),
    Heat(Heat),
}

impl Chart {
    /// Pixels: heat maps widen with their panels.
    fn size(&self) -> (u32, u32) {
        match self {
            Chart::Heat(h) => (40 + 460 * h.panels.len().max(1) as u32, 520),
            _ => PLOT_SIZE,
        }
    }
}

/// A file name from a group key: letters, digits, `.` and `_` kept, runs of anything
/// else one `-`.
pub(crate) fn sanitize(parts: &[&str]) -> String {
    let mut s = String::new();
    for c in parts.join("-").chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}

fn charts(recs: &[Rec]) -> Vec<(String, Chart)> {
    let colour_of = {
        let all = order_systems(recs.iter().map(|r| r.system.clone()).collect());
        move |s: &str| all.iter().position(|x| x == s).unwrap_or(0)
    };
    let mut out = Vec::new();
    let chunks: Vec<&Rec> = recs.iter().filter(|r| r.workload == "chunk").collect();
    for ((profile, cc, mode), sizes) in &chunk_groups(&chunks) {
        let systems = chunk_systems(sizes);
        let categories: Vec<String> = sizes.keys().map(|s| human(*s)).collect();
        let has_mptcp = sizes.values().any(|by| by.contains_key("mptcp"));
        let series = systems
            .iter()
            .filter(|s| !has_mptcp || *s != "mptcp")
            .map(|s| {
                let vals = sizes
                    .values()
                    .map(|by| {
                        let d = Dist::of(by.get(s)?)?;
                        if !has_mptcp {
                            return Some(d);
                        }
                        let base = Dist::of(by.get("mptcp")?)?.med;
                        (base > 0.0).then(|| d.scaled(1.0 / base))
                    })
                    .collect();
                (s.clone(), colour_of(s), vals)
            })
            .collect();
        let (what, suffix, y_desc, hline) = if has_mptcp {
            (
                "chunk completion / mptcp's median",
                "ratio",
                "completion / mptcp (median, p10–p90)",
                Some((1.0, "mptcp".to_string())),
            )
        } else {
            ("chunk completion", "ms", "completion, ms (median, p10–p90)", None)
        };
        out.push((
            sanitize(&["chunk", profile, cc, mode, suffix]),
            Chart::Bars(Bars {
                title: format!("{profile}, {cc}, {mode}: {what}"),
                y_desc: y_desc.into(),
                categories,
                series,
                hline,
            }),
        ));
        if let Some((size, by)) = sizes.last_key_value() {
            out.push((
                sanitize(&["chunk", profile, cc, mode, "cdf"]),
                Chart::Cdf(Cdf {
                    title: format!("{profile}, {cc}, {mode}: {} chunk completion, CDF", human(*size)),
                    x_desc: "completion, ms".into(),
                    series: systems
                        .iter()
                        .filter_map(|s| Some((s.clone(), colour_of(s), by.get(s)?.clone())))
                        .collect(),
                }),
            ));
        }
    }
    let others: Vec<&Rec> = recs.iter().filter(|r| r.workload != "chunk").collect();
    for (key, by) in &workload_groups(&others) {
        let (_, profile, cc, variant, mode) = key;
        let workload = WORKLOADS[key.0];
        let what = workload_label(key);
        let systems = order_systems(by.keys().cloned().collect());
        let name = |suffix: &str| sanitize(&[workload, profile, cc, variant.as_deref().unwrap_or(""), mode, suffix]);
        let title = |m: &str| format!("{profile}, {cc}, {what}, {mode}: {m}");
        // One bar per system for one measure.
        let single = |f: Metric| -> Vec<(String, usize, Vec<Option<Dist>>)> {
            systems
                .iter()
                .map(|s| (s.clone(), colour_of(s), vec![dist(&by[s], f)]))
                .collect()
        };
        let chart = match workload {
            "bulk" => Some((
                name("goodput"),
                Bars {
                    title: title("goodput"),
                    y_desc: "goodput, Mbit/s (median, p10–p90)".into(),
                    categories: vec![what.clone()],
                    series: single(goodput),
                    hline: group_median(by, |r| r.capacity_mbit).map(|c| (c, format!("capacity {c:.1} Mbit/s"))),
                },
            )),
            "video" => Some((
                name("bitrate"),
                Bars {
                    title: title("average bit rate"),
                    y_desc: "average bit rate, Mbit/s (median, p10–p90)".into(),
                    categories: vec![what.clone()],
                    series: single(bitrate),
                    hline: group_median(by, |r| r.ideal_mbit).map(|c| (c, format!("ideal {c:.2} Mbit/s"))),
                },
            )),
            // The records keep per-run percentiles, not the single pings: bars, no CDF.
            "upload-ping" => Some((
                name("ping"),
                Bars {
                    title: title("ping latency during the upload"),
                    y_desc: "ping latency, ms (median over runs, p10–p90)".into(),
                    categories: vec!["p50".into(), "p90".into(), "p99".into()],
                    series: systems
                        .iter()
                        .map(|s| {
                            let rs = &by[s];
                            let v = vec![dist(rs, ping_p50), dist(rs, ping_p90), dist(rs, ping_p99)];
                            (s.clone(), colour_of(s), v)
                        })
                        .collect(),
                    hline: None,
                },
            )),
            "shortflows" => Some((
                name("completion"),
                Bars {
                    title: title("bundle completion"),
                    y_desc: "bundle completion, ms (median, p10–p90)".into(),
                    categories: vec![what.clone()],
                    series: single(completion),
                    hline: None,
                },
            )),
            "handover" => Some((
                name("gap"),
                Bars {
                    title: title("longest gap between arrivals"),
                    y_desc: "max gap, ms (median, p10–p90)".into(),
                    categories: vec![what.clone()],
                    series: single(max_gap),
                    hline: None,
                },
            )),
            _ => None,
        };
        if let Some((n, b)) = chart {
            out.push((n, Chart::Bars(b)));
        }
    }
    for ((family, cc, mode), systems) in &grids(&chunks) {
        let (rows, cols) = grid_axes(systems.values().flat_map(|s| s.values()));
        for (system, sizes) in systems {
            out.push((
                sanitize(&["grid", family, cc, mode, system]),
                Chart::Heat(Heat {
                    title: format!("{family}, {cc}, {mode}: {system} median completion × min(mptcp, oracle)"),
                    rows: rows.clone(),
                    cols: cols.clone(),
                    panels: sizes.iter().map(|(size, c)| (human(*size), c.clone())).collect(),
                }),
            ));
        }
    }
    out
}

/// Registers the plots' font (once per process) with plotters.
fn register_font() -> Result<()> {
    static DONE: std::sync::OnceLock<std::result::Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let path = std::env::var_os("MPFLEX_LAB_FONT")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_FONT));
        let bytes = std::fs::read(&path).map_err(|e| {
            format!(
                "plots need a TrueType font: cannot read {}: {e} (install the fonts-dejavu-core \
                 package, or set MPFLEX_LAB_FONT to a .ttf file)",
                path.display()
            )
        })?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a usable TrueType font", path.display()))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

fn colour(i: usize) -> plotters::style::RGBColor {
    let (r, g, b) = COLOURS[i % COLOURS.len()];
    plotters::style::RGBColor(r, g, b)
}

fn draw_bars<DB: plotters::prelude::DrawingBackend>(
    root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    b: &Bars,
) -> Result<()> {
    use plotters::prelude::*;
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e}");
    let n = b.categories.len().max(1);
    let m = b.series.len().max(1);
    let top = b
        .series
        .iter()
        .flat_map(|s| s.2.iter().flatten())
        .map(|d| d.hi.max(d.med))
        .chain(b.hline.as_ref().map(|h| h.0))
        .fold(0.0f64, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    // x in thousandths of a category (integer axes keep plotters' default tick formatting
    // with custom key points): category i is centred on 1000 i.
    const U: f64 = 1000.0;
    let px = |x: f64| (x * U).round() as i32;
    let x_range = (px(-0.5)..px(n as f64 - 0.5)).with_key_points((0..n).map(|i| px(i as f64)).collect());
    let mut chart = ChartBuilder::on(root)
        .caption(&b.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range, 0.0..top)
        .map_err(e)?;
    let cats = b.categories.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|v| {
            let i = (*v as f64 / U).round();
            (i >= 0.0)
                .then(|| cats.get(i as usize).cloned())
                .flatten()
                .unwrap_or_default()
        })
        .y_desc(&b.y_desc)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;
    let group = 0.8;
    let w = group / m as f64;
    for (j, (label, c, vals)) in b.series.iter().enumerate() {
        let col = colour(*c);
        let x0 = |i: usize| i as f64 - group / 2.0 + j as f64 * w + 0.1 * w;
        let bars = vals.iter().enumerate().filter_map(|(i, d)| {
            let d = (*d)?;
            Some(Rectangle::new(
                [(px(x0(i)), 0.0), (px(x0(i) + 0.8 * w), d.med)],
                col.filled(),
            ))
        });
        chart
            .draw_series(bars)
            .map_err(e)?
            .label(label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], col.filled()));
        let whiskers = vals.iter().enumerate().filter_map(|(i, d)| {
            let d = (*d)?;
            let (l, r) = (px(x0(i) + 0.2 * w), px(x0(i) + 0.6 * w));
            let mid = px(x0(i) + 0.4 * w);
            Some(PathElement::new(
                vec![(l, d.lo), (r, d.lo), (mid, d.lo), (mid, d.hi), (l, d.hi), (r, d.hi)],
                BLACK.stroke_width(1),
            ))
        });
        chart.draw_series(whiskers).map_err(e)?;
    }
    if let Some((y, label)) = &b.hline {
        let y = *y;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(px(-0.5), y), (px(n as f64 - 0.5), y)],
                8,
                5,
                BLACK.stroke_width(2),
            ))
            .map_err(e)?
            .label(label.as_str())
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK.stroke_width(2)));
    }
    finish(root, &mut chart, SeriesLabelPosition::UpperRight)
}

fn draw_cdf<DB: plotters::prelude::DrawingBackend>(
    root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    c: &Cdf,
) -> Result<()> {
    use plotters::prelude::*;
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e}");
    let all = c
        .series
        .iter()
        .flat_map(|s| s.2.iter().copied())
        .filter(|v| v.is_finite());
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.01).max(1e-3);
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d((lo - pad).max(0.0)..hi + pad, 0.0..1.0)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(&c.x_desc)
        .y_desc("fraction of runs")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;
    for (label, k, v) in &c.series {
        let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        if s.is_empty() {
            continue;
        }
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len() as f64;
        let mut pts = vec![(s[0], 0.0)];
        for (i, x) in s.iter().enumerate() {
            pts.push((*x, i as f64 / n));
            pts.push((*x, (i + 1) as f64 / n));
        }
        pts.push((hi + pad, 1.0));
        let col = colour(*k);
        chart
            .draw_series(LineSeries::new(pts, col.stroke_width(2)))
            .map_err(e)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], col.stroke_width(2)));
    }
    finish(root, &mut chart, SeriesLabelPosition::LowerRight)
}

/// The legend at `at`, then the picture written out.
fn finish<'a, DB, CT>(
    root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    chart: &mut plotters::prelude::ChartContext<'a, DB, CT>,
    at: plotters::prelude::SeriesLabelPosition,
) -> Result<()>
where
    DB: plotters::prelude::DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    use plotters::prelude::*;
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e}");
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// A ratio's colour: white at 1, greener below (full at 1/1.5), redder above (full at 1.5).
fn heat_colour(r: f64) -> plotters::style::RGBColor {
    let t = (r.max(1e-9).ln() / 1.5f64.ln()).clamp(-1.0, 1.0);
    let (to, t) = if t < 0.0 { (COLOURS[2], -t) } else { (COLOURS[3], t) };
    let mix = |c: u8| (255.0 + (c as f64 - 255.0) * t).round() as u8;
    plotters::style::RGBColor(mix(to.0), mix(to.1), mix(to.2))
}

fn draw_heat<DB: plotters::prelude::DrawingBackend>(
    root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    h: &Heat,
) -> Result<()> {
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e}");
    let body = root.titled(&h.title, ("sans-serif", 20)).map_err(e)?;
    let panels = body.split_evenly((1, h.panels.len().max(1)));
    // Cell i is centred on 1000 i (integer axes, labels at the centres).
    const U: i32 = 1000;
    let (nc, nr) = (h.cols.len() as i32, h.rows.len() as i32);
    for (area, (name, cells)) in panels.iter().zip(&h.panels) {
        let x_range = (-U / 2..nc * U - U / 2).with_key_points((0..nc).map(|i| i * U).collect());
        let y_range = (-U / 2..nr * U - U / 2).with_key_points((0..nr).map(|i| i * U).collect());
        let mut chart = ChartBuilder::on(area)
            .caption(name, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(x_range, y_range)
            .map_err(e)?;
        let label = |axis: &[u64], v: &i32| {
            let i = (*v as f64 / U as f64).round();
            (i >= 0.0)
                .then(|| axis.get(i as usize).map(|k| mbit(*k)))
                .flatten()
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_label_formatter(&|v| label(&h.cols, v))
            .y_label_formatter(&|v| label(&h.rows, v))
            .x_desc("second path (LTE), Mbit/s")
            .y_desc("first path (WiFi), Mbit/s")
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .draw()
            .map_err(e)?;
        let centred = ("sans-serif", 15)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center));
        for (ri, row) in h.rows.iter().enumerate() {
            for (ci, col) in h.cols.iter().enumerate() {
                let (x, y) = (ci as i32 * U, ri as i32 * U);
                let corners = [(x - U / 2, y - U / 2), (x + U / 2, y + U / 2)];
                match cells.get(&(*row, *col)) {
                    Some(r) => {
                        chart
                            .draw_series([Rectangle::new(corners, heat_colour(*r).filled())])
                            .map_err(e)?;
                        let text = if *r > GRID_FLOOR {
                            format!("{r:.2}!")
                        } else {
                            format!("{r:.2}")
                        };
                        chart
                            .draw_series([Text::new(text, (x, y), centred.clone())])
                            .map_err(e)?;
                    }
                    None => {
                        chart
                            .draw_series([Rectangle::new(corners, RGBColor(235, 235, 235).filled())])
                            .map_err(e)?;
                    }
                }
                chart
                    .draw_series([Rectangle::new(corners, WHITE.stroke_width(2))])
                    .map_err(e)?;
            }
        }
    }
    root.present().map_err(e)?;
    Ok(())
}

fn draw<DB: plotters::prelude::DrawingBackend>(
    root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
) -> Result<()> {
    root.fill(&plotters::style::WHITE)
        .map_err(|e| anyhow!("drawing: {e}"))?;
    match chart {
        Chart::Bars(b) => draw_bars(&root, b),
        Chart::Cdf(c) => draw_cdf(&root, c),
        Chart::Heat(h) => draw_heat(&root, h),
    }
}

/// Draws the results file's groups into `out_dir` (created if missing), each as `.svg`
/// and `.png`; returns the files written. `chunk`, per (profile, cc, mode): completion
/// per size as a ratio to mptcp's median (`…-ratio`; absolute ms, `…-ms`, without mptcp)
/// and the CDF of the largest size (`…-cdf`). Per (profile, cc, workload, variant, mode):
/// `bulk` goodput with the capacity, `video` average bit rate with the ideal rate,
/// `upload-ping` ping p50/p90/p99, `shortflows` bundle completion, `handover` max gap.
///
/// Text needs a TrueType font: [`DEFAULT_FONT`] (Debian's fonts-dejavu-core) or the file
/// `MPFLEX_LAB_FONT` names.
pub fn plots(results: &Path, out_dir: &Path) -> Result<Vec<PathBuf>> {
    plots_files(&[results.to_path_buf()], out_dir)
}

/// [`plots`] over several results files (see [`report_files`]); grids of a two-rate
/// family also as heat maps (`grid-<family>-<cc>-<mode>-<system>`, one panel per size).
pub fn plots_files(results: &[PathBuf], out_dir: &Path) -> Result<Vec<PathBuf>> {
    use plotters::prelude::{BitMapBackend, IntoDrawingArea, SVGBackend};
    let recs = load_files(results)?;
    let charts = charts(&recs);
    std::fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    if charts.is_empty() {
        return Ok(Vec::new());
    }
    register_font()?;
    let mut written = Vec::new();
    for (name, chart) in &charts {
        let size = chart.size();
        let svg = out_dir.join(format!("{name}.svg"));
        draw(SVGBackend::new(&svg, size).into_drawing_area(), chart)
            .with_context(|| format!("plot {}", svg.display()))?;
        written.push(svg);
        let png = out_dir.join(format!("{name}.png"));
        draw(BitMapBackend::new(&png, size).into_drawing_area(), chart)
            .with_context(|| format!("plot {}", png.display()))?;
        written.push(png);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` to a fresh file under the temp dir.
    fn temp_file(name: &str, text: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mpflex-report-test-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join(format!("{name}.jsonl"));
        std::fs::write(&f, text).unwrap();
        f
    }

    /// The table row of `system` in the section whose heading contains `heading`.
    fn row<'a>(md: &'a str, heading: &str, system: &str) -> &'a str {
        let start = md.find(heading).unwrap_or_else(|| panic!("no {heading:?} in\n{md}"));
        let section = &md[start..];
        let section = &section[..section[1..].find("\n### ").map_or(section.len(), |i| i + 1)];
        section
            .lines()
            .find(|l| l.starts_with(&format!("| {system} |")))
            .unwrap_or_else(|| panic!("no {system} row in\n{section}"))
    }

    fn chunk_line(system: &str, size: u64, ms: f64, extra: &str) -> String {
        format!(
            r#"{{"system":"{system}","profile":"two","workload":"chunk","mode":"fresh","cc":"cubic","size":{size},"rep":0,"completion_ms":{ms},"goodput_mbit":1.0,"idle_restart":true,"bound_ms":100.0{extra}}}"#
        )
    }

    fn chunk_jsonl() -> String {
        let mut s = String::new();
        for (size, base) in [(262144u64, 100.0), (1048576, 400.0)] {
            for k in 0..3 {
                let k = k as f64;
                s += &chunk_line("mptcp", size, base + 10.0 * k, "");
                s += "\n";
                s += &chunk_line("tcp-wifi", size, 2.0 * base + k, "");
                s += "\n";
                s += &chunk_line("oracle", size, base * 0.8, r#","p":0.7"#);
                s += "\n";
                s += &chunk_line(
                    "mpflex:minrtt",
                    size,
                    base * 0.5 + k,
                    r#","bytes_per_path":[600,400],"dup_bytes":10"#,
                );
                s += "\n";
            }
        }
        s
    }

    fn rec(system: &str, workload: &str, variant: Option<&str>, rest: &str) -> String {
        let variant = variant.map(|v| format!(r#""variant":"{v}","#)).unwrap_or_default();
        format!(
            r#"{{"system":"{system}","profile":"two","workload":"{workload}",{variant}"mode":"fresh","cc":"cubic","rep":0,"idle_restart":true,{rest}}}"#
        )
    }

    fn workloads_jsonl() -> String {
        let mut v = Vec::new();
        for (i, (sys, g)) in [("mptcp", 40.0), ("mpflex:minrtt", 60.0), ("tcp-wifi", 20.0)]
            .iter()
            .enumerate()
        {
            for k in 0..3 {
                let g = g + k as f64;
                let bpp = if sys.starts_with("mpflex") {
                    r#""bytes_per_path":[700,300],"dup_bytes":0,"#
                } else {
                    ""
                };
                v.push(rec(
                    sys,
                    "bulk",
                    Some("down"),
                    &format!(
                        r#""size":1000,"completion_ms":10000.0,"goodput_mbit":{g},{bpp}"capacity_mbit":80.0,"average_mbit":{a},"bytes":1000"#,
                        a = g - 5.0
                    ),
                ));
                v.push(rec(
                    sys,
                    "shortflows",
                    Some("par"),
                    &format!(
                        r#""size":563200,"completion_ms":{c},"goodput_mbit":3.0,"objects":10,"bytes":563200,"object_ms":[10.0,20.0,30.0]"#,
                        c = 300.0 + 100.0 * i as f64 + k as f64
                    ),
                ));
                v.push(rec(
                    sys,
                    "video",
                    None,
                    &format!(
                        r#""size":0,"completion_ms":60000.0,"goodput_mbit":0.0,"capacity_mbit":9.0,"ideal_mbit":8.47,"bitrate_mbit":{b},"segments":12,"stalls":{i},"stall_ms":{s},"startup_ms":2500.0,"rates_mbit":[0.26,8.47],"unknown_field":"x""#,
                        b = 4.24 + i as f64,
                        s = 1000.0 * i as f64
                    ),
                ));
                v.push(rec(
                    sys,
                    "upload-ping",
                    None,
                    &format!(
                        r#""size":0,"completion_ms":10000.0,"goodput_mbit":{g},"capacity_mbit":50.0,"ping_p50_ms":{p},"ping_p90_ms":{q},"ping_p99_ms":{r},"ping_max_ms":900.0,"pings":90,"ping_failures":0,"average_mbit":30.0"#,
                        p = 50.0 * (i + 1) as f64,
                        q = 60.0 * (i + 1) as f64,
                        r = 80.0 * (i + 1) as f64 + k as f64
                    ),
                ));
                v.push(rec(
                    sys,
                    "handover",
                    None,
                    &format!(
                        r#""size":0,"completion_ms":10000.0,"goodput_mbit":0.0,"capacity_mbit":80.0,"max_gap_ms":{m},"lost_bytes":{l},"received_bytes":2500000,"rate_kbit":2000,"delay_p50_ms":30.0,"delay_max_ms":400.0,"out_of_order":0"#,
                        m = 200.0 * (i + 1) as f64,
                        l = 1000 * i
                    ),
                ));
            }
        }
        // A run whose pings all failed: percentiles are written as null.
        v.push(rec(
            "tcp-lte",
            "upload-ping",
            None,
            r#""size":0,"completion_ms":10000.0,"goodput_mbit":5.0,"ping_p50_ms":null,"ping_p90_ms":null,"ping_p99_ms":null,"ping_max_ms":null,"pings":0,"ping_failures":3"#,
        ));
        v.join("\n") + "\n"
    }

    #[test]
    fn chunk_table() {
        let md = report(&temp_file("chunk", &chunk_jsonl())).unwrap();
        assert!(
            md.contains("### two, cubic, fresh — chunk completion, ms: median (p10–p90)"),
            "{md}"
        );
        assert!(md.contains(
            "| chunk | tcp-wifi | mptcp | oracle | mpflex:minrtt | bound | mpflex:minrtt / mptcp | mpflex:minrtt / oracle |"
        ));
        assert!(md.contains(
            "| 256 KB | 201 (200–202) | 110 (100–120) | 80 (80–80) [p=70%] | 51 (50–52) [p=60%, dup 1.0%] | 100 | **0.46** | **0.64** |"
        ), "{md}");
        assert!(md.contains("[p=…] is the share of bytes on the first path"));
    }

    /// The oracle is the best static share by its median over the repetitions, not each
    /// repetition's luckiest transfer: three shares, each 90 ms in one repetition and
    /// 100 ms in the others, give 100 ms (the minimum per repetition would say 90).
    #[test]
    fn oracle_is_the_best_static_share() {
        let shares = [
            r#"[[0.5,90.0],[0.55,100.0],[0.6,100.0]]"#,
            r#"[[0.5,100.0],[0.55,90.0],[0.6,100.0]]"#,
            r#"[[0.5,100.0],[0.55,101.0],[0.6,90.0],[0.65,10.0]]"#,
        ];
        let mut s = String::new();
        for (rep, pairs) in shares.iter().enumerate() {
            s += &chunk_line("mptcp", 262144, 200.0, "").replace(r#""rep":0"#, &format!(r#""rep":{rep}"#));
            s += "\n";
            s += &chunk_line("oracle", 262144, 90.0, &format!(r#","p":0.5,"oracle_shares":{pairs}"#));
            s += "\n";
        }
        let md = report(&temp_file("oracle", &s)).unwrap();
        // 0.5 and 0.6 have median 100; the lower share wins the tie. 0.65 was measured in
        // one repetition only and is no candidate.
        assert!(
            row(&md, "two, cubic, fresh", "256 KB").contains("| 100 (90–100) [p=50%] |"),
            "{md}"
        );
        // Without the pairs the per-repetition value stands.
        let md = report(&temp_file("oracle-old", &chunk_jsonl())).unwrap();
        assert!(
            row(&md, "two, cubic, fresh", "256 KB").contains("| 80 (80–80) [p=70%] |"),
            "{md}"
        );
    }

    /// Warm records with warm-up times get a second table: the warm-up, and warm-up +
    /// chunk; the oracle's are its chosen share's.
    #[test]
    fn warm_up_and_total() {
        let mut s = String::new();
        for (rep, (w, ms)) in [(1000.0, 300.0), (1100.0, 310.0), (1200.0, 320.0)].iter().enumerate() {
            s += &chunk_line("mpflex:dems-f", 262144, *ms, &format!(r#","warmup_ms":{w}"#))
                .replace(r#""rep":0"#, &format!(r#""rep":{rep}"#))
                .replace("fresh", "warm");
            s += "\n";
            // Shares 0.5 (median 250) and 0.6 (median 280): 0.5 is chosen, with its warm-ups.
            let pairs = format!(
                "[[0.5,{},{}],[0.6,280.0,900.0]]",
                240.0 + 10.0 * rep as f64,
                1500.0 + *w
            );
            s += &chunk_line("oracle", 262144, 1.0, &format!(r#","p":0.5,"oracle_shares":{pairs}"#))
                .replace(r#""rep":0"#, &format!(r#""rep":{rep}"#))
                .replace("fresh", "warm");
            s += "\n";
        }
        let md = report(&temp_file("warm-up", &s)).unwrap();
        assert!(
            md.contains("#### two, cubic, warm — the 1 MB warm-up / warm-up + chunk, ms: median"),
            "{md}"
        );
        assert!(md.contains("| chunk | oracle | mpflex:dems-f |"), "{md}");
        assert!(md.contains("\n| 256 KB | 2600 / 2850 | 1100 / 1410 |\n"), "{md}");
        // Without warm-up times there is no such table.
        let md = report(&temp_file("no-warm-up", &chunk_jsonl())).unwrap();
        assert!(!md.contains("warm-up / warm-up + chunk"), "{md}");
    }

    /// One row per system, medians and ratios to the chosen baseline; the oracle is the
    /// best static share here too.
    #[test]
    fn by_system_transposes_medians() {
        let path = temp_file("by-system", &chunk_jsonl());
        let md = by_system(&path, "mptcp").unwrap();
        assert!(
            md.contains("### two, cubic — median chunk completion, ms (× mptcp)"),
            "{md}"
        );
        assert!(md.contains("| system | fresh 256 KB | fresh 1 MB |"), "{md}");
        // mptcp 100/110/120 and 400/410/420; tcp-wifi 200/201/202 and 800/801/802.
        assert!(md.contains("\n| mptcp | 110 | 410 |\n"), "{md}");
        assert!(md.contains("\n| tcp-wifi | 201 (1.83) | 801 (1.95) |\n"), "{md}");
        let md = by_system(&path, "tcp-wifi").unwrap();
        assert!(md.contains("\n| tcp-wifi | 201 | 801 |\n"), "{md}");
        assert!(md.contains("\n| mptcp | 110 (0.55) | 410 (0.51) |\n"), "{md}");
        // A baseline absent from the file: medians only.
        let md = by_system(&path, "nobody").unwrap();
        assert!(md.contains("\n| mptcp | 110 | 410 |\n"), "{md}");
        assert!(by_system(&temp_file("by-system-empty", ""), "mptcp").is_err());
    }

    /// Results written before other workloads existed: no workload, variant or
    /// idle_restart fields.
    #[test]
    fn old_format_parses() {
        let old = r#"{"system":"mptcp","profile":"seed-default","mode":"warm","cc":"bbr","size":1048576,"rep":0,"completion_ms":471.2,"goodput_mbit":4.45,"bound_ms":567.3}
{"system":"mpflex:minrtt","profile":"seed-default","mode":"warm","cc":"bbr","size":1048576,"rep":0,"completion_ms":235.6,"goodput_mbit":8.9,"bytes_per_path":[3,1],"bound_ms":567.3}
"#;
        let md = report(&temp_file("old", old)).unwrap();
        assert!(md.contains("### seed-default, bbr, warm — chunk completion"), "{md}");
        assert!(
            md.contains("| 1 MB | 471 (471–471) | 236 (236–236) [p=75%] | 567 | **0.50** | – |"),
            "{md}"
        );
        let recs = load(&temp_file("old2", old)).unwrap();
        assert_eq!(recs[0].workload, "chunk");
        assert!(recs[0].variant.is_none() && recs[0].idle_restart);
    }

    #[test]
    fn chunk_tables_unchanged_by_other_workloads() {
        let chunk = chunk_jsonl();
        let alone = report(&temp_file("alone", &chunk)).unwrap();
        let mixed = report(&temp_file("mixed", &(chunk + &workloads_jsonl()))).unwrap();
        assert!(mixed.starts_with(&alone), "{mixed}");
        assert!(mixed.len() > alone.len());
    }

    #[test]
    fn workload_tables() {
        let md = report(&temp_file("workloads", &workloads_jsonl())).unwrap();
        // No chunk records: no chunk footnote.
        assert!(!md.contains("[p=…]"), "{md}");

        let h = "### two, cubic, bulk down, fresh, capacity 80.0 Mbit/s";
        assert_eq!(
            row(&md, h, "mptcp"),
            "| mptcp | 41.0 (40.0–42.0) | 51 (50–52) | **1.00** | 36.0 (35.0–37.0) | – |"
        );
        assert_eq!(
            row(&md, h, "mpflex:minrtt"),
            "| mpflex:minrtt | 61.0 (60.0–62.0) | 76 (75–78) | **1.49** | 56.0 (55.0–57.0) | 70% / 30% |"
        );
        assert!(row(&md, h, "tcp-wifi").contains("**0.51**"));

        let h = "### two, cubic, shortflows par, fresh, 10 objects, 550 KB in all";
        assert_eq!(
            row(&md, h, "mpflex:minrtt"),
            "| mpflex:minrtt | 401 (400–402) | **1.33** | 20 (30) |"
        );
        assert!(row(&md, h, "mptcp").starts_with("| mptcp | 301 (300–302) | **1.00** |"));
        assert!(row(&md, h, "tcp-wifi").starts_with("| tcp-wifi | 501 (500–502) | **1.66** |"));

        let h = "### two, cubic, video, fresh, ideal 8.47 Mbit/s (capacity 9.0 Mbit/s)";
        assert_eq!(
            row(&md, h, "mptcp"),
            "| mptcp | 4.24 (4.24–4.24) | 50 (50–50) | **1.00** | 0 (0–0) | 0 (0–0) | 2500 (2500–2500) |"
        );
        assert_eq!(
            row(&md, h, "mpflex:minrtt"),
            "| mpflex:minrtt | 5.24 (5.24–5.24) | 62 (62–62) | **1.24** | 1 (1–1) | 1000 (1000–1000) | 2500 (2500–2500) |"
        );

        let h = "### two, cubic, upload-ping, fresh, upload capacity 50.0 Mbit/s";
        assert_eq!(
            row(&md, h, "mptcp"),
            "| mptcp | 50 (50–50) | 60 (60–60) | 81 (80–82) | **1.00** | 41.0 (40.0–42.0) | 82 (80–84) | 270 (0) |"
        );
        assert!(row(&md, h, "mpflex:minrtt")
            .starts_with("| mpflex:minrtt | 100 (100–100) | 120 (120–120) | 161 (160–162) | **1.99** |"));
        assert_eq!(
            row(&md, h, "tcp-lte"),
            "| tcp-lte | – | – | – | – | 5.0 (5.0–5.0) | – | 0 (3) |"
        );

        let h = "### two, cubic, handover, fresh, 2000 kbit/s stream";
        assert_eq!(
            row(&md, h, "mptcp"),
            "| mptcp | 200 (200–200) | **1.00** | 0 (0–0) | 2.00 (2.00–2.00) | 30 (30–30) |"
        );
        assert_eq!(
            row(&md, h, "mpflex:minrtt"),
            "| mpflex:minrtt | 400 (400–400) | **2.00** | 1000 (1000–1000) | 2.00 (2.00–2.00) | 30 (30–30) |"
        );
        // Sections come in workload order.
        let at = |s: &str| md.find(s).unwrap();
        assert!(at("bulk down") < at("shortflows par") && at("shortflows par") < at("video, fresh"));
        assert!(at("video, fresh") < at("upload-ping, fresh") && at("upload-ping, fresh") < at("handover, fresh"));
    }

    #[test]
    fn unknown_workload_and_missing_variant_tolerated() {
        let text = rec(
            "mptcp",
            "teleport",
            None,
            r#""size":0,"completion_ms":1.0,"goodput_mbit":0.0"#,
        ) + "\n";
        let md = report(&temp_file("unknown", &text)).unwrap();
        assert!(
            md.contains("1 record(s) of unknown workload \"teleport\" left out."),
            "{md}"
        );
        // A bulk record without a variant.
        let text = rec(
            "mptcp",
            "bulk",
            None,
            r#""size":0,"completion_ms":1.0,"goodput_mbit":7.0"#,
        ) + "\n";
        let md = report(&temp_file("novariant", &text)).unwrap();
        assert_eq!(
            row(&md, "### two, cubic, bulk, fresh", "mptcp"),
            "| mptcp | 7.0 (7.0–7.0) | – | **1.00** | – | – |"
        );
    }

    #[test]
    fn plot_files() {
        let results = temp_file("plots", &(chunk_jsonl() + &workloads_jsonl()));
        let out = results.parent().unwrap().join("plots/nested");
        let files = plots(&results, &out).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for want in [
            "chunk-two-cubic-fresh-ratio",
            "chunk-two-cubic-fresh-cdf",
            "bulk-two-cubic-down-fresh-goodput",
            "shortflows-two-cubic-par-fresh-completion",
            "video-two-cubic-fresh-bitrate",
            "upload-ping-two-cubic-fresh-ping",
            "handover-two-cubic-fresh-gap",
        ] {
            for ext in ["svg", "png"] {
                assert!(
                    names.contains(&format!("{want}.{ext}")),
                    "{want}.{ext} not in {names:?}"
                );
            }
        }
        assert_eq!(files.len(), 14);
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            assert!(bytes.len() > 1000, "{} is {} bytes", f.display(), bytes.len());
            if f.extension().unwrap() == "png" {
                assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", f.display());
            } else {
                let s = String::from_utf8(bytes).unwrap();
                assert!(s.contains("<svg") && s.contains("mptcp"), "{}", f.display());
            }
        }
        // Without mptcp, chunk bars are absolute.
        let only: String = chunk_jsonl()
            .lines()
            .filter(|l| !l.contains("\"mptcp\""))
            .map(|l| format!("{l}\n"))
            .collect();
        let results = temp_file("plots-ms", &only);
        let files = plots(&results, &results.parent().unwrap().join("p")).unwrap();
        assert!(
            files.iter().any(|f| f.ends_with("chunk-two-cubic-fresh-ms.svg")),
            "{files:?}"
        );
    }

    /// A chunk record of `profile` (warm, cubic, 256 KB).
    fn grid_line(profile: &str, system: &str, ms: f64) -> String {
        format!(
            r#"{{"system":"{system}","profile":"{profile}","workload":"chunk","mode":"warm","cc":"cubic","size":262144,"rep":0,"completion_ms":{ms}}}"#
        ) + "\n"
    }

    #[test]
    fn grids_of_a_two_rate_family() {
        assert_eq!(grid_point("bw-grid:12.5x2.5"), Some(("bw-grid", 12_500, 2_500)));
        assert_eq!(grid_point("ecf-asym:0.3x8.6"), Some(("ecf-asym", 300, 8_600)));
        for not in [
            "seed-default",
            "trace:../x/TMobile",
            "bw-grid:12.5",
            "bw-grid:ax2",
            ":1x2",
            "g:0x1",
        ] {
            assert_eq!(grid_point(not), None, "{not}");
        }
        // Two points; the ratio is against the lower of mptcp's and oracle's medians.
        let mut text = String::new();
        for (profile, mptcp, oracle, dems) in [
            ("bw-grid:2.5x7.5", 200.0, 100.0, 90.0),
            ("bw-grid:7.5x2.5", 100.0, 150.0, 120.0),
        ] {
            text += &grid_line(profile, "mptcp", mptcp);
            text += &grid_line(profile, "oracle", oracle);
            text += &grid_line(profile, "mpflex:dems-f", dems);
        }
        // A profile of another kind, and a one-point family: no grid.
        text += &grid_line("seed-default", "mptcp", 100.0);
        text += &grid_line("seed-default", "mpflex:dems-f", 50.0);
        text += &grid_line("ecf-asym:1x2", "mptcp", 100.0);
        text += &grid_line("ecf-asym:1x2", "mpflex:dems-f", 50.0);
        let path = temp_file("grid", &text);
        let md = report(&path).unwrap();
        assert!(
            md.contains("### bw-grid grid, cubic, warm — median chunk completion × min(mptcp, oracle)"),
            "{md}"
        );
        assert!(!md.contains("ecf-asym grid"), "{md}");
        assert!(
            md.contains("**mpflex:dems-f, 256 KB**: 1 of 2 cells ≤ 1.05; median 1.20, worst 1.20 (7.5 × 2.5)"),
            "{md}"
        );
        assert!(md.contains("|  | 2.5 | 7.5 |\n|---|---|---|\n"), "{md}");
        assert!(
            md.contains("\n| **2.5** | – | 0.90 |\n| **7.5** | **1.20** | – |\n"),
            "{md}"
        );

        // A later file's run of a point replaces the earlier one's, baselines included.
        let rerun = grid_line("bw-grid:7.5x2.5", "mptcp", 100.0) + &grid_line("bw-grid:7.5x2.5", "mpflex:dems-f", 80.0);
        let later = temp_file("grid-rerun", &rerun);
        let md = report_files(&[path.clone(), later.clone()]).unwrap();
        assert!(md.contains("\n| **7.5** | 0.80 | – |\n"), "{md}");
        assert!(md.contains("2 of 2 cells ≤ 1.05"), "{md}");
        let md = report_files(&[later, path.clone()]).unwrap();
        assert!(md.contains("\n| **7.5** | **1.20** | – |\n"), "{md}");

        // The heat map: one file per system, a panel per size.
        let files = plots(&path, &path.parent().unwrap().join("heat")).unwrap();
        let heat: Vec<_> = files
            .iter()
            .filter(|f| f.file_stem().unwrap().to_string_lossy() == "grid-bw-grid-cubic-warm-mpflex-dems-f")
            .collect();
        assert_eq!(heat.len(), 2, "{files:?}");
        for f in heat {
            let bytes = std::fs::read(f).unwrap();
            if f.extension().unwrap() == "svg" {
                let s = String::from_utf8(bytes).unwrap();
                assert!(s.contains("0.90") && s.contains("1.20!") && s.contains("256 KB"), "{s}");
            } else {
                assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
            }
        }
    }

    #[test]
    fn sanitized_names() {
        assert_eq!(
            sanitize(&["chunk", "seed-default-270", "cubic", "warm, no idle restart", "ratio"]),
            "chunk-seed-default-270-cubic-warm-no-idle-restart-ratio"
        );
        assert_eq!(
            sanitize(&["bulk", "p", "bbr", "", "fresh", "goodput"]),
            "bulk-p-bbr-fresh-goodput"
        );
    }
}
