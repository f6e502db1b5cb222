//! `bulk`: one connection downloading (`down`) or uploading (`up`) as fast as it can for
//! `--secs`. Goodput is measured over a [`Window`] between fixed times, [`BULK_SKIP`] in
//! and the end; uploads by the receiver's progress reports, so bytes buffered in the
//! sender do not count. The runner then bounds it by what the links had delivered when
//! the window opened ([`Window::bounded_mbit`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{
    connect, fields, make_request, mbit, parse_report, ClientRun, Fields, Spec, Via, OP_DOWNLOAD, OP_UPLOAD, UNTIL_EOF,
};
use crate::summary::{
    average, capacity, goodput, median_of, median_text, pct_of_capacity, BarChart, Column, Summary, Table,
};
use crate::units::unix_us;

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
                ("in-order over the window, Mbit/s", Column::Dist(inorder, 1)),
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

/// The receiver's in-order bytes over goodput's window, unbounded ([`Window::inorder_mbit`]):
/// beside the bounded goodput, so that a reader sees what the bound took off.
fn inorder(r: &crate::record::Record) -> Option<f64> {
    r.field("inorder_mbit")
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

/// Goodput's window: in-order bytes the receiver had at two fixed times of the run (the
/// last read, or progress report, at or before [`BULK_SKIP`] in, and at or before the
/// end), timed in µs since the Unix epoch, the clock the emulator's logs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub from_us: u64,
    pub to_us: u64,
    pub from_bytes: u64,
    pub to_bytes: u64,
}

impl Window {
    /// In-order bytes delivered in the window over its length, Mbit/s. This can exceed
    /// what the links carried in the window: bytes that arrived before it but waited for a
    /// hole in the sequence (a loss, or a slower path) are released inside it. A 20 s
    /// `bulk` on seed-default read 97.8–101.3 % of capacity that way (issue 27), above the
    /// 96.5 % that TCP payload can carry.
    pub fn inorder_mbit(&self) -> Option<f64> {
        let us = self.to_us.checked_sub(self.from_us).filter(|&d| d > 0)?;
        Some(mbit(
            self.to_bytes.saturating_sub(self.from_bytes),
            Duration::from_micros(us),
        ))
    }

    /// Goodput that cannot exceed what the links carried in the window: the window's
    /// bytes are counted from the larger of what the receiver had read when it opened and
    /// what the links had delivered by then (`arrived_by_from`, TCP payload on every path
    /// in the transfer's direction). Nothing read by the end can have arrived after it,
    /// so the count is at most the links' payload over the window (capacity × 1448/1500
    /// plus one packet per path). Payload the links carried before the window that the
    /// receiver never used (retransmissions, redundant copies, mpflex's framing) counts
    /// against it; a few tens of KB over an 18 s window.
    pub fn bounded_mbit(&self, arrived_by_from: u64) -> Option<f64> {
        let w = Window {
            from_bytes: self.from_bytes.max(arrived_by_from),
            ..*self
        };
        w.inorder_mbit()
    }
}

/// A bulk download's progress, as its client saw it.
pub(super) struct Download {
    pub start: Instant,
    /// `start` in µs since the Unix epoch.
    pub start_us: u64,
    /// The last read at or before [`BULK_SKIP`]: its time and the count after it.
    pub before_skip: (Duration, u64),
    pub total: u64,
    /// The first read: when it returned, and the bytes it got.
    pub first: Option<(Instant, u64)>,
    /// When the last read returned.
    pub last: Instant,
    pub end: Instant,
    /// Bytes read by the end of each [`PROGRESS_EVERY`] since `start`: where a run's
    /// start-up or a stall lost its time, which the window and the average do not show.
    pub progress: Vec<u64>,
    /// (µs since the Unix epoch, bytes so far) after a read, at most one per
    /// [`SAMPLE_EVERY`]: what `outages` cuts its windows from.
    pub samples: Vec<(u64, u64)>,
    /// The longest time between two reads.
    pub max_gap: Duration,
}

/// The least time between two of a download's [`Download::samples`].
pub(super) const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// The step of a download's progress series ([`Download::progress`]).
pub(super) const PROGRESS_EVERY: Duration = Duration::from_millis(250);

impl Download {
    /// A download requested at `start` (`start_us` since the Unix epoch) that reads until
    /// `end`.
    pub fn new(start: Instant, start_us: u64, end: Instant) -> Self {
        Download {
            start,
            start_us,
            before_skip: (Duration::ZERO, 0),
            total: 0,
            first: None,
            last: start,
            end,
            progress: Vec::new(),
            samples: Vec::new(),
            max_gap: Duration::ZERO,
        }
    }

    /// A read of `n` bytes returned at `at`.
    pub fn read(&mut self, at: Instant, n: u64) {
        let t = at - self.start;
        // Steps that ended before this read hold the count before it.
        let step = (t.as_micros() / PROGRESS_EVERY.as_micros()) as usize;
        while self.progress.len() < step {
            self.progress.push(self.total);
        }
        if self.first.is_some() {
            self.max_gap = self.max_gap.max(at - self.last);
        }
        self.total += n;
        self.last = at;
        self.first.get_or_insert((at, n));
        let us = self.start_us + t.as_micros() as u64;
        if self
            .samples
            .last()
            .is_none_or(|s| us >= s.0 + SAMPLE_EVERY.as_micros() as u64)
        {
            self.samples.push((us, self.total));
        }
        if t <= BULK_SKIP {
            self.before_skip = (t, self.total);
        }
    }

    /// Goodput's window: from the last read at or before [`BULK_SKIP`] to the end.
    pub fn window(&self) -> Window {
        let us = |d: Duration| self.start_us + d.as_micros() as u64;
        Window {
            from_us: us(self.before_skip.0),
            to_us: us(self.end - self.start),
            from_bytes: self.before_skip.1,
            to_bytes: self.total,
        }
    }

    /// (in-order goodput over the window, whole-run average first byte to last), Mbit/s.
    pub fn rates(&self) -> (f64, f64) {
        let elapsed = self.end - self.start;
        let average = self
            .first
            .and_then(|(t, n)| first_to_last((t - self.start, n), (self.last - self.start, self.total)))
            .unwrap_or_else(|| mbit(self.total, elapsed));
        let goodput = self
            .window()
            .inorder_mbit()
            .unwrap_or_else(|| mbit(self.total, elapsed));
        (goodput, average)
    }
}

/// Requests an endless download on `s` and reads it for `secs`.
pub(super) fn download_for(mut s: TcpStream, secs: f64) -> Result<Download> {
    s.write_all(&make_request(OP_DOWNLOAD, UNTIL_EOF))?;
    let mut buf = vec![0u8; 256 * 1024];
    let start = Instant::now();
    let start_us = unix_us();
    let end = start + Duration::from_secs_f64(secs);
    let mut d = Download::new(start, start_us, end);
    while Instant::now() < end {
        s.set_read_timeout(Some((end - Instant::now()).max(Duration::from_millis(1))))?;
        match s.read(&mut buf) {
            Ok(0) => bail!("server closed the bulk download after {} bytes", d.total),
            Ok(n) => d.read(Instant::now(), n as u64),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
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
        (WINDOW, serde_json::to_value(d.window())?),
        (PROGRESS, d.progress.clone().into()),
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
    /// `start` in µs since the Unix epoch.
    pub start_us: u64,
    pub reports: Vec<Report>,
    pub last: Report,
}

impl Upload {
    /// Goodput's window, by the receiver's clock (the reports' one-way delay varies with
    /// the path and queue that carried them): from its last report at or before
    /// [`BULK_SKIP`] in to its last one at or before the sender stopped at `stop_us`.
    pub fn window(&self, stop_us: u64) -> Option<Window> {
        let skip_us = self.start_us + BULK_SKIP.as_micros() as u64;
        let before = |t: u64| self.reports.iter().rev().find(|r| r.rx_us <= t);
        let (a, b) = (before(skip_us)?, before(stop_us)?);
        Some(Window {
            from_us: a.rx_us,
            to_us: b.rx_us,
            from_bytes: a.count,
            to_bytes: b.count,
        })
    }

    /// (in-order goodput over the window, whole-run average first byte to last), Mbit/s.
    pub fn rates(&self, stop_us: u64) -> (f64, f64) {
        let whole = mbit(self.last.count, self.last.at - self.start);
        let us = Duration::from_micros;
        let steady = self.window(stop_us).and_then(|w| w.inorder_mbit()).unwrap_or(whole);
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
fn progress(mut r: TcpStream, start: Instant, start_us: u64) -> Result<Upload> {
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
                start_us,
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
    let start_us = unix_us();
    s.write_all(&make_request(OP_UPLOAD, UNTIL_EOF))?;
    let reader = {
        let r = s.try_clone()?;
        std::thread::spawn(move || progress(r, start, start_us))
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

/// [`upload_while`] for `secs`; also returns when the sender stopped (µs since the Unix
/// epoch).
pub(super) fn upload_for(s: TcpStream, secs: f64) -> Result<(Upload, u64)> {
    let length = Duration::from_secs_f64(secs);
    let stop = Instant::now() + length;
    let stop_us = unix_us() + length.as_micros() as u64;
    Ok((upload_while(s, || Instant::now() < stop)?, stop_us))
}

/// `bulk` upload for `secs`.
pub fn up(server: SocketAddr, via: &Via, secs: f64) -> Result<Fields> {
    let (u, stop_us) = upload_for(connect(server, via)?, secs)?;
    let (steady, average) = u.rates(stop_us);
    let mut f = fields(vec![
        ("goodput_mbit", steady.into()),
        ("average_mbit", average.into()),
        ("bytes", u.last.count.into()),
    ]);
    if let Some(w) = u.window(stop_us) {
        f.insert(WINDOW.into(), serde_json::to_value(w)?);
    }
    Ok(f)
}

/// The field a workload's goodput window is written to; the runner bounds goodput by it.
pub const WINDOW: &str = "goodput_window";

/// The field a download's progress series is written to: bytes read by the end of each
/// 250 ms since the request ([`Download::progress`]).
pub const PROGRESS: &str = "progress_250ms_bytes";

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

    /// A download over seed-default's two paths (7040 and 9185 kbit/s, 1448 bytes of
    /// payload per 1500-byte packet) in which one LTE packet sent at 1.5 s is lost and
    /// arrives again at 2.5 s: everything after it in sequence waits for it, and the
    /// reader, taking at most 256 KB a read one millisecond apart, gets the backlog after
    /// 2.5 s. Returns the download, its reads (time, bytes so far) and the links' log of
    /// arrivals (µs from 0, the download's start).
    fn held_back(secs: f64) -> (Download, Vec<(Duration, u64)>, crate::arrivals::PayloadLog) {
        let mut sent: Vec<(u64, bool)> = Vec::new();
        for (path, kbit) in [7040.0, 9185.0].into_iter().enumerate() {
            let period = 1500.0 * 8.0 / (kbit * 1000.0);
            let mut t = period;
            while t <= secs {
                sent.push(((t * 1e6) as u64, path == 1));
                t += period;
            }
        }
        sent.sort();
        // In sequence order, each packet's arrival; the lost one's moves to 2.5 s.
        let hole = sent.iter().position(|&(t, lte)| lte && t >= 1_500_000).unwrap();
        let mut at: Vec<u64> = sent.iter().map(|a| a.0).collect();
        at[hole] = 2_500_000;
        let mut log = crate::arrivals::PayloadLog::default();
        let mut by_time = at.clone();
        by_time.sort();
        for t in by_time {
            log.push(t, 1448);
        }
        let start = Instant::now();
        let end_us = (secs * 1e6) as u64;
        let mut d = Download::new(start, 0, start + Duration::from_micros(end_us));
        let mut reads = Vec::new();
        // Released in order: every packet before the first that has not arrived yet.
        let mut released = 0usize;
        for ms in 0..=end_us / 1000 {
            let now = ms * 1000;
            while released < at.len() && at[released] <= now {
                released += 1;
            }
            let n = (released as u64 * 1448 - d.total).min(256 * 1024);
            if n > 0 {
                d.read(start + Duration::from_micros(now), n);
                reads.push((Duration::from_micros(now), d.total));
            }
        }
        (d, reads, log)
    }

    #[test]
    fn progress_holds_the_count_at_the_end_of_each_step() {
        let start = Instant::now();
        let mut d = Download::new(start, 0, start + Duration::from_secs(2));
        d.read(start + Duration::from_millis(100), 10);
        d.read(start + Duration::from_millis(240), 5);
        // Nothing read in the second and third steps: they repeat the count.
        d.read(start + Duration::from_millis(800), 7);
        assert_eq!(d.progress, vec![15, 15, 15]);
        assert_eq!(d.total, 22);
    }

    #[test]
    fn goodput_cannot_exceed_what_the_links_carried() {
        let (d, reads, log) = held_back(20.0);
        let payload_rate = (7040.0 + 9185.0) / 1000.0 * 1448.0 / 1500.0;
        let w = d.window();
        // What the links' payload allows over the window, plus a packet per path.
        let span = (w.to_us - w.from_us) as f64 / 1e6;
        let bound = payload_rate + 2.0 * 1448.0 * 8.0 / span / 1e6;
        let bounded = w.bounded_mbit(log.delivered_by(w.from_us)).unwrap();
        assert!(bounded <= bound, "{bounded} > {bound}");
        assert!(bounded > payload_rate * 0.99, "{bounded}");
        // The goodput `bulk` reported before (issue 27): bytes read after the first read
        // that returned at or after 2 s, to the end. That read took 256 KB of the backlog
        // the hole had held; the rest had arrived before 2 s, and was counted in the window.
        let &(t0, b0) = reads.iter().find(|r| r.0 >= BULK_SKIP).unwrap();
        let old = mbit(d.total - b0, (d.end - d.start) - t0);
        assert!(old > bound, "the definition before gives {old}, within {bound}");
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
