//! `bulk`: one connection downloading (`down`) or uploading (`up`) as fast as it can for
//! `--secs`. Goodput is measured after [`BULK_SKIP`]; uploads by the receiver's progress
//! reports, so bytes buffered in the sender do not count.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{connect, fields, make_request, mbit, ClientRun, Fields, Spec, Via, OP_DOWNLOAD, OP_UPLOAD, UNTIL_EOF};
use crate::record::Record;
use crate::summary::{capacity, goodput, median_of, median_text, pct_of_capacity, BarChart, Column, Summary, Table};

pub struct Bulk;

impl Spec for Bulk {
    fn name(&self) -> &'static str {
        "bulk"
    }

    fn variants(&self) -> (&'static [&'static str], &'static [&'static str]) {
        (&["down", "up"], &["down", "up"])
    }

    fn upload(&self, variant: Option<&str>) -> bool {
        variant == Some("up")
    }

    fn has_capacity(&self) -> bool {
        true
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        if self.upload(run.variant.as_deref()) {
            up(run.server, &run.via, run.secs)
        } else {
            down(run.server, &run.via, run.secs)
        }
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |all| {
                let cap = median_text(all, capacity, |c| format!(", capacity {c:.1} Mbit/s"));
                format!("{cap} — goodput: median (p10–p90)")
            },
            columns: vec![
                ("goodput, Mbit/s", Column::Dist(goodput, 1)),
                ("% of capacity", Column::Dist(pct_of_capacity, 0)),
                ("goodput / mptcp", Column::VsMptcp(goodput)),
                ("whole-run average, Mbit/s", Column::Dist(average, 1)),
                ("bytes per path", Column::PathShares),
            ],
        };
        let chart = BarChart {
            suffix: "goodput",
            title: "goodput",
            y_desc: "goodput, Mbit/s (median, p10–p90)",
            bars: vec![(None, goodput)],
            line: |all| median_of(all, capacity).map(|c| (c, format!("capacity {c:.1} Mbit/s"))),
        };
        Summary::BySystem(table, chart)
    }
}

/// The whole run's average rate.
fn average(r: &Record) -> Option<f64> {
    r.field("average_mbit")
}

/// Goodput is measured after this much of a bulk transfer (slow start and the first
/// queue fill are not what `bulk` asks about); the whole-run average is reported too.
pub const BULK_SKIP: Duration = Duration::from_secs(2);

/// `bulk` download for `secs`: reads as fast as the server sends.
pub fn down(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let mut s = connect(server, via)?;
    s.write_all(&make_request(OP_DOWNLOAD, UNTIL_EOF))?;
    let mut buf = vec![0u8; 256 * 1024];
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let (mut total, mut at_skip) = (0u64, None);
    while Instant::now() < end {
        s.set_read_timeout(Some((end - Instant::now()).max(Duration::from_millis(1))))?;
        match s.read(&mut buf) {
            Ok(0) => bail!("server closed the bulk download after {total} bytes"),
            Ok(n) => total += n as u64,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
        }
        let t = start.elapsed();
        if at_skip.is_none() && t >= BULK_SKIP {
            at_skip = Some((t, total));
        }
    }
    let elapsed = start.elapsed();
    let (t0, b0) = at_skip.unwrap_or((Duration::ZERO, 0));
    Ok(fields(vec![
        ("goodput_mbit", mbit(total - b0, elapsed - t0).into()),
        ("average_mbit", mbit(total, elapsed).into()),
        ("bytes", total.into()),
    ]))
}

/// The upload receiver's progress reports: (when, bytes so far).
type Progress = Vec<(Instant, u64)>;

/// Reads the sink's progress records until the final one; returns (time, count) samples
/// and the final count.
fn progress(mut r: TcpStream) -> Result<(Progress, u64)> {
    r.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut samples = Vec::new();
    let mut rec = [0u8; 16];
    loop {
        r.read_exact(&mut rec).context("upload progress")?;
        let count = u64::from_be_bytes(rec[..8].try_into().unwrap());
        if rec[15] == 1 {
            return Ok((samples, count));
        }
        samples.push((Instant::now(), count));
    }
}

/// Writes zeros on `s` for `secs`, then half-closes; returns the receiver's progress
/// samples, the final count and when the receiver reported it.
pub(super) fn upload_for(mut s: TcpStream, secs: f64) -> Result<(Progress, u64, Instant)> {
    s.write_all(&make_request(OP_UPLOAD, UNTIL_EOF))?;
    let reader = {
        let r = s.try_clone()?;
        std::thread::spawn(move || progress(r))
    };
    let zeros = vec![0u8; 64 * 1024];
    let end = Instant::now() + Duration::from_secs_f64(secs);
    s.set_write_timeout(Some(Duration::from_millis(200)))?;
    while Instant::now() < end {
        match s.write(&zeros) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
        }
    }
    s.shutdown(std::net::Shutdown::Write)?;
    let (samples, total) = reader
        .join()
        .map_err(|_| anyhow::anyhow!("progress reader panicked"))??;
    Ok((samples, total, Instant::now()))
}

/// Upload goodput from the receiver's progress: after [`BULK_SKIP`] until the last
/// report before the sender stopped.
pub(super) fn upload_goodput(
    start: Instant,
    secs: f64,
    samples: &[(Instant, u64)],
    total: u64,
    done: Instant,
) -> (f64, f64) {
    let stop = start + Duration::from_secs_f64(secs);
    let first = samples.iter().find(|(t, _)| *t >= start + BULK_SKIP);
    let last = samples.iter().rev().find(|(t, _)| *t <= stop);
    let steady = match (first, last) {
        (Some(a), Some(b)) if b.0 > a.0 => mbit(b.1 - a.1, b.0 - a.0),
        _ => mbit(total, done - start),
    };
    (steady, mbit(total, done - start))
}

/// `bulk` upload for `secs`.
pub fn up(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let s = connect(server, via)?;
    let start = Instant::now();
    let (samples, total, done) = upload_for(s, secs)?;
    let (steady, avg) = upload_goodput(start, secs, &samples, total, done);
    Ok(fields(vec![
        ("goodput_mbit", steady.into()),
        ("average_mbit", avg.into()),
        ("bytes", total.into()),
    ]))
}
