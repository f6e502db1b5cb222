//! `shortflows`: a bundle of 10 objects of 10, 20, … 100 KB, one after another (`seq`) or
//! all at once (`par`), each on its own connection. `fresh` opens the connections inside
//! the timed bundle; `warm` opens and uses them once and idles a second first.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::Value;

use super::{connect, fields, request, timed, ClientRun, Fields, Spec, Via};
use crate::record::Record;
use crate::summary::{completion, median_text, no_line, quantile, BarChart, Column, Summary, Table};
use crate::units::human;

pub struct Shortflows;

impl Spec for Shortflows {
    fn name(&self) -> &'static str {
        "shortflows"
    }

    fn variants(&self) -> (&'static [&'static str], &'static [&'static str]) {
        (&["seq", "par"], &["seq", "par"])
    }

    fn warm_mode(&self) -> bool {
        true
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        self::run(run.server, &run.via, run.variant.as_deref() == Some("par"), run.warm)
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |all| {
                let objects = median_text(all, |r| r.field("objects"), |n| format!(", {n:.0} objects"));
                let bytes = median_text(all, |r| r.field("bytes"), |b| format!(", {} in all", human(b as u64)));
                format!("{objects}{bytes} — bundle completion: median (p10–p90)")
            },
            columns: vec![
                ("bundle completion, ms", Column::Dist(completion, 0)),
                ("completion / mptcp", Column::VsMptcp(completion)),
                ("object completion, ms: median (p90)", Column::Other(object_times)),
            ],
        };
        let chart = BarChart {
            suffix: "completion",
            title: "bundle completion",
            y_desc: "bundle completion, ms (median, p10–p90)",
            bars: vec![(None, completion)],
            line: no_line,
        };
        Summary::BySystem(table, chart)
    }
}

/// The objects' completion times over all the records: median (p90).
fn object_times(rs: &[&Record]) -> String {
    let objects: Vec<f64> = rs
        .iter()
        .filter_map(|r| r.extra.get("object_ms").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_f64)
        .collect();
    if objects.is_empty() {
        "–".into()
    } else {
        format!("{:.0} ({:.0})", quantile(&objects, 0.5), quantile(&objects, 0.9))
    }
}

/// The objects of a `shortflows` bundle: 10 × 10–100 KB.
pub fn sizes() -> Vec<u64> {
    (1..=10).map(|k| k * 10 * 1024).collect()
}

/// One bundle's times, ms: the whole bundle's and each object's.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub ms: f64,
    pub object_ms: Vec<f64>,
}

/// `shortflows`: the bundle sequentially (`par` false) or all at once. `fresh`: a new
/// connection per object, included in the time; `warm`: connections opened, used once
/// and idle for a second before the clock starts.
pub fn run(server: SocketAddr, via: &Via, par: bool, warm: bool) -> Result<Fields> {
    let b = bundle(server, via, par, warm)?;
    let sizes = sizes();
    Ok(fields(vec![
        ("completion_ms", b.ms.into()),
        ("objects", (sizes.len() as u64).into()),
        ("bytes", sizes.iter().sum::<u64>().into()),
        ("object_ms", b.object_ms.into()),
    ]))
}

/// One bundle of [`sizes`], as [`run`] describes.
pub fn bundle(server: SocketAddr, via: &Via, par: bool, warm: bool) -> Result<Bundle> {
    let sizes = sizes();
    let conns = if !warm {
        sizes.iter().map(|_| None).collect::<Vec<Option<TcpStream>>>()
    } else {
        let n = if par { sizes.len() } else { 1 };
        let mut v = Vec::new();
        for _ in 0..n {
            let mut c = connect(server, via)?;
            request(&mut c, 16 * 1024)?;
            v.push(Some(c));
        }
        std::thread::sleep(Duration::from_secs(1));
        v
    };
    let t = Instant::now();
    let mut per_object = Vec::new();
    if par {
        let results: Vec<Result<Duration>> = std::thread::scope(|sc| {
            let hs: Vec<_> = sizes
                .iter()
                .zip(conns)
                .map(|(&size, mut c)| sc.spawn(move || timed(server, via, size, c.as_mut())))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("worker panicked"))))
                .collect()
        });
        for r in results {
            per_object.push(r?.as_secs_f64() * 1000.0);
        }
    } else {
        let mut warm_conn = conns.into_iter().next().flatten();
        for &size in &sizes {
            per_object.push(timed(server, via, size, warm_conn.as_mut())?.as_secs_f64() * 1000.0);
        }
    }
    Ok(Bundle {
        ms: t.elapsed().as_secs_f64() * 1000.0,
        object_ms: per_object,
    })
}
