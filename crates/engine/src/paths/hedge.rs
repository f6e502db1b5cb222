//! Which path takes a copy: of a small interactive frame (hedging, see
//! `Session::hedge`), of what a stalled or silent path holds.

use std::time::{Duration, Instant};

use super::{arrival_secs, Paths};

/// A path that retransmitted within this long is lossy: hedge its interactive frames
/// ([`Paths::hedge_target`]). Losses at a loaded bottleneck come in spells of seconds
/// (a BBR upload's after its minimum-RTT probes: docs/latency.md).
pub(crate) const HEDGE_LOSS_MEMORY: Duration = Duration::from_secs(3);

impl Paths {
    /// Where a copy of an interactive frame of `len` bytes just handed to `on` goes: the
    /// other path (of those that carry, in `allowed`) that delivers it first, if it does so
    /// within two of `on`'s smoothed round trips after `on` delivers the original — before
    /// `on` could repair a loss of it (a fast retransmission takes a round trip after the
    /// loss shows, a tail-loss probe two). A slower copy would win only against a
    /// retransmission timeout, and costs the same bytes.
    ///
    /// Only while `on` is at risk of losing it: it retransmitted lately
    /// ([`HEDGE_LOSS_MEMORY`]). A path that drops segments (a loaded drop-tail buffer, a
    /// lossy link) drops more; one that has not is not worth a copy of every request.
    pub fn hedge_target(&self, len: usize, on: usize, allowed: u64, now: Instant) -> Option<usize> {
        let here = self.get(on)?;
        let srtt = here.snap.srtt.as_secs_f64();
        if srtt == 0.0 {
            return None;
        }
        let lossy = here
            .last_loss
            .is_some_and(|t| now.saturating_duration_since(t) < HEDGE_LOSS_MEMORY);
        if !lossy {
            return None;
        }
        let mine = arrival_secs(&here.snap, here.queue.get(now), len);
        self.entries
            .iter()
            .filter(|p| p.snap.id != on && p.carries() && allowed & (1u64 << p.snap.id) != 0)
            .map(|p| (arrival_secs(&p.snap, p.queue.get(now), len), p.snap.id))
            .filter(|(t, _)| t.is_finite() && *t <= mine + 2.0 * srtt)
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, id)| id)
    }

    /// The up, unsuspected path with the lowest srtt among those not in `exclude` (a mask).
    pub fn fastest_except(&self, exclude: u64) -> Option<usize> {
        self.entries
            .iter()
            .filter(|p| p.carries() && exclude & (1 << p.snap.id) == 0)
            .min_by_key(|p| (p.snap.srtt, p.snap.id))
            .map(|p| p.snap.id)
    }

    /// Where what silent path `quiet` holds is copied (a path check's `Hedge`): the
    /// fastest other path that carries; while none does, the fastest of those that would
    /// carry were `quiet` suspect (a backup). Not a path the energy-aware mode holds back:
    /// a hiccup is no reason to pay a cellular radio's promotion and tail.
    /// Reason: the copy is sent at two thirds of the suspicion threshold, so that a dark
    /// path's frames are on their way before it is declared suspect; a backup that waited
    /// for the suspicion (and then restarted from its initial window) left a gap 80 ms
    /// longer than a second primary's (docs/paths.md, the tiers row). It takes copies
    /// only: new data still waits for the primary to be suspect.
    pub fn copy_target(&self, quiet: usize) -> Option<usize> {
        self.fastest_except(1 << quiet).or_else(|| {
            let successors = self.carrying_without(1 << quiet);
            self.entries
                .iter()
                .filter(|p| successors & (1u64 << p.snap.id) != 0 && !p.energy_standby)
                .min_by_key(|p| (p.snap.srtt, p.snap.id))
                .map(|p| p.snap.id)
        })
    }
}
