//! `upload-ping`: a 1 KB request/response every 100 ms on one connection, first on idle
//! paths, then beside a bulk upload for `--secs` on a second connection; the small
//! exchanges' latency under load, and its rise over the idle latency of the same system
//! in the same run, is the result (QCUT's experiment). `download-ping` is the same with
//! the bulk going down; the shared code is here.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::bulk::{download_for, upload_for, PROGRESS, WINDOW};
use super::{connect, fields, percentile, ping, request, unix_ns, ClientRun, Fields, Spec, Via};
use crate::record::Record;
use crate::summary::{
    average, average_pct_of_capacity, capacity, median_text, no_line, values, BarChart, Column, Summary, Table,
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
        self::run(run.server, &run.via, run.secs, Direction::Up, IDLE_PINGS)
    }

    fn summary(&self) -> Summary {
        summary(
            |all| {
                let cap = median_text(all, capacity, |c| format!(", upload capacity {c:.1} Mbit/s"));
                format!("{cap} — {HEADING}")
            },
            "ping latency, idle and during the upload",
        )
    }
}

/// What the ping tables' headings say after the capacity.
pub const HEADING: &str = "per-run ping percentiles and the upload's whole-run average: median over runs (p10–p90)";

/// The table and chart of a ping workload: `heading` names the capacity, `title` is the
/// chart's.
pub fn summary(heading: fn(&[&Record]) -> String, title: &'static str) -> Summary {
    let table = Table {
        heading,
        columns: vec![
            ("idle p50, ms", Column::Dist(idle_p50, 0)),
            ("ping p50, ms", Column::Dist(p50, 0)),
            ("ping p99, ms", Column::Dist(p99, 0)),
            ("p50 − idle, ms", Column::Dist(rise, 0)),
            ("p99 / mptcp", Column::VsMptcp(p99)),
            ("average, Mbit/s", Column::Dist(average, 1)),
            ("% of capacity", Column::Dist(average_pct_of_capacity, 0)),
            ("pings (failed)", Column::Other(pings)),
        ],
    };
    // The records keep per-run percentiles, not the single pings: bars, no CDF.
    let chart = BarChart {
        suffix: "ping",
        title,
        y_desc: "ping latency, ms (median over runs, p10–p90)",
        bars: vec![
            (Some("idle p50"), idle_p50),
            (Some("p50"), p50),
            (Some("p90"), p90),
            (Some("p99"), p99),
        ],
        line: no_line,
    };
    Summary::BySystem(table, chart)
}

fn idle_p50(r: &Record) -> Option<f64> {
    r.field("idle_ping_p50_ms")
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

/// What the bulk adds to the median ping: p50 under load − idle p50, of one run.
pub fn rise(r: &Record) -> Option<f64> {
    Some(p50(r)? - idle_p50(r)?)
}

/// The pings of all the records, and how many failed: "270 (0)".
fn pings(rs: &[&Record]) -> String {
    let pings: f64 = values(rs, |r| r.field("pings")).iter().sum();
    let failed: f64 = values(rs, |r| r.field("ping_failures")).iter().sum();
    format!("{pings:.0} ({failed:.0})")
}

/// Size of the small responses of `upload-ping`.
pub const PING_BYTES: u64 = 1024;

/// Time between the starts of two exchanges.
const PING_EVERY: Duration = Duration::from_millis(100);

/// Idle exchanges measured before the bulk starts (2.5 s at [`PING_EVERY`]).
pub const IDLE_PINGS: usize = 25;

/// Pings under load are kept from this far into the bulk on (its slow start is not what
/// they ask about).
const LOADED_SKIP: Duration = Duration::from_secs(1);

/// Which way a ping workload's bulk goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
}

/// One exchange: when it started (ns since the Unix epoch), its time, and its request's
/// part of it (from the client's write to the server's read: the rest is the response's).
#[derive(Debug, Clone, Copy)]
struct Exchange {
    at_ns: u64,
    ms: f64,
    up_ms: f64,
}

/// The ping connection: exchanges, reconnecting after a failed one.
struct Pinger<'a> {
    server: SocketAddr,
    via: &'a Via,
    conn: TcpStream,
    failures: u32,
}

impl Pinger<'_> {
    /// One exchange, or none if it failed (then counted, and the connection replaced).
    fn exchange(&mut self) -> Result<Option<Exchange>> {
        let at_ns = unix_ns();
        let t = Instant::now();
        match ping(&mut self.conn, PING_BYTES) {
            Ok(arrived) => Ok(Some(Exchange {
                at_ns,
                ms: t.elapsed().as_secs_f64() * 1000.0,
                up_ms: arrived.saturating_sub(at_ns) as f64 / 1e6,
            })),
            Err(_) => {
                self.failures += 1;
                self.conn = connect(self.server, self.via)?;
                Ok(None)
            }
        }
    }

    /// Exchanges every [`PING_EVERY`] from `start` while `more(start of the exchange)`
    /// says so; those started at or after `keep_from`.
    fn every_100ms(
        &mut self,
        start: Instant,
        keep_from: Instant,
        more: impl Fn(Instant) -> bool,
    ) -> Result<Vec<Exchange>> {
        let mut kept = Vec::new();
        for k in 0u32.. {
            let due = start + PING_EVERY * k;
            if let Some(w) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(w);
            }
            let t = Instant::now();
            if !more(t) {
                break;
            }
            if let Some(x) = self.exchange()? {
                if t >= keep_from {
                    kept.push(x);
                }
            }
        }
        Ok(kept)
    }
}

/// How far over the idle median an exchange under load must take to be listed in
/// `slow_pings`: the floor's 99th percentile (idle + 60 ms).
const SLOW_OVER_IDLE_MS: f64 = 60.0;

/// The exchanges that took more than the idle median + [`SLOW_OVER_IDLE_MS`], each as
/// [ms after `start_ns`, time, request's part, response's part] (ms, 0.1 ms), so that a
/// tail can be matched against the systems' logs and the links' statistics.
fn slow(loaded: &[Exchange], idle_p50: f64, start_ns: u64) -> Vec<[f64; 4]> {
    let tenth = |v: f64| (v * 10.0).round() / 10.0;
    loaded
        .iter()
        .filter(|x| x.ms > idle_p50 + SLOW_OVER_IDLE_MS)
        .map(|x| {
            [
                tenth(x.at_ns.saturating_sub(start_ns) as f64 / 1e6),
                tenth(x.ms),
                tenth(x.up_ms),
                tenth(x.ms - x.up_ms),
            ]
        })
        .collect()
}

/// A ping workload: `idle` exchanges every 100 ms with nothing else running (after one
/// that opens the connection and is not counted), then the bulk in `direction` on a
/// second connection for `secs` with the exchanges going on beside it, kept from
/// [`LOADED_SKIP`] in.
pub fn run(server: SocketAddr, via: &Via, secs: f64, direction: Direction, idle: usize) -> Result<Fields> {
    let mut p = Pinger {
        server,
        via,
        conn: connect(server, via)?,
        failures: 0,
    };
    // The first exchange meets a new connection (and in mpflex a new stream): not the
    // idle latency asked about.
    request(&mut p.conn, PING_BYTES)?;
    let t0 = Instant::now();
    let idle_pings = p.every_100ms(t0, t0, |t| t < t0 + PING_EVERY * idle as u32)?;
    let idle_rtts: Vec<f64> = idle_pings.iter().map(|x| x.ms).collect();

    // The bulk's connection is opened only now, so nothing else ran during the idle pings.
    let bulk = connect(server, via)?;
    let start = Instant::now();
    let start_ns = unix_ns();
    let end = start + Duration::from_secs_f64(secs);
    let bulk = std::thread::spawn(move || match direction {
        Direction::Up => upload_for(bulk, secs).map(|(u, stop)| (u.rates(stop), u.window(stop), None)),
        Direction::Down => download_for(bulk, secs).map(|d| (d.rates(), Some(d.window()), Some(d.progress))),
    });
    let loaded = p.every_100ms(start, start + LOADED_SKIP, |t| t < end)?;
    let rtts: Vec<f64> = loaded.iter().map(|x| x.ms).collect();
    let ups: Vec<f64> = loaded.iter().map(|x| x.up_ms).collect();
    let downs: Vec<f64> = loaded.iter().map(|x| x.ms - x.up_ms).collect();
    let idle_p50 = percentile(&idle_rtts, 0.5);
    let ((steady, avg), window, progress) = bulk.join().map_err(|_| anyhow::anyhow!("bulk panicked"))??;
    let mut f = fields(vec![
        ("idle_ping_p50_ms", percentile(&idle_rtts, 0.5).into()),
        ("idle_ping_p99_ms", percentile(&idle_rtts, 0.99).into()),
        ("idle_pings", (idle_rtts.len() as u64).into()),
        ("ping_p50_ms", percentile(&rtts, 0.5).into()),
        ("ping_p90_ms", percentile(&rtts, 0.9).into()),
        ("ping_p99_ms", percentile(&rtts, 0.99).into()),
        ("ping_max_ms", percentile(&rtts, 1.0).into()),
        ("pings", (rtts.len() as u64).into()),
        ("ping_failures", p.failures.into()),
        ("ping_up_p50_ms", percentile(&ups, 0.5).into()),
        ("ping_up_p99_ms", percentile(&ups, 0.99).into()),
        ("ping_down_p50_ms", percentile(&downs, 0.5).into()),
        ("ping_down_p99_ms", percentile(&downs, 0.99).into()),
        ("bulk_start_unix_us", (start_ns / 1000).into()),
        ("slow_pings", serde_json::to_value(slow(&loaded, idle_p50, start_ns))?),
        ("goodput_mbit", steady.into()),
        ("average_mbit", avg.into()),
    ]);
    if let Some(w) = window {
        f.insert(WINDOW.into(), serde_json::to_value(w)?);
    }
    if let Some(p) = progress {
        f.insert(PROGRESS.into(), p.into());
    }
    Ok(f)
}
