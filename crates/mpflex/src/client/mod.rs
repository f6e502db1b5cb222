//! `mpflex client`: dials one path connection per link, accepts applications (SOCKS5,
//! transparent redirect) and carries them over the session.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use mpflex_engine::{Role, Session};
use mpflex_wire::{CloseCode, TargetAddr};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::ClientConfig;
use crate::crypto::decode_key;
use crate::driver::{self, run_halves, SessionHandle};
use crate::listen::{accept_each, bind};

pub mod caps;
mod dial;
mod link_wait;
mod path_phase;
mod path_tasks;
mod placement;
mod syn_pace;
#[cfg(test)]
mod tests;
mod udp;

/// Re-reads the configuration (SIGHUP).
pub type Reload = Box<dyn Fn() -> Result<ClientConfig> + Send + Sync>;

/// How long the client waits for an application's first bytes so they can ride in the
/// stream's Open frame (zero extra round trips for client-speaks-first protocols).
const FIRST_BYTES_WAIT: Duration = Duration::from_millis(2);

/// How long the client waits for a stream's first bytes when a policy rule matches host
/// names and the application gave only an address: a TLS client sends its ClientHello
/// (with the server name) at once, but not always within [`FIRST_BYTES_WAIT`] of the
/// SOCKS reply. Only protocols where the server speaks first pay it, once per stream.
const SNI_WAIT: Duration = Duration::from_millis(50);

pub async fn run(cfg: ClientConfig, shutdown: CancellationToken) -> Result<()> {
    run_with_reload(cfg, shutdown, None).await
}

/// [`run`], and on SIGHUP `reload` gives the configuration whose `[[rules]]` apply to
/// streams opened from then on (open streams keep theirs; nothing else is re-read).
pub async fn run_with_reload(cfg: ClientConfig, shutdown: CancellationToken, reload: Option<Reload>) -> Result<()> {
    cfg.tuning.apply_host_settings()?;
    cfg.validate()?;
    let private = cfg.private_key()?;
    let server_public = decode_key(&cfg.server_public_key, "server_public_key")?;
    let scheduler = cfg.scheduler_kind()?;
    let mut engine = cfg.tuning.engine(Role::Client);
    engine.link_hint_hold = cfg.wifi.hold();
    let queue_control = engine.queue_control();
    let mut sess = Session::new(engine, scheduler.build(), Instant::now());
    sess.set_energy_profile(cfg.energy_profile()?);
    sess.set_energy_aware_config(cfg.energy_aware_config());
    sess.set_energy_mode(cfg.energy_mode()?, Instant::now());
    let mut h = SessionHandle::new(sess, Vec::new(), None);
    h.congestion = cfg.tuning.congestion.clone();
    h.pacing = cfg.tuning.pacing;
    h.rekey = cfg.tuning.rekey();
    h.classes = std::sync::Arc::new(cfg.class_rules()?);
    *h.policy.write().expect("policy lock") = std::sync::Arc::new(cfg.policy()?);
    h.default_scheduler = scheduler;
    // The ledger opens before any path carries a byte: a bad file is a clear error or a
    // fresh start, before traffic.
    let capped = capped_paths(&cfg)?;
    let store = if capped.is_empty() {
        None
    } else {
        let (store, warning) = crate::store::Store::open(&cfg.state_file)?;
        if let Some(w) = warning {
            tracing::error!("{w}");
        }
        Some(store)
    };
    let mut token = [0u8; 16];
    rand::Rng::fill(&mut rand::thread_rng(), &mut token);

    for w in cfg.warnings() {
        warn!("{w}");
    }
    let placement = std::sync::Arc::new(placement::Placement::default());
    let p = placement.clone();
    h.on_server_gone = Some(std::sync::Arc::new(move || p.forget()));
    let keys = dial::Keys {
        private,
        server_public,
        token,
        placement,
    };
    if cfg.tun.as_ref().is_some_and(|t| t.routes.is_some()) {
        // The TUN's routing takes the host's traffic once installed: the path sockets
        // carry the mark that keeps them on their links from their first dial.
        crate::tun::routes::mark_path_sockets();
    }
    path_tasks::start(&cfg, &h, keys, shutdown.clone()).await?;
    let mut ledger = None;
    if let Some(store) = store {
        // Fixed paths have their slots now; find each capped entry's.
        let names: Vec<String> = h.with(|sh| sh.paths.iter().map(|p| p.name.clone()).collect());
        let slots: Vec<_> = capped
            .into_iter()
            .filter_map(|(name, cap, at, tier)| {
                let slot = names.iter().position(|n| *n == name)?;
                Some((slot, name, cap, at, tier))
            })
            .collect();
        caps::start(&h, &store, &slots)?;
        let tiers = slots.iter().map(|s| (s.0, s.4)).collect();
        let every = Duration::from_millis(cfg.cap_flush_ms);
        ledger = Some(tokio::spawn(caps::run(
            h.clone(),
            store,
            tiers,
            every,
            shutdown.clone(),
        )));
    }
    if let Some(reload) = reload {
        tokio::spawn(reload_on_hangup(h.clone(), reload, shutdown.clone()));
    }
    if let Some(addr) = cfg.status_listen {
        let h = h.clone();
        let session = crate::status::snapshot::session_id(&token);
        crate::status::serve(addr, "client", cfg.status_access()?, move || {
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
        limit_app_buffers(&l, queue_control);
        info!("SOCKS5 on {addr}");
        listeners.push(tokio::spawn(accept_loop(l, h.clone(), Ingress::Socks)));
    }
    if let Some(addr) = cfg.transparent_listen {
        let l = bind(addr, "transparent_listen").await?;
        limit_app_buffers(&l, queue_control);
        info!("transparent redirect on {addr}");
        listeners.push(tokio::spawn(accept_loop(l, h.clone(), Ingress::Redirect)));
    }
    if let Some(addr) = cfg.transparent_tproxy_listen {
        let l = crate::tproxy::listen_tcp(addr)?;
        limit_app_buffers(&l, queue_control);
        info!("transparent TCP (TPROXY) on {addr}");
        listeners.push(tokio::spawn(accept_loop(l, h.clone(), Ingress::Tproxy(addr.port()))));
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
    let tun = match &cfg.tun {
        Some(t) => Some(crate::tun::start(t, h.clone(), shutdown.clone()).await?),
        None => None,
    };
    tokio::select! {
        _ = shutdown.cancelled() => info!("shutting down"),
        _ = h.closed.cancelled() => warn!("session closed"),
    }
    for l in listeners {
        l.abort();
    }
    if let Some(t) = tun {
        t.stop().await;
    }
    h.close(CloseCode::Normal).await;
    h.abort_all_streams();
    if let Some(l) = ledger {
        // Its last write.
        let _ = l.await;
    }
    Ok(())
}

/// The entries with a data cap: (name, cap, at-cap, configured tier). A cap belongs to
/// one path, so an entry with a device pattern or `auto` cannot have one.
fn capped_paths(
    cfg: &ClientConfig,
) -> Result<
    Vec<(
        String,
        crate::policy::cap::Cap,
        crate::policy::cap::AtCap,
        mpflex_engine::Tier,
    )>,
> {
    let mut out = Vec::new();
    for (i, p) in cfg.paths.iter().enumerate() {
        let Some((cap, at)) = p.cap(i)? else { continue };
        if !matches!(
            p.selector(i)?,
            crate::links::plan::Selector::Fixed | crate::links::plan::Selector::Device(_)
        ) {
            anyhow::bail!("paths[{i}].cap: a cap needs one path; name a device, not a pattern or auto");
        }
        out.push((p.display_name(i), cap, at, p.tier(i)?));
    }
    Ok(out)
}

/// On SIGHUP: new `[[rules]]` for streams opened from then on; a configuration that does
/// not load keeps the old rules, with a log line saying why.
async fn reload_on_hangup(h: SessionHandle, reload: Reload, stop: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        warn!("cannot listen for SIGHUP; rules will not reload");
        return;
    };
    loop {
        tokio::select! {
            _ = hup.recv() => {}
            _ = stop.cancelled() => return,
        }
        match reload().and_then(|c| {
            c.validate()?;
            c.policy()
        }) {
            Ok(p) => {
                info!(rules = p.len(), "SIGHUP: rules reloaded; new streams follow them");
                *h.policy.write().expect("policy lock") = std::sync::Arc::new(p);
            }
            Err(e) => warn!("SIGHUP: configuration not reloaded, the old rules stay: {e:#}"),
        }
    }
}

#[derive(Clone, Copy)]
enum Ingress {
    Socks,
    Redirect,
    /// `TPROXY`, with the listener's port.
    Tproxy(u16),
}

/// The receive buffer of application connections under queue control, bytes.
const APP_RCVBUF: usize = 128 * 1024;

/// Under queue control, application connections get a small fixed receive buffer (set on
/// the listener, so accepted connections inherit it): autotuned it grows to megabytes
/// while the session's bound on bytes ahead of the paths holds the stream back, and bytes
/// waiting there are bytes the application counts as sent. 128 KB still carries
/// gigabits over loopback. The application's own
/// send buffer is its kernel's to size.
fn limit_app_buffers(l: &TcpListener, queue_control: bool) {
    if !queue_control {
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
    let mut user = None;
    let addr = match kind {
        Ingress::Socks => {
            match tokio::time::timeout(Duration::from_secs(10), crate::socks::accept_request(&mut app))
                .await
                .context("SOCKS5 handshake timed out")??
            {
                crate::socks::Request::Connect(addr) => addr,
                crate::socks::Request::ConnectAs(addr, name) => {
                    user = Some(name);
                    addr
                }
                crate::socks::Request::UdpAssociate(hint) => return udp::associate(h, app, hint).await,
            }
        }
        Ingress::Redirect => TargetAddr::Ip(crate::redirect::original_dst(&app)?),
        Ingress::Tproxy(port) => TargetAddr::Ip(crate::tproxy::original_dst_tcp(&app, port)?),
    };
    // The application's socket is this namespace's when REDIRECT caught it in OUTPUT, or
    // when TPROXY caught a local application's packets rerouted through `lo`; a LAN
    // host's connection has no socket here and so no owner (uid, gid, cgroup unknown).
    let uses_owner = h.policy.read().expect("policy lock").uses_owner();
    let owner = match (kind, uses_owner, app.peer_addr()) {
        (Ingress::Redirect | Ingress::Tproxy(_), true, Ok(peer)) => {
            let local = crate::tproxy::canonical(peer);
            // Reads /proc: off the async workers.
            tokio::task::spawn_blocking(move || crate::owner::lookup(local, true))
                .await
                .unwrap_or_default()
        }
        _ => crate::owner::Owner::default(),
    };
    let listener = match kind {
        Ingress::Socks => "socks",
        Ingress::Redirect => "transparent",
        Ingress::Tproxy(_) => "tproxy",
    };
    let (rd, wr) = driver::AppConn::into_halves(app);
    carry(h, rd, wr, addr, listener, user.as_deref(), owner).await
}

/// Opens a stream to `addr` for an application connection from ingress `listener` and
/// carries it until both directions end. Waits briefly for the application's first bytes
/// so they ride in the stream's Open (and a TLS ClientHello's server name reaches the
/// policy).
pub(crate) async fn carry<R: driver::AppRead, W: driver::AppWrite>(
    h: SessionHandle,
    rd: R,
    wr: W,
    addr: TargetAddr,
    listener: &'static str,
    user: Option<&str>,
    owner: crate::owner::Owner,
) -> Result<()> {
    let policy = h.policy.read().expect("policy lock").clone();
    let wait = match &addr {
        TargetAddr::Ip(_) if policy.uses_hosts() => SNI_WAIT,
        _ => FIRST_BYTES_WAIT,
    };
    let mut first = vec![0u8; 16 * 1024];
    let n = match tokio::time::timeout(wait, first_read(&rd, &mut first)).await {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => 0,
    };
    first.truncate(n);
    // The first bytes go out with the stream's Open (zero extra round trips for
    // client-speaks-first protocols). With none, either the application waits for the
    // server to speak or it already closed; the uplink tells the two apart.
    let sni = if policy.uses_hosts() {
        crate::policy::sni::server_name(&first)
    } else {
        None
    };
    let facts = crate::policy::Facts {
        sni: sni.as_deref(),
        uid: owner.uid,
        gid: owner.gid,
        cgroup: owner.cgroup.as_deref(),
        listener: Some(listener),
        user,
        ..Default::default()
    };
    let (id, signals, pending) = h.open_stream_with(addr.clone(), Bytes::from(first), facts);
    debug!(stream = id, %addr, listener, "stream opened");
    run_halves(h, id, rd, wr, signals, pending).await;
    Ok(())
}

/// One read of what the application has sent (0: it closed its sending side).
async fn first_read<R: driver::AppRead>(rd: &R, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        rd.readable().await?;
        match rd.try_read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            r => return r,
        }
    }
}
