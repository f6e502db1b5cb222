//! `handover`: a constant-rate download of 1000-byte stamped messages for `--secs` while
//! the runner takes a path down at a third of the run and back up at two thirds. Variants
//! say how it goes down ([`PathEvent`]): `blackhole` (the link goes dark, the interfaces
//! stay up), `carrier` (the client's interface loses carrier), `degrade` (5 s of falling
//! rate and rising loss and delay first, as when walking away from an access point),
//! `appear` (the path's link joins at a third of the run, and the stream asks for every
//! path's capacity so that the new path is worth using: `appear_ms` says when it was).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{
    connect, fields, make_request, percentile, unix_ns, ClientRun, Fields, PathEvent, Spec, Via, MESSAGE, OP_STREAM,
};
use crate::record::Record;
use crate::summary::{median_text, no_line, BarChart, Column, Summary, Table};

pub struct Handover;

impl Spec for Handover {
    fn name(&self) -> &'static str {
        "handover"
    }

    fn default_secs(&self) -> f64 {
        30.0
    }

    fn has_capacity(&self) -> bool {
        true
    }

    fn variants(&self) -> (&'static [&'static str], &'static [&'static str]) {
        (&["blackhole", "carrier", "degrade", "appear"], &["blackhole"])
    }

    fn path_event(&self, variant: Option<&str>) -> Option<PathEvent> {
        Some(match variant {
            Some("carrier") => PathEvent::Carrier,
            Some("degrade") => PathEvent::Degrade,
            Some("appear") => PathEvent::Appear,
            _ => PathEvent::Blackhole,
        })
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        self::run(run.server, &run.via, run.secs, run.rate_kbit)
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |all| {
                let rate = median_text(all, |r| r.field("rate_kbit"), |k| format!(", {k:.0} kbit/s stream"));
                format!("{rate} — median (p10–p90)")
            },
            columns: vec![
                ("max gap, ms", Column::Dist(max_gap, 0)),
                ("max gap / mptcp", Column::VsMptcp(max_gap)),
                ("lost bytes", Column::Dist(|r| r.field("lost_bytes"), 0)),
                ("dup bytes", Column::Dist(|r| r.dup_bytes.map(|d| d as f64), 0)),
                ("new path carries, ms", Column::DistIfAny(|r| r.field("appear_ms"), 0)),
                ("goodput, Mbit/s", Column::Dist(goodput, 2)),
                ("delay p50, ms", Column::Dist(|r| r.field("delay_p50_ms"), 0)),
            ],
        };
        let chart = BarChart {
            suffix: "gap",
            title: "longest gap between arrivals",
            y_desc: "max gap, ms (median, p10–p90)",
            bars: vec![(None, max_gap)],
            line: no_line,
        };
        Summary::BySystem(table, chart)
    }
}

fn max_gap(r: &Record) -> Option<f64> {
    r.field("max_gap_ms")
}

/// The stream's delivered rate: the record's `goodput_mbit` when the runner measured
/// one, else from the bytes received over the run.
fn goodput(r: &Record) -> Option<f64> {
    match (r.goodput_mbit, r.field("received_bytes"), r.completion_ms) {
        (Some(g), _, _) if g > 0.0 => Some(g),
        (_, Some(b), Some(ms)) if ms > 0.0 => Some(b * 8.0 / (ms / 1000.0) / 1e6),
        (g, _, _) => g,
    }
}

/// A constant `kbit` kbit/s stream for `secs` while the runner takes a path
/// down and up; reports the longest gap between arrivals and the bytes that never came.
pub fn run(server: SocketAddr, via: &Via, secs: f64, kbit: u64) -> Result<Fields> {
    let mut s = connect(server, via)?;
    let ms = (secs * 1000.0) as u64;
    s.write_all(&make_request(OP_STREAM, kbit))?;
    s.write_all(&ms.to_be_bytes())?;
    let start = Instant::now();
    // Sent for `secs`; whatever has not arrived within a grace period after that is lost.
    let deadline = start + Duration::from_millis(ms) + Duration::from_secs(30);
    let mut msg = [0u8; MESSAGE];
    let mut received = 0u64;
    let mut next_seq = 0u64;
    let mut last_arrival = None::<Instant>;
    let mut max_gap = Duration::ZERO;
    let mut delays = Vec::new();
    let mut out_of_order = 0u64;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s.set_read_timeout(Some(left))?;
        match s.read_exact(&mut msg) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break,
            Err(_) => break, // reset: what is missing counts as lost
        }
        let now = Instant::now();
        let seq = u64::from_be_bytes(msg[..8].try_into().unwrap());
        let sent = u64::from_be_bytes(msg[8..16].try_into().unwrap());
        if seq != next_seq {
            out_of_order += 1;
        }
        next_seq = seq + 1;
        received += 1;
        delays.push(unix_ns().saturating_sub(sent) as f64 / 1e6);
        if let Some(l) = last_arrival {
            max_gap = max_gap.max(now - l);
        }
        last_arrival = Some(now);
    }
    let interval = MESSAGE as f64 * 8.0 / (kbit.max(1) as f64 * 1000.0);
    let expected = (ms as f64 / 1000.0 / interval).ceil() as u64;
    Ok(fields(vec![
        ("max_gap_ms", (max_gap.as_secs_f64() * 1000.0).into()),
        (
            "lost_bytes",
            (expected.saturating_sub(received) * MESSAGE as u64).into(),
        ),
        ("received_bytes", (received * MESSAGE as u64).into()),
        ("rate_kbit", kbit.into()),
        ("delay_p50_ms", percentile(&delays, 0.5).into()),
        ("delay_max_ms", percentile(&delays, 1.0).into()),
        ("out_of_order", out_of_order.into()),
    ]))
}
