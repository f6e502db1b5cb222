//! Datagram flows: UDP payloads carried outside the session's sequence.
//!
//! A datagram is never acknowledged, re-sent or reordered (UDP promises none of it, RFC
//! 768, and an application's own loss recovery — QUIC's, RTP's — would only be confused by
//! a copy arriving a path-timeout late). What the engine adds is path choice and a bound:
//!
//! - a *realtime* flow (small datagrams at a modest rate: voice, games, DNS) goes on the
//!   path that delivers first now and, as a copy, on the next one, so a path that fails
//!   mid-call loses nothing its copy carried; the receiver delivers the first copy and
//!   counts the second (the per-flow `seq` exists only for that). Two copies, not more:
//!   the second path covers one failure, and the paths' rate is not spent on more
//!   (issue 24; the redundant scheduler's trade-off in seed 000, applied to one class);
//! - a *bulk* flow (a QUIC download's packets) goes on one path each: in order, to the
//!   path asking for bytes unless another delivers it sooner by more than a few
//!   milliseconds ([`placement_slack`]), so each path takes what it drains and the flow
//!   splits by the paths' rates. A bulk datagram is numbered when a path takes it, and
//!   the receiver puts the flow back in that order ([`reorder`]): a number missing there
//!   is in flight on the other path or lost with a dead one, never dropped in a queue,
//!   so it waits for the gap to fill rather than a guessed window (QUIC takes a packet
//!   three behind the newest as lost, RFC 9002 §6.1.1, and two paths of different delay
//!   reorder far more than that);
//! - datagrams wait in one bounded queue per session ([`Datagrams::limit`] datagrams and
//!   [`QUEUE_BYTES`] bytes); when it is full the oldest goes (a late datagram is worth
//!   less than a new one to every realtime application), counted — the oldest of the
//!   flow that holds the most of the queue, so one application's flood drops its own
//!   datagrams and not a call's beside it. They count against no stream window, and
//!   they go before stream bytes that are not interactive.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpflex_wire::TargetAddr;

pub mod reorder;

/// Identifies a datagram flow (chosen by the client, which opens all flows).
pub type FlowId = u32;

/// How a flow's datagrams are spread over the paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramClass {
    /// Each datagram on the path that delivers first and a copy on the next.
    Realtime,
    /// Each datagram on one path, split by the paths' rates.
    Bulk,
}

impl DatagramClass {
    pub fn name(self) -> &'static str {
        match self {
            DatagramClass::Realtime => "realtime",
            DatagramClass::Bulk => "bulk",
        }
    }
}

/// A datagram up to this size can be realtime: voice frames are 20–200 bytes, game
/// updates a few hundred, DNS queries under 512 (RFC 1035's classic limit).
pub const REALTIME_MAX_LEN: usize = 512;

/// A flow sending more than this (bytes per second, averaged over about a second) is
/// bulk: 1 Mbit/s is above any voice codec or game's update stream and below a video
/// or download. Copying a flow doubles its cost, so only flows this small are copied.
pub const REALTIME_MAX_RATE: f64 = 125_000.0;

/// Bytes the datagram queue may hold: 4 MB, a second of 32 Mbit/s.
pub const QUEUE_BYTES: usize = 4 << 20;

/// A datagram that waited this long without a path taking it is dropped: UDP
/// applications retry on their own timers (DNS after 1–5 s) and a voice frame this old is
/// past its playout time.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// A realtime datagram's copy that its first path took this long ago is not sent any
/// more: the first copy has arrived or is lost with its path by now.
pub const COPY_WAIT: Duration = Duration::from_millis(200);

/// Copied datagrams the receiver remembers per flow, to drop the second copy.
const DEDUP_WINDOW: u32 = 128;

/// The margin of [`placement_slack`], and the least a gap is waited for.
pub const REORDER_MIN: Duration = Duration::from_millis(2);

/// The most a bulk datagram is placed later than its earliest path would deliver it
/// (the sender's slack), and the most a gap is waited for with no path declared dead: a
/// path whose datagrams are this late is failing.
pub const REORDER_MAX: Duration = Duration::from_millis(50);
pub const GAP_WAIT_MAX: Duration = Duration::from_secs(1);

/// How much later than the path that would deliver it first a path asking for bytes may
/// deliver a bulk datagram and still take it: half the spread of the carrying paths'
/// round-trip times (their one-way delays differ by about that much) and a margin of
/// [`REORDER_MIN`], at most [`REORDER_MAX`]. The receiver holds what arrives ahead of it
/// that long; a path asking sooner than it would deliver keeps the link busy.
pub fn placement_slack(spread: Duration) -> Duration {
    (spread / 2 + REORDER_MIN).min(REORDER_MAX)
}

/// How long the receiver waits for a missing bulk datagram when no path has been seen
/// to lose it: twice the slowest path's round-trip time (its one-way delay, its queue
/// and a margin as large again), between [`REORDER_MIN`] and [`GAP_WAIT_MAX`]. It
/// matters only while a path is silently failing; every other gap fills or is given up
/// by the paths' order ([`reorder`]).
pub fn gap_wait(slowest_rtt: Duration) -> Duration {
    (slowest_rtt * 2).clamp(REORDER_MIN, GAP_WAIT_MAX)
}

/// Counts of one session's datagrams, for the metrics. Each drop also logs (at debug:
/// a flood would otherwise flood the log too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatagramCounters {
    /// Datagrams handed to a path (copies included) and their payload bytes.
    pub sent: u64,
    pub sent_bytes: u64,
    /// Realtime copies among `sent`.
    pub copies: u64,
    /// Datagrams delivered to the applications and their payload bytes.
    pub received: u64,
    pub received_bytes: u64,
    /// Second copies the receiver dropped (and copies too late to tell).
    pub duplicates: u64,
    /// Datagrams the full queue dropped, oldest first, before any path took them.
    pub dropped_queue_full: u64,
    /// Datagrams that waited [`MAX_WAIT`] for a path.
    pub dropped_expired: u64,
    /// Datagrams for a flow this side does not know (closed, refused, never opened).
    pub dropped_unknown_flow: u64,
    /// Flows opened (client: by applications; server: by the peer).
    pub flows_opened: u64,
    /// Bulk datagrams that arrived after the receiver stopped waiting for them (delivered
    /// out of order), and gaps it stopped waiting for (a datagram lost, or later than the
    /// reorder window).
    pub late: u64,
    pub gaps: u64,
    /// Flows closed with [`mpflex_wire::FlowCloseCode::Refused`] (server: refused here;
    /// client: refused by the server).
    pub flows_refused: u64,
}

/// A flow as this side knows it.
#[derive(Debug)]
struct Flow {
    addr: TargetAddr,
    /// The next `seq` of a realtime and of a bulk datagram: one numbering per class,
    /// because the receiver puts bulk datagrams back in order by `seq` and a realtime
    /// one taking a number between them would be a gap it waits for (a flow is
    /// reclassified as its rate changes: a QUIC download's small packets are realtime
    /// whenever its rate dips). A realtime datagram is numbered when queued (its copies
    /// share the number), a bulk one when a path takes it ([`Datagrams::bulk_seq`]), so
    /// a bulk datagram the queue drops leaves no gap for the receiver to wait on.
    next_seq: [u16; 2],
    /// (client) Paths that carried the flow's `FlowOpen` on their current connection.
    announced: u64,
    /// Bytes per second sent, decayed with a one-second time constant.
    rate: f64,
    rate_at: Option<Instant>,
    /// A class an application or rule chose; `None`: classified by what it sends.
    pinned: Option<DatagramClass>,
    /// Copied datagrams received: the highest `seq`, and a bit per earlier one.
    rx_high: Option<u16>,
    rx_seen: u128,
    /// Its datagrams in the queue.
    queued: usize,
    /// (receiver) The order of its bulk datagrams.
    order: reorder::Order,
}

impl Flow {
    fn new(addr: TargetAddr) -> Self {
        Flow {
            addr,
            next_seq: [0; 2],
            announced: 0,
            rate: 0.0,
            rate_at: None,
            pinned: None,
            rx_high: None,
            rx_seen: 0,
            queued: 0,
            order: reorder::Order::default(),
        }
    }

    /// Counts `len` bytes sent now and says which class the datagram is.
    fn classify(&mut self, len: usize, now: Instant) -> DatagramClass {
        if let Some(at) = self.rate_at {
            let dt = now.saturating_duration_since(at).as_secs_f64();
            self.rate *= (-dt).exp();
        }
        self.rate += len as f64;
        self.rate_at = Some(now);
        if let Some(c) = self.pinned {
            return c;
        }
        if len <= REALTIME_MAX_LEN && self.rate <= REALTIME_MAX_RATE {
            DatagramClass::Realtime
        } else {
            DatagramClass::Bulk
        }
    }

    /// Whether a copied datagram `seq` is the first of its copies to arrive.
    fn first_copy(&mut self, seq: u16) -> bool {
        let Some(high) = self.rx_high else {
            self.rx_high = Some(seq);
            self.rx_seen = 1;
            return true;
        };
        let ahead = seq.wrapping_sub(high) as i16;
        if ahead > 0 {
            let shift = ahead as u32;
            self.rx_seen = if shift >= DEDUP_WINDOW {
                0
            } else {
                self.rx_seen << shift
            };
            self.rx_seen |= 1;
            self.rx_high = Some(seq);
            return true;
        }
        let back = (-(ahead as i32)) as u32;
        if back >= DEDUP_WINDOW {
            // Too old to tell: a copy this late is worth nothing to a realtime flow.
            return false;
        }
        let bit = 1u128 << back;
        let first = self.rx_seen & bit == 0;
        self.rx_seen |= bit;
        first
    }
}

/// A datagram waiting for its paths.
#[derive(Debug)]
pub(crate) struct Queued {
    pub flow: FlowId,
    /// A realtime datagram's number; a bulk one's is given when a path takes it.
    pub seq: u16,
    pub class: DatagramClass,
    pub data: Bytes,
    /// Paths that are to send it (a bit each); empty until placed.
    pub want: u64,
    /// Paths that sent it.
    pub sent_on: u64,
    pub queued_at: Instant,
    /// When the first path took it.
    pub first_sent: Option<Instant>,
}

/// A `FlowClose` still to be sent on the paths in `on`.
#[derive(Debug)]
pub(crate) struct PendingClose {
    pub flow: FlowId,
    pub code: mpflex_wire::FlowCloseCode,
    pub on: u64,
}

/// The session's datagram flows and queue.
#[derive(Debug)]
pub(crate) struct Datagrams {
    flows: HashMap<FlowId, Flow>,
    next_flow: FlowId,
    pub queue: VecDeque<Queued>,
    queued_bytes: usize,
    /// Most datagrams the queue holds.
    pub limit: usize,
    pub closes: Vec<PendingClose>,
    pub counters: DatagramCounters,
}

impl Datagrams {
    pub fn new(limit: usize) -> Self {
        Datagrams {
            flows: HashMap::new(),
            next_flow: 1,
            queue: VecDeque::new(),
            queued_bytes: 0,
            limit: limit.max(1),
            closes: Vec::new(),
            counters: DatagramCounters::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn contains(&self, flow: FlowId) -> bool {
        self.flows.contains_key(&flow)
    }

    pub fn addr(&self, flow: FlowId) -> Option<&TargetAddr> {
        self.flows.get(&flow).map(|f| &f.addr)
    }

    /// (client) A new flow towards `addr`. Flow ids are never reused within a session,
    /// so a late frame of a closed flow cannot be taken for a new one's.
    pub fn open(&mut self, addr: TargetAddr) -> FlowId {
        let id = self.next_flow;
        self.next_flow = self.next_flow.wrapping_add(1).max(1);
        self.flows.insert(id, Flow::new(addr));
        self.counters.flows_opened += 1;
        id
    }

    /// (server) The peer opened `flow`; false if it was open already (a `FlowOpen` comes
    /// once per path).
    pub fn accept(&mut self, flow: FlowId, addr: TargetAddr) -> bool {
        if self.flows.contains_key(&flow) {
            return false;
        }
        self.flows.insert(flow, Flow::new(addr));
        self.counters.flows_opened += 1;
        true
    }

    pub fn pin(&mut self, flow: FlowId, class: Option<DatagramClass>) {
        if let Some(f) = self.flows.get_mut(&flow) {
            f.pinned = class;
        }
    }

    /// Forgets `flow` and its queued datagrams; returns the paths that announced it.
    pub fn remove(&mut self, flow: FlowId) -> Option<u64> {
        let f = self.flows.remove(&flow)?;
        let before = self.queue.len();
        let mut freed = 0;
        self.queue.retain(|q| {
            let keep = q.flow != flow;
            if !keep {
                freed += q.data.len();
            }
            keep
        });
        self.queued_bytes -= freed;
        if self.queue.len() != before {
            tracing::debug!(
                flow,
                dropped = before - self.queue.len(),
                "flow closed with datagrams queued"
            );
        }
        Some(f.announced)
    }

    /// Queues a datagram of `flow`; returns its class, or `None` if the flow is unknown.
    pub fn push(&mut self, flow: FlowId, data: Bytes, now: Instant) -> Option<DatagramClass> {
        let f = self.flows.get_mut(&flow)?;
        let class = f.classify(data.len(), now);
        let seq = match class {
            DatagramClass::Realtime => {
                let next = &mut f.next_seq[class as usize];
                let seq = *next;
                *next = next.wrapping_add(1);
                seq
            }
            DatagramClass::Bulk => 0,
        };
        f.queued += 1;
        self.queued_bytes += data.len();
        self.queue.push_back(Queued {
            flow,
            seq,
            class,
            data,
            want: 0,
            sent_on: 0,
            queued_at: now,
            first_sent: None,
        });
        while self.queue.len() > self.limit || self.queued_bytes > QUEUE_BYTES {
            let hog = self
                .flows
                .iter()
                .max_by_key(|(id, f)| (f.queued, std::cmp::Reverse(**id)))
                .map(|(id, _)| *id);
            let at = hog
                .and_then(|h| self.queue.iter().position(|q| q.flow == h))
                .unwrap_or(0);
            let old = self.queue.remove(at).expect("over the limit");
            self.forget(&old);
            if old.sent_on == 0 {
                self.counters.dropped_queue_full += 1;
                tracing::debug!(
                    flow = old.flow,
                    len = old.data.len(),
                    "datagram queue full: oldest dropped"
                );
            }
        }
        Some(class)
    }

    /// Books a datagram out of the queue.
    fn forget(&mut self, q: &Queued) {
        self.queued_bytes -= q.data.len();
        if let Some(f) = self.flows.get_mut(&q.flow) {
            f.queued -= 1;
        }
    }

    /// Drops what waited too long, and copies whose first went long enough ago.
    pub fn expire(&mut self, now: Instant) {
        let stale = |q: &Queued| match q.first_sent {
            Some(t) => now.saturating_duration_since(t) >= COPY_WAIT,
            None => now.saturating_duration_since(q.queued_at) >= MAX_WAIT,
        };
        let expired = self.take_out(stale);
        if expired > 0 {
            self.counters.dropped_expired += expired;
            tracing::debug!(expired, "datagrams waited too long for a path: dropped");
        }
    }

    /// Removes the datagrams no path is to send any more.
    pub fn prune(&mut self) {
        self.take_out(|q| q.want == 0 && q.sent_on != 0);
    }

    /// Removes the queued datagrams `out` picks; returns how many of them no path took.
    fn take_out(&mut self, out: impl Fn(&Queued) -> bool) -> u64 {
        if !self.queue.iter().any(&out) {
            return 0;
        }
        let mut unsent = 0;
        let queue = std::mem::take(&mut self.queue);
        for q in queue {
            if out(&q) {
                unsent += (q.sent_on == 0) as u64;
                self.forget(&q);
            } else {
                self.queue.push_back(q);
            }
        }
        unsent
    }

    /// Whether `flow`'s `FlowOpen` must precede its datagram on `path` (client side:
    /// each path's connection hears it once).
    pub fn needs_announce(&self, flow: FlowId, path: usize) -> bool {
        self.flows.get(&flow).is_some_and(|f| f.announced & (1 << path) == 0)
    }

    pub fn announced(&mut self, flow: FlowId, path: usize) {
        if let Some(f) = self.flows.get_mut(&flow) {
            f.announced |= 1 << path;
        }
    }

    /// A path's connection went or was replaced: what it was told is forgotten with it.
    pub fn path_gone(&mut self, path: usize) {
        let bit = 1u64 << path;
        for f in self.flows.values_mut() {
            f.announced &= !bit;
        }
        for c in &mut self.closes {
            c.on &= !bit;
        }
        self.closes.retain(|c| c.on != 0);
    }

    /// A datagram arrived: whether to deliver it (false for a second copy, counted).
    pub fn on_receive(&mut self, flow: FlowId, seq: u16, copied: bool, len: usize) -> bool {
        let Some(f) = self.flows.get_mut(&flow) else {
            self.counters.dropped_unknown_flow += 1;
            tracing::debug!(flow, len, "datagram for an unknown flow dropped");
            return false;
        };
        if copied && !f.first_copy(seq) {
            self.counters.duplicates += 1;
            return false;
        }
        self.counters.received += 1;
        self.counters.received_bytes += len as u64;
        true
    }

    /// The number the next bulk datagram of `flow` a path takes gets.
    pub fn bulk_seq(&self, flow: FlowId) -> u16 {
        self.flows
            .get(&flow)
            .map_or(0, |f| f.next_seq[DatagramClass::Bulk as usize])
    }

    /// A path took `flow`'s bulk datagram numbered [`Datagrams::bulk_seq`].
    pub fn bulk_sent(&mut self, flow: FlowId) {
        if let Some(f) = self.flows.get_mut(&flow) {
            let next = &mut f.next_seq[DatagramClass::Bulk as usize];
            *next = next.wrapping_add(1);
        }
    }

    /// A bulk datagram arrived (its copies already filtered): what is in order
    /// now goes to `out`, the rest waits ([`reorder`]). `up`: a bit per path that is up.
    pub fn reorder(&mut self, flow: FlowId, a: reorder::Arrived, up: u64, out: &mut Vec<(FlowId, Bytes)>) {
        let Some(f) = self.flows.get_mut(&flow) else { return };
        let mut ready = Vec::new();
        let (arrival, gaps) = f.order.arrive(a, up, &mut ready);
        self.counters.late += (arrival == reorder::Arrival::Late) as u64;
        self.counters.gaps += gaps;
        out.extend(ready.into_iter().map(|d| (flow, d)));
    }

    /// (receiver) `path`'s connection went: the gaps only it could have filled are
    /// given up, and what waited behind them goes to `out`.
    pub fn path_down_rx(&mut self, path: usize, up: u64, out: &mut Vec<(FlowId, Bytes)>) {
        for (&flow, f) in self.flows.iter_mut() {
            let mut ready = Vec::new();
            self.counters.gaps += f.order.path_down(path, up, &mut ready);
            out.extend(ready.into_iter().map(|d| (flow, d)));
        }
    }

    /// Gives up waiting where a held datagram has waited `wait` (counted in `gaps`), and
    /// what follows the gap in order goes to `out`.
    pub fn release(&mut self, now: Instant, wait: Duration, out: &mut Vec<(FlowId, Bytes)>) {
        for (&flow, f) in self.flows.iter_mut() {
            let mut ready = Vec::new();
            self.counters.gaps += f.order.release(now, wait, &mut ready);
            out.extend(ready.into_iter().map(|d| (flow, d)));
        }
    }

    /// When the longest-held datagram's wait ends.
    pub fn release_at(&self, wait: Duration) -> Option<Instant> {
        self.flows.values().filter_map(|f| f.order.release_at(wait)).min()
    }

    pub fn queued(&self) -> (usize, usize) {
        (self.queue.len(), self.queued_bytes)
    }

    pub fn flow_ids(&self) -> Vec<FlowId> {
        self.flows.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests;
