//! `[limits]` (server): what one peer may hold, before and after it authenticates
//! (docs/security.md lists each limit, its default and what a client sees at it).

use anyhow::{bail, Result};
use serde::Deserialize;

/// The server's `[limits]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Time from accepting a path connection to its join, ms: routing preamble, Noise
    /// handshake and join record together. A connection that has not joined by then is
    /// closed (a slowloris holds nothing longer).
    pub handshake_timeout_ms: u64,
    /// Path connections between accept and join, from all sources together.
    pub max_handshakes: usize,
    /// The same from one source address (an IPv6 source counts by its /64).
    pub max_handshakes_per_source: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout_ms: 5_000,
            // Room for every source at its own limit up to 256 sources, so a flood from
            // fewer addresses cannot hold every place; a join takes one round trip, so a
            // real client holds its place for milliseconds.
            max_handshakes: 2_048,
            max_handshakes_per_source: 8,
        }
    }
}

impl Limits {
    pub fn validate(&self) -> Result<()> {
        if !(100..=60_000).contains(&self.handshake_timeout_ms) {
            bail!("limits.handshake_timeout_ms: between 100 and 60000");
        }
        if self.max_handshakes == 0 || self.max_handshakes_per_source == 0 {
            bail!("limits.max_handshakes, limits.max_handshakes_per_source: at least 1");
        }
        if self.max_handshakes_per_source > self.max_handshakes {
            bail!("limits.max_handshakes_per_source: at most limits.max_handshakes");
        }
        Ok(())
    }
}
