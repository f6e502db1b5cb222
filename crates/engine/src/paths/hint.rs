//! Link hints: a leading indicator from below the transport (a WiFi signal fading, read
//! from nl80211 by the driver) that says a path is about to fail before any of its
//! `TCP_INFO` trends does.
//!
//! A path hinted weak is degraded exactly as if its quality trends had demoted it: it
//! takes no new data while a healthy path exists, and what it holds is copied to the
//! fastest healthy path (make-before-break, WearMan, seed 000 ch. VI). It is released
//! when the hint clears, but no sooner than the hold after the last weak hint, so a
//! source that alternates cannot make the path ping-pong.

use std::time::{Duration, Instant};

use super::Paths;

/// What the link layer under a path says about it (see [`crate::Session::set_link_hint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkHint {
    /// The link is about to fail (a WiFi signal below its threshold or falling fast):
    /// the path is treated as degraded.
    Weak,
}

/// A path's hint and its hold.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HintState {
    /// Hinted weak (and not yet released).
    pub weak: bool,
    /// When the last weak hint came.
    last_weak: Option<Instant>,
    /// The hint cleared within the hold: the release waits until then.
    pub release_at: Option<Instant>,
}

/// What a hint changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HintChange {
    Unchanged,
    /// The path became degraded by the hint (it was not, by hint or by trend).
    Demoted,
    /// The hint's hold is over and the path is released from it.
    Released,
}

impl Paths {
    /// Applies `hint` to `path` at `now`; `hold` is the least time a weak hint holds.
    pub fn set_hint(&mut self, path: usize, hint: Option<LinkHint>, hold: Duration, now: Instant) -> HintChange {
        self.ensure(path, now);
        let p = &mut self.entries[path];
        match hint {
            Some(LinkHint::Weak) => {
                let was = p.degraded();
                p.hint.weak = true;
                p.hint.last_weak = Some(now);
                p.hint.release_at = None;
                if was {
                    return HintChange::Unchanged;
                }
                p.counters.demotions += 1;
                self.refresh();
                HintChange::Demoted
            }
            None => {
                if !p.hint.weak {
                    return HintChange::Unchanged;
                }
                let at = p.hint.last_weak.map_or(now, |t| t + hold);
                if now < at {
                    p.hint.release_at = Some(at);
                    return HintChange::Unchanged;
                }
                self.release_hint(path)
            }
        }
    }

    fn release_hint(&mut self, path: usize) -> HintChange {
        let p = &mut self.entries[path];
        p.hint = HintState::default();
        self.refresh();
        HintChange::Released
    }

    /// The earliest deferred release.
    pub fn next_hint_release(&self) -> Option<Instant> {
        self.entries.iter().filter_map(|p| p.hint.release_at).min()
    }

    /// Releases the paths whose deferred release is due at `now`; true if any was.
    pub fn release_due_hints(&mut self, now: Instant) -> bool {
        let due: Vec<usize> = (0..self.entries.len())
            .filter(|&i| self.entries[i].hint.release_at.is_some_and(|t| t <= now))
            .collect();
        for &i in &due {
            self.release_hint(i);
        }
        !due.is_empty()
    }
}
