//! (client) Data caps of metered paths: counting, the engine's allowance, and the ledger.
//!
//! A cap counts the frame bytes a path carries in both directions (what the engine's
//! `bytes_sent` and `bytes_received` count: payload and frame headers, not the 18-byte
//! record overhead nor TCP/IP). Every flush interval what is left of the cap is split in
//! two: half is this side's allowance (`Session::set_path_allowance`: the engine stops
//! handing the path frames at it, counted as they are handed to the socket), half is
//! granted to the server for downloads (`Frame::Allowance`, an absolute count of what it
//! may have sent, which the server enforces the same way). Together they never exceed
//! what is left, so the cap is not passed by more than the frames in flight when a
//! period's count was last written; near the cap each direction gets half of the rest per
//! interval. Every flush interval the counts go to the ledger ([`crate::store`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use mpflex_engine::{Session, Tier};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::driver::SessionHandle;
use crate::policy::cap::{AtCap, Cap};
use crate::status::snapshot::CapView;
use crate::store::Store;

/// A capped path's count.
#[derive(Debug, Clone)]
pub struct CapSlot {
    /// The path's slot in the session.
    pub slot: usize,
    pub name: String,
    pub cap: Cap,
    pub at_cap: AtCap,
    /// The accounting period counted now ([`Cap::period_key`]).
    pub period: String,
    /// Bytes the ledger held for the period when counting here began.
    pub stored: u64,
    /// The engine's counters (sent + received) when counting here began.
    pub counters_base: u64,
    /// At the cap: the path runs its at-cap tier.
    pub capped: bool,
}

fn counters(sess: &Session, slot: usize) -> u64 {
    sess.path_counters(slot)
        .map_or(0, |(c, _)| c.bytes_sent + c.bytes_received)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl CapSlot {
    /// Bytes counted in the period so far.
    pub fn used(&self, sess: &Session) -> u64 {
        self.stored + counters(sess, self.slot).saturating_sub(self.counters_base)
    }

    pub fn view(&self, sess: &Session) -> CapView {
        CapView {
            limit: self.cap.bytes,
            used: self.used(sess),
            period: self.period.clone(),
            capped: self.capped,
            at_cap: self.at_cap.name(),
        }
    }
}

/// Loads the capped paths' counts from the ledger and registers them with the session.
/// `paths`: (slot, name, cap, at-cap, configured tier).
pub fn start(h: &SessionHandle, store: &Store, paths: &[(usize, String, Cap, AtCap, Tier)]) -> Result<()> {
    let now = unix_now();
    let mut slots = Vec::new();
    for (slot, name, cap, at_cap, _) in paths {
        let period = cap.period_key(now);
        let stored = store.load(name, &period)?;
        info!(path = %name, used = stored, cap = cap.bytes, %period, "data cap");
        slots.push(CapSlot {
            slot: *slot,
            name: name.clone(),
            cap: *cap,
            at_cap: *at_cap,
            period,
            stored,
            counters_base: 0,
            capped: false,
        });
    }
    h.with(|sh| {
        let t = std::time::Instant::now();
        for c in &mut slots {
            c.counters_base = counters(&sh.sess, c.slot);
            renew(&mut sh.sess, c, t);
        }
        sh.caps = slots;
    });
    Ok(())
}

/// Gives the engine what is left of the cap, or puts a path at its cap in its at-cap
/// tier. A count can only grow within a period, so a capped path stays capped.
fn renew(sess: &mut Session, c: &mut CapSlot, now: std::time::Instant) {
    if c.capped {
        return;
    }
    let used = c.used(sess);
    let left = c.cap.bytes.saturating_sub(used);
    if left < AT_CAP {
        // At the cap: the at-cap tier, where a backup path may carry anything again
        // while no other path can.
        warn!(path = %c.name, used, cap = c.cap.bytes, "path reached its data cap; now {}", c.at_cap.name());
        c.capped = true;
        sess.set_path_tier(c.slot, c.at_cap.tier(), now);
        sess.set_path_allowance(c.slot, None, now);
        sess.grant_path_allowance(c.slot, u64::MAX);
        return;
    }
    let mine = left / 2;
    sess.set_path_allowance(c.slot, Some(mine), now);
    // The server may send the rest on top of what arrived from it so far.
    let received = sess.path_counters(c.slot).map_or(0, |(k, _)| k.bytes_received);
    sess.grant_path_allowance(c.slot, received + (left - mine));
}

/// Left of a cap below which a path is at its cap: each side stops within a frame of
/// its half ([`mpflex_engine::Session::set_path_allowance`]), so less than this cannot
/// be used anyway.
const AT_CAP: u64 = 64 * 1024;

/// Every `every`: starts a new period where one began (lifting its cap), renews the
/// engine's allowances, and writes the counts to the ledger. Writes once more at
/// shutdown.
pub async fn run(
    h: SessionHandle,
    mut store: Store,
    tiers: Vec<(usize, Tier)>,
    every: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let last = tokio::select! {
            _ = tick.tick() => false,
            _ = stop.cancelled() => true,
            _ = h.closed.cancelled() => true,
        };
        let unix = unix_now();
        let counts = h.with(|sh| {
            let t = std::time::Instant::now();
            let mut counts = Vec::new();
            for c in &mut sh.caps {
                let period = c.cap.period_key(unix);
                if period != c.period {
                    info!(path = %c.name, %period, "a new data-cap period starts: the path's cap is lifted");
                    c.period = period;
                    c.stored = 0;
                    c.counters_base = counters(&sh.sess, c.slot);
                    if c.capped {
                        c.capped = false;
                        let tier = tiers
                            .iter()
                            .find(|(s, _)| *s == c.slot)
                            .map_or(Tier::Primary, |(_, t)| *t);
                        sh.sess.set_path_tier(c.slot, tier, t);
                    }
                }
                renew(&mut sh.sess, c, t);
                counts.push((c.name.clone(), c.period.clone(), c.used(&sh.sess)));
            }
            counts
        });
        if let Err(e) = store.save(&counts) {
            warn!("data-cap ledger {}: {e:#}", store.path().display());
        }
        if last {
            return;
        }
    }
}
