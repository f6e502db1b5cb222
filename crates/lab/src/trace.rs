//! mahimahi traces: one line per 1500-byte delivery opportunity, a timestamp in ms from the
//! start; the trace repeats with a period equal to its last timestamp.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Opportunity times in ms, non-decreasing.
    ms: Vec<u64>,
    period_ms: u64,
}

impl Trace {
    pub fn from_millis(ms: Vec<u64>) -> Result<Trace> {
        if ms.is_empty() {
            bail!("trace has no delivery opportunities");
        }
        if ms.windows(2).any(|w| w[1] < w[0]) {
            bail!("trace timestamps go backwards");
        }
        let period_ms = *ms.last().expect("non-empty");
        if period_ms == 0 {
            bail!("trace's last timestamp is 0: it has no duration to repeat");
        }
        Ok(Trace { ms, period_ms })
    }

    pub fn parse(text: &str) -> Result<Trace> {
        let mut ms = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            ms.push(
                line.parse::<u64>()
                    .with_context(|| format!("line {}: {line:?} is not a millisecond timestamp", i + 1))?,
            );
        }
        Trace::from_millis(ms)
    }

    pub fn load(path: &Path) -> Result<Trace> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read trace {}", path.display()))?;
        Trace::parse(&text).with_context(|| format!("trace {}", path.display()))
    }

    pub fn len(&self) -> usize {
        self.ms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ms.is_empty()
    }

    /// Time of opportunity `pos` in repetition `loops`.
    pub fn opportunity(&self, pos: usize, loops: u64) -> Duration {
        Duration::from_millis(loops * self.period_ms + self.ms[pos])
    }

    /// Delivery opportunities at times in `[from, to)`, the trace repeating.
    pub fn opportunities_between(&self, from: Duration, to: Duration) -> u64 {
        let (from, to) = (from.as_millis() as u64, to.as_millis() as u64);
        if to <= from {
            return 0;
        }
        let mut n = 0;
        for k in from / self.period_ms..=to / self.period_ms {
            let base = k * self.period_ms;
            // Both bounds relative to this repetition, clamped to it.
            let lo = from.saturating_sub(base);
            let hi = to.saturating_sub(base);
            let a = self.ms.partition_point(|&t| t < lo);
            let b = self.ms.partition_point(|&t| t < hi);
            n += (b - a) as u64;
        }
        n
    }

    pub fn mean_bytes_per_sec(&self) -> f64 {
        self.ms.len() as f64 * 1500.0 / (self.period_ms as f64 / 1000.0)
    }

    pub fn mean_kbit(&self) -> f64 {
        self.mean_bytes_per_sec() * 8.0 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rates() {
        let t = Trace::parse("0\n0\n1\n\n2\n").unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.opportunity(3, 1), Duration::from_millis(4));
        assert!((t.mean_bytes_per_sec() - 3_000_000.0).abs() < 1.0);
        assert!(Trace::parse("1\nx\n").unwrap_err().to_string().contains("line 2"));
        assert!(Trace::parse("").is_err());
        assert!(Trace::parse("0\n0\n").is_err());
        assert!(Trace::parse("5\n3\n").is_err());
    }

    #[test]
    fn counts_opportunities_across_repetitions() {
        // Period 4 ms: opportunities at 1, 1, 4 (= 0 of the next repetition), 4+1, 4+1, 8, …
        let t = Trace::from_millis(vec![1, 1, 4]).unwrap();
        let ms = Duration::from_millis;
        assert_eq!(t.opportunities_between(ms(0), ms(2)), 2);
        assert_eq!(t.opportunities_between(ms(0), ms(4)), 2);
        assert_eq!(t.opportunities_between(ms(0), ms(5)), 3);
        assert_eq!(t.opportunities_between(ms(0), ms(6)), 5);
        assert_eq!(t.opportunities_between(ms(5), ms(9)), 3);
        assert_eq!(t.opportunities_between(ms(0), ms(400)), 299); // the one at 400 is not in [0, 400)
        assert_eq!(t.opportunities_between(ms(7), ms(7)), 0);
    }

    #[test]
    fn shared_traces_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
        if !dir.is_dir() {
            crate::netns::skip("shared_traces_load", &format!("{} is missing", dir.display()));
            return;
        }
        for name in ["TMobile-LTE-short.down", "ATT-LTE-driving-2016.up"] {
            let t = Trace::load(&dir.join(name)).unwrap();
            assert!(t.mean_kbit() > 100.0, "{name}: {}", t.mean_kbit());
        }
    }
}
