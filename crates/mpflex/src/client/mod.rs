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
        limit_app_buffers(&l, cfg.tuning.queue_target_ms);
        info!("SOCKS5 on {addr}");
        listeners.push(tokio::spawn(accept_loop(l, h.clone(), Ingress::Socks)));
    }
    if let Some(addr) = cfg.transparent_listen {
        let l = bind(addr, "transparent_listen").await?;
        limit_app_buffers(&l, cfg.tuning.queue_target_ms);
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

/// The receive buffer of application connections under queue control, bytes.
const APP_RCVBUF: usize = 128 * 1024;

/// Under queue control, application connections get a small fixed receive buffer (set on
/// the listener, so accepted connections inherit it): autotuned it grows to megabytes
/// while the session's bound on bytes ahead of the paths holds the stream back, and bytes
/// waiting there are bytes the application counts as sent (measured: 3.9 MB in it during
/// an `iperf3` upload). 128 KB still carries gigabits over loopback. The application's own
/// send buffer is its kernel's to size.
fn limit_app_buffers(l: &TcpListener, queue_target_ms: u64) {
    if queue_target_ms == 0 {
        return;
    }
    if let Err(e) = socket2::SockRef::from(l).set_recv_buffer_size(APP_RCVBUF) {
        warn!("cannot size application connections' receive buffer: {e}");
    }
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

/// Keeps path `i` connected: dial, handshake, join the session, run; re-dial with backoff.
async fn path_loop(
    h: SessionHandle,
    i: usize,
    cfg: PathConfig,
    private: [u8; 32],
    server_public: [u8; 32],
    token: [u8; 16],
    shutdown: CancellationToken,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let started = Instant::now();
        let res = tokio::select! {
            r = connect_path(&h, i, &cfg, &private, &server_public, token) => r,
            _ = shutdown.cancelled() => return,
        };
        match res {
            Ok(()) => {}
            Err(e) => warn!(path = %cfg.name, "path down: {e:#}"),
        }
        if shutdown.is_cancelled() {
            return;
        }
        if started.elapsed() > Duration::from_secs(10) {
            backoff = Duration::from_millis(100);
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

async fn connect_path(
    h: &SessionHandle,
    i: usize,
    cfg: &PathConfig,
    private: &[u8; 32],
    server_public: &[u8; 32],
    token: [u8; 16],
) -> Result<()> {
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
    let sock = tokio::time::timeout(Duration::from_secs(10), sock.connect(server))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "no answer from {server} within 10 s: check the route over this link and that the \
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
        client_handshake(&mut stream, private, server_public),
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
    info!(path = %cfg.name, %server, "path up");
    h.run_path(i, stream, t, joined).await
}
