//! Under every table, the settings its records ran with: the build, the congestion
//! control, idle restart and pacing, per system, and where they differ.
//!
//! Rule: a table says what it compares, and says it loudly where two systems ran with
//! different settings or its records come from different builds. The reason: issue 27 —
//! mpflex paced while the baselines never did, and tables stitched files from different
//! code versions, without a word.

use std::collections::BTreeMap;

use super::order_systems;
use crate::record::Record;

/// "on", "off", or "not recorded".
fn on_off(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "not recorded",
    }
}

/// Values of one setting and the systems that ran with each, in system order.
fn by_value(recs: &[&Record], get: impl Fn(&Record) -> String) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in recs {
        m.entry(get(r)).or_default().push(r.system.clone());
    }
    for v in m.values_mut() {
        *v = order_systems(std::mem::take(v));
    }
    m
}

/// One setting: "cubic" where every system had the same value, else each value with its
/// systems and a bold note.
fn setting(name: &str, m: &BTreeMap<String, Vec<String>>) -> String {
    match m.len() {
        0 => String::new(),
        1 => format!("{name} {}", m.keys().next().expect("one")),
        _ => {
            let parts: Vec<String> = m.iter().map(|(v, s)| format!("{v} for {}", s.join(", "))).collect();
            format!("{name} **differs between systems**: {}", parts.join("; "))
        }
    }
}

/// The settings line of a table made of `recs`.
pub(super) fn settings_note(recs: &[&Record]) -> String {
    if recs.is_empty() {
        return String::new();
    }
    let commits = by_value(recs, |r| r.commit.clone().unwrap_or_else(|| "not recorded".into()));
    let build = match commits.len() {
        1 => format!("build {}", commits.keys().next().expect("one")),
        n => format!(
            "**records from {n} builds** ({}): the ratios mix code versions",
            commits.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    // mpflex's own binary, where its records name one: more than one per system means
    // the system's repetitions ran different code.
    let mut ids: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in recs {
        if let Some(id) = r.build.as_ref().and_then(|b| b.id.as_deref()) {
            let v = ids.entry(r.system.as_str()).or_default();
            if !v.contains(&id) {
                v.push(id);
            }
        }
    }
    let mixed: Vec<&str> = ids.iter().filter(|(_, v)| v.len() > 1).map(|(s, _)| *s).collect();
    let mut parts = vec![
        build,
        setting("congestion control", &by_value(recs, |r| r.cc.clone())),
        setting(
            "idle restart",
            &by_value(recs, |r| on_off(Some(r.idle_restart)).to_string()),
        ),
        setting("pacing", &by_value(recs, |r| on_off(r.paced()).to_string())),
    ];
    if !mixed.is_empty() {
        parts.push(format!("**more than one mpflex binary** for {}", mixed.join(", ")));
    }
    format!("\nSettings: {}.\n", parts.join("; "))
}
