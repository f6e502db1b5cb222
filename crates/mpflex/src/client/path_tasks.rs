//! The client's paths: one task per path keeps it dialled while its interface can carry
//! it, and the link watcher ([`crate::links`]) adds paths for interfaces that appear and
//! takes a path down the moment its interface goes, loses carrier or its address.

use crate::energy::guess_kind;
use mpflex_engine::energy::LinkKind;
use std::time::Instant;

use anyhow::Result;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::{ClientConfig, ServerList, WifiConfig};
use crate::driver::SessionHandle;
use crate::links::netlink;
use crate::links::plan::{Planner, Rule, Selector, Slot, Target};
use crate::links::table::{Binding, LinkTable};
use crate::links::wifi;
use crate::status::snapshot::WaitingView;

use super::dial::{dial, Dialed, Keys, Watch};
use super::link_wait::LinkWait;
use super::path_phase::{Ask, Attempt, Phase, START_GRACE};

/// Starts the paths of `cfg`: the fixed ones now, the others as their interfaces come.
/// Fails only if interfaces must be watched and netlink cannot be opened.
pub async fn start(cfg: &ClientConfig, h: &SessionHandle, keys: Keys, shutdown: CancellationToken) -> Result<()> {
    let mut rules = Vec::new();
    for (i, p) in cfg.paths.iter().enumerate() {
        let mut server = Vec::new();
        for a in &p.server.0 {
            server.extend(netlink::server_ips(a).await);
        }
        rules.push(Rule {
            name: p.display_name(i),
            selector: p.selector(i)?,
            exclude: p.exclude_patterns(),
            source: p.source,
            server,
        });
    }
    let mut planner = Planner::new(rules, mpflex_engine::MAX_PATHS);
    let tiers: Vec<mpflex_engine::Tier> = cfg
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| p.tier(i))
        .collect::<Result<_>>()?;
    let servers: Vec<ServerList> = cfg.paths.iter().map(|p| p.server.clone()).collect();
    let kinds: Vec<Option<LinkKind>> = cfg
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| p.kind.is_some().then(|| p.kind(i, None)).transpose())
        .collect::<Result<_>>()?;
    let mut table_rx = if planner.watches() {
        let rx = netlink::watch(shutdown.clone()).await?;
        let table = rx.borrow().clone();
        planner.update(&table);
        Some((rx, table))
    } else {
        None
    };
    let mut m = Manager {
        h: h.clone(),
        keys,
        tiers,
        kinds,
        servers,
        wifi: cfg.wifi.signal_hint.then(|| cfg.wifi.clone()),
        paths: Vec::new(),
        shutdown: shutdown.clone(),
    };
    let empty = LinkTable::default();
    let table = table_rx.as_ref().map_or(&empty, |(_, t)| t);
    m.apply(&planner, &(0..planner.slots().len()).collect::<Vec<_>>(), &[]);
    m.report_waiting(&planner, table);
    if let Some((mut rx, _)) = table_rx.take() {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    _ = shutdown.cancelled() => return,
                }
                let table = rx.borrow_and_update().clone();
                let before = planner.slots().to_vec();
                let changed = planner.update(&table);
                m.apply(&planner, &changed, &before);
                m.report_waiting(&planner, &table);
            }
        });
    }
    Ok(())
}

/// Turns the planner's answers into path tasks, status and log lines.
struct Manager {
    h: SessionHandle,
    keys: Keys,
    /// Per `[[paths]]` entry.
    tiers: Vec<mpflex_engine::Tier>,
    /// Per `[[paths]]` entry: its `kind`, if set (else guessed from each interface's name).
    kinds: Vec<Option<LinkKind>>,
    servers: Vec<ServerList>,
    /// `[wifi]`, if the signal of WiFi paths is read ([`wifi`]).
    wifi: Option<WifiConfig>,
    /// Per path: what its task dials.
    paths: Vec<watch::Sender<Slot>>,
    shutdown: CancellationToken,
}

impl Manager {
    /// Paths `changed` are new or have a new target; `before` is what they were.
    fn apply(&mut self, planner: &Planner, changed: &[usize], before: &[Slot]) {
        for &i in changed {
            let slot = planner.slots()[i].clone();
            let link = match &slot.target {
                Target::Wait(why) => Some(*why),
                Target::Dial(_) => None,
            };
            let kind =
                self.kinds[slot.rule].unwrap_or_else(|| slot.device.as_deref().map_or(LinkKind::Wired, guess_kind));
            self.h
                .describe_path(i, &slot.name, slot.device.as_deref(), self.tiers[slot.rule], link);
            self.h.set_path_kind(i, kind);
            log_change(before.get(i), &slot);
            if let Some(old) = before.get(i) {
                // The old connection's link, address or interface is gone: take the path
                // down now, so what it held is sent again elsewhere without waiting for a
                // timeout; its task re-dials if there is something to dial.
                if matches!(old.target, Target::Dial(_)) {
                    self.h.drop_path(i);
                }
            }
            if i < self.paths.len() {
                self.paths[i].send_replace(slot);
            } else {
                let (tx, rx) = watch::channel(slot.clone());
                self.paths.push(tx);
                if let Some(w) = &self.wifi {
                    tokio::spawn(wifi::watch_path(
                        self.h.clone(),
                        i,
                        rx.clone(),
                        w.clone(),
                        self.shutdown.clone(),
                    ));
                }
                tokio::spawn(path_loop(
                    self.h.clone(),
                    i,
                    self.servers[slot.rule].clone(),
                    rx,
                    self.keys.clone(),
                    self.shutdown.clone(),
                ));
            }
        }
    }

    /// Puts the entries without a path in the status, and logs each one that starts
    /// waiting (at start, every one).
    fn report_waiting(&self, planner: &Planner, table: &LinkTable) {
        let views: Vec<WaitingView> = planner
            .unmatched(table)
            .into_iter()
            .map(|u| {
                let r = &planner.rules()[u.rule];
                let matches = match &r.selector {
                    Selector::Pattern(p) => p.to_string(),
                    _ => "auto".to_string(),
                };
                WaitingView {
                    name: r.name.clone(),
                    matches,
                    state: u.state,
                }
            })
            .collect();
        let old = self.h.with(|sh| std::mem::replace(&mut sh.waiting, views.clone()));
        for w in views.iter().filter(|w| !old.contains(w)) {
            if w.matches == "auto" {
                warn!(
                    "paths entry {:?} (auto = true): no usable interface now ({}): one must be up, with \
                     carrier, a global address and a route to the server, and not loopback or virtual \
                     (name those with device = \"pattern\"); waiting for one",
                    w.name, w.state
                );
            } else {
                warn!(
                    "paths entry {:?} (device = {:?}): {}; waiting for a matching interface",
                    w.name, w.matches, w.state
                );
            }
        }
    }
}

fn log_change(before: Option<&Slot>, now: &Slot) {
    let dev = now.device.as_deref().unwrap_or("-");
    match (before.map(|b| &b.target), &now.target) {
        (None | Some(Target::Wait(_)), Target::Dial(b)) if now.device.is_some() => {
            info!(path = %now.name, "{dev} is usable ({}); dialling", src(b))
        }
        (Some(Target::Dial(_)), Target::Dial(b)) => {
            info!(path = %now.name, "the address of {dev} changed to {}; re-dialling", src(b))
        }
        (Some(Target::Dial(_)), Target::Wait(why)) => warn!(
            path = %now.name,
            "{dev}: {}; path down, its data goes on the other paths",
            why.name()
        ),
        (None, Target::Wait(why)) => warn!(
            path = %now.name,
            "{dev} is not usable yet ({}); the path starts when it is",
            why.name()
        ),
        _ => {}
    }
}

fn src(b: &Binding) -> String {
    b.source.map_or("-".to_string(), |s| s.to_string())
}

/// Keeps path `i` connected while its target says dial: dial, handshake, join the
/// session, run; re-dial with backoff. A dial lasts as long as the kernel retransmits its
/// SYN, paced at first ([`super::syn_pace`]; the path waits for its link meanwhile,
/// [`LinkWait`]), while the other paths carry
/// the session. A new target drops the connection at once. While
/// the engine holds the path suspect, a probe connection dialled beside the silent one
/// ([`probe_loop`]) takes over as soon as it gets through. The phases and their
/// transitions are [`Phase`]'s; this waits for what happens and feeds it in.
async fn path_loop(
    h: SessionHandle,
    i: usize,
    server: ServerList,
    mut target: watch::Receiver<Slot>,
    keys: Keys,
    shutdown: CancellationToken,
) {
    let (probed_tx, mut probed) = tokio::sync::mpsc::channel::<Dialed>(1);
    tokio::spawn(probe_loop(
        h.clone(),
        i,
        server.clone(),
        target.clone(),
        keys.clone(),
        probed_tx,
        shutdown.clone(),
    ));
    let started = Instant::now();
    let grace_end = started + START_GRACE;
    let mut held = h.held_signal(i);
    let mut joined_once = false;
    let mut phase = Phase::aim(&read(&mut target), 0, None, started);
    let wait = std::sync::Mutex::new(LinkWait::default());
    loop {
        if matches!(phase, Phase::Dialing { .. }) {
            let early = in_start_grace(&h, i, joined_once, grace_end);
            phase = phase.hold(*held.borrow_and_update() || early);
        }
        h.set_path_dial(i, phase.dial_state());
        let name = target.borrow().name.clone();
        phase = match phase {
            Phase::Waiting => tokio::select! {
                _ = changed(&mut target) => asked(&h, i, Phase::retarget(&read(&mut target), Instant::now())),
                _ = shutdown.cancelled() => return,
            },
            Phase::Dialing { bind, at } => {
                let watch = Watch {
                    path: &name,
                    wait: &wait,
                };
                tokio::select! {
                    r = dial(&h, i, &server, &bind, &keys, None, Some(&watch)) => match r {
                        Ok(d) => at.dialled(d),
                        Err(e) => failed(at, e, &target),
                    },
                    Some(d) = probed.recv() => took_over(d, &mut target),
                    _ = changed(&mut target) => asked(&h, i, at.retarget(&read(&mut target), Instant::now())),
                    _ = shutdown.cancelled() => return,
                }
            }
            Phase::Joined { conn, at } => {
                joined_once = true;
                info!(path = %name, server = %conn.server, "path up");
                tokio::select! {
                    r = h.run_path(i, conn.stream, conn.transport, conn.joined) => ended(at, r, &target),
                    Some(d) = probed.recv() => took_over(d, &mut target),
                    _ = changed(&mut target) => asked(&h, i, at.retarget(&read(&mut target), Instant::now())),
                    _ = shutdown.cancelled() => return,
                }
            }
            Phase::Held { failures } => {
                debug!(path = %target.borrow().name, "held back by the energy-aware mode; not dialled");
                let early = in_start_grace(&h, i, joined_once, grace_end);
                tokio::select! {
                    _ = flipped(&mut held) => Phase::released(&read(&mut target), failures, Instant::now()),
                    _ = tokio::time::sleep_until(grace_end.into()), if early => {
                        Phase::released(&read(&mut target), failures, Instant::now())
                    }
                    _ = changed(&mut target) => asked(&h, i, Phase::retarget(&read(&mut target), Instant::now())),
                    _ = shutdown.cancelled() => return,
                }
            }
            Phase::Backoff { until, failures } => {
                if shutdown.is_cancelled() {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(until.into()) => Phase::pause_over(&read(&mut target), failures, Instant::now()),
                    Some(d) = probed.recv() => took_over(d, &mut target),
                    _ = changed(&mut target) => asked(&h, i, Phase::retarget(&read(&mut target), Instant::now())),
                    _ = shutdown.cancelled() => return,
                }
            }
        };
    }
}

/// The path's target, read afresh (and marked seen).
fn read(target: &mut watch::Receiver<Slot>) -> Target {
    target.borrow_and_update().target.clone()
}

/// Does what a transition asks of path `i`, and goes where it says.
fn asked(h: &SessionHandle, i: usize, (next, ask): (Phase<Dialed>, Ask)) -> Phase<Dialed> {
    match ask {
        Ask::DropPath => h.drop_path(i),
        Ask::Nothing => {}
    }
    next
}

/// A probe's connection got through: the path continues on it (`run_path` of the new one
/// cancels the old one's tasks).
fn took_over(d: Dialed, target: &mut watch::Receiver<Slot>) -> Phase<Dialed> {
    info!(path = %target.borrow().name, "a probe got through; the path continues on it");
    Phase::probe_through(&read(target), d, Instant::now())
}

/// The dial `at` failed with `e`: said, then the backed-off pause before the next one.
fn failed(at: Attempt, e: anyhow::Error, target: &watch::Receiver<Slot>) -> Phase<Dialed> {
    let now = Instant::now();
    let next = at.failed(now, rand::random::<f64>());
    // Given up for a new target (the link went): said when it was taken.
    if let (Phase::Backoff { until, .. }, false) = (&next, target.has_changed().unwrap_or(false)) {
        warn!(
            path = %target.borrow().name,
            "cannot join: {e:#}; dialling again in {:.1?}",
            until.saturating_duration_since(now)
        );
    }
    next
}

/// The connection of attempt `at` ended with `res`: said, then the pause before the next
/// attempt.
fn ended(at: Attempt, res: Result<()>, target: &watch::Receiver<Slot>) -> Phase<Dialed> {
    match res {
        Ok(()) => {}
        // Taken down for a new target (the link went): said when it was taken.
        Err(_) if target.has_changed().unwrap_or(false) => {}
        Err(e) => warn!(path = %target.borrow().name, "path down: {e:#}"),
    }
    at.ended(Instant::now())
}

/// Probes path `i` while the engine holds it suspect: a fresh connection every probe
/// interval over the path's current link (each attempt sends its own SYN at once, where
/// the silent connection's kernel socket waits out its backed-off retransmission timer),
/// and the first that gets through goes to [`path_loop`]. MPTCP-MA releases a suspended
/// subflow as soon as the link works; this is the end-to-end way to learn that it does.
async fn probe_loop(
    h: SessionHandle,
    i: usize,
    server: ServerList,
    target: watch::Receiver<Slot>,
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
            let Target::Dial(bind) = target.borrow().target.clone() else {
                break;
            };
            let started = tokio::time::Instant::now();
            let attempt = tokio::select! {
                r = dial(&h, i, &server, &bind, &keys, Some(every), None) => r,
                _ = shutdown.cancelled() => return,
            };
            match attempt {
                // The server moved the path onto this connection when it joined (and let
                // the old one go): it is the path's connection now, even if the old one
                // spoke again meanwhile. Dropping it would leave the path with none.
                Ok(d) => {
                    let _ = out.send(d).await;
                    break;
                }
                Err(e) => debug!(path = i, "probe failed: {e:#}"),
            }
            // A probe that failed at once (no route yet) waits out its interval.
            tokio::select! {
                _ = tokio::time::sleep_until(started + every) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }
}

/// Whether path `i`, never joined yet, still lets another path join first
/// ([`START_GRACE`], [`SessionHandle::another_may_carry`]).
fn in_start_grace(h: &SessionHandle, i: usize, joined_once: bool, grace_end: Instant) -> bool {
    !joined_once && Instant::now() < grace_end && h.another_may_carry(i)
}

/// Waits for the held-back signal to change (for ever once its sender is gone).
async fn flipped(held: &mut watch::Receiver<bool>) {
    if held.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Waits for the path's next target. A path that names no interface is never given
/// another (nothing watches the links for it): then this waits for ever.
async fn changed(target: &mut watch::Receiver<Slot>) {
    if target.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
