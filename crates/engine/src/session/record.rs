//! The record a path writer builds: its limits, and the trace of the scheduling decisions
//! that fill it.

use std::time::Instant;

use mpflex_sched::{Decision, PathSnapshot, QueueView};
use mpflex_wire::Frame;

/// What a frame put on a record is, for the path's counters: its first copy, or one sent
/// again (a retransmission, a redundant or hedged copy, a reinjection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Put {
    New,
    Resent,
}

/// The record being built for one path.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rec {
    pub path: usize,
    /// Where the record starts in the output buffer, and the most it may hold.
    pub start: usize,
    pub max: usize,
    /// The most it holds past its first frame: what the path's congestion window sends
    /// at once (see `Session::fill`).
    pub window: usize,
    pub now: Instant,
    /// The session clock's timestamp for frames sent now.
    pub ts: u32,
    /// The most bulk (scheduled) bytes the record may hold, and whether that is queue
    /// control's limit (frames are then cut to fit it).
    pub bulk: usize,
    pub bulk_exact: bool,
}

impl Rec {
    pub fn used(&self, out: &[u8]) -> usize {
        out.len() - self.start
    }

    /// Room left for bulk bytes.
    pub fn bulk_room(&self, out: &[u8]) -> usize {
        self.bulk.min(self.max).saturating_sub(self.used(out))
    }

    pub fn fits(&self, out: &[u8], f: &Frame) -> bool {
        self.takes(self.used(out), f.encoded_len())
    }

    /// Whether a frame of `len` bytes goes into the record after `used` bytes: within its
    /// maximum, and past the first frame within its window.
    pub fn takes(&self, used: usize, len: usize) -> bool {
        used + len <= self.max && (used == 0 || used + len <= self.window)
    }
}

/// What a record may hold: at most `max` bytes, past its first frame at most `window`, of
/// which at most `bulk` bulk bytes (queue control's limit if `bulk_exact`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub max: usize,
    pub window: usize,
    pub bulk: usize,
    pub bulk_exact: bool,
}

/// Logs a scheduling decision with the statistics it was made on (trace level).
pub(super) fn trace_decision(
    path: usize,
    snaps: &[PathSnapshot],
    queue: &QueueView,
    budget: usize,
    decision: &Decision,
) {
    if !tracing::enabled!(tracing::Level::TRACE) {
        return;
    }
    let view: Vec<String> = snaps
        .iter()
        .map(|p| {
            format!(
                "{}:{}{} srtt={}us min_rtt={}us rttvar={}us cwnd={}{} inflight={} notsent={} rate={} pacing={} bw={} owd={:?}",
                p.id,
                if p.alive { "up" } else { "down" },
                if p.ready { ",ready" } else { "" },
                p.srtt.as_micros(),
                p.min_rtt.as_micros(),
                p.rttvar.as_micros(),
                p.cwnd,
                p.restart_cwnd.map(|w| format!("->{w}")).unwrap_or_default(),
                p.in_flight,
                p.notsent,
                p.delivery_rate,
                p.pacing_rate,
                p.bandwidth,
                p.owd_us,
            )
        })
        .collect();
    tracing::trace!(path, queue = queue.bytes, budget, ?decision, paths = ?view, "schedule");
}
