//! Limits after authentication: what one client key, and all clients together, may hold
//! on the server ([`Limits`]): sessions per key, streams and datagram flows per session and
//! per key, descriptors overall and per key, and name lookups in progress.
//!
//! A key is one client (the Noise static key authenticates it), however many sessions and
//! processes it runs, so a key's limits hold across all of them (the per-peer bounds of
//! WireGuard and the per-user `limit_conn` of nginx). Every descriptor a client makes the
//! server open on its behalf (a path it joins, a stream's connection, a flow's socket) is
//! charged to its key and to the server's budget; a key may hold only its share of that
//! budget, so the rest stays for the others whatever one key does. Reaching a limit
//! refuses only the new thing: the stream is reset with [`ResetCode::Limit`], the flow
//! closed with [`FlowCloseCode::TooMany`], the join answered with [`CloseCode::Limit`]. Each refusal is
//! counted by limit (`mpflex_limit_refused_total{limit=…}`) and logged at most once per
//! client key per minute.
//!
//! [`ResetCode::Limit`]: mpflex_wire::ResetCode::Limit
//! [`FlowCloseCode::TooMany`]: mpflex_wire::FlowCloseCode::TooMany
//! [`CloseCode::Limit`]: mpflex_wire::CloseCode::Limit

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mpflex_engine::CreditPool;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{info, warn};

use crate::config::Limits;
use crate::status::Counter;

/// How often one client key's refusals may reach the log.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// How long a name lookup waits for a place among those in progress before its stream or
/// flow is refused: a resolver that answers slowly must not queue lookups without end.
const DNS_WAIT: Duration = Duration::from_secs(5);

/// A limit a client can reach after it authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    SessionsPerClient,
    StreamsPerSession,
    StreamsPerClient,
    FlowsPerSession,
    FlowsPerClient,
    Descriptors,
    DescriptorsPerClient,
    DnsLookups,
    DnsLookupsPerClient,
    DatagramsPerSecond,
}

impl Limit {
    pub const ALL: [Limit; 10] = [
        Limit::SessionsPerClient,
        Limit::StreamsPerSession,
        Limit::StreamsPerClient,
        Limit::FlowsPerSession,
        Limit::FlowsPerClient,
        Limit::Descriptors,
        Limit::DescriptorsPerClient,
        Limit::DnsLookups,
        Limit::DnsLookupsPerClient,
        Limit::DatagramsPerSecond,
    ];

    /// Its name in `/metrics` (the `limit` label) and the status.
    pub fn name(self) -> &'static str {
        match self {
            Limit::SessionsPerClient => "sessions_per_client",
            Limit::StreamsPerSession => "streams_per_session",
            Limit::StreamsPerClient => "streams_per_client",
            Limit::FlowsPerSession => "flows_per_session",
            Limit::FlowsPerClient => "flows_per_client",
            Limit::Descriptors => "descriptors",
            Limit::DescriptorsPerClient => "descriptors_per_client",
            Limit::DnsLookups => "dns_lookups",
            Limit::DnsLookupsPerClient => "dns_lookups_per_client",
            Limit::DatagramsPerSecond => "datagrams_per_second",
        }
    }

    /// The `[limits]` key that sets it, for the log line.
    fn key(self) -> &'static str {
        match self {
            Limit::SessionsPerClient => "limits.max_sessions_per_client",
            Limit::StreamsPerSession => "limits.max_streams_per_session",
            Limit::StreamsPerClient => "limits.max_streams_per_client",
            Limit::FlowsPerSession => "limits.max_flows_per_session",
            Limit::FlowsPerClient => "limits.max_flows_per_client",
            Limit::Descriptors => "limits.max_descriptors",
            Limit::DescriptorsPerClient => "limits.max_descriptors_per_client",
            Limit::DnsLookups => "limits.max_dns_lookups",
            Limit::DnsLookupsPerClient => "limits.max_dns_lookups_per_client",
            Limit::DatagramsPerSecond => "limits.max_datagrams_per_second",
        }
    }
}

/// The limits in numbers, the descriptor budget resolved against the process's
/// `RLIMIT_NOFILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub sessions_per_client: usize,
    pub streams_per_session: usize,
    pub streams_per_client: usize,
    pub flows_per_session: usize,
    pub flows_per_client: usize,
    /// Descriptors paths, streams and flows of all clients may hold together.
    pub descriptors: usize,
    pub descriptors_per_client: usize,
    pub dns_lookups: usize,
    pub dns_lookups_per_client: usize,
    pub datagrams_per_second: u32,
    /// Session credit the server grants one key's sessions together, bytes.
    pub receive_per_client: u64,
}

/// Descriptors kept out of the budget for what no client is charged for: listeners,
/// connections still in their handshake, the status listener and its requests, the
/// resolver's sockets, logs. A quarter of `RLIMIT_NOFILE`, at least 256 and at most
/// 16,384.
pub fn reserve(nofile: u64) -> usize {
    (nofile / 4).clamp(256, 16_384) as usize
}

impl Budget {
    /// The limits `l` for a process allowed `nofile` descriptors.
    pub fn new(l: &Limits, nofile: u64) -> Budget {
        let derived = (nofile as usize).saturating_sub(reserve(nofile)).max(1);
        let descriptors = match l.max_descriptors {
            0 => derived,
            n => n,
        };
        let descriptors_per_client = match l.max_descriptors_per_client {
            0 => (descriptors / 2).max(1),
            n => n.min(descriptors),
        };
        Budget {
            sessions_per_client: l.max_sessions_per_client,
            streams_per_session: l.max_streams_per_session,
            streams_per_client: l.max_streams_per_client,
            flows_per_session: l.max_flows_per_session,
            flows_per_client: l.max_flows_per_client,
            descriptors,
            descriptors_per_client,
            dns_lookups: l.max_dns_lookups,
            dns_lookups_per_client: l.max_dns_lookups_per_client.min(l.max_dns_lookups),
            datagrams_per_second: l.max_datagrams_per_second,
            receive_per_client: l.receive_buffer_per_client,
        }
    }
}

/// This process's soft `RLIMIT_NOFILE`.
pub fn nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    r.rlim_cur
}

/// What one client key holds, over all its sessions.
pub struct Client {
    name: String,
    sessions: AtomicUsize,
    streams: AtomicUsize,
    flows: AtomicUsize,
    descriptors: AtomicUsize,
    dns: Arc<Semaphore>,
    /// The receive credit the key's sessions share ([`Budget::receive_per_client`]).
    credit: Arc<CreditPool>,
    logged: Mutex<Option<Instant>>,
}

/// The server's accounts: the budget, what each key holds, and the refusals.
pub struct Quotas {
    pub budget: Budget,
    descriptors: AtomicUsize,
    clients: Mutex<HashMap<[u8; 32], Arc<Client>>>,
    dns: Arc<Semaphore>,
    refused: [AtomicU64; Limit::ALL.len()],
    /// Refusals counted but not logged (their key was logged within the minute).
    unlogged: AtomicU64,
    /// Connections and sockets the kernel refused for want of descriptors (`EMFILE`,
    /// `ENFILE`).
    out_of_descriptors: AtomicU64,
    descriptors_logged: Mutex<Option<Instant>>,
}

/// A session's account, charged to its client key; the key's session count goes down
/// when the session ends ([`SessionAccount::end`]), or at the latest when the account is
/// dropped.
pub struct SessionAccount {
    quotas: Arc<Quotas>,
    client: Arc<Client>,
    streams: AtomicUsize,
    flows: AtomicUsize,
    ended: std::sync::atomic::AtomicBool,
}

impl Drop for SessionAccount {
    fn drop(&mut self) {
        self.end();
    }
}

/// What a held descriptor is, for its counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Path,
    Stream,
    Flow,
}

/// One descriptor charged to a session, its key and the server; given back when dropped.
pub struct Held {
    acct: Arc<SessionAccount>,
    kind: Kind,
}

impl Drop for Held {
    fn drop(&mut self) {
        let a = &self.acct;
        match self.kind {
            Kind::Path => {}
            Kind::Stream => {
                a.streams.fetch_sub(1, Ordering::Relaxed);
                a.client.streams.fetch_sub(1, Ordering::Relaxed);
            }
            Kind::Flow => {
                a.flows.fetch_sub(1, Ordering::Relaxed);
                a.client.flows.fetch_sub(1, Ordering::Relaxed);
            }
        }
        a.client.descriptors.fetch_sub(1, Ordering::Relaxed);
        a.quotas.descriptors.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A place among the name lookups in progress (the key's and the server's).
pub struct DnsPermit {
    _client: OwnedSemaphorePermit,
    _server: OwnedSemaphorePermit,
}

/// Adds one to `n` if it stays within `max`; whether it did.
fn take(n: &AtomicUsize, max: usize) -> bool {
    n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| (v < max).then_some(v + 1))
        .is_ok()
}

fn give(n: &AtomicUsize) {
    n.fetch_sub(1, Ordering::Relaxed);
}

impl Quotas {
    pub fn new(l: &Limits) -> Arc<Quotas> {
        Quotas::with(Budget::new(l, nofile()))
    }

    pub fn with(budget: Budget) -> Arc<Quotas> {
        Arc::new(Quotas {
            budget,
            descriptors: AtomicUsize::new(0),
            clients: Mutex::new(HashMap::new()),
            dns: Arc::new(Semaphore::new(budget.dns_lookups)),
            refused: Default::default(),
            unlogged: AtomicU64::new(0),
            out_of_descriptors: AtomicU64::new(0),
            descriptors_logged: Mutex::new(None),
        })
    }

    /// A new session for client `key` (named `name`), or the limit it would break.
    pub fn open_session(self: &Arc<Self>, key: [u8; 32], name: &str) -> Result<Arc<SessionAccount>, Limit> {
        let client = self
            .clients
            .lock()
            .unwrap()
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Client {
                    name: name.to_string(),
                    sessions: AtomicUsize::new(0),
                    streams: AtomicUsize::new(0),
                    flows: AtomicUsize::new(0),
                    descriptors: AtomicUsize::new(0),
                    dns: Arc::new(Semaphore::new(self.budget.dns_lookups_per_client)),
                    credit: CreditPool::new(self.budget.receive_per_client),
                    logged: Mutex::new(None),
                })
            })
            .clone();
        if !take(&client.sessions, self.budget.sessions_per_client) {
            self.refuse(&client, Limit::SessionsPerClient);
            return Err(Limit::SessionsPerClient);
        }
        Ok(Arc::new(SessionAccount {
            quotas: self.clone(),
            client,
            streams: AtomicUsize::new(0),
            flows: AtomicUsize::new(0),
            ended: Default::default(),
        }))
    }

    /// Sessions client `key` holds now.
    pub fn sessions_of(&self, key: &[u8; 32]) -> usize {
        let clients = self.clients.lock().unwrap();
        clients.get(key).map_or(0, |c| c.sessions.load(Ordering::Relaxed))
    }

    /// Counts a refusal and logs it if the key's minute allows.
    fn refuse(&self, c: &Client, limit: Limit) {
        self.refused[limit as usize].fetch_add(1, Ordering::Relaxed);
        if !may_log(&c.logged, Instant::now()) {
            self.unlogged.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let max = match limit {
            Limit::SessionsPerClient => self.budget.sessions_per_client,
            Limit::StreamsPerSession => self.budget.streams_per_session,
            Limit::StreamsPerClient => self.budget.streams_per_client,
            Limit::FlowsPerSession => self.budget.flows_per_session,
            Limit::FlowsPerClient => self.budget.flows_per_client,
            Limit::Descriptors => self.budget.descriptors,
            Limit::DescriptorsPerClient => self.budget.descriptors_per_client,
            Limit::DnsLookups => self.budget.dns_lookups,
            Limit::DnsLookupsPerClient => self.budget.dns_lookups_per_client,
            Limit::DatagramsPerSecond => self.budget.datagrams_per_second as usize,
        };
        warn!(
            client = %c.name,
            "refused: {} ({max}) reached; further refusals for this client in the next minute are counted in /metrics, not logged",
            limit.key()
        );
    }

    /// Counts a socket the kernel refused; `true` if it was for want of descriptors
    /// (then logged, once a minute at most).
    pub fn out_of_descriptors(&self, e: &std::io::Error, what: &str) -> bool {
        if !matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
            return false;
        }
        self.out_of_descriptors.fetch_add(1, Ordering::Relaxed);
        if may_log(&self.descriptors_logged, Instant::now()) {
            warn!(
                "{what}: {e}: the process is out of descriptors; raise LimitNOFILE or lower limits.max_descriptors \
                 (further failures in the next minute are counted in /metrics, not logged)"
            );
        }
        true
    }

    /// Descriptors held now by clients' paths, streams and flows.
    pub fn descriptors_held(&self) -> usize {
        self.descriptors.load(Ordering::Relaxed)
    }

    /// The refusals and descriptor failures for `/metrics` and the status.
    pub fn counters(&self) -> Vec<Counter> {
        let mut v: Vec<Counter> = Limit::ALL
            .iter()
            .map(|l| {
                Counter::new(
                    "limit_refused",
                    "Paths, streams, flows and lookups refused because a [limits] limit was reached, by limit.",
                    self.refused[*l as usize].load(Ordering::Relaxed),
                )
                .labelled("limit", l.name())
            })
            .collect();
        v.push(Counter::new(
            "limit_refusals_not_logged",
            "Refusals counted but not logged (their client key was logged within the minute).",
            self.unlogged.load(Ordering::Relaxed),
        ));
        v.push(Counter::new(
            "out_of_descriptors",
            "Connections and sockets for clients' streams and flows the kernel refused: no descriptor left (EMFILE, ENFILE).",
            self.out_of_descriptors.load(Ordering::Relaxed),
        ));
        v
    }

    /// The log line at start: what the budget came to.
    pub fn describe(&self, nofile: u64) {
        let b = &self.budget;
        info!(
            "limits: {} descriptors for clients' paths, streams and flows ({} per client key) of RLIMIT_NOFILE {nofile}; \
             {} sessions, {} streams and {} flows per client key",
            b.descriptors, b.descriptors_per_client, b.sessions_per_client, b.streams_per_client, b.flows_per_client
        );
    }
}

/// Whether a line may be logged now, the last at `*last`; records it if so.
fn may_log(last: &Mutex<Option<Instant>>, now: Instant) -> bool {
    let mut last = last.lock().unwrap();
    if last.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}

impl SessionAccount {
    /// The session ended: its place among its key's sessions is free (once).
    pub fn end(&self) {
        if !self.ended.swap(true, Ordering::Relaxed) {
            self.client.sessions.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Counts a refusal at `limit` (logged if the key's minute allows): for what is
    /// refused outside [`SessionAccount::admit`].
    pub fn refuse(&self, limit: Limit) {
        self.quotas.refuse(&self.client, limit);
    }

    /// The receive credit this session shares with the other sessions of its key.
    pub fn receive_credit(&self) -> Arc<CreditPool> {
        self.client.credit.clone()
    }

    /// The token bucket of one of this session's flows.
    pub fn datagram_rate(&self) -> Rate {
        Rate::new(self.quotas.budget.datagrams_per_second)
    }
    /// Charges one descriptor of `kind`, or refuses it (counted, maybe logged) with the
    /// limit it would break.
    pub fn admit(self: &Arc<Self>, kind: Kind) -> Result<Held, Limit> {
        let q = &self.quotas;
        let b = &q.budget;
        let c = &self.client;
        let counts = match kind {
            Kind::Path => None,
            Kind::Stream => Some((
                (&self.streams, b.streams_per_session, Limit::StreamsPerSession),
                (&c.streams, b.streams_per_client, Limit::StreamsPerClient),
            )),
            Kind::Flow => Some((
                (&self.flows, b.flows_per_session, Limit::FlowsPerSession),
                (&c.flows, b.flows_per_client, Limit::FlowsPerClient),
            )),
        };
        // Each count is taken in turn and the ones taken given back if a later one is
        // full: two admissions racing may both be refused, never both let past a limit.
        let mut steps: Vec<(&AtomicUsize, usize, Limit)> = Vec::with_capacity(4);
        if let Some((session, client)) = counts {
            steps.push(session);
            steps.push(client);
        }
        steps.push((&c.descriptors, b.descriptors_per_client, Limit::DescriptorsPerClient));
        steps.push((&q.descriptors, b.descriptors, Limit::Descriptors));
        for (i, (n, max, limit)) in steps.iter().enumerate() {
            if !take(n, *max) {
                for (m, _, _) in &steps[..i] {
                    give(m);
                }
                q.refuse(c, *limit);
                return Err(*limit);
            }
        }
        Ok(Held {
            acct: self.clone(),
            kind,
        })
    }

    /// A place for a name lookup: the key's, then the server's; waits for one up to
    /// [`DNS_WAIT`], else refuses (counted, maybe logged).
    pub async fn dns(&self) -> Result<DnsPermit, Limit> {
        self.dns_within(DNS_WAIT).await
    }

    async fn dns_within(&self, wait: Duration) -> Result<DnsPermit, Limit> {
        let q = &self.quotas;
        let deadline = tokio::time::Instant::now() + wait;
        let Ok(Ok(client)) = tokio::time::timeout_at(deadline, self.client.dns.clone().acquire_owned()).await else {
            q.refuse(&self.client, Limit::DnsLookupsPerClient);
            return Err(Limit::DnsLookupsPerClient);
        };
        let Ok(Ok(server)) = tokio::time::timeout_at(deadline, q.dns.clone().acquire_owned()).await else {
            q.refuse(&self.client, Limit::DnsLookups);
            return Err(Limit::DnsLookups);
        };
        Ok(DnsPermit {
            _client: client,
            _server: server,
        })
    }

    /// The server's accounts.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }
}

/// A token bucket: `per_second` on average, in bursts of up to a tenth of a second's
/// worth (at least 64).
pub struct Rate {
    per_second: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Rate {
    pub fn new(per_second: u32) -> Rate {
        let burst = (f64::from(per_second) / 10.0).max(64.0);
        Rate {
            per_second: f64::from(per_second),
            burst,
            tokens: burst,
            at: Instant::now(),
        }
    }

    /// Whether one more may pass at `now`.
    pub fn take(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now.max(self.at);
        self.tokens = (self.tokens + dt * self.per_second).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas() -> Arc<Quotas> {
        Quotas::with(Budget {
            sessions_per_client: 2,
            streams_per_session: 3,
            streams_per_client: 4,
            flows_per_session: 1,
            flows_per_client: 8,
            descriptors: 10,
            descriptors_per_client: 6,
            dns_lookups: 2,
            dns_lookups_per_client: 1,
            datagrams_per_second: 100,
            receive_per_client: 4 << 20,
        })
    }

    fn refused(q: &Quotas, l: Limit) -> u64 {
        q.refused[l as usize].load(Ordering::Relaxed)
    }

    #[test]
    fn each_limit_refuses_only_the_new_thing_and_gives_back() {
        let q = quotas();
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let s1 = q.open_session(a, "a").unwrap();
        let s2 = q.open_session(a, "a").unwrap();
        assert_eq!(q.open_session(a, "a").err(), Some(Limit::SessionsPerClient));
        // Streams: three in one session, the fourth per client in another.
        let mut held: Vec<Held> = (0..3).map(|_| s1.admit(Kind::Stream).unwrap()).collect();
        assert_eq!(s1.admit(Kind::Stream).err(), Some(Limit::StreamsPerSession));
        held.push(s2.admit(Kind::Stream).unwrap());
        assert_eq!(s2.admit(Kind::Stream).err(), Some(Limit::StreamsPerClient));
        // Flows: one per session; then the key's descriptor share (6) is full.
        held.push(s1.admit(Kind::Flow).unwrap());
        assert_eq!(s1.admit(Kind::Flow).err(), Some(Limit::FlowsPerSession));
        held.push(s2.admit(Kind::Flow).unwrap());
        assert_eq!(s2.admit(Kind::Path).err(), Some(Limit::DescriptorsPerClient));
        // Another key still gets its share, up to the server's budget (10).
        let t = q.open_session(b, "b").unwrap();
        let theirs: Vec<Held> = (0..4).map(|_| t.admit(Kind::Path).unwrap()).collect();
        assert_eq!(t.admit(Kind::Path).err(), Some(Limit::Descriptors));
        assert_eq!(q.descriptors_held(), 10);
        for l in [
            Limit::SessionsPerClient,
            Limit::StreamsPerSession,
            Limit::StreamsPerClient,
            Limit::FlowsPerSession,
            Limit::DescriptorsPerClient,
            Limit::Descriptors,
        ] {
            assert_eq!(refused(&q, l), 1, "{l:?}");
        }
        // One line per key a minute: a's first refusal and b's.
        assert_eq!(q.unlogged.load(Ordering::Relaxed), 4);
        drop(held);
        drop(theirs);
        assert_eq!(q.descriptors_held(), 0);
        assert!(s1.admit(Kind::Stream).is_ok());
        // A session's end gives its place back.
        drop(s1);
        assert!(q.open_session(a, "a").is_ok());
    }

    #[tokio::test]
    async fn lookups_wait_for_a_place_and_one_key_cannot_take_them_all() {
        let q = quotas();
        let a = q.open_session([1; 32], "a").unwrap();
        let b = q.open_session([2; 32], "b").unwrap();
        let pa = a.dns().await.unwrap();
        let pb = b.dns().await.unwrap();
        // Key a's one place is taken: its next lookup waits, then is refused.
        let wait = Duration::from_millis(20);
        assert_eq!(a.dns_within(wait).await.err(), Some(Limit::DnsLookupsPerClient));
        drop(pa);
        let again = a.dns_within(wait).await;
        assert!(again.is_ok());
        // Both of the server's places are taken now: a third key waits for the server's.
        let c = q.open_session([3; 32], "c").unwrap();
        assert_eq!(c.dns_within(wait).await.err(), Some(Limit::DnsLookups));
        drop(pb);
        assert_eq!(refused(&q, Limit::DnsLookupsPerClient), 1);
    }

    #[test]
    fn the_budget_keeps_a_reserve_and_halves_for_one_key() {
        let l = Limits::default();
        let b = Budget::new(&l, 65_536);
        assert_eq!(b.descriptors, 65_536 - 16_384);
        assert_eq!(b.descriptors_per_client, b.descriptors / 2);
        let b = Budget::new(&l, 4_096);
        assert_eq!((b.descriptors, b.descriptors_per_client), (3_072, 1_536));
        let b = Budget::new(&l, 100);
        assert!(b.descriptors >= 1);
    }

    #[test]
    fn a_flow_passes_its_rate_in_bursts_of_a_tenth_of_a_second() {
        let mut r = Rate::new(10_000);
        let t0 = Instant::now();
        let burst = (0..5_000).take_while(|_| r.take(t0)).count();
        assert_eq!(burst, 1_000);
        // A second later, a second's worth has come back, capped at the burst.
        let later = (0..5_000).take_while(|_| r.take(t0 + Duration::from_secs(1))).count();
        assert_eq!(later, 1_000);
        let t = t0 + Duration::from_secs(1) + Duration::from_millis(10);
        let n = (0..5_000).take_while(|_| r.take(t)).count();
        assert!((99..=100).contains(&n), "{n}");
    }

    /// In `/metrics`, the refusals are one family with a series per limit.
    #[test]
    fn refusals_are_one_family_labelled_by_limit() {
        let q = quotas();
        let s = q.open_session([1; 32], "a").unwrap();
        let _held: Vec<Held> = (0..3).map(|_| s.admit(Kind::Stream).unwrap()).collect();
        assert!(s.admit(Kind::Stream).is_err());
        let (_, text) = crate::status::metrics::render("server", Vec::new(), q.counters(), false);
        assert_eq!(
            text.matches("# TYPE mpflex_limit_refused_total counter").count(),
            1,
            "{text}"
        );
        assert!(text.contains(r#"mpflex_limit_refused_total{role="server",limit="streams_per_session"} 1"#));
        assert!(text.contains(r#"mpflex_limit_refused_total{role="server",limit="dns_lookups"} 0"#));
    }

    #[test]
    fn out_of_descriptors_is_counted_and_other_errors_are_not() {
        let q = quotas();
        assert!(q.out_of_descriptors(&std::io::Error::from_raw_os_error(libc::EMFILE), "connect"));
        assert!(!q.out_of_descriptors(&std::io::Error::from_raw_os_error(libc::ECONNREFUSED), "connect"));
        assert_eq!(q.out_of_descriptors.load(Ordering::Relaxed), 1);
    }
}
