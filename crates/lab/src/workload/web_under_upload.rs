//! `web-under-upload`: the `shortflows` `par` bundle (10 objects of 10–100 KB at once,
//! each on a fresh connection) on idle paths, then again while a bulk upload runs on
//! another connection (started [`LEAD`] before the bundle, so it is past slow start and
//! its queues are full); [`PAIRS`] such pairs per run. What the upload costs a page load.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::bulk::upload_while;
use super::shortflows::{bundle, sizes};
use super::{connect, fields, percentile, ClientRun, Fields, Spec, Via};
use crate::record::Record;
use crate::summary::{capacity, median_text, no_line, BarChart, Column, Summary, Table};

pub struct WebUnderUpload;

impl Spec for WebUnderUpload {
    fn name(&self) -> &'static str {
        "web-under-upload"
    }

    fn upload(&self, _variant: Option<&str>) -> bool {
        true
    }

    fn has_capacity(&self) -> bool {
        true
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        self::run(run.server, &run.via, PAIRS, LEAD)
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |all| {
                let cap = median_text(all, capacity, |c| format!(", upload capacity {c:.1} Mbit/s"));
                let pairs = median_text(all, |r| r.field("pairs"), |n| format!(", {n:.0} pairs per run"));
                format!("{cap}{pairs} — per-run medians of the bundle's completion: median over runs (p10–p90)")
            },
            columns: vec![
                ("bundle idle, ms", Column::Dist(idle, 0)),
                ("bundle loaded, ms", Column::Dist(loaded, 0)),
                ("loaded / idle", Column::Dist(ratio, 2)),
                ("ratio / mptcp", Column::VsMptcp(ratio)),
                ("upload, Mbit/s", Column::Dist(upload, 1)),
            ],
        };
        let chart = BarChart {
            suffix: "bundle",
            title: "bundle completion, idle and during an upload",
            y_desc: "bundle completion, ms (median over runs, p10–p90)",
            bars: vec![(Some("idle"), idle), (Some("loaded"), loaded)],
            line: no_line,
        };
        Summary::BySystem(table, chart)
    }
}

fn idle(r: &Record) -> Option<f64> {
    r.field("bundle_ms_idle")
}

fn loaded(r: &Record) -> Option<f64> {
    r.field("bundle_ms_loaded")
}

pub fn ratio(r: &Record) -> Option<f64> {
    r.field("ratio")
}

fn upload(r: &Record) -> Option<f64> {
    r.field("upload_mbit")
}

/// Idle/loaded pairs per run: a bundle alone varies by ±30 % between pairs on one build
/// (fresh connections, each through the paths' handshakes), so the ratio of two medians
/// needs about ten of each to move by less than the floor's 20 % between runs.
pub const PAIRS: usize = 10;

/// How long the upload runs before the loaded bundle starts.
pub const LEAD: Duration = Duration::from_secs(2);

/// Quiet after an upload has been received in full, before the next idle bundle: what
/// is left in flight (acknowledgements, the last reports) drains.
const PAUSE: Duration = Duration::from_millis(500);

/// `pairs` times: a bundle on idle paths; an upload, `lead` later a bundle beside it, the
/// upload stopped when the bundle is done and waited for until the receiver has it all.
pub fn run(server: SocketAddr, via: &Via, pairs: usize, lead: Duration) -> Result<Fields> {
    let t = Instant::now();
    let (mut idle, mut loaded, mut uploads) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..pairs {
        idle.push(bundle(server, via, true, false)?.ms);
        let up = connect(server, via)?;
        let stop = AtomicBool::new(false);
        let (b, u) = std::thread::scope(|sc| {
            let uploader = sc.spawn(|| upload_while(up, || !stop.load(Ordering::SeqCst)));
            std::thread::sleep(lead);
            let b = bundle(server, via, true, false);
            stop.store(true, Ordering::SeqCst);
            (b, uploader.join())
        });
        loaded.push(b?.ms);
        let u = u.map_err(|_| anyhow::anyhow!("uploader panicked"))??;
        uploads.push(u.rates(crate::units::unix_us()).1);
        std::thread::sleep(PAUSE);
    }
    let (idle_ms, loaded_ms) = (percentile(&idle, 0.5), percentile(&loaded, 0.5));
    let upload_mbit = percentile(&uploads, 0.5);
    Ok(fields(vec![
        ("completion_ms", (t.elapsed().as_secs_f64() * 1000.0).into()),
        ("bundle_ms_idle", idle_ms.into()),
        ("bundle_ms_loaded", loaded_ms.into()),
        ("ratio", (loaded_ms / idle_ms).into()),
        ("bundles_ms_idle", idle.into()),
        ("bundles_ms_loaded", loaded.into()),
        ("pairs", (pairs as u64).into()),
        ("objects", (sizes().len() as u64).into()),
        ("bytes", sizes().iter().sum::<u64>().into()),
        ("upload_mbit", upload_mbit.into()),
        ("uploads_mbit", uploads.into()),
        ("goodput_mbit", upload_mbit.into()),
    ]))
}
