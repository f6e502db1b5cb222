//! How records are summarised: measures of a record, their spread over repetitions, and
//! the layout of a workload's table and chart.
//!
//! Rule: a workload file declares what its report shows with these types; `report` lays
//! them out. The reason: the workload knows its fields, the report knows Markdown and
//! plots, and neither imports the other.

use crate::record::Record;

/// A per-record measure.
pub type Measure = fn(&Record) -> Option<f64>;

/// The `q` quantile of some samples, interpolated linearly between the two nearest ranks
/// (Hyndman and Fan's type 7, numpy's default); panics on none.
///
/// Rule: the median of an even count is the mean of the middle two. The reason: a median
/// taken by picking one of them is not symmetric, so the median of some changes and the
/// negated median of the same reductions would differ.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let x = (s.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (i, frac) = (x.floor() as usize, x.fract());
    match s.get(i + 1) {
        Some(next) if frac > 0.0 => s[i] + (next - s[i]) * frac,
        _ => s[i],
    }
}

/// Median and the p10–p90 range of some samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dist {
    pub med: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Dist {
    /// The finite samples' distribution, if there are any.
    pub fn of(v: &[f64]) -> Option<Dist> {
        let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        (!v.is_empty()).then(|| Dist {
            med: quantile(&v, 0.5),
            lo: quantile(&v, 0.1),
            hi: quantile(&v, 0.9),
        })
    }

    pub fn scaled(self, k: f64) -> Dist {
        Dist {
            med: self.med * k,
            lo: self.lo * k,
            hi: self.hi * k,
        }
    }
}

/// The finite values of a measure over some records.
pub fn values(rs: &[&Record], f: Measure) -> Vec<f64> {
    rs.iter().filter_map(|r| f(r)).filter(|v| v.is_finite()).collect()
}

pub fn dist(rs: &[&Record], f: Measure) -> Option<Dist> {
    Dist::of(&values(rs, f))
}

pub fn median_of(rs: &[&Record], f: Measure) -> Option<f64> {
    dist(rs, f).map(|d| d.med)
}

/// The median of a measure over some records as `text` puts it, or nothing if no record
/// has it (a table heading's figure).
pub fn median_text(rs: &[&Record], f: Measure, text: impl Fn(f64) -> String) -> String {
    median_of(rs, f).map(text).unwrap_or_default()
}

pub fn goodput(r: &Record) -> Option<f64> {
    r.goodput_mbit
}

pub fn completion(r: &Record) -> Option<f64> {
    r.completion_ms
}

pub fn capacity(r: &Record) -> Option<f64> {
    r.capacity_mbit
}

pub fn pct_of_capacity(r: &Record) -> Option<f64> {
    Some(r.goodput_mbit? / r.capacity_mbit.filter(|c| *c > 0.0)? * 100.0)
}

/// The whole run's average rate, first byte to last.
pub fn average(r: &Record) -> Option<f64> {
    r.field("average_mbit")
}

/// The whole run's average as a share of the capacity, %.
pub fn average_pct_of_capacity(r: &Record) -> Option<f64> {
    Some(average(r)? / r.capacity_mbit.filter(|c| *c > 0.0)? * 100.0)
}

/// One column of a workload's table: a cell per system from that system's records.
pub enum Column {
    /// Median (p10–p90) with this many decimals.
    Dist(Measure, usize),
    /// As `Dist`, left out of a table where no system has a value (a figure only some
    /// variants record).
    DistIfAny(Measure, usize),
    /// The ratio of the system's median to mptcp's, bold.
    VsMptcp(Measure),
    /// The median share of the bytes on each path, "61% / 39%".
    PathShares,
    /// Anything else.
    Other(fn(&[&Record]) -> String),
}

/// A workload's table: one per (profile, cc, workload, variant, mode), a row per system.
pub struct Table {
    /// The heading's end, after "profile, cc, workload variant, mode", from every record
    /// of the group (e.g. ", capacity 80.0 Mbit/s — goodput: median (p10–p90)").
    pub heading: fn(&[&Record]) -> String,
    /// (column head, column), after the system's name.
    pub columns: Vec<(&'static str, Column)>,
}

/// A workload's chart: bars per system with p10–p90 whiskers.
pub struct BarChart {
    /// The end of the file's name.
    pub suffix: &'static str,
    /// What the title says after the group.
    pub title: &'static str,
    pub y_desc: &'static str,
    /// The bar groups: (label, measure); no label is the group's own ("bulk down").
    pub bars: Vec<(Option<&'static str>, Measure)>,
    /// A reference line from every record of the group: (value, label).
    pub line: fn(&[&Record]) -> Option<(f64, String)>,
}

/// How the report summarises a workload.
pub enum Summary {
    /// One download per chunk size: tables with a row per size and a column per system,
    /// ratios to mptcp and the oracle, the fluid bound, grids of two-rate families.
    BySize,
    /// A table and a chart per group, a row (bar) per system.
    BySystem(Table, BarChart),
}

/// No reference line.
pub fn no_line(_: &[&Record]) -> Option<(f64, String)> {
    None
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.5), 2.5);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
        assert_eq!(quantile(&[7.0], 0.9), 7.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 1.0), 5.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.0), 1.0);
        assert!((quantile(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0], 0.1) - 19.0).abs() < 1e-9);
    }

    #[test]
    fn a_median_of_negated_samples_is_the_negated_median() {
        let v = [-30.0, -13.0, -8.0, -5.0, 2.0, -21.0, -9.0, -16.0, 0.5, -3.0];
        let neg: Vec<f64> = v.iter().map(|x| -x).collect();
        assert_eq!(quantile(&neg, 0.5), -quantile(&v, 0.5));
        assert_eq!(quantile(&neg, 0.9), -quantile(&v, 0.1));
    }
}
