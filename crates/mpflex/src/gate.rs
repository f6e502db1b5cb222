//! Admission before authentication: the path port is open to the whole internet, so what
//! a peer that has not authenticated may hold is bounded (the per-source handshake limits
//! of OpenSSH's `MaxStartups` and nginx's `limit_conn`, applied to a Noise handshake).
//!
//! - one deadline from accept to joined ([`Limits::handshake_timeout_ms`]): a connection
//!   that has not joined by then is closed, whatever stage it is in (slowloris);
//! - at most [`Limits::max_handshakes`] connections in progress, and at most
//!   [`Limits::max_handshakes_per_source`] from one source (an IPv4 address, an IPv6 /64:
//!   a host on IPv6 is usually given a whole /64); a connection beyond either is closed at
//!   once, without a byte;
//! - failures are counted, and logged at most once per source per minute, so a flood
//!   cannot flood the log.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Limits;

/// How often one source's failures may reach the log.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// The most sources whose last log line is remembered; past it, failures of sources not
/// remembered are counted but not logged until the oldest entries age out.
const MAX_LOG_SOURCES: usize = 4096;

/// The part of a peer's address the per-source limits count by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Source(IpAddr);

impl Source {
    pub fn of(ip: IpAddr) -> Source {
        match crate::acl::canonical(ip) {
            IpAddr::V6(v6) => {
                let mut o = v6.octets();
                o[8..].fill(0);
                Source(IpAddr::from(o))
            }
            v4 => Source(v4),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V6(a) => write!(f, "{a}/64"),
            a => write!(f, "{a}"),
        }
    }
}

/// Why a connection did not join: the `/metrics` counter it lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Refused on accept: too many handshakes in progress (overall or from its source).
    Busy,
    /// Did not join within the deadline.
    TimedOut,
    /// Its bytes were not an mpflex handshake by a known client.
    Refused,
}

/// The pre-authentication state of a server.
pub struct Gate {
    max: usize,
    per_source: usize,
    pub deadline: Duration,
    in_progress: Mutex<HashMap<Source, usize>>,
    total: AtomicU64,
    logged: Mutex<HashMap<Source, Instant>>,
    pub busy: AtomicU64,
    pub timed_out: AtomicU64,
    pub refused: AtomicU64,
    /// Failures that were counted but not logged (their source logged within the minute).
    pub unlogged: AtomicU64,
}

/// A connection's place among the handshakes in progress, given back when dropped.
pub struct Permit {
    gate: Arc<Gate>,
    source: Source,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut m = self.gate.in_progress.lock().unwrap();
        if let Some(n) = m.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.source);
            }
        }
        self.gate.total.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Gate {
    pub fn new(l: &Limits) -> Arc<Gate> {
        Arc::new(Gate {
            max: l.max_handshakes,
            per_source: l.max_handshakes_per_source,
            deadline: Duration::from_millis(l.handshake_timeout_ms),
            in_progress: Mutex::new(HashMap::new()),
            total: AtomicU64::new(0),
            logged: Mutex::new(HashMap::new()),
            busy: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            unlogged: AtomicU64::new(0),
        })
    }

    /// A place for a new connection from `ip`, or `None` (counted) if either limit is
    /// reached.
    pub fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<Permit> {
        let source = Source::of(ip);
        let mut m = self.in_progress.lock().unwrap();
        let mine = m.get(&source).copied().unwrap_or(0);
        if self.total.load(Ordering::Relaxed) as usize >= self.max || mine >= self.per_source {
            drop(m);
            self.busy.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        m.insert(source, mine + 1);
        self.total.fetch_add(1, Ordering::Relaxed);
        Some(Permit {
            gate: self.clone(),
            source,
        })
    }

    /// Handshakes in progress now.
    pub fn in_progress(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Counts a failure from `ip`; `true` if it may be logged (the source's first in
    /// [`LOG_EVERY`]). The caller's log line says that more are only counted.
    pub fn fail(&self, ip: IpAddr, why: Failure) -> bool {
        match why {
            Failure::Busy => {} // counted by `enter`
            Failure::TimedOut => drop(self.timed_out.fetch_add(1, Ordering::Relaxed)),
            Failure::Refused => drop(self.refused.fetch_add(1, Ordering::Relaxed)),
        }
        let loggable = self.may_log(Source::of(ip), Instant::now());
        if !loggable {
            self.unlogged.fetch_add(1, Ordering::Relaxed);
        }
        loggable
    }

    fn may_log(&self, s: Source, now: Instant) -> bool {
        let mut logged = self.logged.lock().unwrap();
        if let Some(t) = logged.get(&s) {
            if now.duration_since(*t) < LOG_EVERY {
                return false;
            }
        }
        if logged.len() >= MAX_LOG_SOURCES && !logged.contains_key(&s) {
            logged.retain(|_, t| now.duration_since(*t) < LOG_EVERY);
            if logged.len() >= MAX_LOG_SOURCES {
                return false;
            }
        }
        logged.insert(s, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(max: usize, per_source: usize) -> Arc<Gate> {
        Gate::new(&Limits {
            max_handshakes: max,
            max_handshakes_per_source: per_source,
            ..Limits::default()
        })
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn per_source_and_global_limits_hold_and_permits_come_back() {
        let g = gate(5, 2);
        let a1 = g.enter(ip("192.0.2.1")).unwrap();
        let _a2 = g.enter(ip("192.0.2.1")).unwrap();
        assert!(g.enter(ip("192.0.2.1")).is_none());
        // The IPv4-mapped form is the same source.
        assert!(g.enter(ip("::ffff:192.0.2.1")).is_none());
        let _b = [g.enter(ip("192.0.2.2")).unwrap(), g.enter(ip("192.0.2.2")).unwrap()];
        let _c = g.enter(ip("192.0.2.3")).unwrap();
        // Five in progress: the sixth is refused whatever its source.
        assert!(g.enter(ip("192.0.2.4")).is_none());
        assert_eq!(g.busy.load(Ordering::Relaxed), 3);
        drop(a1);
        assert_eq!(g.in_progress(), 4);
        assert!(g.enter(ip("192.0.2.1")).is_some());
    }

    #[test]
    fn an_ipv6_source_is_its_64() {
        let g = gate(100, 1);
        let _a = g.enter(ip("2001:db8:1:2::1")).unwrap();
        assert!(g.enter(ip("2001:db8:1:2:ffff::9")).is_none());
        assert!(g.enter(ip("2001:db8:1:3::1")).is_some());
        assert_eq!(Source::of(ip("2001:db8:1:2::1")).to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn a_source_is_logged_once_a_minute_and_every_failure_counted() {
        let g = gate(10, 10);
        let t0 = Instant::now();
        assert!(g.may_log(Source::of(ip("192.0.2.1")), t0));
        assert!(!g.may_log(Source::of(ip("192.0.2.1")), t0 + Duration::from_secs(59)));
        assert!(g.may_log(Source::of(ip("192.0.2.2")), t0));
        assert!(g.may_log(Source::of(ip("192.0.2.1")), t0 + LOG_EVERY));
        assert!(g.fail(ip("192.0.2.9"), Failure::Refused));
        assert!(!g.fail(ip("192.0.2.9"), Failure::TimedOut));
        assert_eq!(g.refused.load(Ordering::Relaxed), 1);
        assert_eq!(g.timed_out.load(Ordering::Relaxed), 1);
        assert_eq!(g.unlogged.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_log_memory_is_bounded() {
        let g = gate(10, 10);
        let t0 = Instant::now();
        for i in 0..MAX_LOG_SOURCES as u32 {
            assert!(g.may_log(Source::of(IpAddr::from(i.to_be_bytes())), t0));
        }
        // Full of recent entries: a new source is counted, not logged, not remembered.
        assert!(!g.may_log(Source::of(ip("203.0.113.1")), t0));
        assert_eq!(g.logged.lock().unwrap().len(), MAX_LOG_SOURCES);
        // Once they age out, it is.
        assert!(g.may_log(Source::of(ip("203.0.113.1")), t0 + LOG_EVERY));
        assert_eq!(g.logged.lock().unwrap().len(), 1);
    }
}
