//! Markdown tables: chunk downloads by size (a column per system), the other workloads
//! by system (a row per system, the columns their [`Table`] names).

use std::collections::BTreeMap;

use super::settings::settings_note;
use super::{cell_of, chunk_groups, chunk_systems, order_systems, BySize, Cell};
use crate::record::Record;
use crate::summary::{dist, median_of, quantile, Column, Dist, Measure, Summary, Table};
use crate::units::human;
use crate::workload::chunk::finish_gap_ms;
use crate::workload::Workload;

/// What chunk records carry besides their completion, per cell.
#[derive(Default)]
struct ChunkExtras {
    /// (profile, size) -> the fluid bound.
    bounds: BTreeMap<(String, u64), f64>,
    /// The first path's share: the oracle's split, mpflex's bytes.
    shares: BTreeMap<Cell, Vec<f64>>,
    /// mpflex's duplicate bytes, as a share of all.
    dups: BTreeMap<Cell, Vec<f64>>,
    /// Warm mode: the warm-up's time, and warm-up + chunk, per record.
    warm_ups: BTreeMap<Cell, (Vec<f64>, Vec<f64>)>,
    /// The spread of the paths' last-byte arrivals, ms, where two or more paths carried
    /// some of the chunk.
    gaps: BTreeMap<Cell, Vec<f64>>,
}

impl ChunkExtras {
    fn of(recs: &[&Record]) -> ChunkExtras {
        let mut x = ChunkExtras::default();
        for r in recs {
            if let Some(b) = r.bound_ms {
                x.bounds.insert((r.profile.clone(), r.size), b);
            }
            let key = cell_of(r);
            let finish: Option<Vec<Option<f64>>> = r
                .extra
                .get("path_finish_ms")
                .and_then(|v| serde_json::from_value(v.clone()).ok());
            if let Some(g) = finish.as_deref().and_then(finish_gap_ms) {
                x.gaps.entry(key.clone()).or_default().push(g);
            }
            if let Some(p) = r.p {
                x.shares.entry(key.clone()).or_default().push(p);
            }
            if let (Some(w), Some(ms)) = (r.field("warmup_ms"), r.completion_ms) {
                let e = x.warm_ups.entry(key.clone()).or_default();
                e.0.push(w);
                e.1.push(w + ms);
            }
            if let Some(b) = &r.bytes_per_path {
                let total: u64 = b.iter().sum();
                if total > 0 {
                    x.shares
                        .entry(key.clone())
                        .or_default()
                        .push(b[0] as f64 / total as f64);
                    if let Some(d) = r.dup_bytes {
                        x.dups.entry(key).or_default().push(d as f64 / total as f64);
                    }
                }
            }
        }
        x
    }
}

/// The chunk tables and their footnote (empty without chunk records).
pub(super) fn chunk_tables(recs: &[&Record]) -> String {
    if recs.is_empty() {
        return String::new();
    }
    let extras = ChunkExtras::of(recs);
    let mut md = String::new();
    for ((profile, cc, mode), sizes) in &chunk_groups(recs) {
        let systems = chunk_systems(sizes);
        md += &chunk_table((profile, cc, mode), sizes, &systems, &extras);
        let group: Vec<&Record> = recs
            .iter()
            .filter(|r| (&r.profile, &r.cc, &r.mode_label()) == (profile, cc, mode))
            .copied()
            .collect();
        md += &settings_note(&group);
        md += &warm_up_table(profile, cc, mode, sizes, &systems, &extras.warm_ups);
    }
    md += "\n[p=…] is the share of bytes on the first path (oracle: the best static split; mpflex: \
           measured at the client, in `warm` mode including the 1 MB warm-up); dup is the share of \
           bytes the client received twice; gap is the median time between the first and the last \
           path's last data packet of the chunk, as the links delivered them (where two paths \
           carried some of it).\n";
    md
}

/// One (profile, cc, mode)'s completion per size and system, the bound, and each mpflex
/// system's ratios to mptcp and the oracle.
fn chunk_table(group: (&str, &str, &str), sizes: &BySize, systems: &[String], extras: &ChunkExtras) -> String {
    let (profile, cc, mode) = group;
    let mpflex: Vec<&String> = systems.iter().filter(|s| s.starts_with("mpflex")).collect();
    let mut md = format!("\n### {profile}, {cc}, {mode} — chunk completion, ms: median (p10–p90)\n\n");
    md += "| chunk |";
    for s in systems {
        md += &format!(" {s} |");
    }
    md += " bound |";
    for s in &mpflex {
        md += &format!(" {s} / mptcp | {s} / oracle |");
    }
    md += "\n|---|";
    md += &"---|".repeat(systems.len());
    md += "---|";
    md += &"---|---|".repeat(mpflex.len());
    md += "\n";
    for (size, by) in sizes {
        md += &format!("| {} |", human(*size));
        for s in systems {
            let key = (profile.into(), cc.into(), mode.into(), *size, s.clone());
            md += &chunk_cell(by.get(s), &key, extras);
        }
        match extras.bounds.get(&(profile.into(), *size)) {
            Some(b) => md += &format!(" {b:.0} |"),
            None => md += " – |",
        }
        let med = |name: &str| by.get(name).filter(|v| !v.is_empty()).map(|v| quantile(v, 0.5));
        for s in &mpflex {
            let m = med(s);
            let r = |b: Option<f64>| match (m, b) {
                (Some(a), Some(b)) => format!("**{:.2}**", a / b),
                _ => "–".into(),
            };
            md += &format!(" {} | {} |", r(med("mptcp")), r(med("oracle")));
        }
        md += "\n";
    }
    md
}

/// One system's completion at one size: median (p10–p90) [share, duplicates].
fn chunk_cell(v: Option<&Vec<f64>>, key: &Cell, extras: &ChunkExtras) -> String {
    let Some(v) = v.filter(|v| !v.is_empty()) else {
        return " – |".into();
    };
    let dup = extras
        .dups
        .get(key)
        .map(|x| format!(", dup {:.1}%", 100.0 * quantile(x, 0.5)))
        .unwrap_or_default();
    let gap = extras.gaps.get(key).map(|x| format!("gap {:.0} ms", quantile(x, 0.5)));
    let share = match (extras.shares.get(key), gap) {
        (Some(x), gap) => format!(
            " [p={:.0}%{dup}{}]",
            100.0 * quantile(x, 0.5),
            gap.map(|g| format!(", {g}")).unwrap_or_default()
        ),
        (None, Some(g)) => format!(" [{g}]"),
        (None, None) => String::new(),
    };
    format!(
        " {:.0} ({:.0}–{:.0}){share} |",
        quantile(v, 0.5),
        quantile(v, 0.1),
        quantile(v, 0.9)
    )
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

/// "median (p10–p90)" with `prec` decimals, or "–".
fn cell(d: Option<Dist>, prec: usize) -> String {
    match d {
        Some(d) => format!("{:.p$} ({:.p$}–{:.p$})", d.med, d.lo, d.hi, p = prec),
        None => "–".into(),
    }
}

/// Records of one system in one group.
pub(super) type BySystem<'a> = BTreeMap<String, Vec<&'a Record>>;

/// Ratio of this system's median to mptcp's, bold, or "–".
fn ratio_cell(by: &BySystem, rs: &[&Record], f: Measure) -> String {
    let base = by.get("mptcp").and_then(|m| median_of(m, f));
    match (median_of(rs, f), base) {
        (Some(a), Some(b)) if b != 0.0 => format!("**{:.2}**", a / b),
        _ => "–".into(),
    }
}

/// Median share of the bytes on each path, "61% / 39%".
fn path_shares(rs: &[&Record]) -> String {
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

/// (workload, profile, cc, variant, mode).
pub(super) type Key = (Workload, String, String, Option<String>, String);

/// The records of known workloads other than chunk downloads, by group and system.
pub(super) fn workload_groups<'a>(recs: &[&'a Record]) -> BTreeMap<Key, BySystem<'a>> {
    let mut groups: BTreeMap<Key, BySystem> = BTreeMap::new();
    for r in recs {
        let Some(w) = Workload::parse(&r.workload) else {
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
pub(super) fn workload_label(key: &Key) -> String {
    let name = key.0.spec().name();
    match &key.3 {
        Some(v) => format!("{name} {v}"),
        None => name.to_string(),
    }
}

/// Every record of a group.
pub(super) fn all<'a>(by: &BySystem<'a>) -> Vec<&'a Record> {
    by.values().flatten().copied().collect()
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

fn rows(by: &BySystem, row: impl Fn(&[&Record]) -> Vec<String>) -> Vec<Vec<String>> {
    order_systems(by.keys().cloned().collect())
        .into_iter()
        .map(|s| {
            let mut r = vec![s.clone()];
            r.extend(row(&by[&s][..]));
            r
        })
        .collect()
}

/// The group's table, as its workload's [`Table`] says (nothing for a workload laid out
/// by size).
pub(super) fn workload_table(key: &Key, by: &BySystem) -> String {
    let Summary::BySystem(spec, _) = key.0.spec().summary() else {
        return String::new();
    };
    let (_, profile, cc, _, mode) = key;
    let what = workload_label(key);
    let title = format!("{profile}, {cc}, {what}, {mode}{}", (spec.heading)(&all(by)));
    let mut head: Vec<&str> = std::iter::once("system")
        .chain(spec.columns.iter().map(|(h, _)| *h))
        .collect();
    let mut rows = rows(by, |rs| columns(&spec, by, rs));
    // Columns only some variants fill are left out where no system has a value.
    for (i, (_, c)) in spec.columns.iter().enumerate().rev() {
        if matches!(c, Column::DistIfAny(..)) && rows.iter().all(|r| r[i + 1] == "–") {
            head.remove(i + 1);
            for r in &mut rows {
                r.remove(i + 1);
            }
        }
    }
    let mut md = String::new();
    table(&mut md, &title, &head, &rows);
    md += &settings_note(&all(by));
    md
}

/// One system's cells.
fn columns(spec: &Table, by: &BySystem, rs: &[&Record]) -> Vec<String> {
    spec.columns
        .iter()
        .map(|(_, c)| match c {
            Column::Dist(f, prec) | Column::DistIfAny(f, prec) => cell(dist(rs, *f), *prec),
            Column::VsMptcp(f) => ratio_cell(by, rs, *f),
            Column::PathShares => path_shares(rs),
            Column::Other(f) => f(rs),
        })
        .collect()
}
