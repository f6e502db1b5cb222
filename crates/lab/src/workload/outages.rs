//! `outages`: one connection downloading (`down-…`) or uploading (`up-…`) as fast as it
//! can while each path in turn goes dark for [`OUTAGE`], the first at [`FIRST_AT`] and
//! the next [`APART`] later: "outages in a row". The variant names the direction and the
//! order, by path index: `down-1-0` takes path 1 down first (seed-default's LTE), then
//! path 0 (WiFi); `down-0-1` the other way round.
//!
//! The question is the survivor's goodput while the other path is dark, against its
//! capacity: a path that has just come back from its own outage must carry the transfer
//! alone at its rate when the other one goes. Per outage the runner records that goodput,
//! the survivors' capacity and their ratio ([`window_fields`]).

use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Value};

use super::bulk::{self, WINDOW};
use super::{connect, fields, ClientRun, Fields, Spec};
use crate::arrivals::PayloadLog;
use crate::record::Record;
use crate::summary::{goodput, median_text, BarChart, Column, Summary, Table};

pub struct Outages;

/// The first outage starts this long into the run: slow start and the first queue fill
/// are over, both paths carry the transfer.
pub const FIRST_AT: Duration = Duration::from_secs(12);
/// How long each path is dark.
pub const OUTAGE: Duration = Duration::from_secs(3);
/// From one outage's start to the next one's.
pub const APART: Duration = Duration::from_secs(12);

/// The floor: while only one path is up, its goodput is at least this share of its
/// capacity.
pub const FLOOR: f64 = 0.8;

/// One path's outage in a run: dark from `at` for `length` after the client started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    pub path: usize,
    pub at: Duration,
    pub length: Duration,
}

const VARIANTS: &[&str] = &["down-1-0", "down-0-1", "up-1-0", "up-0-1"];

/// A variant's direction (true: upload) and the paths in the order they go down:
/// `<down|up>-<path>-<path>…`, each path once.
pub fn parse_variant(v: &str) -> Option<(bool, Vec<usize>)> {
    let mut parts = v.split('-');
    let upload = match parts.next()? {
        "down" => false,
        "up" => true,
        _ => return None,
    };
    let order: Vec<usize> = parts.map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let distinct = order.iter().enumerate().all(|(i, p)| !order[..i].contains(p));
    (!order.is_empty() && distinct).then_some((upload, order))
}

/// The outages of a variant: its paths in order, [`FIRST_AT`], then every [`APART`].
pub fn schedule(variant: Option<&str>) -> Vec<Outage> {
    let Some((_, order)) = variant.and_then(parse_variant) else {
        return Vec::new();
    };
    order
        .into_iter()
        .enumerate()
        .map(|(i, path)| Outage {
            path,
            at: FIRST_AT + APART * i as u32,
            length: OUTAGE,
        })
        .collect()
}

impl Spec for Outages {
    fn name(&self) -> &'static str {
        "outages"
    }

    fn variants(&self) -> (&'static [&'static str], &'static [&'static str]) {
        (VARIANTS, VARIANTS)
    }

    /// The last outage ends at 27 s; 3 s of both paths after it.
    fn default_secs(&self) -> f64 {
        30.0
    }

    fn upload(&self, variant: Option<&str>) -> bool {
        variant.and_then(parse_variant).is_some_and(|(up, _)| up)
    }

    fn has_capacity(&self) -> bool {
        true
    }

    fn outages(&self, variant: Option<&str>) -> Vec<Outage> {
        schedule(variant)
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        let s = connect(run.server, &run.via)?;
        if self.upload(run.variant.as_deref()) {
            let (u, stop_us) = bulk::upload_for(s, run.secs)?;
            let (steady, average) = u.rates(stop_us);
            let samples: Vec<(u64, u64)> = u.reports.iter().map(|r| (r.rx_us, r.count)).collect();
            let mut f = fields(vec![
                ("goodput_mbit", steady.into()),
                ("average_mbit", average.into()),
                ("bytes", u.last.count.into()),
                (SAMPLES, serde_json::to_value(samples)?),
            ]);
            if let Some(w) = u.window(stop_us) {
                f.insert(WINDOW.into(), serde_json::to_value(w)?);
            }
            Ok(f)
        } else {
            let d = bulk::download_for(s, run.secs)?;
            let (goodput, average) = d.rates();
            Ok(fields(vec![
                ("goodput_mbit", goodput.into()),
                ("average_mbit", average.into()),
                ("bytes", d.total.into()),
                ("max_gap_ms", (d.max_gap.as_secs_f64() * 1000.0).into()),
                (WINDOW, serde_json::to_value(d.window())?),
                (bulk::PROGRESS, d.progress.clone().into()),
                (SAMPLES, serde_json::to_value(&d.samples)?),
            ]))
        }
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |all| {
                let first = median_text(
                    all,
                    |r| r.field("outage1_capacity_mbit"),
                    |c| format!(", survivor of the 1st outage {c:.1} Mbit/s"),
                );
                let second = median_text(
                    all,
                    |r| r.field("outage2_capacity_mbit"),
                    |c| format!(", of the 2nd {c:.1} Mbit/s"),
                );
                format!("{first}{second} — median (p10–p90)")
            },
            columns: vec![
                (
                    "1st outage: goodput, Mbit/s",
                    Column::Dist(|r| r.field("outage1_goodput_mbit"), 2),
                ),
                ("1st: / capacity", Column::Dist(|r| r.field("outage1_ratio"), 2)),
                (
                    "2nd outage: goodput, Mbit/s",
                    Column::Dist(|r| r.field("outage2_goodput_mbit"), 2),
                ),
                ("2nd: / capacity", Column::Dist(|r| r.field("outage2_ratio"), 2)),
                ("lower / capacity", Column::Dist(min_ratio, 2)),
                ("lower / mptcp", Column::VsMptcp(min_ratio)),
                ("max gap, ms", Column::DistIfAny(|r| r.field("max_gap_ms"), 0)),
                ("goodput 2 s–end, Mbit/s", Column::Dist(goodput, 1)),
                ("emulator late p99, ms", Column::Dist(late_p99, 0)),
            ],
        };
        let chart = BarChart {
            suffix: "ratio",
            title: "goodput while one path is up / its capacity",
            y_desc: "goodput / capacity (median, p10–p90)",
            bars: vec![
                (Some("1st outage"), |r| r.field("outage1_ratio")),
                (Some("2nd outage"), |r| r.field("outage2_ratio")),
            ],
            line: |_| Some((FLOOR, format!("floor {FLOOR}"))),
        };
        Summary::BySystem(table, chart)
    }
}

/// The emulator's worst lateness over the run (p99 of each link direction, the highest):
/// on a busy machine the links delay packets the model did not, and a path that stalls
/// for that long is suspected and its window backs off, which is the machine's doing.
fn late_p99(r: &Record) -> Option<f64> {
    ["link_down_late_p99_ms", "link_up_late_p99_ms"]
        .iter()
        .filter_map(|k| r.extra.get(*k)?.as_array())
        .flatten()
        .filter_map(|v| v.as_f64())
        .reduce(f64::max)
}

fn min_ratio(r: &Record) -> Option<f64> {
    r.field("min_outage_ratio")
}

/// The field the client's progress samples are written to, `[µs since the Unix epoch,
/// in-order bytes]` (the runner turns them into per-outage windows and drops them).
pub const SAMPLES: &str = "progress_samples";

/// In-order bytes at `t_us`, linear between the samples around it (`samples` by time);
/// the first sample's count before it, the last one's after it. An upload's receiver
/// reports every 250 ms, a download samples its reads every [`bulk::SAMPLE_EVERY`]: a
/// window's edge between two samples is taken where the rate between them puts it.
pub fn bytes_at(samples: &[(u64, u64)], t_us: u64) -> Option<f64> {
    let after = samples.partition_point(|s| s.0 <= t_us);
    match (after.checked_sub(1).map(|i| samples[i]), samples.get(after)) {
        (None, None) => None,
        (Some(a), None) => Some(a.1 as f64),
        (None, Some(b)) => Some(b.1 as f64),
        (Some(a), Some(b)) => {
            let f = (t_us - a.0) as f64 / (b.0 - a.0).max(1) as f64;
            Some(a.1 as f64 + f * (b.1 as f64 - a.1 as f64))
        }
    }
}

/// What happened during one outage: the path that was dark, from when to when (µs since
/// the Unix epoch, as the runner took it down and up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dark {
    pub path: usize,
    pub from_us: u64,
    pub to_us: u64,
}

/// The survivors' goodput during each outage and its ratio to their capacity, as record
/// fields: `outage<n>_goodput_mbit`, `outage<n>_capacity_mbit`, `outage<n>_ratio`,
/// `min_outage_ratio` and an `outages` list with the details.
///
/// Goodput over the dark window is the lower of two counts, so that it cannot exceed
/// either: the receiver's in-order bytes over the window (which can include bytes that
/// arrived on the survivor before the window and waited for the dark path's lost ones)
/// and the TCP payload the survivors' links delivered in the window, in the transfer's
/// direction (which includes retransmissions and mpflex's framing). `rates_kbit` is
/// each path's rate in that direction (a trace's mean; none: unlimited), `names` the paths'.
pub fn window_fields(
    samples: &[(u64, u64)],
    dark: &[Dark],
    logs: Option<&[PayloadLog]>,
    rates_kbit: &[Option<f64>],
    names: &[String],
) -> Fields {
    let mut f = Fields::new();
    let mut details = Vec::new();
    let mut lowest: Option<f64> = None;
    for (i, d) in dark.iter().enumerate() {
        let n = i + 1;
        let secs = d.to_us.saturating_sub(d.from_us) as f64 / 1e6;
        let survivors: Vec<usize> = (0..rates_kbit.len()).filter(|&p| p != d.path).collect();
        let inorder = match (bytes_at(samples, d.from_us), bytes_at(samples, d.to_us)) {
            (Some(a), Some(b)) if secs > 0.0 => Some((b - a).max(0.0)),
            _ => None,
        };
        let carried = logs.filter(|l| l.iter().all(|l| !l.full)).map(|l| {
            survivors
                .iter()
                .filter_map(|&p| l.get(p))
                .map(|l| l.delivered_between(d.from_us, d.to_us))
                .sum::<u64>() as f64
        });
        let bytes = match (inorder, carried) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mbit = |b: f64| b * 8.0 / secs / 1e6;
        let goodput = bytes.filter(|_| secs > 0.0).map(mbit);
        let capacity: Option<f64> = survivors
            .iter()
            .map(|&p| rates_kbit.get(p).copied().flatten())
            .sum::<Option<f64>>()
            .map(|k| k / 1000.0);
        let ratio = match (goodput, capacity) {
            (Some(g), Some(c)) if c > 0.0 => Some(g / c),
            _ => None,
        };
        if let Some(r) = ratio {
            lowest = Some(lowest.map_or(r, |l: f64| l.min(r)));
        }
        f.insert(format!("outage{n}_goodput_mbit"), goodput.into());
        f.insert(format!("outage{n}_capacity_mbit"), capacity.into());
        f.insert(format!("outage{n}_ratio"), ratio.into());
        let name = |p: usize| names.get(p).cloned().unwrap_or_else(|| p.to_string());
        details.push(json!({
            "path": name(d.path),
            "survivors": survivors.iter().map(|&p| name(p)).collect::<Vec<_>>(),
            "from_us": d.from_us,
            "to_us": d.to_us,
            "inorder_mbit": inorder.filter(|_| secs > 0.0).map(mbit),
            "carried_mbit": carried.filter(|_| secs > 0.0).map(mbit),
            "goodput_mbit": goodput,
            "capacity_mbit": capacity,
            "ratio": ratio,
        }));
    }
    f.insert("min_outage_ratio".into(), lowest.into());
    f.insert("outages".into(), Value::Array(details));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_name_direction_and_order() {
        assert_eq!(parse_variant("down-1-0"), Some((false, vec![1, 0])));
        assert_eq!(parse_variant("up-0-1"), Some((true, vec![0, 1])));
        assert_eq!(parse_variant("up-2"), Some((true, vec![2])));
        assert_eq!(parse_variant("sideways-1-0"), None);
        assert_eq!(parse_variant("down"), None);
        assert_eq!(parse_variant("down-1-1"), None, "a path goes down once");
        assert_eq!(parse_variant("down-x-0"), None);
        for v in VARIANTS {
            assert!(parse_variant(v).is_some(), "{v}");
        }
        assert!(Outages.upload(Some("up-1-0")));
        assert!(!Outages.upload(Some("down-1-0")));
    }

    #[test]
    fn the_schedule_is_two_outages_twelve_seconds_apart() {
        let s = schedule(Some("down-1-0"));
        assert_eq!(
            s,
            vec![
                Outage {
                    path: 1,
                    at: Duration::from_secs(12),
                    length: Duration::from_secs(3)
                },
                Outage {
                    path: 0,
                    at: Duration::from_secs(24),
                    length: Duration::from_secs(3)
                },
            ]
        );
        assert_eq!(schedule(Some("up-0-1"))[0].path, 0);
        assert!(schedule(None).is_empty());
        // The last outage ends before the default run does.
        let last = *schedule(Some("down-0-1")).last().unwrap();
        assert!((last.at + last.length).as_secs_f64() < Outages.default_secs());
    }

    #[test]
    fn bytes_at_interpolates_between_samples() {
        let s = [(1_000_000, 0), (1_250_000, 1000), (1_500_000, 1000)];
        assert_eq!(bytes_at(&s, 1_000_000), Some(0.0));
        assert_eq!(bytes_at(&s, 1_125_000), Some(500.0));
        assert_eq!(bytes_at(&s, 1_250_000), Some(1000.0));
        assert_eq!(bytes_at(&s, 1_400_000), Some(1000.0));
        assert_eq!(bytes_at(&s, 900_000), Some(0.0));
        assert_eq!(bytes_at(&s, 2_000_000), Some(1000.0));
        assert_eq!(bytes_at(&[], 2_000_000), None);
    }

    /// A 2 s outage of path 1 on two paths of 8000 and 4000 kbit/s: the survivor (path
    /// 0) carried 1.5 MB in it, the receiver released 1.6 MB (0.1 MB had arrived before
    /// and waited for path 1's lost bytes): goodput is the links' 6 Mbit/s, 0.75 of the
    /// survivor's 8 Mbit/s. Without the links' logs, the receiver's count.
    #[test]
    fn window_goodput_is_the_lower_count_over_the_survivors_capacity() {
        let t0 = 10_000_000;
        let samples: Vec<(u64, u64)> = (0..=30)
            .map(|i| {
                (
                    t0 - 500_000 + i * 100_000,
                    i * 100_000 + if i >= 5 { 100_000 } else { 0 },
                )
            })
            .collect();
        // At t0 (i = 5): 600_000; at t0 + 2 s (i = 25): 2_600_000 → 2.0 MB in order...
        let dark = [Dark {
            path: 1,
            from_us: t0,
            to_us: t0 + 2_000_000,
        }];
        let mut logs = vec![PayloadLog::default(), PayloadLog::default()];
        for k in 0..1500 {
            logs[0].push(t0 + k * 1000, 1000);
            logs[1].push(t0 - 1000 - k, 1000);
        }
        let names = ["wifi".to_string(), "lte".to_string()];
        let rates = [Some(8000.0), Some(4000.0)];
        let f = window_fields(&samples, &dark, Some(&logs), &rates, &names);
        assert_eq!(f["outage1_capacity_mbit"], 8.0);
        assert!(
            (f["outage1_goodput_mbit"].as_f64().unwrap() - 6.0).abs() < 1e-9,
            "{f:?}"
        );
        assert!((f["outage1_ratio"].as_f64().unwrap() - 0.75).abs() < 1e-9);
        assert_eq!(f["min_outage_ratio"], f["outage1_ratio"]);
        assert_eq!(f["outages"][0]["path"], "lte");
        assert_eq!(f["outages"][0]["survivors"][0], "wifi");
        // ...which is 8 Mbit/s, above what the links carried.
        assert!((f["outages"][0]["inorder_mbit"].as_f64().unwrap() - 8.0).abs() < 1e-9);
        let f = window_fields(&samples, &dark, None, &rates, &names);
        assert!((f["outage1_ratio"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        // A full log is not a count.
        logs[0].full = true;
        let f = window_fields(&samples, &dark, Some(&logs), &rates, &names);
        assert!((f["outage1_ratio"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        // A survivor of no set rate (unlimited) has no ratio.
        let f = window_fields(&samples, &dark, None, &[None, Some(4000.0)], &names);
        assert!(f["outage1_ratio"].is_null());
        assert!(f["min_outage_ratio"].is_null());
    }
}
