//! `upload-ping`: a bulk upload for `--secs` with a 1 KB request/response every 100 ms on
//! a second connection; the small exchanges' latency is the result (QCUT's experiment).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::bulk::{upload_for, upload_goodput};
use super::{connect, fields, percentile, request, ClientRun, Fields, Spec, Via};
use crate::record::Record;
use crate::summary::{
    capacity, goodput, median_text, no_line, pct_of_capacity, values, BarChart, Column, Summary, Table,
};

pub struct UploadPing;

impl Spec for UploadPing {
    fn name(&self) -> &'static str {
        "upload-ping"
    }

    fn upload(&self, _variant: Option<&str>) -> bool {
        true
    }

    fn has_capacity(&self) -> bool {
        true
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        self::run(run.server, &run.via, run.secs)
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |all| {
                let cap = median_text(all, capacity, |c| format!(", upload capacity {c:.1} Mbit/s"));
                format!("{cap} — per-run ping percentiles and goodput: median over runs (p10–p90)")
            },
            columns: vec![
                ("ping p50, ms", Column::Dist(p50, 0)),
                ("ping p90, ms", Column::Dist(p90, 0)),
                ("ping p99, ms", Column::Dist(p99, 0)),
                ("p99 / mptcp", Column::VsMptcp(p99)),
                ("upload goodput, Mbit/s", Column::Dist(goodput, 1)),
                ("% of capacity", Column::Dist(pct_of_capacity, 0)),
                ("pings (failed)", Column::Other(pings)),
            ],
        };
        // The records keep per-run percentiles, not the single pings: bars, no CDF.
        let chart = BarChart {
            suffix: "ping",
            title: "ping latency during the upload",
            y_desc: "ping latency, ms (median over runs, p10–p90)",
            bars: vec![(Some("p50"), p50), (Some("p90"), p90), (Some("p99"), p99)],
            line: no_line,
        };
        Summary::BySystem(table, chart)
    }
}

fn p50(r: &Record) -> Option<f64> {
    r.field("ping_p50_ms")
}

fn p90(r: &Record) -> Option<f64> {
    r.field("ping_p90_ms")
}

fn p99(r: &Record) -> Option<f64> {
    r.field("ping_p99_ms")
}

/// The pings of all the records, and how many failed: "270 (0)".
fn pings(rs: &[&Record]) -> String {
    let pings: f64 = values(rs, |r| r.field("pings")).iter().sum();
    let failed: f64 = values(rs, |r| r.field("ping_failures")).iter().sum();
    format!("{pings:.0} ({failed:.0})")
}

/// Size of the small responses of `upload-ping`.
pub const PING_BYTES: u64 = 1024;

/// A bulk upload for `secs` with a small request/response every 100 ms on
/// a second connection; the small exchanges' latency is the result (QCUT's experiment).
pub fn run(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let mut ping = connect(server, via)?;
    request(&mut ping, PING_BYTES)?;
    let up = connect(server, via)?;
    let start = Instant::now();
    let uploader = std::thread::spawn(move || upload_for(up, secs));
    let mut rtts = Vec::new();
    let mut failures = 0u32;
    let mut k = 0u32;
    // The first second is the upload's slow start; pings are kept from then on.
    while start.elapsed() < Duration::from_secs_f64(secs) {
        k += 1;
        let due = start + Duration::from_millis(100) * k;
        if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        let t = Instant::now();
        match request(&mut ping, PING_BYTES) {
            Ok(()) if t >= start + Duration::from_secs(1) => rtts.push(t.elapsed().as_secs_f64() * 1000.0),
            Ok(()) => {}
            Err(_) => {
                failures += 1;
                ping = connect(server, via)?;
            }
        }
    }
    let (samples, total, done) = uploader.join().map_err(|_| anyhow::anyhow!("uploader panicked"))??;
    let (steady, avg) = upload_goodput(start, secs, &samples, total, done);
    Ok(fields(vec![
        ("ping_p50_ms", percentile(&rtts, 0.5).into()),
        ("ping_p90_ms", percentile(&rtts, 0.9).into()),
        ("ping_p99_ms", percentile(&rtts, 0.99).into()),
        ("ping_max_ms", percentile(&rtts, 1.0).into()),
        ("pings", (rtts.len() as u64).into()),
        ("ping_failures", failures.into()),
        ("goodput_mbit", steady.into()),
        ("average_mbit", avg.into()),
    ]))
}
