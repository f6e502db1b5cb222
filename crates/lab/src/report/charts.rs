//! What the plots show: bar charts with whiskers, CDFs and heat maps, built from the
//! records; [`super::draw`] draws them.

use super::grid::{grid_axes, grids, GridCells};
use super::tables::{all, workload_groups, workload_label};
use super::{chunk_groups, chunk_systems, order_systems};
use crate::record::Record;
use crate::summary::{dist, Dist, Summary};
use crate::units::{human, sanitize};
use crate::workload::Workload;

const PLOT_SIZE: (u32, u32) = (1024, 640);

/// One bar per series in each category, with p10–p90 whiskers, and an optional
/// horizontal reference line.
pub(super) struct Bars {
    pub(super) title: String,
    pub(super) y_desc: String,
    pub(super) categories: Vec<String>,
    /// (label, colour index, one value per category).
    pub(super) series: Vec<(String, usize, Vec<Option<Dist>>)>,
    pub(super) hline: Option<(f64, String)>,
}

/// Empirical CDFs, one line per series.
pub(super) struct Cdf {
    pub(super) title: String,
    pub(super) x_desc: String,
    pub(super) series: Vec<(String, usize, Vec<f64>)>,
}

/// Heat maps of ratios over a two-rate grid, one panel per size.
pub(super) struct Heat {
    pub(super) title: String,
    /// Rates (kbit/s) of the rows (first path) and columns (second path).
    pub(super) rows: Vec<u64>,
    pub(super) cols: Vec<u64>,
    /// (panel title, cells).
    pub(super) panels: Vec<(String, GridCells)>,
}

pub(super) enum Chart {
    Bars(Bars),
    Cdf(Cdf),
    Heat(Heat),
}

impl Chart {
    /// Pixels: heat maps widen with their panels.
    pub(super) fn size(&self) -> (u32, u32) {
        match self {
            Chart::Heat(h) => (40 + 460 * h.panels.len().max(1) as u32, 520),
            _ => PLOT_SIZE,
        }
    }
}

/// A system's colour: its place among every system of the records.
type ColourOf<'a> = &'a dyn Fn(&str) -> usize;

/// Every chart of the records, with its file name (no extension): chunk downloads, the
/// other workloads, then the grids' heat maps.
pub(super) fn charts(recs: &[Record]) -> Vec<(String, Chart)> {
    let systems = order_systems(recs.iter().map(|r| r.system.clone()).collect());
    let colour_of = |s: &str| systems.iter().position(|x| x == s).unwrap_or(0);
    let (chunks, others): (Vec<&Record>, Vec<&Record>) = recs.iter().partition(|r| super::by_size(r));
    let mut out = chunk_charts(&chunks, &colour_of);
    out.extend(workload_charts(&others, &colour_of));
    out.extend(heat_maps(&chunks));
    out
}

/// Per (profile, cc, mode): completion per size as a ratio to mptcp's median (absolute
/// without mptcp), and the CDF of the largest size.
fn chunk_charts(chunks: &[&Record], colour_of: ColourOf) -> Vec<(String, Chart)> {
    let name = Workload::Chunk.spec().name();
    let mut out = Vec::new();
    for ((profile, cc, mode), sizes) in &chunk_groups(chunks) {
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
            sanitize(&[name, profile, cc, mode, suffix]),
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
                sanitize(&[name, profile, cc, mode, "cdf"]),
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
    out
}

/// Per (profile, cc, workload, variant, mode): the workload's bar chart.
fn workload_charts(others: &[&Record], colour_of: ColourOf) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    for (key, by) in &workload_groups(others) {
        let Summary::BySystem(_, spec) = key.0.spec().summary() else {
            continue;
        };
        let (workload, profile, cc, variant, mode) = key;
        let what = workload_label(key);
        let name = sanitize(&[
            workload.spec().name(),
            profile,
            cc,
            variant.as_deref().unwrap_or(""),
            mode,
            spec.suffix,
        ]);
        let series = order_systems(by.keys().cloned().collect())
            .into_iter()
            .map(|s| {
                let v = spec.bars.iter().map(|(_, f)| dist(&by[&s], *f)).collect();
                (s.clone(), colour_of(&s), v)
            })
            .collect();
        let bars = Bars {
            title: format!("{profile}, {cc}, {what}, {mode}: {}", spec.title),
            y_desc: spec.y_desc.into(),
            categories: spec
                .bars
                .iter()
                .map(|(label, _)| label.map_or_else(|| what.clone(), String::from))
                .collect(),
            series,
            hline: (spec.line)(&all(by)),
        };
        out.push((name, Chart::Bars(bars)));
    }
    out
}

/// A heat map per two-rate family and system, a panel per size.
fn heat_maps(chunks: &[&Record]) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    for ((family, cc, mode), systems) in &grids(chunks) {
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
