//! Dialling a path: resolve the server, connect from the path's binding, run the Noise
//! handshake and join the session; a dial that no server answers counts towards moving
//! the session ([`Placement::refused`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::config::ServerList;
use crate::crypto::{client_handshake, Transport};
use crate::driver::SessionHandle;
use crate::links::table::Binding;
use crate::pathconn::{configure_path_socket, join_as_client, Joined};
use crate::status::snapshot::DialState;

use super::link_wait::{Failure, LinkWait, Say, SYN_RTO};
use super::placement::Placement;
use super::syn_pace::{Pace, CAP, CAPPED_SYN_RETRIES, PACED_FOR};

/// What every path connection authenticates, routes and joins with.
#[derive(Clone)]
pub struct Keys {
    pub private: [u8; 32],
    pub server_public: [u8; 32],
    /// The session's token.
    pub token: [u8; 16],
    /// Which server holds the session.
    pub placement: Arc<Placement>,
}

/// After how long without an answer the next of the server's addresses is dialled beside
/// the ones already dialling: by then the first SYN and the kernel's first retransmission
/// of it went unanswered ([`SYN_RTO`]). The earlier dials go on (their SYNs may yet be
/// answered, and the first answer wins), as Happy Eyeballs (RFC 8305) keeps its earlier
/// attempts; an address that fails outright is followed by the next at once.
const NEXT_ADDRESS_AFTER: Duration = Duration::from_secs(2);

/// The bounds of how long the server's answers to the handshake and to the join request
/// may take ([`answer_timeout`]): never shorter than what a busy server needs on any link,
/// never longer than RFC 6298 (2.5)'s floor for a maximum RTO.
const ANSWER_FLOOR: Duration = Duration::from_secs(10);
const ANSWER_CAP: Duration = Duration::from_secs(60);
/// The answer timeout in retransmission timeouts of the new connection: the request and
/// the kernel's first three backed-off retransmissions of it (1 + 2 + 4 + 8, RFC 6298
/// (5.5)).
const ANSWER_RTOS: u32 = 15;

/// How long the server's answers after the TCP handshake may take on `stream`: from the
/// retransmission timeout the kernel derived from that handshake's round trip (three
/// seconds once its SYN was retransmitted, RFC 6298 (5.7)), so a connection made across a
/// slow or just-returned link is given the time its own retransmissions need.
fn answer_timeout(stream: &TcpStream) -> Duration {
    let rto = crate::tcpinfo::tcp_info(stream).map_or(Duration::ZERO, |t| Duration::from_micros(t.rto.into()));
    answer_timeout_for(rto)
}

fn answer_timeout_for(rto: Duration) -> Duration {
    rto.saturating_mul(ANSWER_RTOS).clamp(ANSWER_FLOOR, ANSWER_CAP)
}

/// A path's own dial (a probe's says nothing): the path's name for the log, and its wait
/// for the link ([`LinkWait`]), which outlives each dial.
pub(super) struct Watch<'a> {
    pub path: &'a str,
    pub wait: &'a Mutex<LinkWait>,
}

impl Watch<'_> {
    /// The dial to `server` started at `started` is unanswered now: said, and shown.
    fn unanswered(&self, h: &SessionHandle, i: usize, server: SocketAddr, started: Instant) {
        let say = self
            .wait
            .lock()
            .expect("link wait")
            .unanswered(started.into_std(), std::time::Instant::now());
        let path = self.path;
        match say {
            Say::Nothing => {}
            Say::Waiting => warn!(
                path,
                "no answer yet from {server}: waiting for the link (the SYN goes again every half second for a \
                 minute, then as the kernel retransmits it; the path joins when one is answered)"
            ),
            Say::StillWaiting(d) => info!(
                path,
                "still waiting for the link: no answer from {server} for {:.0?}", d
            ),
        }
        if say != Say::Nothing || self.wait.lock().expect("link wait").said() {
            h.set_path_dial(i, Some(DialState::WaitingForLink));
        }
    }

    /// A dial got an answer from `server`.
    fn answered(&self, server: SocketAddr) {
        if let Some(d) = self.wait.lock().expect("link wait").answered(std::time::Instant::now()) {
            info!(path = self.path, "{server} answered after {:.1?}: the link is back", d);
        }
    }
}

/// A path connection that is dialled, authenticated and joined, ready to run.
pub(super) struct Dialed {
    pub stream: TcpStream,
    pub transport: Transport,
    pub joined: Joined,
    pub server: SocketAddr,
}

/// A dial that reached no server: the connection was refused, or closed before the
/// handshake was answered (a balancer with no live server for the route, a server that
/// refuses the route). Counts towards moving the session ([`Placement::refused`]).
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct Refusal(anyhow::Error);

/// An attempt the kernel gave up on because the next hop did not answer the neighbour
/// discovery (ARP, NDP) its SYN waited for: EHOSTUNREACH, some seconds after the attempt
/// began. On a link with neighbours (Ethernet, WiFi), that is what a dark link looks like.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct NoNeighbour(anyhow::Error);

/// Dials path `i` from `bind` to the session's server: connect, handshake, join. With
/// `reach`, a server not reached (connected and authenticated) within it fails the dial;
/// without, the connect lasts as long as the kernel retransmits its SYN. With `watch`, an
/// unanswered dial is said and shown as waiting for the link.
pub(super) async fn dial(
    h: &SessionHandle,
    i: usize,
    servers: &ServerList,
    bind: &Binding,
    keys: &Keys,
    reach: Option<Duration>,
    watch: Option<&Watch<'_>>,
) -> Result<Dialed> {
    let placement = &keys.placement;
    let by = reach.map(|d| (Instant::now() + d, d));
    let r = dial_with(h, i, servers, bind, keys, by, watch).await;
    if let Err(e) = &r {
        if e.downcast_ref::<Refusal>().is_some() {
            if let Some(s) = placement.refused(h.any_path_up()) {
                warn!(
                    "server {} refuses every path of the session: opening a new session on another \
                     server (open streams are reset)",
                    s.id
                );
            }
        }
    }
    r
}

/// The addresses to try for `servers` from `bind`, in order: each entry's addresses of
/// the source's family, as the resolver gives them.
async fn candidates(servers: &ServerList, bind: &Binding) -> Result<Vec<SocketAddr>> {
    let mut out = Vec::new();
    let mut last = None;
    for s in &servers.0 {
        match resolve(s).await {
            Ok(addrs) => out.extend(
                addrs
                    .into_iter()
                    .filter(|a| bind.source.is_none_or(|src| src.is_ipv4() == a.is_ipv4())),
            ),
            Err(e) => last = Some(anyhow::anyhow!("cannot resolve {s}: {e}")),
        }
    }
    match (out.is_empty(), last) {
        (false, _) => Ok(out),
        (true, Some(e)) => Err(e),
        (true, None) => anyhow::bail!("{servers} has no address of the source's family"),
    }
}

/// The server's addresses, or the last ones it resolved to when resolving fails now: a
/// path re-dialled while the resolver is unreachable — during an outage, or with
/// `tun.routes` sending the host's DNS into a session that has no path left — still
/// reaches the server it reached before.
async fn resolve(server: &str) -> std::io::Result<Vec<SocketAddr>> {
    static LAST: std::sync::Mutex<Option<std::collections::HashMap<String, Vec<SocketAddr>>>> =
        std::sync::Mutex::new(None);
    match tokio::net::lookup_host(server).await {
        Ok(addrs) => {
            let addrs: Vec<_> = addrs.collect();
            let mut last = LAST.lock().expect("resolver cache");
            last.get_or_insert_with(Default::default)
                .insert(server.to_string(), addrs.clone());
            Ok(addrs)
        }
        Err(e) => {
            let last = LAST.lock().expect("resolver cache");
            match last.as_ref().and_then(|m| m.get(server)) {
                Some(addrs) if !addrs.is_empty() => {
                    debug!("cannot resolve {server} ({e}); dialling the addresses it had");
                    Ok(addrs.clone())
                }
                _ => Err(e),
            }
        }
    }
}

/// Connects path `i` from `bind` to one of `addrs`, the one that answered last first, the
/// next ones [`NEXT_ADDRESS_AFTER`] apart (or at once after one failed); the first to
/// connect wins. No attempt is cut short for want of an answer: each lasts while the
/// kernel retransmits its SYN, so a link that comes back during it carries the next one
/// and the path joins then. A path's own dial in the first minute of its wait for the link
/// also paces its SYNs at most half a second apart ([`super::syn_pace`]): the attempts at
/// the first address are capped at a one-second retransmission timeout, with a second one
/// half a second after the first, or, where the kernel cannot cap them, joined by a
/// short-lived fresh attempt every half second.
async fn connect(
    h: &SessionHandle,
    i: usize,
    bind: &Binding,
    addrs: &[SocketAddr],
    placement: &Placement,
    watch: Option<&Watch<'_>>,
) -> Result<(TcpStream, SocketAddr)> {
    let first = placement.endpoint() % addrs.len();
    let started = Instant::now();
    let paced = watch.is_some_and(|w| w.wait.lock().expect("link wait").paced(started.into_std()));
    let pace = Pace::of(paced, paced && kernel_caps_rto());
    let cap = pace.caps();
    let mut unanswered = || {
        if let Some(w) = watch {
            w.unanswered(h, i, addrs[first], started);
        }
    };
    let (s, idx) = race(
        pace,
        addrs.len(),
        first,
        |idx| connect_one(bind, addrs[idx], cap),
        watch.is_some().then_some(&mut unanswered as &mut (dyn FnMut() + Send)),
    )
    .await
    .map_err(|e| e.unwrap_or_else(|| anyhow::anyhow!("no answer from {}", addrs[first])))?;
    placement.set_endpoint(idx);
    if let Some(w) = watch {
        w.answered(addrs[idx]);
    }
    Ok((s, addrs[idx]))
}

/// The attempts of a dial at `n` addresses, `first` first (see [`connect`]): `launch(idx)`
/// makes an attempt at address `idx`; `unanswered`, if given, is called every [`SYN_RTO`]
/// while none has answered. The first attempt to succeed and its address's index, or the
/// last error (`None` if every attempt ran out of time).
async fn race<T, F: std::future::Future<Output = Result<T>>>(
    pace: Pace,
    n: usize,
    first: usize,
    launch: impl Fn(usize) -> F,
    mut unanswered: Option<&mut (dyn FnMut() + Send)>,
) -> std::result::Result<(T, usize), Option<anyhow::Error>> {
    let started = Instant::now();
    let mut dialling = FuturesUnordered::new();
    let mut next = 0;
    let stagger = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(stagger);
    // The next attempt beside the first address's first, and its number.
    let mut extra = pace.extra(1);
    let mut extras = 1;
    let extra_due = tokio::time::sleep_until(started + extra.map_or(Duration::ZERO, |e| e.at));
    tokio::pin!(extra_due);
    let mut last = None;
    let mut tick = tokio::time::interval_at(started + SYN_RTO, SYN_RTO);
    loop {
        tokio::select! {
            _ = &mut stagger, if next < n => {
                let idx = (first + next) % n;
                next += 1;
                dialling.push(timed(idx, None, launch(idx)));
                stagger.as_mut().reset(Instant::now() + NEXT_ADDRESS_AFTER);
            }
            _ = &mut extra_due, if extra.is_some() => {
                let life = extra.and_then(|e| e.life);
                dialling.push(timed(first, life, launch(first)));
                extras += 1;
                extra = pace.extra(extras);
                if let Some(e) = extra {
                    extra_due.as_mut().reset(started + e.at);
                }
            }
            Some((idx, life, ran, r)) = dialling.next() => {
                match r {
                    Some(Ok(s)) => return Ok((s, idx)),
                    // A fresh attempt's time for an answer is over.
                    None => {}
                    // While paced, a next hop that gave no answer is the link's silence,
                    // as a SYN without one is: the attempt starts again (its SYN sets off
                    // the next neighbour discovery at once) rather than failing the dial.
                    Some(Err(e))
                        if pace != Pace::Kernel
                            && ran >= SYN_RTO
                            && started.elapsed() < PACED_FOR
                            && e.is::<NoNeighbour>() =>
                    {
                        debug!("{e:#}; the next hop gave no answer, dialling again");
                        dialling.push(timed(idx, life, launch(idx)));
                    }
                    Some(Err(e)) => {
                        debug!("{e:#}; trying the other server addresses");
                        // The address failed outright (refused, no route, the kernel gave
                        // up): no more attempts at it.
                        if idx == first {
                            extra = None;
                        }
                        if next < n {
                            stagger.as_mut().reset(Instant::now());
                        }
                        last = Some(e);
                    }
                }
                if next == n && dialling.is_empty() {
                    return Err(last);
                }
            }
            _ = tick.tick(), if unanswered.is_some() => {
                if let Some(f) = unanswered.as_mut() {
                    f();
                }
            }
        }
    }
}

/// Attempt `f` at address `idx`, given `life` to succeed: the index, the life, how long
/// it ran, and its result (`None` if its life ran out).
async fn timed<T>(
    idx: usize,
    life: Option<Duration>,
    f: impl std::future::Future<Output = Result<T>>,
) -> (usize, Option<Duration>, Duration, Option<Result<T>>) {
    let started = Instant::now();
    let r = match life {
        None => Some(f.await),
        Some(l) => tokio::time::timeout(l, f).await.ok(),
    };
    (idx, life, started.elapsed(), r)
}

/// Whether this kernel takes a per-socket cap on the retransmission timeout
/// (`TCP_RTO_MAX_MS`, Linux 6.13): asked once, of a socket made for the question.
fn kernel_caps_rto() -> bool {
    static CAPS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CAPS.get_or_init(|| {
        let caps = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .and_then(|s| crate::tcpinfo::set_rto_max(&s, CAP));
        if let Err(e) = &caps {
            debug!("this kernel does not cap a socket's retransmission timeout (TCP_RTO_MAX_MS: {e}); a path waiting for its link paces its SYNs with fresh attempts");
        }
        caps.is_ok()
    })
}

/// Caps the retransmission timeout of `sock`'s SYN at [`CAP`] for [`CAPPED_SYN_RETRIES`]
/// retransmissions ([`super::syn_pace`]); the cap it had, to give the connection back, or
/// `None` if the kernel took neither.
fn cap_syns(sock: &TcpSocket) -> Option<Duration> {
    use crate::tcpinfo::{rto_max, set_rto_max, set_syn_retries};
    let had = rto_max(sock).ok()?;
    set_rto_max(sock, CAP).ok()?;
    if let Err(e) = set_syn_retries(sock, CAPPED_SYN_RETRIES) {
        // Capped with the kernel's count, the attempt would give up within seconds.
        debug!("cannot set TCP_SYNCNT ({e}); the SYN keeps the kernel's schedule");
        set_rto_max(sock, had).ok()?;
        return None;
    }
    Some(had)
}

/// Dials path `i` with the placement's ticket: connect, handshake, join the session. A `reach`
/// deadline (a probe's interval) bounds the connect and the handshake only: the server
/// moves the path onto a connection as soon as it has read its join request, so once that
/// is sent the dial runs to its answer, whatever the time.
async fn dial_with(
    h: &SessionHandle,
    i: usize,
    servers: &ServerList,
    bind: &Binding,
    keys: &Keys,
    reach: Option<(Instant, Duration)>,
    watch: Option<&Watch<'_>>,
) -> Result<Dialed> {
    let placement = &keys.placement;
    let ticket = &placement.ticket().await;
    // A server that gave a join address is dialled there directly when the source's
    // family can reach it.
    let addrs = match ticket.join {
        Some(j) if bind.source.is_none_or(|src| src.is_ipv4() == j.is_ipv4()) => vec![j],
        _ => candidates(servers, bind).await?,
    };
    let (mut stream, server) = within(reach, connect(h, i, bind, &addrs, placement, watch)).await?;
    if watch.is_some() {
        h.set_path_dial(i, Some(DialState::Dialing));
    }
    let answer = answer_timeout(&stream);
    let handshake = async {
        tokio::time::timeout(
            answer,
            client_handshake(&mut stream, &ticket.route.encode(), &keys.private, &keys.server_public),
        )
        .await
        .with_context(|| format!("no answer to the handshake within {answer:?}"))?
    };
    let t = within(reach, handshake).await.map_err(|e| {
        let closed = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::UnexpectedEof
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::BrokenPipe
                )
            })
        });
        if closed {
            anyhow::Error::new(Refusal(e))
        } else {
            e
        }
    })?;
    // From here the server may have the path on this connection: no giving up.
    let (ack, joined) = tokio::time::timeout(answer, join_as_client(&mut stream, &t, keys.token, i))
        .await
        .with_context(|| format!("no answer to Hello within {answer:?}"))??;
    if !placement.joined(ticket.route, ack.server) {
        anyhow::bail!(
            "the session moved to another server while this path joined server {}",
            ack.server.id
        );
    }
    if h.with(|sh| sh.sess.joined(ack.fresh)) {
        warn!(
            "the server lost this session (restarted, or the session moved to another server); open streams are reset"
        );
    }
    configure_path_socket(&stream, h.congestion.as_deref(), h.pacing)?;
    Ok(Dialed {
        stream,
        transport: t,
        joined,
        server,
    })
}

/// `f`, failed if `reach` (a deadline and the interval it ends) passes first.
async fn within<T>(reach: Option<(Instant, Duration)>, f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    match reach {
        Some((by, every)) => tokio::time::timeout_at(by, f)
            .await
            .map_err(|_| anyhow::anyhow!("the server was not reached within {every:?}"))?,
        None => f.await,
    }
}

/// Connects to `server` from `bind`: one attempt, as long as the kernel retransmits its SYN
/// (with `cap`, a second apart: [`cap_syns`]).
async fn connect_one(bind: &Binding, server: SocketAddr, cap: bool) -> Result<TcpStream> {
    let sock = if server.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // With `tun.routes` installed, the host's traffic goes into the TUN; path sockets carry
    // the mark that keeps them on their links (crate::tun::routes).
    if let Some(mark) = crate::tun::routes::path_mark() {
        socket2::SockRef::from(&sock)
            .set_mark(mark)
            .map_err(|e| anyhow::anyhow!("cannot mark the path socket (SO_MARK, needs CAP_NET_ADMIN): {e}"))?;
    }
    if let Some(dev) = &bind.device {
        sock.bind_device(Some(dev.as_bytes())).map_err(|e| {
            let fix = match e.raw_os_error() {
                Some(libc::ENODEV) => "no interface has that name (`ip link` lists them)",
                Some(libc::EPERM) => "binding to a device needs CAP_NET_RAW on this kernel",
                _ => "check device",
            };
            anyhow::anyhow!("device {dev}: cannot bind to it: {e}; {fix}")
        })?;
    }
    if let Some(src) = bind.source {
        sock.bind(SocketAddr::new(src, 0)).map_err(|e| {
            anyhow::anyhow!("source {src}: cannot bind to it: {e}; is it an address of this host (`ip addr`)?")
        })?;
    }
    let had = if cap { cap_syns(&sock) } else { None };
    let stream = sock.connect(server).await.map_err(|e| {
        let failure = Failure::of(&e);
        let err = anyhow::anyhow!("cannot connect to {server}: {e}; {}", failure.hint());
        match failure {
            Failure::Refused => anyhow::Error::new(Refusal(err)),
            _ if e.raw_os_error() == Some(libc::EHOSTUNREACH) => anyhow::Error::new(NoNeighbour(err)),
            _ => err,
        }
    })?;
    // The connection's data retransmissions back off as the namespace has them.
    if let Some(d) = had {
        if let Err(e) = crate::tcpinfo::set_rto_max(&stream, d) {
            warn!("cannot give the path connection its retransmission timeout cap of {d:?} back: {e}");
        }
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_timeout_follows_the_connections_rto_within_its_bounds() {
        let ms = Duration::from_millis;
        // An RTO at the kernel's floor, or none read: the floor.
        assert_eq!(answer_timeout_for(ms(200)), ANSWER_FLOOR);
        assert_eq!(answer_timeout_for(Duration::ZERO), ANSWER_FLOOR);
        // A long round trip, or a SYN that was retransmitted (an RTO of three seconds):
        // the request and three backed-off retransmissions of it.
        assert_eq!(answer_timeout_for(ms(1200)), ms(18_000));
        assert_eq!(answer_timeout_for(ms(3000)), ms(45_000));
        assert_eq!(answer_timeout_for(Duration::from_secs(120)), ANSWER_CAP);
    }

    /// A link that comes back at `back` after the race began: an attempt launched before
    /// then gets no answer, one launched after is answered a round trip (`rtt`) later.
    /// Every launch's time is kept in `launches`.
    fn link_back_at(
        back: Duration,
        rtt: Duration,
        launches: &std::sync::Mutex<Vec<Duration>>,
    ) -> impl Fn(usize) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Duration>> + Send>> + '_ {
        let t0 = Instant::now();
        move |_| {
            let at = t0.elapsed();
            launches.lock().unwrap().push(at);
            Box::pin(async move {
                if at < back {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(rtt).await;
                Ok(at)
            })
        }
    }

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&x| Duration::from_millis(x)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn without_the_cap_a_fresh_attempt_every_half_second_wins_after_the_links_return() {
        let launches = std::sync::Mutex::new(Vec::new());
        let t0 = Instant::now();
        let back = Duration::from_millis(3200);
        let rtt = Duration::from_millis(80);
        let (won, idx) = race(Pace::Fresh, 1, 0, link_back_at(back, rtt, &launches), None)
            .await
            .unwrap();
        // The first attempt launched after the return (at 3.5 s) wins a round trip later.
        assert_eq!((won, idx), (Duration::from_millis(3500), 0));
        assert_eq!(t0.elapsed(), Duration::from_millis(3580));
        assert_eq!(
            *launches.lock().unwrap(),
            ms(&[0, 500, 1000, 1500, 2000, 2500, 3000, 3500])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn capped_attempts_are_two_half_a_second_apart() {
        let launches = std::sync::Mutex::new(Vec::new());
        let never = Duration::from_secs(3600);
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            race(Pace::Capped, 1, 0, link_back_at(never, never, &launches), None),
        )
        .await;
        assert!(r.is_err(), "the race ended without an answer");
        assert_eq!(*launches.lock().unwrap(), ms(&[0, 500]));
        // Past the minute, one attempt on the kernel's schedule.
        launches.lock().unwrap().clear();
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            race(Pace::Kernel, 1, 0, link_back_at(never, never, &launches), None),
        )
        .await;
        assert!(r.is_err());
        assert_eq!(*launches.lock().unwrap(), ms(&[0]));
    }

    /// Attempts that fail as a next hop that never answers ARP does (EHOSTUNREACH three
    /// seconds in); the launches' times are kept.
    fn no_neighbour(
        launches: &std::sync::Mutex<Vec<Duration>>,
    ) -> impl Fn(usize) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send>> + '_ {
        let t0 = Instant::now();
        move |_| {
            launches.lock().unwrap().push(t0.elapsed());
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Err(anyhow::Error::new(NoNeighbour(anyhow::anyhow!("no route to host"))))
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_wait_dials_again_when_the_next_hop_does_not_answer_and_the_kernels_fails() {
        let launches = std::sync::Mutex::new(Vec::new());
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            race(Pace::Capped, 1, 0, no_neighbour(&launches), None),
        )
        .await;
        assert!(r.is_err(), "the paced wait failed the dial");
        assert_eq!(
            *launches.lock().unwrap(),
            ms(&[0, 500, 3000, 3500, 6000, 6500, 9000, 9500])
        );
        // Once the wait's minute is over, the dial fails with the error.
        launches.lock().unwrap().clear();
        let t0 = Instant::now();
        let e = race(Pace::Kernel, 1, 0, no_neighbour(&launches), None)
            .await
            .unwrap_err();
        assert!(e.is_some_and(|e| e.is::<NoNeighbour>()));
        assert_eq!(t0.elapsed(), Duration::from_secs(3));
        assert_eq!(*launches.lock().unwrap(), ms(&[0]));
    }

    #[tokio::test]
    async fn a_capped_attempt_gives_the_connection_the_namespaces_cap_back() {
        use crate::tcpinfo::rto_max;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = listener.local_addr().unwrap();
        let sock = TcpSocket::new_v4().unwrap();
        let Ok(had) = rto_max(&sock) else {
            // No TCP_RTO_MAX_MS here: such a wait paces with fresh attempts.
            assert!(!kernel_caps_rto());
            assert_eq!(cap_syns(&sock), None);
            return;
        };
        assert!(kernel_caps_rto());
        assert_eq!(cap_syns(&sock), Some(had));
        assert_eq!(rto_max(&sock).unwrap(), CAP);
        let mut n = 0u32;
        let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
        // SAFETY: `n` is a live u32 and `len` its size.
        let rc = unsafe {
            libc::getsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&sock),
                libc::IPPROTO_TCP,
                libc::TCP_SYNCNT,
                &mut n as *mut u32 as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!((rc, n), (0, CAPPED_SYN_RETRIES));
        // The connection a capped attempt makes backs off as the namespace has it.
        let bind = Binding {
            device: None,
            source: None,
        };
        let stream = connect_one(&bind, server, true).await.unwrap();
        assert_eq!(rto_max(&stream).unwrap(), had);
    }
}
