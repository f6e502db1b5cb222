//! `mpflex server`: accepts authenticated path connections, groups them into sessions and
//! connects each stream to its destination, within the destination policy.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use bytes::Bytes;
use mpflex_engine::join::{JoinError, JoinRequest, ServerInfo};
use mpflex_engine::{Role, Session};
use mpflex_wire::{CloseCode, FlowCloseCode, Refusal, Route, TargetAddr};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::acl::Acl;
use crate::classes::{ClassRules, Destination};
use crate::config::ServerConfig;
use crate::crypto::{decode_key, encode_key, server_handshake, Opener, ReplayGuard, SilentPeer, Transport};
use crate::driver::{run_stream, FlowMsg, FlowOpened, Opened, SessionHandle};
use crate::gate::{Failure, Gate};
use crate::listen::{accept_each, bind};
use crate::pathconn::{
    answer_join, configure_path_socket, read_join_request, read_preamble, refuse_join, PreambleError,
};
use crate::quota::{Held, Kind, Quotas, SessionAccount};
use crate::status::snapshot::session_id;
use crate::status::SessionView;

struct Server {
    cfg: ServerConfig,
    classes: Arc<ClassRules>,
    /// The server's static key, wiped when the server ends.
    private: zeroize::Zeroizing<[u8; 32]>,
    clients: HashMap<[u8; 32], String>,
    replay: ReplayGuard,
    gate: Arc<Gate>,
    quotas: Arc<Quotas>,
    acl: Acl,
    sessions: Mutex<HashMap<SessionKey, (SessionHandle, Arc<SessionAccount>)>>,
    /// What the join answer says about this server.
    me: ServerInfo,
    /// Path connections whose first bytes were not a routing preamble this build reads.
    bad_preamble: AtomicU64,
    /// Path connections whose preamble named another server (a balancer's mistake or a
    /// forged preamble).
    misrouted: AtomicU64,
}

/// A session belongs to one client key and carries the client's random token.
type SessionKey = ([u8; 32], [u8; 16]);

pub async fn run(cfg: ServerConfig, shutdown: CancellationToken) -> Result<()> {
    cfg.tuning.apply_host_settings()?;
    cfg.validate()?;
    let mut clients = HashMap::new();
    for (i, c) in cfg.clients.iter().enumerate() {
        clients.insert(
            decode_key(&c.public_key, &format!("clients[{i}].public_key"))?,
            c.name.clone(),
        );
    }
    let nofile = crate::quota::nofile();
    let quotas = Quotas::new(&cfg.limits);
    quotas.describe(nofile);
    // Connections in their handshake hold descriptors of the reserve the budget leaves:
    // at most half of it, so paths that joined and the status listener keep the rest.
    let mut before_auth = cfg.limits.clone();
    let room = (crate::quota::reserve(nofile) / 2).max(1);
    if before_auth.max_handshakes > room {
        info!("limits.max_handshakes lowered to {room}: half the descriptors RLIMIT_NOFILE {nofile} keeps out of the clients' budget");
        before_auth.max_handshakes = room;
        before_auth.max_handshakes_per_source = before_auth.max_handshakes_per_source.min(room);
    }
    let srv = Arc::new(Server {
        private: zeroize::Zeroizing::new(cfg.private_key()?),
        acl: Acl::new(&cfg.acl)?,
        classes: Arc::new(cfg.class_rules()?),
        clients,
        replay: ReplayGuard::default(),
        gate: Gate::new(&before_auth),
        quotas,
        sessions: Mutex::new(HashMap::new()),
        me: ServerInfo {
            id: cfg.server_id,
            join: cfg.join_addr,
        },
        bad_preamble: AtomicU64::new(0),
        misrouted: AtomicU64::new(0),
        cfg,
    });
    // The ACL refuses the server's own addresses: followed as interfaces come and go.
    let mut table = crate::links::netlink::watch(shutdown.clone()).await?;
    srv.acl.set_own(table.borrow_and_update().addrs().map(|a| a.ip));
    let acl = srv.acl.clone();
    tokio::spawn(async move {
        while table.changed().await.is_ok() {
            acl.set_own(table.borrow_and_update().addrs().map(|a| a.ip));
        }
    });
    if let Some(addr) = srv.cfg.status_listen {
        let (s, c) = (srv.clone(), srv.clone());
        let access = srv.cfg.status_access()?;
        crate::status::serve_with(addr, "server", access, move || s.status(), move || c.counters()).await?;
    }
    // Lets `mpflex status` find this process; the file goes when this returns.
    let _registration = srv
        .cfg
        .status_listen
        .and_then(|a| crate::runtime::register("server", a));
    let mut tasks = Vec::new();
    for addr in &srv.cfg.listen {
        let l = bind(*addr, "listen").await?;
        info!("accepting paths on {addr}");
        tasks.push(tokio::spawn(accept_loop(l, srv.clone())));
    }
    shutdown.cancelled().await;
    info!("shutting down");
    // The listeners close first: a balancer's health check then fails and new sessions
    // go to the other servers, while the open streams here run on for the grace period.
    for t in tasks {
        t.abort();
    }
    drain(&srv).await;
    // A server of a pool tells its clients to move on (they open a new session through
    // the balancer); a lone server says it ended.
    let code = if srv.me.id != 0 {
        CloseCode::Draining
    } else {
        CloseCode::Normal
    };
    let sessions: Vec<SessionHandle> = srv.sessions.lock().unwrap().drain().map(|(_, (h, _))| h).collect();
    for h in &sessions {
        h.with(|sh| sh.sess.close(code));
    }
    // One pause for all the Close frames to leave, not one per session.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for h in sessions {
        h.closed.cancel();
        h.abort_all_streams();
    }
    Ok(())
}

/// Waits, at most `drain_grace_secs`, for the sessions' open streams to end.
async fn drain(srv: &Server) {
    let grace = Duration::from_secs(srv.cfg.drain_grace_secs);
    if grace.is_zero() {
        return;
    }
    let deadline = Instant::now() + grace;
    loop {
        let open: usize = srv
            .sessions
            .lock()
            .unwrap()
            .values()
            .map(|(h, _)| h.with(|sh| sh.sess.stream_ids().len()))
            .sum();
        if open == 0 {
            info!("drained: no stream open");
            return;
        }
        if Instant::now() >= deadline {
            info!(open, "drain grace of {grace:?} over; closing the sessions");
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn accept_loop(l: TcpListener, srv: Arc<Server>) {
    accept_each(l, "path connection ended", move |sock, peer| {
        serve_path(srv.clone(), sock, peer)
    })
    .await
}

async fn serve_path(srv: Arc<Server>, mut sock: TcpStream, peer: SocketAddr) -> Result<()> {
    let Some(permit) = srv.gate.enter(peer.ip()) else {
        if srv.gate.fail(peer.ip(), Failure::Busy) {
            warn!(%peer, "path refused: too many handshakes in progress (limits.max_handshakes, limits.max_handshakes_per_source); {QUIET}");
        }
        return Ok(());
    };
    // One deadline from accept to joined, whatever stage the peer stalls in.
    let deadline = tokio::time::Instant::now() + srv.gate.deadline;
    let (client, req, opener, leftover, t) = match tokio::time::timeout_at(deadline, admit(&srv, &mut sock, peer)).await
    {
        Ok(Ok(Some(x))) => x,
        Ok(Ok(None)) => return Ok(()),
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            if srv.gate.fail(peer.ip(), Failure::TimedOut) {
                warn!(%peer, "path refused: not joined within limits.handshake_timeout_ms ({:?}); {QUIET}", srv.gate.deadline);
            }
            return Ok(());
        }
    };
    let name = srv.clients[&client].clone();
    // Every path a client joins holds a descriptor charged to its key.
    let admitted = srv
        .session(client, req.session, &name)
        .and_then(|(h, acct, fresh)| Ok((h, acct.admit(Kind::Path)?, fresh)));
    let Ok((h, held, fresh)) = admitted else {
        // Counted and logged by the accounts; the client logs the reason.
        let _ = tokio::time::timeout_at(deadline, refuse_join(&mut sock, &t, CloseCode::Limit)).await;
        return Ok(());
    };
    let joined = match tokio::time::timeout_at(
        deadline,
        answer_join(&mut sock, &t, req, fresh, srv.me, opener, leftover),
    )
    .await
    {
        Ok(r) => r?,
        Err(_) => bail!("join answer not sent within limits.handshake_timeout_ms"),
    };
    drop(permit);
    configure_path_socket(&sock, srv.cfg.tuning.congestion.as_deref(), srv.cfg.tuning.pacing)?;
    let path = req.path;
    h.ensure_path_slot(path, &format!("{name}/{path}@{peer}"));
    info!(client = %name, path, %peer, fresh, "path joined");
    let r = h.run_path(path, sock, t, joined).await;
    drop(held);
    info!(client = %name, path, %peer, "path left: {}", r.as_ref().err().map_or("closed".to_string(), |e| format!("{e:#}")));
    Ok(())
}

/// What a log line about a refused connection adds: the source's next failures this
/// minute are only counted ([`crate::gate::LOG_EVERY`]).
const QUIET: &str = "further failures from this source in the next minute are counted in /metrics, not logged";

/// What an authenticated path's join brings: the client's key, its request, and where
/// the connection continues.
type Admitted = ([u8; 32], JoinRequest, Opener, bytes::BytesMut, Transport);

/// A path connection's routing preamble, Noise handshake and join request; `None` if it
/// was refused (counted, and logged if its source's minute allows).
async fn admit(srv: &Server, sock: &mut TcpStream, peer: SocketAddr) -> Result<Option<Admitted>> {
    let refused = |what: std::fmt::Arguments| {
        if srv.gate.fail(peer.ip(), Failure::Refused) {
            warn!(%peer, "{what}; {QUIET}");
        }
    };
    match read_preamble(sock).await {
        Ok(Route::Any) => {}
        Ok(Route::Server(id)) if id.get() == srv.me.id => {}
        Ok(r) => {
            srv.misrouted.fetch_add(1, Ordering::Relaxed);
            refused(format_args!(
                "path refused: its routing preamble names {r}, this is server {}; check the balancer's map",
                srv.me.id
            ));
            return Ok(None);
        }
        Err(PreambleError::Silent) => {
            debug!(%peer, "path port: connection closed before sending anything");
            return Ok(None);
        }
        Err(e) => {
            srv.bad_preamble.fetch_add(1, Ordering::Relaxed);
            refused(format_args!("path refused: {e}"));
            return Ok(None);
        }
    }
    let (t, client) = match server_handshake(sock, &srv.private, &srv.clients, &srv.replay).await {
        Ok(x) => x,
        Err(e) if e.is::<SilentPeer>() => {
            debug!(%peer, "path port: connection {e}");
            return Ok(None);
        }
        Err(e) => {
            // Nothing goes back to a peer that did not authenticate.
            refused(format_args!("handshake refused: {e:#}"));
            return Ok(None);
        }
    };
    match read_join_request(sock, &t).await {
        Ok((req, opener, leftover)) => Ok(Some((client, req, opener, leftover, t))),
        Err(e) => {
            if let Some(e @ JoinError::Version { .. }) = e.downcast_ref::<JoinError>() {
                // An operator's problem (an authenticated client of another release), not noise.
                warn!(%peer, client = %srv.clients[&client], "path refused: {e}");
            }
            Err(e)
        }
    }
}

impl Server {
    /// The session for (client key, token), created if new (`true` then) and the key's
    /// [`crate::config::Limits::max_sessions_per_client`] allows.
    fn session(
        self: &Arc<Self>,
        client: [u8; 32],
        token: [u8; 16],
        name: &str,
    ) -> Result<(SessionHandle, Arc<SessionAccount>, bool), crate::quota::Limit> {
        let mut sessions = self.sessions.lock().unwrap();
        if let Some((h, acct)) = sessions.get(&(client, token)) {
            if !h.closed.is_cancelled() {
                return Ok((h.clone(), acct.clone(), false));
            }
        }
        if self.quotas.sessions_of(&client) >= self.quotas.budget.sessions_per_client {
            // A session of the key without paths (its client restarted, or moved on)
            // makes room: an honest client's restarts never meet the limit.
            let idle = sessions
                .iter()
                .find(|((k, _), (h, _))| *k == client && !h.any_path_up())
                .map(|(k, (h, a))| (*k, h.clone(), a.clone()));
            if let Some((key, h, acct)) = idle {
                info!(client = %name, "a session without paths closed to make room for a new one of the same client");
                sessions.remove(&key);
                h.closed.cancel();
                h.abort_all_streams();
                acct.end();
            }
        }
        let acct = self.quotas.open_session(client, name)?;
        let scheduler = self.cfg.scheduler_kind().expect("validated").build();
        let mut sess = Session::new(self.cfg.tuning.engine(Role::Server), scheduler, Instant::now());
        // What the key's clients may send ahead of their destinations is one budget
        // over all its sessions (`limits.receive_buffer_per_client`).
        sess.share_receive_credit(acct.receive_credit());
        let (tx, rx) = mpsc::unbounded_channel();
        let mut h = SessionHandle::new(sess, Vec::new(), Some(tx));
        h.pacing = self.cfg.tuning.pacing;
        h.rekey = self.cfg.tuning.rekey();
        h.classes = self.classes.clone();
        h.allowed_schedulers = self.cfg.allowed_scheduler_kinds().expect("validated").map(Arc::new);
        let (ftx, frx) = mpsc::unbounded_channel();
        h.flow_opens = Some(ftx);
        sessions.insert((client, token), (h.clone(), acct.clone()));
        tokio::spawn(flow_loop(self.clone(), h.clone(), acct.clone(), frx));
        info!(client = %name, session = %encode_key(&token), "new session");
        tokio::spawn(egress_loop(self.clone(), h.clone(), acct.clone(), rx));
        tokio::spawn(reaper(self.clone(), h.clone(), acct.clone(), (client, token)));
        Ok((h, acct, true))
    }

    /// The server's own counters for the status endpoint.
    fn counters(&self) -> Vec<crate::status::Counter> {
        let mut v: Vec<crate::status::Counter> = [
            (
                "paths_refused_bad_preamble",
                "Path connections refused because their first bytes were not a routing preamble.",
                self.bad_preamble.load(Ordering::Relaxed),
            ),
            (
                "paths_refused_misrouted",
                "Path connections refused because their routing preamble named another server.",
                self.misrouted.load(Ordering::Relaxed),
            ),
            (
                "paths_refused_busy",
                "Path connections closed on accept: too many handshakes in progress, overall or from their source.",
                self.gate.busy.load(Ordering::Relaxed),
            ),
            (
                "handshakes_timed_out",
                "Path connections closed because they had not joined within limits.handshake_timeout_ms.",
                self.gate.timed_out.load(Ordering::Relaxed),
            ),
            (
                "handshakes_failed",
                "Path connections refused before authentication: no preamble, another server's, or no valid handshake.",
                self.gate.refused.load(Ordering::Relaxed),
            ),
            (
                "handshake_failures_not_logged",
                "Failures before authentication counted but not logged (their source was logged within the minute).",
                self.gate.unlogged.load(Ordering::Relaxed),
            ),
            (
                "accept_errors",
                "Failed accepts on this process's listeners (EMFILE: out of descriptors), each followed by a backoff.",
                crate::listen::ACCEPT_ERRORS.load(Ordering::Relaxed),
            ),
        ]
        .into_iter()
        .map(|(name, help, value)| crate::status::Counter::new(name, help, value))
        .collect();
        v.extend(self.quotas.counters());
        v
    }

    /// The sessions as the status endpoint shows them.
    fn status(&self) -> Vec<SessionView> {
        let handles: Vec<(SessionKey, SessionHandle)> = self
            .sessions
            .lock()
            .unwrap()
            .iter()
            .map(|(k, (h, _))| (*k, h.clone()))
            .collect();
        // Each session's lock is taken with the session map's released: a path joining
        // meanwhile does not wait for the snapshots.
        let mut views: Vec<SessionView> = handles
            .into_iter()
            .map(|((client, token), h)| SessionView {
                client: Some(self.clients.get(&client).cloned().unwrap_or_default()),
                session: session_id(&token),
                snap: h.snapshot(),
            })
            .collect();
        views.sort_by(|a, b| (&a.client, &a.session).cmp(&(&b.client, &b.session)));
        views
    }
}

/// Drops a session whose paths have all been gone for `session_linger_secs`.
async fn reaper(srv: Arc<Server>, h: SessionHandle, acct: Arc<SessionAccount>, key: SessionKey) {
    let linger = Duration::from_secs(srv.cfg.session_linger_secs);
    if h.pathless_for(linger).await {
        info!("session expired: no path for {linger:?}");
    }
    h.closed.cancel();
    h.abort_all_streams();
    acct.end();
    let mut sessions = srv.sessions.lock().unwrap();
    if sessions.get(&key).is_some_and(|(cur, _)| cur.closed.is_cancelled()) {
        sessions.remove(&key);
    }
}

async fn egress_loop(
    srv: Arc<Server>,
    h: SessionHandle,
    acct: Arc<SessionAccount>,
    mut rx: mpsc::UnboundedReceiver<Opened>,
) {
    while let Some(o) = rx.recv().await {
        // The stream's descriptor is charged from the start (its lookup, its connect).
        let Ok(held) = acct.admit(Kind::Stream) else {
            h.with(|sh| sh.sess.stream_reset(o.stream, mpflex_wire::ResetCode::Limit));
            continue;
        };
        let (srv, h, acct) = (srv.clone(), h.clone(), acct.clone());
        tokio::spawn(async move {
            let _held = held;
            match connect(&srv, &acct, &o.addr).await {
                Ok(sock) => {
                    // The client learns the dial succeeded (a TUN answers the SYN then).
                    h.with(|sh| sh.sess.stream_connected(o.stream));
                    // A rule may name the network a name resolved into.
                    if let (TargetAddr::Domain(name, _), Ok(peer)) = (&o.addr, sock.peer_addr()) {
                        let d = Destination {
                            host: Some(name),
                            ip: Some(peer.ip()),
                            port: peer.port(),
                        };
                        h.classify_late(o.stream, &d);
                    }
                    run_stream(h, o.stream, sock, o.signals, Bytes::new()).await
                }
                Err((code, e)) => {
                    // A refusal is the operator's to fix (the ACL); an unreachable
                    // destination is the internet's everyday business.
                    if code == Refusal::Refused {
                        info!(stream = o.stream, "stream refused: {e:#}; the server's [acl] decides (allow, deny, allow_ports, deny_ports, allow_loopback, allow_private, allow_link_local, allow_own)");
                    } else {
                        debug!(stream = o.stream, addr = %o.addr, "connect failed: {e:#}");
                    }
                    h.with(|sh| {
                        sh.streams_refused += u64::from(code == Refusal::Refused);
                        sh.sess.stream_reset(o.stream, code.into())
                    });
                }
            }
        });
    }
}

async fn connect(
    srv: &Server,
    acct: &SessionAccount,
    addr: &TargetAddr,
) -> Result<TcpStream, (Refusal, anyhow::Error)> {
    let allowed = permitted(srv, acct, addr).await?;
    let mut last = None;
    for a in allowed {
        match tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(a)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) if srv.quotas.out_of_descriptors(&e, "connecting a stream") => {
                return Err((Refusal::Limit, anyhow::anyhow!("{a}: {e}")));
            }
            Ok(Err(e)) => last = Some(anyhow::anyhow!("{a}: {e}")),
            Err(_) => last = Some(anyhow::anyhow!("{a}: connect timed out")),
        }
    }
    Err((Refusal::Unreachable, last.expect("at least one address")))
}

/// The addresses `addr` resolves to that the ACL permits, for a stream or a datagram
/// flow alike (the same policy for TCP and UDP destinations). The error carries the
/// reason, which a stream's reset and a flow's close both give.
async fn permitted(
    srv: &Server,
    acct: &SessionAccount,
    addr: &TargetAddr,
) -> Result<Vec<SocketAddr>, (Refusal, anyhow::Error)> {
    let candidates: Vec<SocketAddr> = match addr {
        TargetAddr::Ip(a) => vec![*a],
        // An address written out as a name (SOCKS clients resolving remotely send what
        // they were given) needs no resolver thread.
        TargetAddr::Domain(d, port) if d.parse::<std::net::IpAddr>().is_ok() => {
            vec![SocketAddr::new(d.parse().expect("checked"), *port)]
        }
        TargetAddr::Domain(d, port) => {
            let place = acct
                .dns()
                .await
                .map_err(|l| (Refusal::Limit, anyhow::anyhow!("{addr}: {} reached", l.name())))?;
            // The lookup keeps its place until the resolver answers, even if the stream
            // is gone by then: the place counts a thread of the resolver pool.
            let name = (d.clone(), *port);
            let lookup = tokio::spawn(async move {
                let r = tokio::net::lookup_host(name).await.map(|a| a.collect::<Vec<_>>());
                drop(place);
                r
            });
            lookup
                .await
                .map_err(|e| (Refusal::Unreachable, anyhow::anyhow!("cannot resolve {d}: {e}")))?
                .map_err(|e| (Refusal::Unreachable, anyhow::anyhow!("cannot resolve {d}: {e}")))?
        }
    };
    // The policy applies to resolved addresses, so a name cannot smuggle in a
    // forbidden destination.
    let mut why = None;
    let allowed: Vec<SocketAddr> = candidates
        .into_iter()
        .filter(|a| match srv.acl.check(a) {
            Ok(()) => true,
            Err(d) => {
                why.get_or_insert(d);
                false
            }
        })
        .collect();
    if allowed.is_empty() {
        let why = why.map_or("no address".to_string(), |d| d.to_string());
        return Err((
            Refusal::Refused,
            anyhow::anyhow!("{addr}: destination not allowed: {why}"),
        ));
    }
    Ok(allowed)
}

/// Gives each datagram flow the peer opens a socket of its own, within the limits.
async fn flow_loop(
    srv: Arc<Server>,
    h: SessionHandle,
    acct: Arc<SessionAccount>,
    mut rx: mpsc::UnboundedReceiver<FlowOpened>,
) {
    while let Some(o) = rx.recv().await {
        match acct.admit(Kind::Flow) {
            Ok(held) => drop(tokio::spawn(serve_flow(srv.clone(), h.clone(), acct.clone(), o, held))),
            Err(_) => h.close_flow(o.flow, FlowCloseCode::TooMany),
        }
    }
}

/// One datagram flow: a UDP socket connected to the destination, so only the
/// destination's answers come back (an endpoint-dependent mapping, RFC 4787 §4.1), kept
/// until no datagram has gone either way for the idle timeout, the peer closes the flow,
/// or the session ends. A refused destination closes the flow with the reason, counted in
/// the session's `flows_refused`, and a log line. What the client sends is dropped (and
/// counted) when empty — a packet out for two bytes in, carrying nothing — and beyond the
/// flow's `limits.max_datagrams_per_second`.
async fn serve_flow(srv: Arc<Server>, h: SessionHandle, acct: Arc<SessionAccount>, o: FlowOpened, _held: Held) {
    let FlowOpened { flow, addr, mut rx } = o;
    let mut rate = acct.datagram_rate();
    let sock = match flow_socket(&srv, &acct, &addr).await {
        Ok(s) => s,
        Err((code, e)) => {
            if code == Refusal::Refused {
                info!(flow, "datagram flow refused: {e:#}; the server's [acl] decides (allow, deny, allow_ports, deny_ports, allow_loopback, allow_private, allow_link_local, allow_own)");
            } else {
                debug!(flow, %addr, "datagram flow failed: {e:#}");
            }
            h.close_flow(flow, code.into());
            return;
        }
    };
    let idle = srv.cfg.udp.idle_timeout(addr.port());
    debug!(flow, %addr, ?idle, "datagram flow opened");
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some((_, FlowMsg::Datagram(d))) if d.is_empty() => h.count_udp(|u| u.dropped_empty += 1),
                Some((_, FlowMsg::Datagram(_))) if !rate.take(Instant::now()) => {
                    h.count_udp(|u| u.dropped_rate += 1);
                    acct.refuse(crate::quota::Limit::DatagramsPerSecond);
                }
                Some((_, FlowMsg::Datagram(d))) => {
                    last = tokio::time::Instant::now();
                    if let Err(e) = sock.send(&d).await {
                        // ICMP unreachable from an earlier datagram, a full buffer:
                        // UDP's own losses, not the flow's end.
                        debug!(flow, %addr, "datagram not sent: {e}");
                    }
                }
                Some((_, FlowMsg::Closed(_))) | None => return,
            },
            r = sock.readable() => {
                if let Err(e) = r {
                    debug!(flow, %addr, "flow socket failed: {e}");
                    h.close_flow(flow, FlowCloseCode::Unreachable);
                    return;
                }
                match recv_now(&sock) {
                    Ok(Some(d)) if d.len() > mpflex_wire::MAX_DATAGRAM => {
                        // An IPv6 datagram may carry up to 65,527 bytes; the session
                        // carries what IPv4 can.
                        h.count_udp(|u| u.dropped_oversize += 1);
                        debug!(flow, len = d.len(), "datagram larger than a UDP payload over IPv4 dropped");
                    }
                    Ok(Some(d)) => {
                        last = tokio::time::Instant::now();
                        if !h.send_datagram(flow, d) {
                            return;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => debug!(flow, %addr, "datagram not received: {e}"),
                }
            }
            _ = tokio::time::sleep_until(last + idle) => {
                debug!(flow, %addr, "datagram flow idle: closed");
                h.close_flow(flow, FlowCloseCode::Idle);
                return;
            }
            _ = h.closed.cancelled() => return,
        }
    }
}

thread_local! {
    /// The buffer flow sockets are read into, one per runtime thread: a flow holds none
    /// of its own while it waits (10,000 idle flows would otherwise hold 640 MB of them).
    static RECV_BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 65_536]);
}

/// Reads one datagram from a socket that is readable, without waiting: `None` if it
/// was not after all.
fn recv_now(sock: &UdpSocket) -> std::io::Result<Option<Bytes>> {
    RECV_BUF.with(|b| {
        let mut b = b.borrow_mut();
        match sock.try_recv(&mut b) {
            Ok(n) => Ok(Some(Bytes::copy_from_slice(&b[..n]))),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    })
}

/// An unprivileged ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP` or `IPPROTO_ICMPV6`; Linux's
/// icmp(7), allowed to the groups in `net.ipv4.ping_group_range`) connected to `to`: a
/// flow to port 0 carries ICMP echo (wire protocol 9). The kernel gives each request
/// the socket's identifier and its checksum, and hands back only the replies to it, so
/// the flow needs no raw socket and sees no one else's ICMP.
fn ping_socket(to: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let proto = if to.is_ipv4() {
        Protocol::ICMPV4
    } else {
        Protocol::ICMPV6
    };
    let s = Socket::new(Domain::for_address(to), Type::DGRAM, Some(proto)).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("no ping socket ({e}): the server's group must be in net.ipv4.ping_group_range"),
        )
    })?;
    s.set_nonblocking(true)?;
    s.connect(&SockAddr::from(to))?;
    UdpSocket::from_std(std::net::UdpSocket::from(s))
}

/// A UDP socket connected to the first permitted address of `addr` (port 0: a ping
/// socket, [`ping_socket`]).
async fn flow_socket(
    srv: &Server,
    acct: &SessionAccount,
    addr: &TargetAddr,
) -> Result<UdpSocket, (Refusal, anyhow::Error)> {
    let allowed = permitted(srv, acct, addr).await?;
    let mut last = None;
    for a in allowed {
        let local: SocketAddr = if a.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let r = async {
            if a.port() == 0 {
                return ping_socket(a);
            }
            let s = UdpSocket::bind(local).await?;
            s.connect(a).await?;
            Ok::<_, std::io::Error>(s)
        }
        .await;
        match r {
            Ok(s) => return Ok(s),
            Err(e) if srv.quotas.out_of_descriptors(&e, "opening a datagram flow") => {
                return Err((Refusal::Limit, anyhow::anyhow!("{a}: {e}")));
            }
            Err(e) => last = Some(anyhow::anyhow!("{a}: {e}")),
        }
    }
    Err((Refusal::Unreachable, last.expect("at least one address")))
}
