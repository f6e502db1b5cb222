//! `bulk`: one connection downloading (`down`) or uploading (`up`) as fast as it can for
//! `--secs`. Goodput is measured after [`BULK_SKIP`]; uploads by the receiver's progress
//! reports, so bytes buffered in the sender do not count.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{
    connect, fields, make_request, mbit, parse_report, ClientRun, Fields, Spec, Via, OP_DOWNLOAD, OP_UPLOAD, UNTIL_EOF,
};
use crate::summary::{
    average, capacity, goodput, median_of, median_text, pct_of_capacity, BarChart, Column, Summary, Table,
};

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

/// Goodput is measured after this much of a bulk transfer (slow start and the first
/// queue fill are not what `bulk` asks about); the whole-run average is reported too.
pub const BULK_SKIP: Duration = Duration::from_secs(2);

/// The whole-run rate, first byte to last: the bytes that arrived after the first read
/// over the time from that read to the last one, Mbit/s (none if there is no such time).
/// The first read's bytes arrived before it returned, so they are left out: counted, they
/// would lift a short run above what the links delivered. Bytes read later arrived
/// later, so each path contributes at most its rate over the interval plus the one
/// packet it was serialising when the interval began; with the rate counting IP bytes
/// that stays below capacity × 1448/1500 once the run is some packets long.
pub fn first_to_last(first: (Duration, u64), last: (Duration, u64)) -> Option<f64> {
    let span = last.0.checked_sub(first.0).filter(|d| !d.is_zero())?;
    Some(mbit(last.1.saturating_sub(first.1), span))
}

/// A bulk download's progress, as its client saw it.
pub(super) struct Download {
    pub start: Instant,
    pub total: u64,
    /// The first read: when it returned, and the bytes it got.
    pub first: Option<(Instant, u64)>,
    /// When the last read returned.
    pub last: Instant,
    /// The time and count at [`BULK_SKIP`], if it got that far.
    pub at_skip: Option<(Duration, u64)>,
    pub end: Instant,
}

impl Download {
    /// (goodput after [`BULK_SKIP`], whole-run average first byte to last), Mbit/s.
    pub fn rates(&self) -> (f64, f64) {
        let elapsed = self.end - self.start;
        let (t0, b0) = self.at_skip.unwrap_or((Duration::ZERO, 0));
        let average = self
            .first
            .and_then(|(t, n)| first_to_last((t - self.start, n), (self.last - self.start, self.total)))
            .unwrap_or_else(|| mbit(self.total, elapsed));
        (mbit(self.total - b0, elapsed - t0), average)
    }
}

/// Requests an endless download on `s` and reads it for `secs`.
pub(super) fn download_for(mut s: TcpStream, secs: f64) -> Result<Download> {
    s.write_all(&make_request(OP_DOWNLOAD, UNTIL_EOF))?;
    let mut buf = vec![0u8; 256 * 1024];
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let mut d = Download {
        start,
        total: 0,
        first: None,
        last: start,
        at_skip: None,
        end,
    };
    while Instant::now() < end {
        s.set_read_timeout(Some((end - Instant::now()).max(Duration::from_millis(1))))?;
        match s.read(&mut buf) {
            Ok(0) => bail!("server closed the bulk download after {} bytes", d.total),
            Ok(n) => {
                d.total += n as u64;
                d.last = Instant::now();
                d.first.get_or_insert((d.last, n as u64));
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
        }
        let t = start.elapsed();
        if d.at_skip.is_none() && t >= BULK_SKIP {
            d.at_skip = Some((t, d.total));
        }
    }
    d.end = Instant::now();
    Ok(d)
}

/// `bulk` download for `secs`: reads as fast as the server sends.
pub fn down(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let d = download_for(connect(server, via)?, secs)?;
    let (goodput, average) = d.rates();
    Ok(fields(vec![
        ("goodput_mbit", goodput.into()),
        ("average_mbit", average.into()),
        ("bytes", d.total.into()),
    ]))
}

/// One progress report of the upload's receiver.
#[derive(Debug, Clone, Copy)]
pub(super) struct Report {
    /// When the client got it.
    pub at: Instant,
    pub count: u64,
    /// When the receiver had read `count` bytes, µs since the Unix epoch.
    pub rx_us: u64,
}

/// A bulk upload's progress: the receiver's reports and its final one.
pub(super) struct Upload {
    pub start: Instant,
    pub reports: Vec<Report>,
    pub last: Report,
}

impl Upload {
    /// (goodput between the first report the client got after [`BULK_SKIP`] and the last
    /// one it got before the sender stopped at `stop`, whole-run average first byte to
    /// last), Mbit/s, both timed by the receiver's clock: the reports' one-way delay
    /// varies with the path and queue that carried them.
    pub fn rates(&self, stop: Instant) -> (f64, f64) {
        let whole = mbit(self.last.count, self.last.at - self.start);
        let us = Duration::from_micros;
        let first = self.reports.iter().find(|r| r.at >= self.start + BULK_SKIP);
        let last = self.reports.iter().rev().find(|r| r.at <= stop);
        let steady = match (first, last) {
            (Some(a), Some(b)) => first_to_last((us(a.rx_us), a.count), (us(b.rx_us), b.count)),
            _ => None,
        }
        .unwrap_or(whole);
        let average = self
            .reports
            .iter()
            .find(|r| r.count > 0)
            .and_then(|f| first_to_last((us(f.rx_us), f.count), (us(self.last.rx_us), self.last.count)))
            .unwrap_or(whole);
        (steady, average)
    }
}

/// Reads the sink's progress reports until the final one.
fn progress(mut r: TcpStream, start: Instant) -> Result<Upload> {
    r.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut reports = Vec::new();
    let mut rec = [0u8; 16];
    loop {
        r.read_exact(&mut rec).context("upload progress")?;
        let (count, rx_us, last) = parse_report(&rec);
        let report = Report {
            at: Instant::now(),
            count,
            rx_us,
        };
        if last {
            return Ok(Upload {
                start,
                reports,
                last: report,
            });
        }
        reports.push(report);
    }
}

/// Writes zeros on `s` while `more()` says so, then half-closes; returns the receiver's
/// reports once it has read everything.
pub(super) fn upload_while(mut s: TcpStream, more: impl Fn() -> bool) -> Result<Upload> {
    let start = Instant::now();
    s.write_all(&make_request(OP_UPLOAD, UNTIL_EOF))?;
    let reader = {
        let r = s.try_clone()?;
        std::thread::spawn(move || progress(r, start))
    };
    let zeros = vec![0u8; 64 * 1024];
    s.set_write_timeout(Some(Duration::from_millis(200)))?;
    while more() {
        match s.write(&zeros) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
        }
    }
    s.shutdown(std::net::Shutdown::Write)?;
    reader.join().map_err(|_| anyhow::anyhow!("progress reader panicked"))?
}

/// [`upload_while`] for `secs`; also returns when the sender stopped.
pub(super) fn upload_for(s: TcpStream, secs: f64) -> Result<(Upload, Instant)> {
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    Ok((upload_while(s, || Instant::now() < stop)?, stop))
}

/// `bulk` upload for `secs`.
pub fn up(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let (u, stop) = upload_for(connect(server, via)?, secs)?;
    let (steady, average) = u.rates(stop);
    Ok(fields(vec![
        ("goodput_mbit", steady.into()),
        ("average_mbit", average.into()),
        ("bytes", u.last.count.into()),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads of a download over two paths of `kbit` kbit/s each, 1500-byte IP packets
    /// with 1448 bytes of payload, both starting at 0 and read whenever a packet arrives:
    /// (time, bytes so far) per read.
    fn reads(kbit: [f64; 2], secs: f64) -> Vec<(Duration, u64)> {
        let mut arrivals: Vec<f64> = Vec::new();
        for k in kbit {
            let per_packet = 1500.0 * 8.0 / (k * 1000.0);
            let mut t = per_packet;
            while t <= secs {
                arrivals.push(t);
                t += per_packet;
            }
        }
        arrivals.sort_by(f64::total_cmp);
        arrivals
            .iter()
            .enumerate()
            .map(|(i, t)| (Duration::from_secs_f64(*t), 1448 * (i as u64 + 1)))
            .collect()
    }

    #[test]
    fn first_to_last_stays_within_capacity() {
        for (kbit, secs) in [
            ([2020.0, 2286.0], 10.0),
            ([7040.0, 9185.0], 10.0),
            ([2020.0, 2286.0], 0.5),
        ] {
            let r = reads(kbit, secs);
            let capacity = (kbit[0] + kbit[1]) / 1000.0;
            let (first, last) = (r[0], *r.last().unwrap());
            let avg = first_to_last(first, last).unwrap();
            let span = (last.0 - first.0).as_secs_f64();
            // At most one packet more than the payload rate allows on the second path.
            let bound = capacity * 1448.0 / 1500.0 + 1448.0 * 8.0 / span / 1e6;
            assert!(avg <= bound, "{avg} > {bound} at {kbit:?}");
            assert!(avg < capacity, "{avg} ≥ {capacity}");
            if secs >= 10.0 {
                assert!(avg <= capacity * 1448.0 / 1500.0 * 1.001, "{avg} at {kbit:?}");
                assert!(avg > capacity * 1448.0 / 1500.0 * 0.99, "{avg} at {kbit:?}");
            }
            // Counting the first read's bytes too would overstate a short run.
            let naive = mbit(last.1, last.0 - first.0);
            assert!(naive > avg);
        }
        // 50 ms, 17 packets: all the bytes over first to last read exceed the links' rate.
        let r = reads([2020.0, 2286.0], 0.05);
        let naive = mbit(r.last().unwrap().1, r.last().unwrap().0 - r[0].0);
        assert!(naive > 4.306, "{naive}");
        // One read, or none after the first: no interval.
        assert_eq!(first_to_last(r[0], r[0]), None);
        assert_eq!(first_to_last(r[1], r[0]), None);
    }
}
