//! `mpflex client`: dials one path connection per link, accepts applications (SOCKS5,
//! transparent redirect) and carries them over the session.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use mpflex_engine::{Role, Session};
use mpflex_wire::{close, TargetAddr};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::ClientConfig;
use crate::crypto::decode_key;
use crate::driver::{run_stream, SessionHandle};
use crate::listen::{accept_each, bind};

mod paths;
mod placement;
mod udp;

/// How long the client waits for an application's first bytes so they can ride in the
/// stream's Open frame (zero extra round trips for client-speaks-first protocols).
const FIRST_BYTES_WAIT: Duration = Duration::from_millis(2);

pub async fn run(cfg: ClientConfig, shutdown: CancellationToken) -> Result<()> {
    cfg.tuning.apply_host_settings()?;
    cfg.validate()?;
    let private = cfg.private_key()?;
    let server_public = decode_key(&cfg.server_public_key, "server_public_key")?;
    let scheduler = mpflex_sched::by_name(&cfg.scheduler).expect("validated");
    let mut sess = Session::new(cfg.tuning.engine(Role::Client), scheduler, Instant::now());
    sess.set_energy_profile(cfg.energy_profile()?);
    sess.set_energy_aware_config(cfg.energy_aware_config());
    sess.set_energy_mode(cfg.energy_mode()?, Instant::now());
    let mut h = SessionHandle::new(sess, Vec::new(), None, cfg.tuning.notsent_lowat);
    h.congestion = cfg.tuning.congestion.clone();
    h.pacing = cfg.tuning.pacing;
    h.fresh_ssthresh = cfg.tuning.fresh_ssthresh;
    h.queue_target = Duration::from_millis(cfg.tuning.queue_target_ms);
    h.classes = std::sync::Arc::new(cfg.class_rules()?);
    let mut token = [0u8; 16];
    rand::Rng::fill(&mut rand::thread_rng(), &mut token);

    for w in cfg.warnings() {
        warn!("{w}");
    }
    let placement = std::sync::Arc::new(placement::Placement::default());
    let p = placement.clone();
    h.on_server_gone = Some(std::sync::Arc::new(move || p.forget()));
    let keys = paths::Keys {
        private,
        server_public,
        token,
        placement,
    };
    paths::start(&cfg, &h, keys, shutdown.clone()).await?;
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
    if let Some(addr) = cfg.transparent_udp_listen {
        let sock = crate::tproxy::listen(addr)?;
        info!("transparent UDP (TPROXY) on {addr}");
        let h = h.clone();
        listeners.push(tokio::spawn(async move {
            if let Err(e) = udp::transparent(h, sock).await {
                warn!("transparent UDP stopped: {e:#}");
            }
        }));
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
        Ingress::Socks => {
            match tokio::time::timeout(Duration::from_secs(10), crate::socks::accept_request(&mut app))
                .await
                .context("SOCKS5 handshake timed out")??
            {
                crate::socks::Request::Connect(addr) => addr,
                crate::socks::Request::UdpAssociate(hint) => return udp::associate(h, app, hint).await,
            }
        }
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
