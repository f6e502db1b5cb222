//! The path supervisor's rules: what state each path is in, which paths may take new data
//! (tiers), when a silent path is suspected, and when a working path is judged to be
//! failing before it fails.
//!
//! Two detectors feed it, both from statistics the engine already has:
//!
//! * **Silence** (the blackhole a link-state event cannot show): a path that holds data —
//!   frames of ours, or bytes its kernel socket has not had acknowledged — and has shown
//!   no sign of life for max(3 × its minimum RTT, 150 ms) is *suspected*: its frames are
//!   sent again on the others, it takes nothing new, the driver probes it with fresh
//!   connections, and the first answer releases it. Signs of life are anything received on
//!   it, the peer's arrival reports or ACKs for its frames, and any ACK its kernel socket
//!   received (`tcpi_last_ack_recv`, duplicate ACKs included, so a path recovering a loss
//!   behind a deep queue is not mistaken for a dead one). This is MPTCP-MA's suspend and
//!   release (Lim et al., "Improving performance of MPTCP in mobile environments",
//!   ch. 2): stop using a subflow as soon as it is found inactive and take it back as
//!   soon as it works, instead of waiting out TCP's exponentially backed-off timers.
//!   MPTCP-MA reads the WiFi MAC; an end-to-end proxy reads the transport, which also
//!   sees failures beyond the first hop. Two thirds of the way to the threshold, what the
//!   path holds is already copied to the fastest other path (a hedge: the path still
//!   takes new data), so a dark path's oldest frames are on their way a third sooner.
//! * **Degradation** (WearMan, Guo, "Improving mobile networking performance", ch. VI:
//!   hand over *before* the link fails, on a leading indicator, make-before-break):
//!   the indicators are the trends every link shows in `TCP_INFO` — the retransmission
//!   ratio rising above the path's own baseline and the RTT rising, both while the path
//!   is not saturated by our own data (then its queue and its congestion losses are of
//!   our making: a bulk transfer filling a 500 ms buffer is no failing link), and the
//!   delivery rate collapsing while the RTT rises when it is. They are
//!   summed over 250 ms bins (MPTCP-MA polls every 300 ms); a path is demoted after a
//!   second of bad bins and promoted again only after seconds of clear ones (separate
//!   thresholds, as WearMan's 5 dB gap between its two RSSI thresholds, plus a dwell that
//!   doubles with each demotion soon after a promotion, so a marginal path does not
//!   ping-pong).
//!
//! Tiers (primary, secondary, backup, as 3GPP ATSSS's priority mode and MPTCP's backup
//! flag): only the best tier among the paths that can carry takes new data; a lower tier
//! takes over only while every path of the higher tiers is down, suspect or degraded.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::kernel::TcpInfo;

/// A path's state, as status output shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathState {
    /// Not connected (never was, or died and is being re-dialled).
    Down,
    /// Connected and healthy, but a path of a better tier carries the data: kept warm
    /// with keepalives, ready to take over without a handshake.
    Standby,
    /// Carries new data.
    Active,
    /// Its quality trends say it is failing: takes no new data, its unacknowledged frames
    /// were copied to a healthy path, and it delivers what it already holds.
    Degraded,
    /// Healthy but no longer of the best tier (a better path came back): takes no new
    /// data and delivers what it holds, then stands by.
    Draining,
    /// Silent while holding data: its frames went to the other paths, it is being probed,
    /// and its first answer releases it.
    Suspect,
}

impl PathState {
    pub const ALL: [PathState; 6] = [
        PathState::Active,
        PathState::Standby,
        PathState::Degraded,
        PathState::Draining,
        PathState::Suspect,
        PathState::Down,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PathState::Down => "down",
            PathState::Standby => "standby",
            PathState::Active => "active",
            PathState::Degraded => "degraded",
            PathState::Draining => "draining",
            PathState::Suspect => "suspect",
        }
    }
}

/// The least silence that makes a path holding data suspect: a delayed ACK (40 ms), a
/// tail-loss probe and the jitter of a busy host fit in it.
pub(crate) const SUSPECT_FLOOR: Duration = Duration::from_millis(150);
/// ... and the silence in minimum RTTs: a frame's crossing and its report's return.
const SUSPECT_RTTS: u32 = 3;
/// Half way there (one and a half minimum RTTs, 75 ms at least) the frames the path holds
/// are copied to the fastest other path, while it still takes new data: a hedge. A
/// working path answers within a round trip (its peer reports each frame as it arrives),
/// so copies are rarely wasted, and they are once per silence, of what the path holds; a
/// dark one has its oldest frames on their way elsewhere half a threshold sooner, which
/// is what a stream's longest gap is made of.
const HEDGE_FLOOR: Duration = Duration::from_millis(75);
const HEDGE_RTTS_X2: u32 = 3;
/// The most a path's suspicion threshold is scaled by after false alarms.
const MAX_SUSPECT_SCALE: u32 = 8;
/// A suspicion released sooner than this (and sooner than four thresholds) was a false
/// alarm: the path was slow, not dark.
const FALSE_ALARM: Duration = Duration::from_secs(1);
/// A false alarm's scale halves after this long without one.
const SCALE_DECAY: Duration = Duration::from_secs(30);

/// How often a suspect path is probed with a fresh connection (the driver dials; the
/// engine only says when): MPTCP-MA's 300 ms polling interval, or four minimum RTTs on a
/// long path, so a handshake can complete within one.
pub(crate) fn probe_every(min_rtt: Duration) -> Duration {
    (4 * min_rtt).max(Duration::from_millis(300))
}

/// How much two readings of the time of one ACK may differ (see [`KernelView::read`]).
const ACK_JITTER: Duration = Duration::from_millis(20);

/// What the kernel socket of a path showed at its last `TCP_INFO` reading.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KernelView {
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// When the socket last received an ACK (any ACK: a duplicate shows the peer receives).
    pub last_ack: Instant,
    /// Cumulative bytes acknowledged, to see acknowledgement progress.
    pub bytes_acked: u64,
    /// When the reading was taken.
    pub read_at: Instant,
}

impl KernelView {
    pub fn new(now: Instant) -> Self {
        KernelView {
            unacked: 0,
            last_ack: now,
            bytes_acked: 0,
            read_at: now,
        }
    }

    /// Takes a reading at `now`: whether the socket's bytes were acknowledged further
    /// (the connection moves) and whether it received a later ACK at all (the link
    /// works) since the last one.
    pub fn read(&mut self, info: &TcpInfo, now: Instant) -> Answer {
        let ack = now
            .checked_sub(Duration::from_millis(info.last_ack_recv as u64))
            .unwrap_or(now);
        // `tcpi_last_ack_recv` counts whole milliseconds (jiffies, on some kernels 4 or
        // 10 ms): two readings of one ACK differ by that much. Only a later ACK answers.
        let answer = Answer {
            moved: info.bytes_acked > self.bytes_acked,
            link: ack > self.last_ack + ACK_JITTER,
        };
        // A connection that has not received an ACK since it was set up reports the time
        // since its handshake; never move the last ACK backwards.
        self.last_ack = self.last_ack.max(ack);
        self.bytes_acked = info.bytes_acked;
        self.unacked = info.unacked;
        self.read_at = now;
        answer
    }
}

/// What a socket's reading showed since the last (see [`KernelView::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    /// Bytes were acknowledged further: the connection moves.
    pub moved: bool,
    /// A later ACK came, perhaps only a duplicate: the link works, though the connection
    /// may still wait for a retransmission (after an outage, its backed-off timer) before
    /// it moves.
    pub link: bool,
}

/// A path's suspicion threshold and its false-alarm hysteresis.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Suspicion {
    /// Since when the path is suspect (`None`: it is not).
    pub since: Option<Instant>,
    /// The threshold's multiplier: doubled by each false alarm, halved after
    /// [`SCALE_DECAY`] without one.
    scale: u32,
    last_false: Option<Instant>,
    /// When the next probe is due while suspect.
    pub next_probe: Option<Instant>,
}

impl Default for Suspicion {
    fn default() -> Self {
        Suspicion {
            since: None,
            scale: 1,
            last_false: None,
            next_probe: None,
        }
    }
}

impl Suspicion {
    /// Silence after which a path holding data is suspect: max(3 × min RTT, 150 ms) times
    /// the false-alarm scale, plus the peer's ACK delay.
    pub fn threshold(&self, min_rtt: Duration, ack_delay: Duration, now: Instant) -> Duration {
        (SUSPECT_RTTS * min_rtt).max(SUSPECT_FLOOR) * self.scale_at(now) + ack_delay
    }

    /// Silence after which what the path holds is copied elsewhere: max(1.5 × min RTT,
    /// 75 ms), scaled and with the ACK delay as the threshold.
    pub fn hedge_after(&self, min_rtt: Duration, ack_delay: Duration, now: Instant) -> Duration {
        (HEDGE_RTTS_X2 * min_rtt / 2).max(HEDGE_FLOOR) * self.scale_at(now) + ack_delay
    }

    fn scale_at(&self, now: Instant) -> u32 {
        let mut scale = self.scale;
        if let Some(t) = self.last_false {
            let quiet = now.saturating_duration_since(t);
            let halvings = (quiet.as_secs() / SCALE_DECAY.as_secs()).min(8) as u32;
            scale >>= halvings;
        }
        scale.max(1)
    }

    /// The path is suspect from `now`; the first probe is due at once.
    pub fn start(&mut self, now: Instant) {
        self.since = Some(now);
        self.next_probe = Some(now);
    }

    /// The path answered at `now` after a suspicion whose threshold was `threshold`. A
    /// short suspicion was a false alarm: the threshold doubles (up to eight times).
    pub fn release(&mut self, now: Instant, threshold: Duration) {
        let Some(since) = self.since.take() else { return };
        self.next_probe = None;
        let lasted = now.saturating_duration_since(since);
        if lasted < FALSE_ALARM.min(4 * threshold) {
            self.scale = (self.scale_at(now) * 2).min(MAX_SUSPECT_SCALE);
            self.last_false = Some(now);
        }
    }

    pub fn is_suspect(&self) -> bool {
        self.since.is_some()
    }
}

/// Length of one bin of `TCP_INFO` samples.
pub(crate) const BIN: Duration = Duration::from_millis(250);
/// Bins the loss ratio is summed over (2 s): at 1 % random loss and 170 segments/s a
/// 4 % ratio over this window is a one-in-10⁵ event, over one bin it is routine.
const LOSS_WINDOW: usize = 8;
/// Bins the delivery rate's peak is kept over (10 s).
const RATE_WINDOW: usize = 40;
/// Consecutive bad bins that demote a path (1 s): a single loss episode or a
/// congestion-control sawtooth lasts about an RTT, a walk out of coverage seconds.
const DEMOTE_BINS: u32 = 4;
/// Clear bins a degraded path needs before promotion (3 s), doubled per demotion that
/// followed soon after a promotion.
const PROMOTE_BINS: u32 = 12;
const MAX_PROMOTE_BINS: u32 = 12 * 16;
/// How long after an outage the readings are not judged (see [`Quality::outage`]).
pub(crate) const RECOVERY: Duration = Duration::from_secs(1);
/// A demotion this soon after a promotion was a ping-pong.
const PING_PONG: Duration = Duration::from_secs(60);
/// The least segments in the loss window for its ratio to mean anything.
const LOSS_MIN_SEGS: u32 = 60;
/// Loss ratio that demotes: at least this, and three times the path's own baseline.
const LOSS_DEMOTE: f64 = 0.03;
/// ... and a count of retransmissions this improbable were the path losing at its
/// baseline (at least a third of [`LOSS_DEMOTE`]): over the window's few segments a
/// 1 %-loss path shows 3 % often (4 of 84 segments: a 1-in-130 window), and a WiFi path
/// with 1 % random loss carrying an upload was demoted twice in five minutes on that
/// alone (docs/paths.md, the no-flapping row).
const LOSS_SIGNIFICANCE: f64 = 1e-4;
/// A bin delivering more than this many times the path's typical rate is a path taking
/// on more (a transfer starting, a congestion control probing), not a failing one: its
/// losses are that growth's (BBR's start-up into WiFi's 50 ms buffer: 26 of 204 segments).
const RATE_GROWING: f64 = 2.0;
/// ... and that still allows promotion (below it, or within 1.5× the baseline).
const LOSS_CLEAR: f64 = 0.015;
/// A bin's RTT is inflated beyond this many minimum RTTs (and by 40 ms) ...
const RTT_DEMOTE: f64 = 2.0;
const RTT_DEMOTE_ABS: Duration = Duration::from_millis(40);
/// ... and clear below this many (plus 10 ms).
const RTT_CLEAR: f64 = 1.5;
/// The delivery rate collapsed: below this fraction of its recent peak, with the RTT up by
/// this factor.
const RATE_COLLAPSE: f64 = 0.5;
const RATE_COLLAPSE_RTT: f64 = 1.5;

/// One bin's summary.
#[derive(Debug, Clone, Copy, Default)]
struct Bin {
    /// Data segments sent and retransmitted in the bin.
    segs: u32,
    retrans: u32,
    /// The smallest smoothed RTT read in the bin (a burst's queue of the path's own making
    /// drains within it; a longer propagation delay or a slower link does not), and the
    /// minimum RTT.
    srtt: Duration,
    min_rtt: Duration,
    /// The highest delivery-rate sample, bytes/s.
    rate: u64,
    /// The socket was acknowledged something in the bin (its RTT is fresh).
    acked: bool,
    /// A reading in the bin had a delivery-rate sample not limited by the application:
    /// the path carried all it could, so a queue or a loss may be of its own making.
    saturated: bool,
    /// Our data filled the path (see [`Quality::read`]).
    busy: bool,
    readings: u32,
}

/// The WearMan monitor of one path: its indicators, bin by bin, and the verdict.
#[derive(Debug, Clone)]
pub(crate) struct Quality {
    degraded: bool,
    bin: Bin,
    bin_start: Option<Instant>,
    /// (segments, retransmissions) of the last bins, newest last.
    loss: VecDeque<(u32, u32)>,
    /// Delivery-rate peaks of the last bins.
    rates: VecDeque<u64>,
    /// The last bin's RTT, to tell a rising RTT from a draining queue.
    last_srtt: Duration,
    /// The kernel's cumulative counters at the last reading.
    last_counts: Option<(u32, u32, u64)>,
    /// The path's own loss baseline: exponentially decayed sums of segments and
    /// retransmissions, updated while it is healthy.
    base_segs: f64,
    base_retrans: f64,
    bad_run: u32,
    clear_run: u32,
    /// Clear bins needed for the next promotion.
    promote_bins: u32,
    last_promotion: Option<Instant>,
    /// Readings before this are not judged: the path was silent (a suspicion, a new
    /// connection), and the retransmissions that recover the outage are its aftermath,
    /// not a trend.
    judge_from: Option<Instant>,
    /// Times demoted, for the counters.
    pub demotions: u64,
    /// What the last bad bin showed, for the log.
    why: String,
}

impl Default for Quality {
    fn default() -> Self {
        Quality {
            degraded: false,
            bin: Bin::default(),
            bin_start: None,
            loss: VecDeque::new(),
            rates: VecDeque::new(),
            last_srtt: Duration::ZERO,
            last_counts: None,
            base_segs: 0.0,
            base_retrans: 0.0,
            bad_run: 0,
            clear_run: 0,
            promote_bins: PROMOTE_BINS,
            last_promotion: None,
            judge_from: None,
            demotions: 0,
            why: String::new(),
        }
    }
}

/// What a reading changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Unchanged,
    Demoted,
    Promoted,
}

impl Quality {
    pub fn degraded(&self) -> bool {
        self.degraded
    }

    /// What the bin that last judged the path bad showed (for the log).
    pub fn why(&self) -> &str {
        &self.why
    }

    /// A new connection: its kernel counters start from zero. The verdict, the baseline
    /// and the dwell stay (they describe the link, not the connection).
    pub fn new_connection(&mut self) {
        self.last_counts = None;
        self.bin = Bin::default();
        self.bin_start = None;
    }

    /// The path fell silent (suspect) or came back at `now`: what the window holds and the
    /// next [`RECOVERY`] of readings are the outage and its recovery (the kernel
    /// retransmitting everything the dark link swallowed), not a trend; they are not
    /// judged.
    pub fn outage(&mut self, now: Instant) {
        self.bin = Bin::default();
        self.bin_start = None;
        self.loss.clear();
        self.bad_run = 0;
        self.judge_from = Some(now + RECOVERY);
    }

    /// Takes a `TCP_INFO` reading at `now`; closes the bin when it is over.
    pub fn read(&mut self, info: &TcpInfo, now: Instant) -> Verdict {
        if self.judge_from.is_some_and(|t| now < t) {
            self.last_counts = Some((info.data_segs_out, info.total_retrans, info.bytes_acked));
            return Verdict::Unchanged;
        }
        let counts = (info.data_segs_out, info.total_retrans, info.bytes_acked);
        let (segs, retrans, acked) = match self.last_counts {
            // Counters never go backwards on one connection.
            Some((s, r, a)) => (counts.0.saturating_sub(s), counts.1.saturating_sub(r), counts.2 > a),
            None => (0, 0, false),
        };
        self.last_counts = Some(counts);
        let start = *self.bin_start.get_or_insert(now);
        let b = &mut self.bin;
        b.segs += segs;
        b.retrans += retrans;
        let srtt = Duration::from_micros(info.rtt as u64);
        b.srtt = if b.readings == 0 { srtt } else { b.srtt.min(srtt) };
        if info.min_rtt != 0 && info.min_rtt != u32::MAX {
            b.min_rtt = Duration::from_micros(info.min_rtt as u64);
        }
        b.rate = b.rate.max(info.delivery_rate);
        b.saturated |= info.delivery_rate > 0 && !info.delivery_rate_app_limited();
        // Busy with our data: our bytes in flight and unsent are at least half of what the
        // path delivers in a smoothed RTT. Its RTT may then be our own queue — a path held
        // back by queue control is application-limited by design, so the kernel's flag
        // does not say so, and a bulk upload through a deep buffer inflated both paths'
        // RTT fifty-fold and demoted both (half the upload's rate). The schedulers weigh
        // that queue already; the RTT signal is read only on a path that is not busy.
        let ours = info.held_bytes() as f64;
        b.busy |= info.delivery_rate > 0 && ours >= 0.5 * info.delivery_rate as f64 * srtt.as_secs_f64();
        b.acked |= acked;
        b.readings += 1;
        if now.saturating_duration_since(start) < BIN {
            return Verdict::Unchanged;
        }
        let bin = std::mem::take(&mut self.bin);
        self.bin_start = Some(now);
        self.close(bin, now)
    }

    /// Judges a finished bin.
    fn close(&mut self, bin: Bin, now: Instant) -> Verdict {
        // A saturated bin's losses may be the congestion control's own (a slow start
        // overshooting the buffer): they do not count.
        let counted = if bin.saturated { (0, 0) } else { (bin.segs, bin.retrans) };
        push_capped(&mut self.loss, counted, LOSS_WINDOW);
        push_capped(&mut self.rates, bin.rate, RATE_WINDOW);
        let prev_srtt = std::mem::replace(&mut self.last_srtt, bin.srtt);
        let (segs, retrans) = self.loss.iter().fold((0, 0), |(s, r), &(bs, br)| (s + bs, r + br));
        let ratio = retrans as f64 / segs.max(1) as f64;
        let baseline = if self.base_segs > 0.0 {
            self.base_retrans / self.base_segs
        } else {
            0.0
        };
        let typical = median_nonzero(&self.rates);
        let growing = typical > 0 && bin.rate as f64 > RATE_GROWING * typical as f64;
        let lossy = segs >= LOSS_MIN_SEGS
            && ratio >= LOSS_DEMOTE.max(3.0 * baseline)
            && poisson_tail(retrans, segs as f64 * baseline.max(LOSS_DEMOTE / 3.0)) < LOSS_SIGNIFICANCE
            && !growing;
        let loss_clear = segs < LOSS_MIN_SEGS / 3 || ratio < LOSS_CLEAR.max(1.5 * baseline);
        let min = bin.min_rtt;
        // The RTT is read only from bins with acknowledgements (an idle path's smoothed
        // RTT is as old as its last ACK), not while the path was saturated (the queue is
        // then its own, which the schedulers weigh already), and not while it falls (a
        // queue draining).
        let fresh = bin.acked && !min.is_zero();
        let rising = bin.srtt.as_secs_f64() >= 0.95 * prev_srtt.as_secs_f64();
        let inflated = fresh
            && !bin.saturated
            && !bin.busy
            && rising
            && bin.srtt.as_secs_f64() >= RTT_DEMOTE * min.as_secs_f64()
            && bin.srtt >= min + RTT_DEMOTE_ABS;
        let rtt_clear = !fresh || bin.srtt.as_secs_f64() <= RTT_CLEAR * min.as_secs_f64() + 0.010;
        // The rate collapsed: a saturated path delivering under half of what it typically
        // did in the last 10 s (the median bin: one burst's sample of gigabytes per second
        // on a short path is no baseline; application-limited samples count, as lower
        // bounds) with its RTT up, by a factor and by 40 ms (on a LAN path of a few
        // microseconds a millisecond's queue is a large factor and no failure).
        let collapsed = fresh
            && bin.saturated
            && rising
            && (bin.rate as f64) < RATE_COLLAPSE * typical as f64
            && bin.srtt.as_secs_f64() >= RATE_COLLAPSE_RTT * min.as_secs_f64()
            && bin.srtt >= min + RTT_DEMOTE_ABS;
        let bad = lossy || inflated || collapsed;
        if bad {
            self.why = format!(
                "{}{}{}loss {retrans}/{segs} (baseline {:.1} %), srtt {:?} (min {min:?}), rate {} B/s (typical {typical})",
                if lossy { "lossy, " } else { "" },
                if inflated { "RTT inflated, " } else { "" },
                if collapsed { "rate collapsed, " } else { "" },
                baseline * 100.0,
                bin.srtt,
                bin.rate,
            );
        }
        if !self.degraded {
            // The baseline learns from healthy bins only (a 12 s memory): the bins that
            // lead to a demotion must not raise the bar they are judged by.
            if !bad {
                self.base_segs = self.base_segs * 0.98 + bin.segs as f64;
                self.base_retrans = self.base_retrans * 0.98 + bin.retrans as f64;
            }
            self.bad_run = if bad { self.bad_run + 1 } else { 0 };
            if self.bad_run >= DEMOTE_BINS {
                self.degraded = true;
                self.bad_run = 0;
                self.clear_run = 0;
                self.demotions += 1;
                let ping_pong = self
                    .last_promotion
                    .is_some_and(|t| now.saturating_duration_since(t) < PING_PONG);
                self.promote_bins = if ping_pong {
                    (self.promote_bins * 2).min(MAX_PROMOTE_BINS)
                } else {
                    PROMOTE_BINS
                };
                return Verdict::Demoted;
            }
            return Verdict::Unchanged;
        }
        // Promotion needs evidence: a bin with ACKs (the degraded path's probes) and
        // every indicator clear.
        let clear = bin.acked && !bad && loss_clear && rtt_clear;
        self.clear_run = if clear { self.clear_run + 1 } else { 0 };
        if self.clear_run >= self.promote_bins {
            self.degraded = false;
            self.clear_run = 0;
            self.last_promotion = Some(now);
            return Verdict::Promoted;
        }
        Verdict::Unchanged
    }
}

/// P(X ≥ k) for X Poisson with mean `lambda`: how likely `k` or more losses are at the
/// expected count (1 where `k` is no more than expected; the test needs only small tails).
fn poisson_tail(k: u32, lambda: f64) -> f64 {
    if k == 0 || k as f64 <= lambda {
        return 1.0;
    }
    // The first term in logarithms (exp(-λ) underflows on a fast path's window), then the
    // series, whose terms fall from there on.
    let ln_fact: f64 = (2..=k).map(|i| (i as f64).ln()).sum();
    let mut term = (-lambda + k as f64 * lambda.ln() - ln_fact).exp();
    let mut sum = 0.0;
    let mut i = k;
    while term > sum * 1e-12 && i < k + 100_000 {
        sum += term;
        i += 1;
        term *= lambda / i as f64;
    }
    sum
}

/// The median of the non-zero values (0 if none).
fn median_nonzero(v: &VecDeque<u64>) -> u64 {
    let mut xs: Vec<u64> = v.iter().copied().filter(|&x| x > 0).collect();
    if xs.is_empty() {
        return 0;
    }
    xs.sort_unstable();
    xs[xs.len() / 2]
}

fn push_capped<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    if q.len() == cap {
        q.pop_front();
    }
    q.push_back(v);
}

#[cfg(test)]
mod tests;
