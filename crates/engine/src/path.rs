//! Per-path state kept by the engine.

use std::collections::VecDeque;
use std::time::Instant;

use mpflex_sched::PathSnapshot;

use crate::owd::OwdEstimator;
use mpflex_wire::Frame;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStatus {
    /// Not connected (never was, or died and is being re-dialled).
    Down,
    Up,
}

/// What a path has carried, for status output and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathCounters {
    /// Encoded frame bytes handed to the path.
    pub bytes_sent: u64,
    /// Encoded frame bytes received on the path.
    pub bytes_received: u64,
    /// Stream payload bytes sent, first copies only.
    pub payload_sent: u64,
    /// Stream payload bytes sent again here after another path had sent them.
    pub payload_resent: u64,
    /// Payload bytes received that were already delivered (duplicates).
    pub duplicate_received: u64,
    /// Times the path went down.
    pub failures: u64,
    /// Times the path went silent while holding data, so its frames were re-sent.
    pub suspicions: u64,
    /// Frames re-sent here because the peer's reorder buffer stalled on them.
    pub stall_reinjections: u64,
}

#[derive(Debug)]
pub(crate) struct PathEntry {
    pub status: PathStatus,
    pub snap: PathSnapshot,
    pub counters: PathCounters,
    /// Control frames that must go on this very path (Ping/Pong).
    pub ctrl: VecDeque<Frame>,
    /// Sequence numbers to send here as duplicates (redundant scheduling).
    pub dup: VecDeque<u64>,
    pub last_recv: Instant,
    /// Last time anything was handed to this path (a ping counts from when it is queued).
    pub last_send: Instant,
    /// Received nothing for too long while holding our data: its frames were re-sent
    /// elsewhere and schedulers skip it until it speaks again.
    pub suspect: bool,
    pub ping_id: u64,
    /// Unacknowledged frames this path holds a copy of.
    pub held: usize,
    /// Last sign that what this path holds is getting through: anything received on it,
    /// an arrival report or ACK covering a frame sent on it, or the moment it went from
    /// holding nothing to holding something.
    pub progress: Instant,
    /// One-way delay towards the peer, from its arrival reports.
    pub owd: OwdEstimator,
    /// (timestamp, bytes in flight) of recent data frames sent here, oldest first, to
    /// bin the arrival reports by the bytes in flight at send time.
    pub sent_log: VecDeque<(u32, u64)>,
}

impl PathEntry {
    pub fn new(id: usize, now: Instant) -> Self {
        PathEntry {
            status: PathStatus::Down,
            snap: PathSnapshot {
                id,
                ..Default::default()
            },
            counters: PathCounters::default(),
            ctrl: VecDeque::new(),
            dup: VecDeque::new(),
            last_recv: now,
            last_send: now,
            suspect: false,
            ping_id: 0,
            held: 0,
            progress: now,
            owd: OwdEstimator::default(),
            sent_log: VecDeque::new(),
        }
    }
}
