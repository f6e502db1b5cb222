//! Whether each path is alive: its suspicion, hedge and probe clocks, its keepalives,
//! and when its silence makes it dead.

use std::time::{Duration, Instant};

use mpflex_wire::Frame;

use super::{PathEntry, Paths};
use crate::config::EngineConfig;
use crate::supervisor::{probe_every, BIN};

/// What the session carries, as the path timers see it: it sets the keepalive interval
/// and how long a silent path lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// No stream and no datagram flow: keepalives every `idle_keepalive`.
    Idle,
    /// Streams or flows open, the first of them since `since`.
    Carrying { since: Instant },
}

/// What a timer check found on one path.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PathCheck {
    /// Nothing received for the path timeout: it is dead.
    TimedOut,
    /// No sign of life for longer than its suspicion threshold while holding data.
    Stuck,
    /// Silent for two thirds of its threshold: copy what it holds elsewhere.
    Hedge,
    /// Suspect, and a probe is due.
    Probe,
    Fine,
}

impl Paths {
    /// Silence after which a path holding data is suspected (see
    /// [`crate::supervisor::Suspicion::threshold`]): from its minimum RTT, or its smoothed
    /// RTT while the minimum is unknown.
    pub(super) fn suspect_after(&self, p: &PathEntry, now: Instant) -> Duration {
        p.suspicion.threshold(Self::base_rtt(p), self.ack_delay, now)
    }

    /// Silence after which what a path holds is copied elsewhere (see
    /// [`crate::supervisor::Suspicion::hedge_after`]). Only while it holds frames of ours
    /// not yet copied for this silence.
    fn hedge_at(&self, p: &PathEntry) -> Option<Instant> {
        let life = p.last_life();
        (p.held > 0 && p.hedged != Some(life))
            .then(|| life + p.suspicion.hedge_after(Self::base_rtt(p), self.ack_delay, life))
    }

    /// The path's RTT without its queue: the minimum, or the smoothed RTT while the
    /// minimum is unknown.
    pub(super) fn base_rtt(p: &PathEntry) -> Duration {
        if p.snap.min_rtt.is_zero() {
            p.snap.srtt
        } else {
            p.snap.min_rtt
        }
    }

    /// What `path` holds was copied elsewhere at this silence.
    pub fn hedged(&mut self, path: usize) {
        let p = &mut self.entries[path];
        p.hedged = Some(p.last_life());
    }

    /// How often a path sends a keepalive: every bin while it is suspect or degraded
    /// (probes within its own connection, so the monitor sees RTT samples and the first
    /// answer comes soon after the link does), else every `keepalive`, or every
    /// `idle_keepalive` while the session carries nothing.
    fn keepalive_every(p: &PathEntry, cfg: &EngineConfig, load: Load) -> Duration {
        if p.suspect() || p.degraded() {
            cfg.keepalive.min(BIN)
        } else if load == Load::Idle {
            cfg.idle_keepalive()
        } else {
            cfg.keepalive
        }
    }

    /// When a path that hears nothing more is declared dead. Carrying data, after
    /// `path_timeout` of silence. Idle, its peer's keepalives come `idle_keepalive -
    /// keepalive` further apart, and its silence is excused that much longer. A session
    /// that starts carrying sends a keepalive on every path at once (theirs are overdue
    /// at the carrying interval), so a path that died while idle is dropped
    /// `path_timeout` after the start at the latest, as a path that dies under load is.
    /// A question of ours that nothing answered is not excused: a path that died while
    /// the session still carried (its keepalives then went every second, and going idle
    /// asks every path once more, see [`Paths::ask`]) is dropped `path_timeout` after the
    /// first unanswered one, whether or not the session went idle meanwhile.
    fn dead_at(p: &PathEntry, cfg: &EngineConfig, load: Load) -> Instant {
        let excused = cfg.idle_keepalive().saturating_sub(cfg.keepalive);
        let idle = p.last_recv + cfg.path_timeout + excused;
        let idle = p.unanswered.map_or(idle, |t| idle.min(t + cfg.path_timeout));
        match load {
            Load::Idle => idle,
            Load::Carrying { since } => idle.min(p.last_recv.max(since) + cfg.path_timeout),
        }
    }

    /// The next instant a path timer fires.
    pub fn next_timeout(&self, cfg: &EngineConfig, load: Load) -> Option<Instant> {
        self.entries
            .iter()
            .filter(|p| p.is_up() && !p.quiet())
            .flat_map(|p| {
                let watch = cfg.suspicion && !p.suspect();
                let stuck = (watch && p.holding()).then(|| p.last_life() + self.suspect_after(p, p.last_life()));
                let hedge = watch.then(|| self.hedge_at(p)).flatten();
                [
                    Some(p.last_send + Self::keepalive_every(p, cfg, load)),
                    Some(Self::dead_at(p, cfg, load)),
                    stuck,
                    hedge,
                    p.suspicion.next_probe,
                ]
            })
            .flatten()
            .min()
    }

    /// Checks `path`'s liveness at `now`. Without suspicion
    /// ([`EngineConfig::suspicion`]) only the path timeout ends a silent path.
    pub fn check(&self, path: usize, now: Instant, cfg: &EngineConfig, load: Load) -> PathCheck {
        let p = &self.entries[path];
        if !p.is_up() || p.quiet() {
            return PathCheck::Fine;
        }
        if now >= Self::dead_at(p, cfg, load) {
            return PathCheck::TimedOut;
        }
        if p.suspect() {
            if p.suspicion.next_probe.is_some_and(|t| t <= now) {
                return PathCheck::Probe;
            }
            return PathCheck::Fine;
        }
        if !cfg.suspicion {
            return PathCheck::Fine;
        }
        let silent = now.saturating_duration_since(p.last_life());
        if p.holding() && silent >= self.suspect_after(p, now) {
            return PathCheck::Stuck;
        }
        if self.hedge_at(p).is_some_and(|t| t <= now) {
            return PathCheck::Hedge;
        }
        PathCheck::Fine
    }

    /// A probe of the suspect `path` is being made at `now`; the next is due a probe
    /// interval later.
    pub fn probed(&mut self, path: usize, now: Instant) {
        let p = &mut self.entries[path];
        let rtt = if p.snap.min_rtt.is_zero() {
            p.snap.srtt
        } else {
            p.snap.min_rtt
        };
        p.suspicion.next_probe = Some(now + probe_every(rtt));
    }

    /// Queues a keepalive on `path` if it sent nothing for its keepalive interval
    /// (shorter while it is suspect or degraded, longer while the session is idle). True
    /// if it did.
    pub fn keepalive(&mut self, path: usize, now: Instant, cfg: &EngineConfig, load: Load) -> bool {
        let p = &mut self.entries[path];
        let every = Self::keepalive_every(p, cfg, load);
        if now.saturating_duration_since(p.last_send) < every {
            return false;
        }
        self.ask(path, now)
    }

    /// Queues a ping on `path` now, whatever its keepalive clock says, and starts its
    /// unanswered clock if none runs: the path is dead `path_timeout` after the first
    /// question nothing answered. False if the path is down or kept quiet.
    pub fn ask(&mut self, path: usize, now: Instant) -> bool {
        let p = &mut self.entries[path];
        if !p.is_up() || p.quiet() {
            return false;
        }
        p.ping_id += 1;
        p.last_send = now;
        p.unanswered.get_or_insert(now);
        p.ctrl.push_back(Frame::Ping { id: p.ping_id });
        true
    }
}
