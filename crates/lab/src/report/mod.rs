//! Markdown tables and plots from results files.
//!
//! Chunk downloads: median (p10–p90) completion per system and size, ratios to `mptcp`
//! and `oracle`, the fluid bound beside them (`tables`), and grids of two-rate families
//! (`grid`). The other workloads: one table per (profile, congestion control,
//! workload, variant, mode), one row per system, median (p10–p90) of each measure over
//! the repetitions and the ratio of medians to `mptcp`, laid out as the workload's
//! [`Summary`] says. [`plots`] draws the same groups as SVG and PNG files (`charts`, `draw`).
//!
//! Rule: every ratio compares systems of one run: a group found in several files is
//! taken from the last one only. The reason: runs on different days meet different
//! machine load, and a rerun of a point replaces the older one as a whole.

mod charts;
mod draw;
mod failed;
mod grid;
mod settings;
mod tables;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

pub use draw::{plots, plots_files, DEFAULT_FONT};

use crate::record::Record;
use crate::summary::{quantile, Summary};
use crate::units::human;
use crate::workload::Workload;

/// Whether the record's workload is laid out by size (chunk downloads).
fn by_size(r: &Record) -> bool {
    Workload::parse(&r.workload).is_some_and(|w| matches!(w.spec().summary(), Summary::BySize))
}

fn load(path: &Path) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut recs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r = serde_json::from_str::<Record>(line).with_context(|| format!("{}:{}", path.display(), i + 1))?;
        if by_size(&r) && r.completion_ms.is_none() && r.error.is_none() {
            anyhow::bail!(
                "{}:{}: {} record without completion_ms",
                path.display(),
                i + 1,
                r.workload
            );
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
fn load_files(paths: &[PathBuf]) -> Result<Vec<Record>> {
    type Key = (String, String, Option<String>, String, String);
    let key = |r: &Record| {
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

/// The records of results files as the report takes them (a group found in several files
/// from the last only; the oracle as its best static split), failed repetitions left
/// out: they measured nothing ([`Record::error`]).
pub fn load_results(paths: &[PathBuf]) -> Result<Vec<Record>> {
    Ok(failed::split(load_files(paths)?).0)
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
/// several shares (`oracle_shares`: [share, ms] pairs, in `warm` mode [share, ms, warm-up
/// ms]; from the second repetition on the first one's best share and its two
/// neighbours). Per cell, among the shares measured in every repetition, the one with the
/// lowest median is chosen, and each repetition's completion and share become that
/// share's: one transfer per repetition at one fixed split, as every other system is
/// measured. Records without the pairs keep the per-repetition best. The chosen share's
/// warm-up time, where recorded, becomes the record's `warmup_ms`.
fn oracle_static(recs: &mut [Record]) {
    /// Share in ‰ -> (ms, warm-up ms) of one record; the smallest time if a share repeats.
    fn pairs(r: &Record) -> Option<BTreeMap<i64, (f64, Option<f64>)>> {
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
            let key = cell_of(r);
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

/// The record's cell.
fn cell_of(r: &Record) -> Cell {
    (
        r.profile.clone(),
        r.cc.clone(),
        r.mode_label(),
        r.size,
        r.system.clone(),
    )
}

/// Baselines first (single-path TCP, mptcp, oracle), mpflex last.
fn order_systems(mut s: Vec<String>) -> Vec<String> {
    s.sort();
    s.dedup();
    s.sort_by_key(|x| (x.starts_with("mpflex"), x == "oracle", x == "mptcp", x.clone()));
    s
}

/// Compares profile names with their numbers as numbers, so `bw-grid:2.5x7.5` comes
/// before `bw-grid:12.5x2.5` and `seed-default-270` before `seed-default-470`.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    /// The name cut into text and numbers (a number may have one decimal point).
    fn parts(s: &str) -> Vec<Result<f64, String>> {
        let mut out = Vec::new();
        let mut rest = s;
        while !rest.is_empty() {
            let digits = rest
                .char_indices()
                .take_while(|(i, c)| c.is_ascii_digit() || (*c == '.' && *i > 0))
                .count();
            let cut = if digits > 0 {
                digits
            } else {
                rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len())
            };
            let (head, tail) = rest.split_at(cut);
            out.push(
                head.trim_end_matches('.')
                    .parse::<f64>()
                    .ok()
                    .filter(|_| digits > 0)
                    .ok_or_else(|| head.to_string()),
            );
            rest = tail;
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(&pb) {
        let o = match (x, y) {
            (Ok(x), Ok(y)) => x.total_cmp(y),
            (Err(x), Err(y)) => x.cmp(y),
            (Ok(_), Err(_)) => std::cmp::Ordering::Less,
            (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        };
        if o.is_ne() {
            return o;
        }
    }
    pa.len().cmp(&pb.len()).then_with(|| a.cmp(b))
}

/// Chunk completion times: (profile, cc, mode) -> size -> system -> samples, the profiles
/// in [`natural_cmp`] order.
fn chunk_groups(recs: &[&Record]) -> Vec<(Group, BySize)> {
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
    let mut groups: Vec<(Group, BySize)> = groups.into_iter().collect();
    groups.sort_by(|(a, _), (b, _)| natural_cmp(&a.0, &b.0).then_with(|| (&a.1, &a.2).cmp(&(&b.1, &b.2))));
    groups
}

fn chunk_systems(sizes: &BySize) -> Vec<String> {
    order_systems(sizes.values().flat_map(|m| m.keys().cloned()).collect())
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
    let (recs, failures) = failed::split(load_files(paths)?);
    // (profile, cc) -> (mode, size) -> system -> samples.
    type Cols = BTreeMap<(String, u64), BTreeMap<String, Vec<f64>>>;
    let mut groups: BTreeMap<(String, String), Cols> = BTreeMap::new();
    for r in recs.iter().filter(|r| by_size(r)) {
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
    let failures: Vec<Record> = failures.into_iter().filter(by_size).collect();
    md += &failed::table(&failures, &recs);
    Ok(md)
}

/// Markdown tables for every workload in the results file at `path`: chunk first (as
/// before other workloads existed), then the others in [`Workload`] order: bulk,
/// shortflows, video, upload-ping, download-ping, web-under-upload, handover.
pub fn report(path: &Path) -> Result<String> {
    report_files(&[path.to_path_buf()])
}

/// [`report`] over several results files. A group (profile, workload, variant, congestion
/// control, mode) found in more than one file is taken from the last of them only, so a
/// rerun replaces a point and ratios never mix runs. Chunk points of a two-rate family
/// (`bw-grid:<w>x<l>`, `ecf-asym:<w>x<l>`) are also tabulated as grids (`grid`).
pub fn report_files(paths: &[PathBuf]) -> Result<String> {
    let (recs, failures) = failed::split(load_files(paths)?);
    let (chunks, others): (Vec<&Record>, Vec<&Record>) = recs.iter().partition(|r| by_size(r));
    let mut md = tables::chunk_tables(&chunks);
    md += &grid::grid_tables(&chunks);
    for (key, by) in &tables::workload_groups(&others) {
        md += &tables::workload_table(key, by);
    }
    let mut unknown: BTreeMap<&str, usize> = BTreeMap::new();
    for r in others.iter().filter(|r| Workload::parse(&r.workload).is_none()) {
        *unknown.entry(r.workload.as_str()).or_default() += 1;
    }
    for (w, n) in unknown {
        md += &format!("\n{n} record(s) of unknown workload {w:?} left out.\n");
    }
    md += &failed::table(&failures, &recs);
    Ok(md)
}
