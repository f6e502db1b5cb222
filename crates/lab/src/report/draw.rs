//! Draws the charts with plotters, as SVG and PNG, text through a TrueType font read at
//! run time.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use super::charts::{charts, Bars, Cdf, Chart, Heat};
use super::grid::{mbit, GRID_FLOOR};
use super::load_files;

/// The font the plots' text is drawn with, unless `MPFLEX_LAB_FONT` names another.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
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
/// `upload-ping` and `download-ping` idle p50 and ping p50/p90/p99, `shortflows` bundle
/// completion, `web-under-upload` the bundle idle and loaded, `handover` max gap.
///
/// Text needs a TrueType font: [`DEFAULT_FONT`] (Debian's fonts-dejavu-core) or the file
/// `MPFLEX_LAB_FONT` names.
pub fn plots(results: &Path, out_dir: &Path) -> Result<Vec<PathBuf>> {
    plots_files(&[results.to_path_buf()], out_dir)
}

/// [`plots`] over several results files (see [`super::report_files`]); grids of a two-rate
/// family also as heat maps (`grid-<family>-<cc>-<mode>-<system>`, one panel per size).
pub fn plots_files(results: &[PathBuf], out_dir: &Path) -> Result<Vec<PathBuf>> {
    use plotters::prelude::{BitMapBackend, IntoDrawingArea, SVGBackend};
    // Failed repetitions measured nothing to draw; the report's tables count them.
    let recs = super::failed::split(load_files(results)?).0;
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
