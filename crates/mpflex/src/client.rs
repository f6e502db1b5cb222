//! `mpflex client`: dials one path connection per link, accepts applications (SOCKS5,
//! transparent redirect) and carries them over the session.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use mpflex_engine::{Role, Session};
use mpflex_wire::{close, TargetAddr};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::{ClientConfig, PathConfig};
use crate::crypto::{client_handshake, decode_key};
use crate::driver::{run_stream, SessionHandle};
use crate::listen::{accept_each, bind};
use crate::pathconn::{configure_path_socket, join_as_client};

/// How long the client waits for an application's first bytes so they can ride in the
/// stream's Open frame (zero extra round trips for client-speaks-first protocols).
const FIRST_BYTES_WAIT: Duration = Duration::from_millis(2);

pub async fn run(cfg: ClientConfig, shutdown: CancellationToken) -> Result<()> {
    cfg.tuning.apply_host_settings()?;
    cfg.validate()?;
    let private = cfg.private_key()?;
    let server_public = decode_key(&cfg.server_public_key, "server_public_key")?;
    let scheduler = mpflex_sched::by_name(&cfg.scheduler).expect("validated");
    let sess = Session::new(cfg.tuning.engine(Role::Client), scheduler, Instant::now());
    let names = cfg.paths.iter().map(|p| p.name.clone()).collect();
    let mut h = SessionHandle::new(sess, names, None, cfg.tuning.notsent_lowat);
    h.congestion = cfg.tuning.congestion.clone();
    h.pacing = cfg.tuning.pacing;
    h.fresh_ssthresh = cfg.tuning.fresh_ssthresh;
    h.queue_target = Duration::from_millis(cfg.tuning.queue_target_ms);
    h.classes = std::sync::Arc::new(cfg.class_rules()?);
    let mut token = [0u8; 16];
    rand::Rng::fill(&mut rand::thread_rng(), &mut token);

    for (i, p) in cfg.paths.iter().enumerate() {
        if p.backup {
            h.with(|sh| sh.sess.set_path_backup(i, true, Instant::now()));
        }
        tokio::spawn(path_loop(
            h.clone(),
            i,
            p.clone(),
            private,
            server_public,
            token,
            shutdown.clone(),
        ));
    }
    if let Some(addr) = cfg.status_listen {
        let h = h.clone();
        let session = crate::status::snapshot::session_id(&token);
        crate::status::serve(addr, "client", move || {
            vec![crate::status::SessionView {
                client: None,
                session: session.clone(),
                snap: h.snapshot(),
            }]
        })
        .await?;
    }
    // Lets `mpflex status` find this process; the file goes when this returns.
    let _registration = cfg.status_listen.and_then(|a| crate::runtime::register("client", a));
    let mut listeners = Vec::new();
    if let Some(addr) = cfg.socks_listen {
        let l = bind(addr, "socks_listen").await?;
        info!("SOCKS5 on {addr}");
        listeners.push(tokio::spawn(accept_loop(l, h.clone(), Ingress::Socks)));
    }
    if let Some(addr) = cfg.transparent_listen {
        let l = bind(addr, "transparent_listen").await?;
        info!("transparent redirect on {addr}");
        listeners.push(tokio::spawn(accept_loop(l, h.clone(), Ingress::Redirect)));
    }
    tokio::select! {
        _ = shutdown.cancelled() => info!("shutting down"),
        _ = h.closed.cancelled() => warn!("session closed"),
    }
    for l in listeners {
        l.abort();
    }
    h.close(close::NORMAL).await;
    h.abort_all_streams();
    Ok(())
}

#[derive(Clone, Copy)]
enum Ingress {
    Socks,
    Redirect,
}

async fn accept_loop(l: TcpListener, h: SessionHandle, kind: Ingress) {
    accept_each(l, "application connection refused", move |app, _| {
        serve_app(h.clone(), app, kind)
    })
    .await
}

async fn serve_app(h: SessionHandle, mut app: TcpStream, kind: Ingress) -> Result<()> {
    let addr = match kind {
        Ingress::Socks => tokio::time::timeout(Duration::from_secs(10), crate::socks::accept(&mut app))
            .await
            .context("SOCKS5 handshake timed out")??,
        Ingress::Redirect => TargetAddr::Ip(crate::redirect::original_dst(&app)?),
    };
    let mut first = vec![0u8; 16 * 1024];
    let n = match tokio::time::timeout(FIRST_BYTES_WAIT, app.read(&mut first)).await {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => 0,
    };
    first.truncate(n);
    // The first bytes go out with the stream's Open (zero extra round trips for
    // client-speaks-first protocols). With none, either the application waits for the
    // server to speak or it already closed; the uplink tells the two apart.
    let (id, signals, pending) = h.open_stream(addr.clone(), Bytes::from(first));
    debug!(stream = id, %addr, "stream opened");
    run_stream(h, id, app, signals, pending).await;
    Ok(())
}

/// A path connection that is dialled, authenticated and joined, ready to run.
struct Dialed {
    stream: TcpStream,
    transport: crate::crypto::Transport,
    joined: crate::pathconn::Joined,
    server: SocketAddr,
}

/// The keys and session token every dial of the client uses.
#[derive(Clone, Copy)]
struct Keys {
    private: [u8; 32],
    server_public: [u8; 32],
    token: [u8; 16],
}

/// How long a connection attempt waits for the server's SYN-ACK before the next attempt
/// starts with a fresh SYN. The kernel retransmits a SYN after 1 s, 3 s, 7 s: over a link
/// that was dark and is back, a long attempt would leave the path unused for seconds.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest pause between failed attempts (an attempt costs a SYN).
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Keeps path `i` connected: dial, handshake, join the session, run; re-dial with backoff.
/// While the engine holds the path suspect, a probe connection dialled beside the silent
/// one ([`probe_loop`]) takes over as soon as it gets through.
async fn path_loop(
    h: SessionHandle,
    i: usize,
    cfg: PathConfig,
    private: [u8; 32],
    server_public: [u8; 32],
    token: [u8; 16],
    shutdown: CancellationToken,
) {
    let keys = Keys {
        private,
        server_public,
        token,
    };
    let (probed_tx, mut probed) = tokio::sync::mpsc::channel::<Dialed>(1);
    tokio::spawn(probe_loop(h.clone(), i, cfg.clone(), keys, probed_tx, shutdown.clone()));
    let mut backoff = Duration::from_millis(100);
    let mut next: Option<Dialed> = None;
    loop {
        let started = Instant::now();
        let dialed = match next.take() {
            Some(d) => Ok(d),
            None => tokio::select! {
                r = dial(&h, i, &cfg, keys) => r,
                Some(d) = probed.recv() => Ok(d),
                _ = shutdown.cancelled() => return,
            },
        };
        let res = match dialed {
            Ok(d) => {
                info!(path = %cfg.name, server = %d.server, "path up");
                tokio::select! {
                    r = h.run_path(i, d.stream, d.transport, d.joined) => r,
                    Some(d) = probed.recv() => {
                        // The probe's connection replaces the silent one (`run_path` of
                        // the new one cancels the old one's tasks).
                        info!(path = %cfg.name, "a probe got through; the path continues on it");
                        next = Some(d);
                        continue;
                    }
                    _ = shutdown.cancelled() => return,
                }
            }
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            warn!(path = %cfg.name, "path down: {e:#}");
        }
        if shutdown.is_cancelled() {
            return;
        }
        if started.elapsed() > Duration::from_secs(10) {
            backoff = Duration::from_millis(100);
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            Some(d) = probed.recv() => next = Some(d),
            _ = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Probes path `i` while the engine holds it suspect: a fresh connection every probe
/// interval (each attempt sends its own SYN at once, where the silent connection's kernel
/// socket waits out its backed-off retransmission timer), and the first that gets through
/// goes to [`path_loop`]. MPTCP-MA releases a suspended subflow as soon as the link
/// works; this is the end-to-end way to learn that it does.
async fn probe_loop(
    h: SessionHandle,
    i: usize,
    cfg: PathConfig,
    keys: Keys,
    out: tokio::sync::mpsc::Sender<Dialed>,
    shutdown: CancellationToken,
) {
    let signal = h.probe_signal(i);
    loop {
        tokio::select! {
            _ = signal.notified() => {}
            _ = shutdown.cancelled() => return,
        }
        while let Some(every) = h.probe_due(i) {
            let started = tokio::time::Instant::now();
            let attempt = tokio::select! {
                r = tokio::time::timeout(every, dial(&h, i, &cfg, keys)) => r,
                _ = shutdown.cancelled() => return,
            };
            match attempt {
                Ok(Ok(d)) => {
                    if h.probe_due(i).is_some() {
                        let _ = out.send(d).await;
                    }
                    break;
                }
                Ok(Err(e)) => debug!(path = %cfg.name, "probe failed: {e:#}"),
                Err(_) => debug!(path = %cfg.name, "probe unanswered within {every:?}"),
            }
            // A probe that failed at once (no route yet) waits out its interval.
            tokio::select! {
                _ = tokio::time::sleep_until(started + every) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }
}

/// Dials path `i`: connects over its link, authenticates and joins the session.
async fn dial(h: &SessionHandle, i: usize, cfg: &PathConfig, keys: Keys) -> Result<Dialed> {
    let Keys {
        private,
        server_public,
        token,
    } = keys;
    let server: SocketAddr = tokio::net::lookup_host(&cfg.server)
        .await
        .with_context(|| format!("cannot resolve {}", cfg.server))?
        .find(|a| cfg.source.is_none_or(|s| s.is_ipv4() == a.is_ipv4()))
        .with_context(|| format!("{} has no address of the source's family", cfg.server))?;
    let sock = if server.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(dev) = &cfg.device {
        sock.bind_device(Some(dev.as_bytes())).map_err(|e| {
            let fix = match e.raw_os_error() {
                Some(libc::ENODEV) => "no interface has that name (`ip link` lists them)",
                Some(libc::EPERM) => "binding to a device needs CAP_NET_RAW on this kernel",
                _ => "check device",
            };
            anyhow::anyhow!("device {dev}: cannot bind to it: {e}; {fix}")
        })?;
    }
    if let Some(src) = cfg.source {
        sock.bind(SocketAddr::new(src, 0)).map_err(|e| {
            anyhow::anyhow!("source {src}: cannot bind to it: {e}; is it an address of this host (`ip addr`)?")
        })?;
    }
    let sock = tokio::time::timeout(CONNECT_TIMEOUT, sock.connect(server))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "no answer from {server} within {CONNECT_TIMEOUT:?}: check the route over this link and that the \
                 server's firewall lets the port in"
            )
        })?
        .map_err(|e| {
            let fix = match e.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    "nothing listens there: is `mpflex server` running with this address in its listen?"
                }
                _ => "check the server address and the route over this link",
            };
            anyhow::anyhow!("cannot connect to {server}: {e}; {fix}")
        })?;
    let mut stream = sock;
    let t = tokio::time::timeout(
        Duration::from_secs(10),
        client_handshake(&mut stream, &private, &server_public),
    )
    .await
    .context("handshake timed out")??;
    let (fresh, joined) = tokio::time::timeout(Duration::from_secs(10), join_as_client(&mut stream, &t, token, i))
        .await
        .context("no answer to Hello")??;
    if h.with(|sh| sh.sess.joined(fresh)) {
        warn!("the server lost this session (restarted?); open streams are reset");
    }
    configure_path_socket(&stream, h.congestion.as_deref(), h.pacing)?;
    Ok(Dialed {
        stream,
        transport: t,
        joined,
        server,
    })
}
