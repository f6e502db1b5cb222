//! The I/O driver: runs a sans-IO [`Session`] over real sockets.
//!
//! One session is shared by small tokio tasks under a mutex that is never held across an
//! `.await`: per path a reader (decrypt, decode, feed the engine) and a writer (late
//! binding: pull frames only while the kernel socket holds little unsent data), per
//! application stream an uplink and a downlink task, and one timer task. The engine's
//! events are turned into `Notify` wake-ups whenever the lock is released.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpflex_engine::{FlowId, SchedulerKind, Session, StreamId, Tier};
use mpflex_wire::{CloseCode, FlowCloseCode, ResetCode, TargetAddr};
use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::classes::ClassRules;
use crate::links::table::Unusable;
use crate::status::snapshot::{DialState, PathView, SessionSnapshot, StreamView, WaitingView};

pub(crate) mod bufpool;
mod events;
mod path;
mod stream;

pub use stream::{run_halves, run_stream, AppConn, AppRead, AppWrite};

/// Wake-ups for the two tasks of a stream, and where it goes.
#[derive(Default)]
pub struct StreamSignals {
    /// Data, a fin or a reset is waiting for the application.
    pub readable: Notify,
    /// Flow-control credit arrived (or the stream was reset).
    pub writable: Notify,
    /// The stream's destination (for the status output).
    pub target: Option<TargetAddr>,
    /// (client) The policy rule it matched and the paths that allows, for the status.
    pub rule: Option<String>,
    pub allowed: Option<String>,
    /// The scheduler the peer was asked to run for its direction, or (server) was asked
    /// for by the client and refused.
    pub peer_scheduler: Option<SchedulerKind>,
    /// (client) The ingress the application came in by (a `listeners` name).
    pub listener: Option<&'static str>,
}

impl StreamSignals {
    fn to(target: TargetAddr) -> Self {
        StreamSignals {
            target: Some(target),
            ..Default::default()
        }
    }
}

pub struct PathSlot {
    pub name: String,
    pub wake: Arc<Notify>,
    /// Cancels the tasks of the path's current connection.
    pub kill: CancellationToken,
    /// Counts connections of this path, so a replaced one does not take the path down.
    pub generation: u64,
    /// Signalled when the engine asks for the path to be probed ([`mpflex_engine::Event::ProbePath`]).
    pub probe: Arc<Notify>,
    /// (client) The interface the path is bound to, if any.
    pub device: Option<String>,
    /// (client) Why the path's interface cannot carry it now; `None` while it can (or the
    /// path names no interface).
    pub link: Option<Unusable>,
    /// (client) Where its dial stands while it is not joined ([`DialState`]).
    pub dial: Option<DialState>,
    /// (client) Its configured tier (a data cap may lower the engine's).
    pub tier: Tier,
    /// (client) The WiFi signal last read on its interface, dBm ([`crate::links::wifi`]);
    /// `None` unless the path runs over WiFi.
    pub wifi_signal: Option<i32>,
    /// Record key switches on its connections: (sent, received) (docs/security.md).
    pub rekeys: (u64, u64),
    /// (client) Whether the energy-aware mode holds the path back while another carries
    /// ([`mpflex_engine::Session::path_held_back`]), kept current by every dispatch.
    pub held: watch::Sender<bool>,
}

impl PathSlot {
    fn new(name: String) -> Self {
        PathSlot {
            name,
            wake: Arc::new(Notify::new()),
            kill: CancellationToken::new(),
            generation: 0,
            probe: Arc::new(Notify::new()),
            device: None,
            link: None,
            dial: None,
            tier: Tier::Primary,
            wifi_signal: None,
            rekeys: (0, 0),
            held: watch::channel(false).0,
        }
    }
}

/// What the engine hands a datagram flow's owner (the server's flow socket, the client's
/// SOCKS5 association).
#[derive(Debug)]
pub enum FlowMsg {
    Datagram(Bytes),
    /// The peer closed the flow (with its reason).
    Closed(FlowCloseCode),
}

/// Where a flow's datagrams go, and where the flow goes (for the log).
pub struct FlowSink {
    pub tx: mpsc::Sender<(FlowId, FlowMsg)>,
    pub target: TargetAddr,
}

/// Datagrams the ingress and the driver dropped before or after the engine, each with a
/// debug log line (a flood must not flood the log too).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UdpDrops {
    /// SOCKS5 UDP requests with FRAG ≠ 0 (fragmentation is optional in RFC 1928 §7 and
    /// not implemented: such datagrams are dropped, as the RFC allows).
    pub dropped_frag: u64,
    /// SOCKS5 UDP requests too short or with a bad address.
    pub dropped_malformed: u64,
    /// Datagrams larger than a UDP payload can be ([`mpflex_wire::MAX_DATAGRAM`]).
    pub dropped_oversize: u64,
    /// Datagrams from an address other than the association's client (RFC 1928 §7).
    pub dropped_foreign: u64,
    /// Datagrams to a destination the server refused this association before.
    pub dropped_refused: u64,
    /// Datagrams from the peer whose flow's owner was too far behind to take them.
    pub dropped_backlog: u64,
    /// Datagrams to a new destination while the session had `max_flows` flows open.
    pub dropped_flow_limit: u64,
    /// (server) Zero-length datagrams from the peer: each would cost a packet and carry
    /// nothing.
    pub dropped_empty: u64,
    /// (server) Datagrams from the peer beyond `limits.max_datagrams_per_second` of their flow.
    pub dropped_rate: u64,
}

pub struct Shared {
    pub sess: Session,
    pub streams: HashMap<StreamId, Arc<StreamSignals>>,
    /// The owners of the open datagram flows.
    pub flows: HashMap<FlowId, FlowSink>,
    pub udp: UdpDrops,
    pub paths: Vec<PathSlot>,
    /// (client) `[[paths]]` patterns and `auto` entries that have no path yet.
    pub waiting: Vec<WaitingView>,
    /// (client) The data caps of capped paths ([`crate::client::caps`]).
    pub caps: Vec<crate::client::caps::CapSlot>,
    /// (client) Streams opened per policy rule (`-`: none matched).
    pub rule_hits: std::collections::BTreeMap<String, u64>,
    /// Streams the server refused (its `[acl]`): the application saw a reset.
    pub streams_refused: u64,
    /// (client) The TUN ingress's counters, read when a snapshot is taken.
    pub tun: Option<Arc<dyn Fn() -> crate::tun::TunCounters + Send + Sync>>,
    timer_deadline: Option<Instant>,
}

/// A datagram flow the peer opened (server side): give it a socket.
pub struct FlowOpened {
    pub flow: FlowId,
    pub addr: TargetAddr,
    pub rx: mpsc::Receiver<(FlowId, FlowMsg)>,
}

/// Datagrams from the peer that may wait for one flow's owner; more are dropped
/// ([`UdpDrops::dropped_backlog`]): a flow whose socket cannot keep up must not hold
/// the session's memory.
pub const FLOW_BACKLOG: usize = 512;

/// A stream the peer opened (server side): connect it.
pub struct Opened {
    pub stream: StreamId,
    pub addr: TargetAddr,
    pub signals: Arc<StreamSignals>,
}

#[derive(Clone)]
pub struct SessionHandle {
    inner: Arc<Mutex<Shared>>,
    timer: Arc<Notify>,
    /// Signalled when a path connection joins or ends ([`SessionHandle::pathless_for`]).
    pub paths_changed: Arc<Notify>,
    opens: Option<mpsc::UnboundedSender<Opened>>,
    /// (server) Where flows the peer opens go.
    pub flow_opens: Option<mpsc::UnboundedSender<FlowOpened>>,
    /// Fatal session error or shutdown.
    pub closed: CancellationToken,
    /// Congestion control for this session's path connections.
    pub congestion: Option<String>,
    /// Whether path connections use the kernel's TCP pacing.
    pub pacing: bool,
    /// When path connections move to their next record key (`tuning.rekey_after_*`).
    pub rekey: crate::crypto::Rekey,
    /// Class overrides (`[[classes]]`), applied as streams open.
    pub classes: Arc<ClassRules>,
    /// (client) The policy rules, swapped whole on a reload.
    pub policy: Arc<std::sync::RwLock<Arc<crate::policy::Policy>>>,
    /// (client) The scheduler streams no rule gives one ask the server for.
    pub default_scheduler: SchedulerKind,
    /// (server) Schedulers a client may ask for; `None`: any.
    pub allowed_schedulers: Option<Arc<Vec<SchedulerKind>>>,
    /// (client) Called when a server of a pool closes the session because it is going
    /// away ([`CloseCode::Draining`]): the paths are dropped and the session moves to
    /// another server instead of ending.
    pub on_server_gone: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl SessionHandle {
    pub fn new(sess: Session, path_names: Vec<String>, opens: Option<mpsc::UnboundedSender<Opened>>) -> Self {
        let paths = path_names.into_iter().map(PathSlot::new).collect();
        let h = SessionHandle {
            inner: Arc::new(Mutex::new(Shared {
                sess,
                streams: HashMap::new(),
                flows: HashMap::new(),
                udp: UdpDrops::default(),
                paths,
                waiting: Vec::new(),
                caps: Vec::new(),
                rule_hits: Default::default(),
                streams_refused: 0,
                tun: None,
                timer_deadline: None,
            })),
            timer: Arc::new(Notify::new()),
            paths_changed: Arc::new(Notify::new()),
            opens,
            flow_opens: None,
            closed: CancellationToken::new(),
            congestion: None,
            pacing: true,
            rekey: Default::default(),
            classes: Arc::new(ClassRules::default()),
            policy: Arc::default(),
            default_scheduler: SchedulerKind::MinRtt,
            allowed_schedulers: None,
            on_server_gone: None,
        };
        tokio::spawn(timer_task(h.clone()));
        h
    }

    /// Runs `f` under the session lock, then turns the engine's events into wake-ups.
    pub fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        let mut sh = self.inner.lock().expect("session lock poisoned");
        let r = f(&mut sh);
        self.dispatch(&mut sh);
        r
    }

    /// Opens a stream (client side) with no policy facts beyond its destination; see
    /// [`SessionHandle::open_stream_with`].
    pub fn open_stream(&self, addr: TargetAddr, initial: Bytes) -> (StreamId, Arc<StreamSignals>, Bytes) {
        self.open_stream_with(addr, initial, crate::policy::Facts::default())
    }

    /// Opens a stream (client side): pins its class if a `[[classes]]` entry or its rule
    /// says, applies its policy rule (paths, scheduler both ways, energy mode; `facts`
    /// beyond the destination come from the ingress), and registers its signals. Returns
    /// the part of `initial` flow control did not let through yet; hand it to
    /// [`run_stream`].
    pub fn open_stream_with(
        &self,
        addr: TargetAddr,
        initial: Bytes,
        facts: crate::policy::Facts<'_>,
    ) -> (StreamId, Arc<StreamSignals>, Bytes) {
        let configured = self.classes.class_of(&addr);
        let policy = self.policy.read().expect("policy lock").clone();
        let decision = policy.decide(&crate::policy::Facts {
            dest: crate::classes::Destination::of(&addr),
            class: configured,
            ..facts
        });
        let class = decision.class.or(configured);
        let scheduler = decision.scheduler.unwrap_or(self.default_scheduler);
        let mut signals = StreamSignals::to(addr.clone());
        signals.rule = decision.rule.clone();
        signals.allowed = Some(decision.paths_text());
        signals.peer_scheduler = Some(scheduler);
        signals.listener = crate::policy::LISTENERS
            .iter()
            .copied()
            .find(|l| Some(*l) == facts.listener);
        let signals = Arc::new(signals);
        let (id, rest) = self.with(|sh| {
            sh.sess.set_clock(Instant::now());
            let id = sh.sess.open_stream(addr);
            if class.is_some() {
                sh.sess.set_stream_class(id, class);
            }
            let paths: Vec<(String, crate::config::Tier)> = sh.paths.iter().map(|p| (p.name.clone(), p.tier)).collect();
            sh.sess.set_stream_paths(id, decision.mask(&paths));
            // Runs it for the uploads and asks the server to for the downloads.
            sh.sess.set_stream_scheduler(id, Some(scheduler));
            sh.sess.set_stream_energy(id, decision.energy.aware());
            *sh.rule_hits
                .entry(decision.rule.clone().unwrap_or_else(|| "-".into()))
                .or_default() += 1;
            let taken = sh.sess.stream_send(id, initial.clone());
            sh.streams.insert(id, signals.clone());
            (id, initial.slice(taken..))
        });
        (id, signals, rest)
    }

    /// (client) Opens a datagram flow towards `addr`; the peer's datagrams and its close
    /// go to `sink` tagged with the flow. `None` at the session's flow limit (counted
    /// here, with a log line).
    pub fn open_flow(&self, addr: TargetAddr, sink: mpsc::Sender<(FlowId, FlowMsg)>) -> Option<FlowId> {
        self.with(|sh| {
            sh.sess.set_clock(Instant::now());
            let Some(id) = sh.sess.open_flow(addr.clone()) else {
                sh.udp.dropped_flow_limit += 1;
                debug!(%addr, "datagram dropped: the session has as many flows as it may");
                return None;
            };
            if let Some(class) = self.classes.datagram_class_of(&addr) {
                sh.sess.set_flow_class(id, Some(class));
            }
            sh.flows.insert(id, FlowSink { tx: sink, target: addr });
            Some(id)
        })
    }

    /// Sends a datagram on `flow`. False if the flow is gone (the peer closed it).
    pub fn send_datagram(&self, flow: FlowId, data: Bytes) -> bool {
        self.with(|sh| sh.sess.send_datagram(flow, data).is_some())
    }

    /// Closes `flow` on this side and tells the peer (`code` from
    /// [`FlowCloseCode`]).
    pub fn close_flow(&self, flow: FlowId, code: FlowCloseCode) {
        self.with(|sh| {
            sh.flows.remove(&flow);
            sh.sess.close_flow(flow, code);
        })
    }

    /// Counts a datagram the ingress dropped.
    pub fn count_udp(&self, f: impl FnOnce(&mut UdpDrops)) {
        self.with(|sh| f(&mut sh.udp))
    }

    pub fn path_name(&self, p: usize) -> String {
        self.with(|sh| sh.paths[p].name.clone())
    }

    /// Adds a path slot on the server, where paths appear as clients dial them.
    pub fn ensure_path_slot(&self, p: usize, name: &str) {
        self.with(|sh| {
            while sh.paths.len() <= p {
                let i = sh.paths.len();
                sh.paths.push(PathSlot::new(format!("path{i}")));
            }
            sh.paths[p].name = name.to_string();
        })
    }

    /// (client) Names path `p` and its interface (adding the slot if new), sets its tier,
    /// and records why its interface cannot carry it now (`None`: it can).
    pub fn describe_path(&self, p: usize, name: &str, device: Option<&str>, tier: Tier, link: Option<Unusable>) {
        self.with(|sh| {
            while sh.paths.len() <= p {
                let i = sh.paths.len();
                sh.paths.push(PathSlot::new(format!("path{i}")));
            }
            let slot = &mut sh.paths[p];
            slot.name = name.to_string();
            slot.device = device.map(String::from);
            slot.link = link;
            slot.tier = tier;
            // A path at its data cap keeps its at-cap tier until the period ends.
            let tier = match sh.caps.iter().find(|c| c.slot == p && c.capped) {
                Some(c) => c.at_cap.tier(),
                None => tier,
            };
            sh.sess.set_path_tier(p, tier, Instant::now());
        })
    }

    /// (client) Where path `p`'s dial stands (none once it joined), for the status.
    pub fn set_path_dial(&self, p: usize, dial: Option<DialState>) {
        self.with(|sh| {
            if let Some(slot) = sh.paths.get_mut(p) {
                slot.dial = dial;
            }
        })
    }

    /// (client) What link path `p` runs over (the energy model, the energy-aware mode).
    pub fn set_path_kind(&self, p: usize, kind: mpflex_engine::energy::LinkKind) {
        self.with(|sh| sh.sess.set_path_kind(p, kind, Instant::now()))
    }

    /// (client) Turns the session's energy-aware mode on or off: the configuration's
    /// `energy_mode`, or a policy rule's action.
    pub fn set_energy_mode(&self, mode: mpflex_engine::EnergyMode) {
        self.with(|sh| sh.sess.set_energy_mode(mode, Instant::now()))
    }

    /// (client) What the link under path `p` says: weak (a WiFi signal fading,
    /// [`crate::links::wifi`]) or fine again (`None`); see [`Session::set_link_hint`].
    pub fn set_link_hint(&self, p: usize, hint: Option<mpflex_engine::LinkHint>) {
        self.with(|sh| sh.sess.set_link_hint(p, hint, Instant::now()))
    }

    /// (client) The WiFi signal just read on path `p`'s interface, for the status.
    pub fn set_wifi_signal(&self, p: usize, dbm: Option<i32>) {
        self.with(|sh| {
            if let Some(slot) = sh.paths.get_mut(p) {
                slot.wifi_signal = dbm;
            }
        })
    }

    /// (client) Takes path `p` down now: its connection is closed and whatever only it
    /// held is sent again on the others ([`Session::path_down`]). For a link the kernel
    /// reports gone, where waiting for a timeout would only stall the transfer.
    pub fn drop_path(&self, p: usize) {
        self.with(|sh| {
            sh.paths[p].kill.cancel();
            sh.sess.path_down(p);
        })
    }

    /// (client) The `[[paths]]` entries that have no path yet, for the status.
    pub fn set_waiting(&self, waiting: Vec<WaitingView>) {
        self.with(|sh| sh.waiting = waiting)
    }

    /// Queues a session Close on every path and gives writers a moment to send it.
    pub async fn close(&self, code: CloseCode) {
        self.with(|sh| sh.sess.close(code));
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.closed.cancel();
    }

    /// Resets every stream locally (the session is going away).
    pub fn abort_all_streams(&self) {
        self.with(|sh| {
            for id in sh.sess.stream_ids() {
                sh.sess.stream_reset(id, ResetCode::SessionGone);
            }
            for (_, s) in sh.streams.drain() {
                s.readable.notify_one();
                s.writable.notify_one();
            }
        });
    }

    /// Pins a stream's class if no rule did yet and one matches `d` (the server, once a
    /// name has resolved).
    pub fn classify_late(&self, id: StreamId, d: &crate::classes::Destination<'_>) {
        let Some(class) = self.classes.class_for(d) else { return };
        self.with(|sh| {
            if sh.sess.stream_class(id).is_some_and(|(_, pinned)| !pinned) {
                sh.sess.set_stream_class(id, Some(class));
            }
        });
    }

    /// Whether any path is up.
    pub fn any_path_up(&self) -> bool {
        self.with(|sh| (0..sh.sess.num_paths()).any(|p| sh.sess.path_status(p) == mpflex_engine::PathStatus::Up))
    }

    /// Waits until no path of the session has been up for `linger`: true then, false if
    /// the session closed first. Woken by its paths joining and ending, not by a clock: a
    /// server holds thousands of sessions, and looking at each twice a second cost more
    /// than their keepalives.
    pub async fn pathless_for(&self, linger: Duration) -> bool {
        loop {
            // A change signalled between a look and the wait is kept by the `Notify`.
            if self.any_path_up() {
                tokio::select! {
                    _ = self.paths_changed.notified() => continue,
                    _ = self.closed.cancelled() => return false,
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(linger) => {
                    if !self.any_path_up() {
                        return true;
                    }
                }
                _ = self.paths_changed.notified() => {}
                _ = self.closed.cancelled() => return false,
            }
        }
    }

    /// The signal the engine raises when path `p` should be probed.
    pub fn probe_signal(&self, p: usize) -> Arc<Notify> {
        self.with(|sh| sh.paths[p].probe.clone())
    }

    /// (client) Follows whether path `p` is held back ([`PathSlot::held`]).
    pub fn held_signal(&self, p: usize) -> watch::Receiver<bool> {
        self.with(|sh| sh.paths[p].held.subscribe())
    }

    /// (client) Whether path `p`, which the energy-aware mode holds back, should let
    /// another path join first at the start: one that the mode does not hold back has a
    /// usable link and has not been connected yet (it may be dialling now). Once one
    /// was, [`PathSlot::held`] says all.
    pub fn another_may_carry(&self, p: usize) -> bool {
        self.with(|sh| {
            sh.sess.energy_holds(p)
                && (0..sh.paths.len()).any(|q| {
                    let o = &sh.paths[q];
                    q != p && o.link.is_none() && o.generation == 0 && !sh.sess.path_energy_standby(q)
                })
        })
    }

    /// Whether path `p` is suspect now, and how long a probe of it may take.
    pub fn probe_due(&self, p: usize) -> Option<Duration> {
        self.with(|sh| sh.sess.path_suspect(p).then(|| sh.sess.path_probe_every(p)))
    }

    /// What the status endpoint shows of this session now.
    pub fn snapshot(&self) -> SessionSnapshot {
        let now = Instant::now();
        self.with(|sh| {
            let sess = &sh.sess;
            let energy = sess.energy(now);
            let paths = (0..sh.paths.len())
                .map(|p| {
                    let counters = sess.path_counters(p);
                    PathView {
                        id: p,
                        name: sh.paths[p].name.clone(),
                        state: sess.path_state(p),
                        backup: counters.is_some_and(|(_, s)| s.backup),
                        tier: sess.path_tier(p),
                        counters: counters.map(|(c, _)| c.clone()),
                        snap: counters.map(|(_, s)| s.clone()).unwrap_or_default(),
                        owd_us: sess.path_owd(p),
                        queue_delay: sess.path_queue_delay(p, now),
                        device: sh.paths[p].device.clone(),
                        link: sh.paths[p].link,
                        dial: sh.paths[p].dial,
                        kind: sess.path_kind(p).name(),
                        energy: energy.get(p).copied().unwrap_or_default(),
                        energy_standby: sess.path_energy_standby(p),
                        held: *sh.paths[p].held.borrow(),
                        cap: sh.caps.iter().find(|c| c.slot == p).map(|c| c.view(sess)),
                        wifi_signal_dbm: sh.paths[p].wifi_signal,
                        rekeys: sh.paths[p].rekeys,
                        link_weak: sess.path_hinted_weak(p),
                    }
                })
                .collect();
            let mut ids = sess.stream_ids();
            ids.sort_unstable();
            let stream_list = ids
                .into_iter()
                .filter_map(|id| {
                    let (class, pinned) = sess.stream_class(id)?;
                    let signals = sh.streams.get(&id);
                    let target = signals.and_then(|s| s.target.as_ref()).map(|t| t.to_string());
                    let here = sess.stream_scheduler(id);
                    // What each direction runs: this side's for what it sends; for the
                    // other, what the client asked for (the server refuses one outside
                    // its allowed_schedulers and runs its own, which its status shows).
                    let peer = signals.and_then(|s| s.peer_scheduler).map(SchedulerKind::name);
                    let (up, down) = if self.opens.is_some() {
                        (peer.unwrap_or(here), here)
                    } else {
                        (here, peer.unwrap_or(here))
                    };
                    Some(StreamView {
                        id,
                        target,
                        class,
                        pinned,
                        paths: sess.stream_paths(id).unwrap_or_default().to_vec(),
                        rule: signals.and_then(|s| s.rule.clone()),
                        allowed: signals.and_then(|s| s.allowed.clone()),
                        listener: signals.and_then(|s| s.listener),
                        scheduler_up: up,
                        scheduler_down: down,
                        mask: sess.stream_allowed_paths(id),
                    })
                })
                .collect();
            SessionSnapshot {
                scheduler: sess.scheduler_name(),
                streams: sess.num_streams(),
                buffered_frames: sess.buffered_frames(),
                held: sess.held_bytes(),
                buffered: sess.buffered_bytes(),
                ahead: sess.ahead_bytes(),
                early_delivered: sess.early_delivered(),
                reorder_frames: sess.reorder_frames(),
                counters: sess.counters().clone(),
                paths,
                waiting: sh.waiting.clone(),
                stream_list,
                rule_hits: sh.rule_hits.clone(),
                streams_refused: sh.streams_refused,
                class_latency: sess.class_latency().clone(),
                flows: sess.num_flows(),
                datagrams: sess.datagram_counters().clone(),
                udp: sh.udp.clone(),
                tun: sh.tun.as_ref().map(|f| f()),
                energy_mode: sess.energy_mode().name(),
                energy_profile: sess.energy_profile().name.clone(),
                energy_aware: sess.energy_aware(),
            }
        })
    }
}

async fn timer_task(h: SessionHandle) {
    loop {
        let next = h.with(|sh| {
            let now = Instant::now();
            if sh.sess.poll_timeout().is_some_and(|t| t <= now) {
                sh.sess.handle_timeout(now);
            }
            let next = sh.sess.poll_timeout();
            sh.timer_deadline = next;
            next
        });
        let sleep_to = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep_until(sleep_to.into()) => {}
            _ = h.timer.notified() => {}
            _ = h.closed.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests;
