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
//!   path asking for bytes unless another delivers it sooner by more than the reorder
//!   window, so each path takes what it drains and the flow splits by the paths' rates.
//!   The receiver puts a bulk flow's datagrams back in order, waiting
//!   for a missing one at most a short window (the paths' delay difference and a margin,
//!   [`reorder_window`]): QUIC takes a packet three behind the newest as lost (RFC 9002
//!   §6.1.1), and two paths of different delay reorder far more than that. A datagram
//!   that never comes (lost with its path) holds the flow back only that long;
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

/// The least and most a bulk datagram waits for one missing before it.
pub const REORDER_MIN: Duration = Duration::from_millis(2);
pub const REORDER_MAX: Duration = Duration::from_millis(50);

/// Most bulk datagrams one flow holds while waiting for a missing one; beyond, it stops
/// waiting (the window's worth at a high rate, and a bound on memory).
const REORDER_HOLD: usize = 256;

/// How long a bulk datagram waits for a missing one before it: half the spread of the
/// carrying paths' round-trip times (their one-way delays differ by about that much) and
/// a margin of [`REORDER_MIN`], at most [`REORDER_MAX`] (a path slower than that by more
/// is failing, and its datagrams count as lost).
pub fn reorder_window(spread: Duration) -> Duration {
    (spread / 2 + REORDER_MIN).min(REORDER_MAX)
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
    /// Flows closed with [`mpflex_wire::flow_close::REFUSED`] (server: refused here;
    /// client: refused by the server).
    pub flows_refused: u64,
}

/// A flow as this side knows it.
#[derive(Debug)]
struct Flow {
    addr: TargetAddr,
    /// The next `seq` of a realtime and of a bulk datagram: one numbering per class,
    /// because the receiver puts bulk datagrams back in order by `seq` and a realtime
    /// one taking a number between them would be a gap it waits a whole window for (a
    /// flow is reclassified as its rate changes: a QUIC download's small packets are
    /// realtime whenever its rate dips).
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
    /// (receiver) The bulk `seq` expected next, and those held until it comes, with when
    /// each arrived.
    rx_next: Option<u16>,
    held: std::collections::BTreeMap<u16, (Bytes, Instant)>,
    /// How long its gaps took to fill lately (a decaying maximum), grown when one filled
    /// after the receiver stopped waiting: the window adapts to the reordering the flow
    /// sees, which includes the queues in the sender's sockets that no RTT shows.
    rx_wait: Duration,
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
            rx_next: None,
            held: std::collections::BTreeMap::new(),
            rx_wait: Duration::ZERO,
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

    /// The reorder window of this flow: `base` (from the paths' RTTs) or a quarter more
    /// than its gaps took to fill lately, whichever is longer, at most [`REORDER_MAX`].
    fn window(&self, base: Duration) -> Duration {
        base.max(self.rx_wait + self.rx_wait / 4).min(REORDER_MAX)
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
    pub code: u8,
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
        let next = &mut f.next_seq[class as usize];
        let seq = *next;
        *next = next.wrapping_add(1);
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

    /// A bulk datagram arrived (its copies already filtered): what is in order now goes
    /// to `out`, the rest waits ([`Datagrams::release`]).
    pub fn reorder(&mut self, flow: FlowId, seq: u16, data: Bytes, now: Instant, out: &mut Vec<(FlowId, Bytes)>) {
        let Some(f) = self.flows.get_mut(&flow) else { return };
        let next = *f.rx_next.get_or_insert(seq);
        let ahead = seq.wrapping_sub(next) as i16;
        if ahead < 0 {
            // Later than the window let it be: still worth more delivered than dropped,
            // and the window was too short.
            self.counters.late += 1;
            f.rx_wait = (f.rx_wait * 2 + REORDER_MIN).min(REORDER_MAX);
            out.push((flow, data));
            return;
        }
        if ahead > 0 {
            let rel = |s: u16| s.wrapping_sub(next);
            f.held.insert(seq, (data, now));
            if f.held.len() > REORDER_HOLD {
                // Stop waiting: the lowest held becomes the next expected.
                let low = *f.held.keys().min_by_key(|&&s| rel(s)).expect("held");
                f.rx_next = Some(low);
                self.counters.gaps += 1;
                Self::drain(flow, f, out);
            }
            return;
        }
        if let Some(first) = f.held.values().map(|(_, t)| *t).min() {
            // A gap filled: how long it held the flow back.
            let took = now.saturating_duration_since(first);
            f.rx_wait = took.max(f.rx_wait.mul_f64(0.98));
        }
        f.rx_next = Some(seq.wrapping_add(1));
        out.push((flow, data));
        Self::drain(flow, f, out);
    }

    /// Delivers the held datagrams that continue `f`'s order.
    fn drain(flow: FlowId, f: &mut Flow, out: &mut Vec<(FlowId, Bytes)>) {
        while let Some(next) = f.rx_next {
            let Some((d, _)) = f.held.remove(&next) else { break };
            out.push((flow, d));
            f.rx_next = Some(next.wrapping_add(1));
        }
    }

    /// Gives up waiting where a held datagram has waited `window`: the gap before it is
    /// lost (counted in `gaps`), and what follows it in order goes to `out`.
    pub fn release(&mut self, now: Instant, window: Duration, out: &mut Vec<(FlowId, Bytes)>) {
        for (&flow, f) in self.flows.iter_mut() {
            while let Some(next) = f.rx_next {
                let rel = |s: u16| s.wrapping_sub(next);
                let Some((&low, &(_, at))) = f.held.iter().min_by_key(|(&s, _)| rel(s)) else {
                    break;
                };
                let oldest = f.held.values().map(|(_, t)| *t).min().unwrap_or(at);
                if now.saturating_duration_since(oldest) < f.window(window) {
                    break;
                }
                f.rx_next = Some(low);
                self.counters.gaps += 1;
                Self::drain(flow, f, out);
            }
        }
    }

    /// When the longest-held datagram's wait ends.
    pub fn release_at(&self, window: Duration) -> Option<Instant> {
        self.flows
            .values()
            .filter_map(|f| f.held.values().map(|(_, t)| *t).min().map(|t| t + f.window(window)))
            .min()
    }

    pub fn queued(&self) -> (usize, usize) {
        (self.queue.len(), self.queued_bytes)
    }

    pub fn flow_ids(&self) -> Vec<FlowId> {
        self.flows.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> TargetAddr {
        TargetAddr::Ip("10.0.0.1:53".parse().unwrap())
    }

    /// The first copy of each `seq` is delivered and the second not, in either order and
    /// across the 16-bit wrap; a copy older than the window is dropped.
    #[test]
    fn dedup_keeps_the_first_copy() {
        let mut d = Datagrams::new(16);
        let id = d.open(addr());
        for seq in [65534u16, 65535, 0, 1] {
            assert!(d.on_receive(id, seq, true, 10));
        }
        assert!(!d.on_receive(id, 65535, true, 10));
        assert!(!d.on_receive(id, 1, true, 10));
        assert!(d.on_receive(id, 3, true, 10));
        assert!(d.on_receive(id, 2, true, 10), "a late first copy still counts");
        assert!(!d.on_receive(id, 2, true, 10));
        assert!(d.on_receive(id, 200, true, 10));
        assert!(!d.on_receive(id, 3, true, 10), "beyond the window");
        // Datagrams sent once are never taken for copies.
        assert!(d.on_receive(id, 3, false, 10));
        assert!(d.on_receive(id, 3, false, 10));
        assert_eq!(d.counters.duplicates, 4);
        assert_eq!(d.counters.received, 9);
        assert!(!d.on_receive(99, 0, false, 10));
        assert_eq!(d.counters.dropped_unknown_flow, 1);
    }

    /// A flow whose class changes numbers each class on its own, so the receiver's
    /// reordering of its bulk datagrams never waits for a number a realtime one took.
    #[test]
    fn each_class_is_numbered_on_its_own() {
        let t0 = Instant::now();
        let mut d = Datagrams::new(64);
        let id = d.open(addr());
        let mut classes = Vec::new();
        for (i, c) in [
            DatagramClass::Bulk,
            DatagramClass::Realtime,
            DatagramClass::Bulk,
            DatagramClass::Realtime,
            DatagramClass::Realtime,
            DatagramClass::Bulk,
        ]
        .into_iter()
        .enumerate()
        {
            d.pin(id, Some(c));
            assert_eq!(d.push(id, Bytes::from(vec![0u8; 100]), t0), Some(c), "{i}");
            classes.push(c);
        }
        let seqs: Vec<(DatagramClass, u16)> = d.queue.iter().map(|q| (q.class, q.seq)).collect();
        use DatagramClass::*;
        assert_eq!(
            seqs,
            [
                (Bulk, 0),
                (Realtime, 0),
                (Bulk, 1),
                (Realtime, 1),
                (Realtime, 2),
                (Bulk, 2)
            ]
        );
        // The receiver: the bulk ones come out at once, nothing held, no gap.
        let mut rx = Datagrams::new(64);
        let rid = rx.open(addr());
        let mut out = Vec::new();
        for (c, seq) in seqs {
            assert!(rx.on_receive(rid, seq, c == Realtime, 100));
            if c == Bulk {
                rx.reorder(rid, seq, Bytes::from_static(b"x"), t0, &mut out);
            }
        }
        assert_eq!(out.len(), 3);
        assert_eq!(rx.release_at(REORDER_MAX), None, "nothing held");
        assert_eq!((rx.counters.gaps, rx.counters.late), (0, 0));
    }

    /// Bulk datagrams come out in order: a gap holds those behind it until it fills or
    /// the window passes (then it counts as a gap), a datagram later than that is
    /// delivered anyway and counted late; the order survives the 16-bit wrap.
    #[test]
    fn bulk_datagrams_are_put_back_in_order() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let w = ms(10);
        let mut d = Datagrams::new(16);
        let id = d.open(addr());
        let mut out = Vec::new();
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let got = |out: &mut Vec<(FlowId, Bytes)>| -> Vec<String> {
            out.drain(..)
                .map(|(_, x)| String::from_utf8(x.to_vec()).unwrap())
                .collect()
        };
        d.reorder(id, 65534, b("a"), t0, &mut out);
        d.reorder(id, 0, b("c"), t0, &mut out);
        d.reorder(id, 1, b("d"), t0, &mut out);
        assert_eq!(got(&mut out), ["a"]);
        assert_eq!(d.release_at(w), Some(t0 + w));
        d.reorder(id, 65535, b("b"), t0 + ms(3), &mut out);
        assert_eq!(got(&mut out), ["b", "c", "d"]);
        assert_eq!(d.release_at(w), None);
        d.reorder(id, 3, b("f"), t0 + ms(4), &mut out);
        d.release(t0 + ms(13), w, &mut out);
        assert!(out.is_empty(), "still within the window");
        d.release(t0 + ms(14), w, &mut out);
        assert_eq!(got(&mut out), ["f"]);
        assert_eq!(d.counters.gaps, 1);
        d.reorder(id, 2, b("e"), t0 + ms(20), &mut out);
        assert_eq!(got(&mut out), ["e"]);
        assert_eq!(d.counters.late, 1);
        assert_eq!(reorder_window(Duration::ZERO), REORDER_MIN);
        assert_eq!(reorder_window(ms(20)), ms(12));
        assert_eq!(reorder_window(ms(500)), REORDER_MAX);
    }

    /// A flood from one flow fills the queue: its own oldest datagrams go, the other
    /// flow's stay.
    #[test]
    fn a_flood_drops_its_own_datagrams() {
        let t0 = Instant::now();
        let mut d = Datagrams::new(10);
        let call = d.open(addr());
        let flood = d.open(addr());
        d.push(call, Bytes::from_static(b"voice 0"), t0);
        for _ in 0..50 {
            d.push(flood, Bytes::from(vec![0; 1000]), t0);
        }
        d.push(call, Bytes::from_static(b"voice 1"), t0);
        assert_eq!(d.counters.dropped_queue_full, 42);
        let calls = d.queue.iter().filter(|q| q.flow == call).count();
        assert_eq!(calls, 2, "the call's datagrams stay");
        assert_eq!(d.queued(), (10, 8 * 1000 + 14));
        d.expire(t0 + MAX_WAIT);
        assert_eq!(d.queued(), (0, 0));
        assert_eq!(d.counters.dropped_expired, 10);
    }

    /// Small datagrams at a voice rate are realtime; large ones, or small ones at a high
    /// rate, bulk; a pinned class wins.
    #[test]
    fn classes_follow_size_and_rate() {
        let t0 = Instant::now();
        let mut d = Datagrams::new(100_000);
        let voice = d.open(addr());
        let flood = d.open(addr());
        for i in 0..200u32 {
            let t = t0 + Duration::from_millis(20 * i as u64);
            assert_eq!(
                d.push(voice, Bytes::from(vec![0; 160]), t),
                Some(DatagramClass::Realtime)
            );
        }
        assert_eq!(
            d.push(voice, Bytes::from(vec![0; 1200]), t0 + Duration::from_secs(5)),
            Some(DatagramClass::Bulk)
        );
        let mut last = None;
        for i in 0..2000u64 {
            last = d.push(flood, Bytes::from(vec![0; 400]), t0 + Duration::from_micros(100 * i));
        }
        assert_eq!(last, Some(DatagramClass::Bulk), "400-byte datagrams at 4 MB/s");
        d.pin(flood, Some(DatagramClass::Realtime));
        assert_eq!(
            d.push(flood, Bytes::from(vec![0; 400]), t0 + Duration::from_millis(200)),
            Some(DatagramClass::Realtime)
        );
    }
}
