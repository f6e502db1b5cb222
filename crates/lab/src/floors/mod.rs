//! The energy-aware mode's floors: targets of our own (docs/energy.md), not a seed's
//! claims, each a bound on the ratio of two systems' medians at one point of one run.
//!
//! Rule: a floor is stated in the form it is measured in — a profile of the lab, a size,
//! the systems it compares and the bound — so `mpflex-lab floors` judges records against
//! the numbers the doc states, and a floor is feasible under the thesis' model on its
//! profile (a bound no system can meet there measures nothing).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Result};

use crate::record::Record;
use crate::reproduce::{self, Run};
use crate::summary::quantile;

/// What a bound compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// The modelled energy of the transfer (`energy_j`).
    Energy,
    /// The download's completion time.
    Time,
}

impl Measure {
    fn of(self, r: &Record) -> Option<f64> {
        match self {
            Measure::Energy => r.field("energy_j"),
            Measure::Time => r.completion_ms,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Measure::Energy => "energy",
            Measure::Time => "time",
        }
    }

    fn value(self, v: f64) -> String {
        match self {
            Measure::Energy => format!("{v:.2} J"),
            Measure::Time => format!("{:.2} s", v / 1000.0),
        }
    }
}

/// `system`'s median `measure` at most `max` × `reference`'s.
pub struct Bound {
    pub measure: Measure,
    pub reference: &'static str,
    pub max: f64,
}

pub struct Floor {
    pub id: &'static str,
    /// The lab profile and the download's size, bytes.
    pub profile: &'static str,
    pub size: u64,
    /// The system held to the floor.
    pub system: &'static str,
    /// All of them hold for the floor to be met.
    pub bounds: &'static [Bound],
    /// Where the numbers come from.
    pub why: &'static str,
}

/// The energy-aware mode on, as the lab names it.
const EMPTCP: &str = "mpflex:emptcp";

pub const FLOORS: &[Floor] = &[
    Floor {
        id: "wifi-good",
        profile: "wifi-good",
        size: 16 << 20,
        system: EMPTCP,
        bounds: &[
            Bound {
                measure: Measure::Energy,
                reference: "mptcp",
                max: 0.35,
            },
            Bound {
                measure: Measure::Time,
                reference: "tcp-wifi",
                max: 1.05,
            },
        ],
        why: "WiFi at 20 Mbit/s is cheaper per byte alone than with LTE (the EIB), so the mode \
              should cost about what TCP over WiFi costs and take WiFi alone's time, not \
              MPTCP's: WiFi alone is slower than both links at line rate, and any LTE byte \
              pays a promotion and a tail (docs/energy.md).",
    },
    Floor {
        id: "wifi-good-lte-bad",
        profile: "wifi-good-lte-bad",
        size: 16 << 20,
        system: EMPTCP,
        bounds: &[
            Bound {
                measure: Measure::Energy,
                reference: "mptcp",
                max: 0.6,
            },
            Bound {
                measure: Measure::Time,
                reference: "mptcp",
                max: 1.25,
            },
        ],
        why: "The thesis' \"Good WiFi & Bad LTE\" (§4.3.3, 16 MB): eMPTCP about half MPTCP's \
              energy in about 20 % more time; LTE at 5 Mbit/s, below its 8 Mbit/s line \
              between good and bad.",
    },
    Floor {
        id: "wifi-bad",
        profile: "wifi-bad",
        size: 16 << 20,
        system: EMPTCP,
        bounds: &[Bound {
            measure: Measure::Time,
            reference: "mptcp",
            max: 1.05,
        }],
        why: "WiFi at 0.8 Mbit/s costs more per byte than both links together, so LTE should \
              carry from early on: the thesis' static bad-WiFi runs (§4.2.2) find eMPTCP \
              \"almost the same\" as MPTCP, with the default τ.",
    },
];

/// The runs the floors read, into one file ([`FILE`]): every floor's profile, the mode
/// against kernel MPTCP (and TCP over WiFi alone where a floor names it: not on
/// `wifi-bad`, where it takes ten times as long), 16 MB on new connections; full: 10
/// repetitions (the thesis' count for its 16 MB runs, §4.3).
pub const RUNS: &[Run] = &[
    Run {
        name: "emptcp-floors",
        profiles: ("wifi-good,wifi-good-lte-bad", "wifi-good,wifi-good-lte-bad"),
        workload: "chunk",
        systems: "mptcp,mpflex:emptcp,tcp-wifi",
        sizes: ("16M", "16M"),
        modes: ("fresh", "fresh"),
        variants: None,
        secs: None,
        reps: (3, 10),
    },
    Run {
        name: "emptcp-floors",
        profiles: ("wifi-bad", "wifi-bad"),
        workload: "chunk",
        systems: "mptcp,mpflex:emptcp",
        sizes: ("16M", "16M"),
        modes: ("fresh", "fresh"),
        variants: None,
        secs: None,
        reps: (3, 10),
    },
];

/// The runs' results file, in the output directory.
pub const FILE: &str = "emptcp-floors.jsonl";

/// One bound as measured: the medians and their ratio (none without records of both).
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub ours: f64,
    pub reference: f64,
    pub ratio: f64,
    pub reps: usize,
}

/// The median of `measure` for `system` at the floor's point, and the repetitions.
fn median(recs: &[Record], floor: &Floor, system: &str, measure: Measure) -> Option<(f64, usize)> {
    let v: Vec<f64> = recs
        .iter()
        .filter(|r| r.system == system && r.profile == floor.profile && r.size == floor.size && r.workload == "chunk")
        .filter_map(|r| measure.of(r))
        .collect();
    (!v.is_empty()).then(|| (quantile(&v, 0.5), v.len()))
}

/// Each bound of `floor` as `recs` measure it.
pub fn judge(floor: &Floor, recs: &[Record]) -> Vec<Option<Measured>> {
    floor
        .bounds
        .iter()
        .map(|b| {
            let (ours, n) = median(recs, floor, floor.system, b.measure)?;
            let (reference, m) = median(recs, floor, b.reference, b.measure)?;
            (reference > 0.0).then(|| Measured {
                ours,
                reference,
                ratio: ours / reference,
                reps: n.min(m),
            })
        })
        .collect()
}

/// The floors' table from `recs`.
pub fn table(recs: &[Record]) -> String {
    let mut md = String::from("| floor | bound | measured (medians) | verdict |\n|---|---|---|---|\n");
    for f in FLOORS {
        for (b, m) in f.bounds.iter().zip(judge(f, recs)) {
            let bound = format!("{} ≤ {:.2} × {}'s", b.measure.name(), b.max, b.reference);
            let (measured, verdict) = match m {
                None => ("–".to_string(), "not measured"),
                Some(m) => (
                    format!(
                        "{} vs {}: {:.2} × ({} reps)",
                        b.measure.value(m.ours),
                        b.measure.value(m.reference),
                        m.ratio,
                        m.reps
                    ),
                    if m.ratio <= b.max { "met" } else { "**not met**" },
                ),
            };
            md += &format!(
                "| `{}` {}, {} | {bound} | {measured} | {verdict} |\n",
                f.profile,
                crate::units::human(f.size),
                f.system
            );
        }
    }
    md
}

/// Start and end of the generated section in docs/energy.md.
pub const BEGIN: &str = "<!-- floors:begin — written by `mpflex-lab floors`; edits inside are overwritten -->";
pub const END: &str = "<!-- floors:end -->";

/// What `floors` was asked.
pub struct Options {
    pub quick: bool,
    pub out_dir: PathBuf,
    /// The doc whose section between [`BEGIN`] and [`END`] is rewritten (none: print only).
    pub doc: Option<PathBuf>,
    pub mpflex_bin: PathBuf,
    /// Judge the results file already in `out_dir` instead of running.
    pub report_only: bool,
}

/// Runs [`RUNS`] (unless `report_only`), judges it, writes the doc's section; returns it.
pub fn floors(opts: &Options, stop: &AtomicBool) -> Result<String> {
    let file = opts.out_dir.join(FILE);
    if let Some(doc) = &opts.doc {
        // A doc without the markers is refused before the runs, not after them.
        with_section(doc, &std::fs::read_to_string(doc)?, "")?;
    }
    if !opts.report_only {
        // Every configuration is checked before the first run starts.
        let configs = RUNS
            .iter()
            .map(|r| reproduce::config_of(r, opts.quick, &file, &opts.mpflex_bin))
            .collect::<Result<Vec<_>>>()?;
        std::fs::create_dir_all(&opts.out_dir)?;
        if file.exists() {
            std::fs::remove_file(&file)?;
        }
        for (mut cfg, profiles) in configs {
            crate::runner::run_profiles(&mut cfg, profiles, stop)?;
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                bail!(
                    "interrupted: {} holds what ran; `floors` runs it all again",
                    file.display()
                );
            }
        }
    }
    let recs = crate::report::load_results(std::slice::from_ref(&file))?;
    let section = section(&recs, opts, &file);
    if let Some(doc) = &opts.doc {
        write_section(doc, &section)?;
        eprintln!("wrote {}", doc.display());
    }
    Ok(section)
}

fn section(recs: &[Record], opts: &Options, file: &Path) -> String {
    let commits: std::collections::BTreeSet<String> = recs
        .iter()
        .map(|r| r.commit.clone().unwrap_or_else(|| "not recorded".into()))
        .collect();
    let quick = if opts.quick { " --quick" } else { "" };
    format!(
        "Generated by `sudo mpflex-lab floors{quick}` from `{}` (`mpflex-lab` commit {}): \
         {} on new connections, CUBIC; energy modelled as above.{}\n\n{}",
        file.display(),
        commits.into_iter().collect::<Vec<_>>().join(", "),
        crate::units::human(FLOORS[0].size),
        if opts.quick {
            " **`--quick`: 3 repetitions, indicative** (full: 10)."
        } else {
            ""
        },
        table(recs)
    )
}

/// Puts `section` between [`BEGIN`] and [`END`] in `doc`; a doc without both is refused.
fn write_section(doc: &Path, section: &str) -> Result<()> {
    let out = with_section(doc, &std::fs::read_to_string(doc)?, section)?;
    std::fs::write(doc, out)?;
    Ok(())
}

/// `text` (of `doc`) with `section` between [`BEGIN`] and [`END`].
fn with_section(doc: &Path, text: &str, section: &str) -> Result<String> {
    let (Some(a), Some(b)) = (text.find(BEGIN), text.find(END)) else {
        bail!("{}: no {BEGIN} … {END} markers", doc.display());
    };
    if b < a {
        bail!("{}: the floors' markers are out of order", doc.display());
    }
    Ok(format!("{}{BEGIN}\n{section}{}", &text[..a], &text[b..]))
}

#[cfg(test)]
mod tests;
