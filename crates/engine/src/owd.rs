//! One-way-delay estimation from the peer's arrival reports (DEMS: Guo et al.,
//! "Accelerating Multipath Transport Through Balanced Subflow Completion", MobiCom 2017,
//! §3.1 and §3.3).
//!
//! Cellular latency grows with the bytes a path has in flight, so samples are binned by
//! the bytes in flight when the sampled frame was sent (10 KB bins), each bin an EWMA with
//! α = 0.25. Each sample also updates the path's deviation: an EWMA (α = 0.25) of
//! |sample − the bin's estimate before the sample|, the dissertation's "variance of OWD",
//! kept in time units. Samples carry the unknown offset between the two hosts' clocks;
//! it is the same for every path and cancels in ΔOWD.

/// Width of a bytes-in-flight bin.
pub const BIN_BYTES: u64 = 10 * 1024;
/// Bins kept; bytes in flight beyond the last bin's start share it (2.5 MB).
pub const BINS: usize = 256;
const ALPHA: f64 = 0.25;

#[derive(Debug, Clone)]
pub struct OwdEstimator {
    bins: Vec<Option<f64>>,
    dev: Option<f64>,
    samples: u64,
}

impl Default for OwdEstimator {
    fn default() -> Self {
        OwdEstimator {
            bins: vec![None; BINS],
            dev: None,
            samples: 0,
        }
    }
}

fn bin(bif: u64) -> usize {
    ((bif / BIN_BYTES) as usize).min(BINS - 1)
}

impl OwdEstimator {
    /// A sample of `owd_us` (with the clock offset) for a frame sent with `bif` bytes in
    /// flight on the path.
    pub fn sample(&mut self, bif: u64, owd_us: i64) {
        let x = owd_us as f64;
        let b = bin(bif);
        // Deviation against what the estimator would have predicted for this bin.
        let predicted = self.bins[b].or_else(|| self.nearest(b));
        if let Some(pred) = predicted {
            let d = (x - pred).abs();
            self.dev = Some(self.dev.map_or(d, |v| (1.0 - ALPHA) * v + ALPHA * d));
        }
        self.bins[b] = Some(self.bins[b].map_or(x, |v| (1.0 - ALPHA) * v + ALPHA * x));
        self.samples += 1;
    }

    /// The estimate for `bif` bytes in flight: that bin's, or the nearest filled bin's
    /// (lower first on a tie). `None` before any sample.
    pub fn estimate(&self, bif: u64) -> Option<i64> {
        let b = bin(bif);
        self.bins[b].or_else(|| self.nearest(b)).map(|v| v.round() as i64)
    }

    fn nearest(&self, b: usize) -> Option<f64> {
        (1..BINS).find_map(|d| {
            let lo = b.checked_sub(d).and_then(|i| self.bins[i]);
            let hi = self.bins.get(b + d).copied().flatten();
            lo.or(hi)
        })
    }

    /// Mean absolute deviation of samples from their estimates, microseconds.
    pub fn deviation(&self) -> u64 {
        self.dev.map_or(0, |d| d.round() as u64)
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma_per_bin_and_nearest_fallback() {
        let mut e = OwdEstimator::default();
        assert_eq!(e.estimate(0), None);
        e.sample(5_000, 40_000);
        assert_eq!(e.estimate(0), Some(40_000));
        // Next sample in the same bin: 0.75·40 + 0.25·80 = 50 ms.
        e.sample(9_000, 80_000);
        assert_eq!(e.estimate(1), Some(50_000));
        // A far bin falls back to the nearest filled one until it has its own samples.
        assert_eq!(e.estimate(500_000), Some(50_000));
        e.sample(500_000, 200_000);
        assert_eq!(e.estimate(500_000), Some(200_000));
        assert_eq!(e.estimate(0), Some(50_000));
        // Beyond the last bin: the last bin.
        e.sample(100 << 20, 900_000);
        assert_eq!(e.estimate(50 << 20), Some(900_000));
        assert_eq!(e.samples(), 4);
    }

    #[test]
    fn deviation_is_ewma_of_absolute_error() {
        let mut e = OwdEstimator::default();
        e.sample(0, 100_000);
        assert_eq!(e.deviation(), 0);
        // |140 − 100| = 40 ms is the first deviation sample.
        e.sample(0, 140_000);
        assert_eq!(e.deviation(), 40_000);
        // Estimate is now 110 ms; |110 − 110| = 0 → 0.75·40 = 30 ms.
        e.sample(0, 110_000);
        assert_eq!(e.deviation(), 30_000);
    }

    #[test]
    fn clock_offset_cancels_in_differences() {
        let (mut a, mut b) = (OwdEstimator::default(), OwdEstimator::default());
        let offset = -3_000_000_000i64; // receiver clock far behind
        for i in 0..20 {
            a.sample(0, offset + 25_000 + (i % 3) * 1000);
            b.sample(0, offset + 135_000 + (i % 3) * 1000);
        }
        let d = b.estimate(0).unwrap() - a.estimate(0).unwrap();
        assert!((109_000..=111_000).contains(&d), "{d}");
    }
}

/// How long a path's frames wait in queues now, from the peer's arrival reports: the
/// lowest one-way delay of the last 100 ms above the lowest of the last 10 to 20 s — the
/// path's propagation delay (the clock offset cancels). The recent *minimum* is the
/// standing queue, as CoDel reads it: a frame at the end of a large record, or behind a
/// burst that is draining, waits longer without the path holding a queue. It counts
/// what a new frame waits behind, in the socket and at the bottleneck, without the
/// receiver's delayed ACKs that inflate TCP's RTT samples when a sender writes little at
/// a time (as queue control makes it). LEDBAT (RFC 6817) measures its queue the same way.
#[derive(Debug, Clone, Default)]
pub struct QueueDelay {
    /// Lowest sample of the current and the previous base window, µs with the offset.
    base: Windowed,
    recent: Windowed,
    last: Option<std::time::Instant>,
}

/// The lowest sample of the current and the previous window.
#[derive(Debug, Clone, Default)]
struct Windowed {
    min: [Option<i64>; 2],
    start: Option<std::time::Instant>,
}

impl Windowed {
    fn sample(&mut self, v: i64, now: std::time::Instant, window: std::time::Duration) {
        if self.start.is_none_or(|t| now.saturating_duration_since(t) >= window) {
            // A window with no sample at all clears both.
            let fresh = self
                .start
                .is_some_and(|t| now.saturating_duration_since(t) < 2 * window);
            self.min = [None, if fresh { self.min[0] } else { None }];
            self.start = Some(now);
        }
        self.min[0] = Some(self.min[0].map_or(v, |m| m.min(v)));
    }

    fn get(&self) -> Option<i64> {
        self.min.iter().flatten().min().copied()
    }
}

/// Length of one base window (the base is the lower of two).
pub(crate) const BASE_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);
/// Length of one recent window (CoDel's interval is two).
const RECENT_WINDOW: std::time::Duration = std::time::Duration::from_millis(50);
/// A queue estimate older than this says nothing about now.
const QUEUE_STALE: std::time::Duration = std::time::Duration::from_secs(1);

impl QueueDelay {
    pub fn sample(&mut self, owd_us: i64, now: std::time::Instant) {
        self.base.sample(owd_us, now, BASE_WINDOW);
        self.recent.sample(owd_us, now, RECENT_WINDOW);
        self.last = Some(now);
    }

    /// The smallest one-way delay of the base windows (µs, with the clock offset): the
    /// path without a queue. `None` before a report.
    pub fn base(&self) -> Option<i64> {
        self.base.get()
    }

    /// Until when the base stays within `slack` of what it is now if no lower sample
    /// comes: a sample lives until the window after its own ends, so the base is kept to
    /// the end of the next window when the current window holds a sample within `slack`
    /// of it, and only to the end of the current one when it lives in the previous
    /// window alone. `None` before a report. Queue control drains a path to read the base
    /// again only before then ([`crate::writer::PathWriter::steer`]).
    pub fn base_kept_until(&self, slack: std::time::Duration) -> Option<std::time::Instant> {
        let base = self.base.get()?;
        let start = self.base.start?;
        let slack = i64::try_from(slack.as_micros()).unwrap_or(i64::MAX);
        let current = self.base.min[0].is_some_and(|m| m <= base.saturating_add(slack));
        Some(start + if current { 2 * BASE_WINDOW } else { BASE_WINDOW })
    }

    /// The queue delay now; `None` without a recent report.
    pub fn get(&self, now: std::time::Instant) -> Option<std::time::Duration> {
        let last = self.last?;
        if now.saturating_duration_since(last) > QUEUE_STALE {
            return None;
        }
        let q = (self.recent.get()? - self.base.get()?).max(0);
        Some(std::time::Duration::from_micros(q as u64))
    }
}

#[cfg(test)]
mod queue_tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_queue_is_the_recent_minimum_above_the_windowed_minimum() {
        let t = Instant::now();
        let mut q = QueueDelay::default();
        assert_eq!(q.get(t), None);
        // Clock offset 1 s, propagation 25 ms.
        q.sample(1_025_000, t);
        assert_eq!(q.get(t), Some(Duration::ZERO));
        // A standing queue of 20 ms, frames at the end of records waiting up to 10 more.
        for i in 1..=300 {
            q.sample(1_045_000 + (i % 3) * 5_000, t + Duration::from_millis(i as u64));
        }
        let now = t + Duration::from_millis(300);
        assert_eq!(q.get(now), Some(Duration::from_millis(20)), "the standing queue");
        assert_eq!(q.get(now + Duration::from_secs(2)), None, "stale");
        // The minimum is forgotten after two windows: a longer path is its new base.
        let late = now + 2 * BASE_WINDOW;
        q.sample(1_060_000, late);
        q.sample(1_060_000, late + BASE_WINDOW);
        assert_eq!(q.get(late + BASE_WINDOW), Some(Duration::ZERO));
    }

    /// The base is kept to the end of the window after the one that holds a sample
    /// within the slack of it, and no longer.
    #[test]
    fn the_base_is_kept_until_the_window_after_its_last_near_sample_ends() {
        let t = Instant::now();
        let slack = Duration::from_millis(2);
        let mut q = QueueDelay::default();
        assert_eq!(q.base_kept_until(slack), None);
        q.sample(1_025_000, t);
        assert_eq!(q.base_kept_until(slack), Some(t + 2 * BASE_WINDOW));
        // A queue all through the next window: the base lives in the previous one.
        let next = t + BASE_WINDOW;
        q.sample(1_045_000, next);
        assert_eq!(q.base_kept_until(slack), Some(next + BASE_WINDOW));
        // A drained sample (within the slack) in it keeps the base a window longer.
        q.sample(1_026_000, next + Duration::from_secs(3));
        assert_eq!(q.base_kept_until(slack), Some(next + 2 * BASE_WINDOW));
    }
}
