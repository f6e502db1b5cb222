//! Grids of a two-rate family (`bw-grid:<w>x<l>`, `ecf-asym:<w>x<l>`): per system and
//! size, the median chunk completion over the better baseline at each point.

use std::collections::BTreeMap;

use super::{chunk_groups, order_systems, Group};
use crate::record::Record;
use crate::summary::{quantile, Dist};
use crate::units::human;

/// The systems a grid's ratios are against: the lower of their medians.
const GRID_BASELINES: [&str; 2] = ["mptcp", "oracle"];
/// The floor a grid cell is counted against.
pub(super) const GRID_FLOOR: f64 = 1.05;

/// A point of a two-rate family: (family, first rate, second rate) in kbit/s, from a
/// profile name such as `bw-grid:12.5x2.5`.
pub(super) fn grid_point(profile: &str) -> Option<(&str, u64, u64)> {
    let (family, rates) = profile.split_once(':')?;
    let (a, b) = rates.split_once('x')?;
    let kbit = |s: &str| {
        let v = s.parse::<f64>().ok()?;
        (v.is_finite() && v > 0.0).then(|| (v * 1000.0).round() as u64)
    };
    (!family.is_empty()).then_some((family, kbit(a)?, kbit(b)?))
}

pub(super) fn mbit(kbit: u64) -> String {
    format!("{}", kbit as f64 / 1000.0)
}

/// (first rate, second rate) -> a system's median / the lower baseline median.
pub(super) type GridCells = BTreeMap<(u64, u64), f64>;
/// (family, cc, mode) -> system -> size -> cells; families with at least two points.
pub(super) type Grids = BTreeMap<Group, BTreeMap<String, BTreeMap<u64, GridCells>>>;

pub(super) fn grids(chunks: &[&Record]) -> Grids {
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
pub(super) fn grid_axes<'a>(cells: impl Iterator<Item = &'a GridCells>) -> (Vec<u64>, Vec<u64>) {
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
pub(super) fn grid_tables(chunks: &[&Record]) -> String {
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
