//! Repetitions that measured nothing ([`Record::error`]: mpflex's paths never came up).
//!
//! Rule: a failed repetition takes no part in any median or ratio (it has no measure), and
//! the report counts it beside the repetitions that did measure, per system and point.
//! The reason: a system whose paths fail to join on some repetitions must not look as good
//! as one that never fails, nor vanish from the tables.

use std::collections::BTreeMap;

use super::natural_cmp;
use crate::record::Record;
use crate::units::human;

/// (measured, failed).
pub(super) fn split(recs: Vec<Record>) -> (Vec<Record>, Vec<Record>) {
    recs.into_iter().partition(|r| r.error.is_none())
}

/// Where a repetition belongs: profile, workload (with its variant, or a chunk's size),
/// congestion control, mode, system.
type Point = (String, String, String, String, String);

fn point(r: &Record) -> Point {
    let workload = match (&r.variant, r.workload.as_str()) {
        (Some(v), w) => format!("{w} {v}"),
        (None, "chunk") => format!("chunk {}", human(r.size)),
        (None, w) => w.to_string(),
    };
    (
        r.profile.clone(),
        workload,
        r.cc.clone(),
        r.mode_label(),
        r.system.clone(),
    )
}

/// The failed repetitions of `failed` per point, out of all that ran there (`measured`
/// beside them), with the first error; empty without failures.
pub(super) fn table(failed: &[Record], measured: &[Record]) -> String {
    if failed.is_empty() {
        return String::new();
    }
    let mut by: BTreeMap<Point, (usize, &str)> = BTreeMap::new();
    for r in failed {
        let e = by.entry(point(r)).or_insert((0, r.error.as_deref().unwrap_or("")));
        e.0 += 1;
    }
    let mut ran: BTreeMap<Point, usize> = BTreeMap::new();
    for r in measured {
        *ran.entry(point(r)).or_default() += 1;
    }
    let mut rows: Vec<(&Point, &(usize, &str))> = by.iter().collect();
    rows.sort_by(|(a, _), (b, _)| natural_cmp(&a.0, &b.0).then_with(|| a.cmp(b)));
    let total: usize = by.values().map(|v| v.0).sum();
    let mut md = format!(
        "\n### Failed repetitions — {total} measured nothing, left out of every median and ratio above\n\n\
         | profile | workload | cc | mode | system | failed | first error |\n|---|---|---|---|---|---|---|\n"
    );
    for ((profile, workload, cc, mode, system), (n, error)) in rows {
        let of = n + ran
            .get(&(
                profile.clone(),
                workload.clone(),
                cc.clone(),
                mode.clone(),
                system.clone(),
            ))
            .unwrap_or(&0);
        md += &format!(
            "| {profile} | {workload} | {cc} | {mode} | {system} | {n} of {of} | {} |\n",
            error.replace('|', "\\|")
        );
    }
    md
}
