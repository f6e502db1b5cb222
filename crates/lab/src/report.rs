//! Markdown tables from a results file: median (p10–p90) per system, ratios to `mptcp`
//! and `oracle`, the fluid bound beside them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use crate::runner::human;

#[derive(Debug, Clone, serde::Deserialize)]
struct Rec {
    system: String,
    profile: String,
    mode: String,
    cc: String,
    size: u64,
    completion_ms: f64,
    bound_ms: f64,
    #[serde(default)]
    p: Option<f64>,
    #[serde(default)]
    bytes_per_path: Option<Vec<u64>>,
    #[serde(default)]
    dup_bytes: Option<u64>,
    #[serde(default = "yes")]
    idle_restart: bool,
}

fn yes() -> bool {
    true
}

/// (profile, congestion control, mode).
type Group = (String, String, String);
/// size -> system -> completion times.
type BySize = BTreeMap<u64, BTreeMap<String, Vec<f64>>>;

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    s[i]
}

pub fn report(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut recs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        recs.push(serde_json::from_str::<Rec>(line).with_context(|| format!("{}:{}", path.display(), i + 1))?);
    }
    // (profile, cc, mode) -> size -> system -> samples
    let mut groups: BTreeMap<Group, BySize> = BTreeMap::new();
    let mut bounds: BTreeMap<(String, u64), f64> = BTreeMap::new();
    let mut shares: BTreeMap<(String, String, String, u64, String), Vec<f64>> = BTreeMap::new();
    let mut dups: BTreeMap<(String, String, String, u64, String), Vec<f64>> = BTreeMap::new();
    for r in &recs {
        let mode = if r.idle_restart {
            r.mode.clone()
        } else {
            format!("{}, no idle restart", r.mode)
        };
        let r = &Rec { mode, ..r.clone() };
        groups
            .entry((r.profile.clone(), r.cc.clone(), r.mode.clone()))
            .or_default()
            .entry(r.size)
            .or_default()
            .entry(r.system.clone())
            .or_default()
            .push(r.completion_ms);
        bounds.insert((r.profile.clone(), r.size), r.bound_ms);
        let key = (
            r.profile.clone(),
            r.cc.clone(),
            r.mode.clone(),
            r.size,
            r.system.clone(),
        );
        if let Some(p) = r.p {
            shares.entry(key.clone()).or_default().push(p);
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
        let systems: Vec<String> = {
            let mut s: Vec<String> = sizes.values().flat_map(|m| m.keys().cloned()).collect();
            s.sort();
            s.dedup();
            // Baselines first, mpflex last.
            s.sort_by_key(|x| (x.starts_with("mpflex"), x == "oracle", x == "mptcp", x.clone()));
            s
        };
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
            md += &format!(
                " {:.0} |",
                bounds.get(&(profile.clone(), *size)).copied().unwrap_or(f64::NAN)
            );
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
    }
    md += "\n[p=…] is the share of bytes on the first path (oracle: the best static split; mpflex: \
           measured at the client, in `warm` mode including the 1 MB warm-up); dup is the share of \
           bytes the client received twice.\n";
    Ok(md)
}
