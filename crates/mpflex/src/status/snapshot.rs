//! What the status endpoint knows of a session at one moment: the typed snapshot the
//! JSON, the metrics and the live view are all rendered from.

use std::time::Duration;

use mpflex_engine::energy::{j_per_mb, PathEnergy};
use mpflex_engine::{ClassLatency, EnergyAwareView, PathCounters, SessionCounters, StreamId, TrafficClass};
use mpflex_sched::PathSnapshot;

/// A path's state, as the engine's supervisor names it (active, standby, degraded,
/// draining, suspect, down).
pub use mpflex_engine::PathState;

use crate::links::table::Unusable;
use mpflex_engine::Tier;

#[derive(Debug, Clone)]
pub struct PathView {
    pub id: usize,
    pub name: String,
    pub state: PathState,
    pub backup: bool,
    /// 0 primary, 1 secondary, 2 backup.
    pub tier: Tier,
    /// `None` for a path slot the engine has not seen yet.
    pub counters: Option<PathCounters>,
    pub snap: PathSnapshot,
    /// One-way delay and its deviation, µs (with the hosts' clock offset).
    pub owd_us: Option<(i64, u64)>,
    /// The queue the path's frames wait in now, from the peer's reports.
    pub queue_delay: Option<Duration>,
    /// (client) The interface the path is bound to.
    pub device: Option<String>,
    /// (client) Why the path's interface cannot carry it now: then the status names this
    /// as its state ("waiting for device", "no carrier", "no address", "no route").
    pub link: Option<Unusable>,
    /// (client) Where its dial stands while it is not up (none once joined).
    pub dial: Option<DialState>,
    /// "wifi", "cellular" or "wired".
    pub kind: &'static str,
    /// The modelled energy it spent (docs/energy.md).
    pub energy: PathEnergy,
    /// Held back by the energy-aware mode (on a server: the client said so).
    pub energy_standby: bool,
    /// (client) Not dialled: the energy-aware mode holds it back while another path
    /// carries (docs/energy.md).
    pub held: bool,
    /// (client) Its data cap, if it has one.
    pub cap: Option<CapView>,
    /// (client) The WiFi signal last read on its interface, dBm (a path over WiFi).
    pub wifi_signal_dbm: Option<i32>,
    /// Record key switches on its connections: (sent, received).
    pub rekeys: (u64, u64),
    /// (client) Its link hinted weak (the WiFi signal): degraded while another path can
    /// carry.
    pub link_weak: bool,
}

/// (client) Where a path that is not up stands with its dial: the status names this as
/// its state, so a path that waits for its link is told apart from one that is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialState {
    /// Connecting, handshaking or joining; nothing unanswered yet.
    Dialing,
    /// Its SYN went unanswered past the kernel's initial retransmission timeout: the
    /// kernel retransmits it, and the path joins when the link carries one.
    WaitingForLink,
    /// The last dial failed (refused, no route, the kernel gave up): pausing before the
    /// next.
    Retrying,
}

impl DialState {
    pub fn name(self) -> &'static str {
        match self {
            DialState::Dialing => "dialing",
            DialState::WaitingForLink => "waiting for link",
            DialState::Retrying => "retrying",
        }
    }
}

/// A metered path's data cap as the status shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CapView {
    pub limit: u64,
    /// Bytes counted this period (both directions, frame bytes; docs/policy.md).
    pub used: u64,
    pub period: String,
    /// Reached: the path now runs `at_cap` (`backup` or `off`).
    pub capped: bool,
    pub at_cap: &'static str,
}

impl PathView {
    /// The state the status shows: the engine's, or while the path is down, what its
    /// interface lacks, that it is held back, or where its dial stands.
    pub fn state_name(&self) -> &'static str {
        match self.link {
            Some(why) if self.state == PathState::Down => why.name(),
            None if self.held && self.state == PathState::Down => "held back",
            None if self.state == PathState::Down => self.dial.map_or(self.state.name(), DialState::name),
            _ => self.state.name(),
        }
    }

    /// Bytes in the path's socket and on the wire: unsent plus unacknowledged segments.
    pub fn in_flight_bytes(&self) -> u64 {
        self.snap.in_flight as u64 * self.snap.mss.max(1) as u64
    }
}

#[derive(Debug, Clone)]
pub struct StreamView {
    pub id: StreamId,
    pub target: Option<String>,
    pub class: TrafficClass,
    pub pinned: bool,
    /// Stream bytes per path (index = path id), both directions.
    pub paths: Vec<u64>,
    /// (client) The policy rule it matched and the paths that allows.
    pub rule: Option<String>,
    pub allowed: Option<String>,
    /// (client) The ingress the application came in by.
    pub listener: Option<&'static str>,
    /// The scheduler of each direction (client to server, server to client).
    pub scheduler_up: &'static str,
    pub scheduler_down: &'static str,
    /// The engine's mask of allowed paths (a bit per path id).
    pub mask: u64,
}

#[derive(Debug, Clone)]
pub struct SessionSnapshot {
    pub scheduler: &'static str,
    pub streams: usize,
    pub buffered_frames: usize,
    /// (send, receive) bytes held in memory ([`mpflex_engine::Session::held_bytes`]).
    pub held: (u64, u64),
    /// The session's memory account ([`mpflex_engine::Session::buffered_bytes`]).
    pub buffered: u64,
    /// Bytes accepted from applications and not yet handed to a path.
    pub ahead: u64,
    pub early_delivered: u64,
    pub reorder_frames: usize,
    pub counters: SessionCounters,
    pub paths: Vec<PathView>,
    /// (client) `[[paths]]` entries without a path yet.
    pub waiting: Vec<WaitingView>,
    pub stream_list: Vec<StreamView>,
    /// (client) Streams opened per policy rule since the start (`-`: no rule matched).
    pub rule_hits: std::collections::BTreeMap<String, u64>,
    /// Streams the server's `[acl]` refused since the start (each reset at its
    /// application).
    pub streams_refused: u64,
    pub class_latency: ClassLatency,
    /// Datagram flows open now, the engine's datagram counts and the ingress's drops.
    pub flows: usize,
    pub datagrams: mpflex_engine::DatagramCounters,
    pub udp: crate::driver::UdpDrops,
    /// (client) What the TUN ingress carried and dropped, when it runs.
    pub tun: Option<crate::tun::TunCounters>,
    /// "aware" or "off" (a server follows the client's word per path).
    pub energy_mode: &'static str,
    pub energy_profile: String,
    pub energy_aware: Option<EnergyAwareView>,
}

impl SessionSnapshot {
    /// The session's modelled energy, J, and the bytes it priced.
    pub fn energy(&self) -> (f64, u64) {
        self.paths
            .iter()
            .fold((0.0, 0), |(j, b), p| (j + p.energy.total_j(), b + p.energy.bytes))
    }
}

/// (client) A `[[paths]]` device pattern or `auto` entry that has no path yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingView {
    pub name: String,
    /// What it matches: the pattern, or "auto".
    pub matches: String,
    /// Why it has no path, e.g. "no interface matches" or "wlan0: no address".
    pub state: String,
}

/// One session as the status endpoint serves it.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// (server) The client's configured name.
    pub client: Option<String>,
    /// A short id of the session (the first bytes of its token, hex), the same on both
    /// sides.
    pub session: String,
    pub snap: SessionSnapshot,
}

/// The short id of a session token.
pub fn session_id(token: &[u8; 16]) -> String {
    token[..4].iter().map(|b| format!("{b:02x}")).collect()
}

impl SessionSnapshot {
    /// The status JSON of one session (`mpflex status --json`).
    pub fn to_json(&self) -> serde_json::Value {
        let paths: Vec<serde_json::Value> = self.paths.iter().map(path_json).collect();
        let stream_list: Vec<serde_json::Value> = self
            .stream_list
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id,
                    "target": s.target,
                    "class": s.class.name(),
                    "pinned": s.pinned,
                    "paths": s.paths,
                    "rule": s.rule,
                    "allowed": s.allowed,
                    "listener": s.listener,
                    "scheduler_up": s.scheduler_up,
                    "scheduler_down": s.scheduler_down,
                })
            })
            .collect();
        let c = &self.counters;
        let mut j = serde_json::json!({
            "scheduler": self.scheduler,
            "streams": self.streams,
            "buffered_frames": self.buffered_frames,
            "held_bytes": {"send": self.held.0, "receive": self.held.1},
            "buffered_bytes": self.buffered,
            "ahead_bytes": self.ahead,
            "early_delivered": self.early_delivered,
            "reorder_frames": self.reorder_frames,
            "decisions": {"send": c.decisions_send, "wait": c.decisions_wait, "reinject": c.decisions_reinject},
            "resent_frames": {"path_lost": c.resent_lost, "scheduler": c.resent_scheduler, "copy": c.resent_copies, "hedge": c.hedged},
            "paths": paths,
            "waiting": self.waiting.iter().map(|w| serde_json::json!({
                "name": w.name, "matches": w.matches, "state": w.state,
            })).collect::<Vec<_>>(),
            "stream_list": stream_list,
            "rule_hits": self.rule_hits,
            "streams_refused": self.streams_refused,
            "class_latency": class_latency_json(&self.class_latency),
            "datagrams": datagrams_json(self),
            "energy": energy_json(self),
        });
        if let Some(t) = &self.tun {
            j["tun"] = serde_json::to_value(t).unwrap_or_default();
        }
        j
    }
}

/// The session's datagram counts: what went each way, and every drop by its reason.
fn datagrams_json(s: &SessionSnapshot) -> serde_json::Value {
    let d = &s.datagrams;
    let u = &s.udp;
    serde_json::json!({
        "flows": s.flows,
        "flows_opened": d.flows_opened,
        "flows_refused": d.flows_refused,
        "sent": d.sent,
        "sent_bytes": d.sent_bytes,
        "copies": d.copies,
        "received": d.received,
        "received_bytes": d.received_bytes,
        "duplicates": d.duplicates,
        "reorder": {"late": d.late, "gaps": d.gaps},
        "dropped": {
            "queue_full": d.dropped_queue_full,
            "expired": d.dropped_expired,
            "unknown_flow": d.dropped_unknown_flow,
            "frag": u.dropped_frag,
            "malformed": u.dropped_malformed,
            "oversize": u.dropped_oversize,
            "foreign": u.dropped_foreign,
            "refused": u.dropped_refused,
            "backlog": u.dropped_backlog,
            "flow_limit": u.dropped_flow_limit,
            "empty": u.dropped_empty,
            "rate": u.dropped_rate,
        },
    })
}

/// The path's tier by name: a path the energy-aware mode holds back is an energy standby
/// (below backup) unless a data cap put it off altogether.
fn tier_name(p: &PathView) -> &'static str {
    if p.energy_standby && p.tier < Tier::Off {
        Tier::EnergyStandby.name()
    } else {
        p.tier.name()
    }
}
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The session's energy: its mode, profile, total and J/MB, and the energy-aware mode's
/// view while it is on.
fn energy_json(s: &SessionSnapshot) -> serde_json::Value {
    let (j, bytes) = s.energy();
    let aware = s.energy_aware.map(|a| {
        serde_json::json!({
            "cellular_active": a.cellular_active,
            "wifi_mbit": a.wifi_mbit.map(|x| (x * 100.0).round() / 100.0),
            "cellular_mbit": (a.cellular_mbit * 100.0).round() / 100.0,
            "wakes": a.wakes,
        })
    });
    serde_json::json!({
        "mode": s.energy_mode,
        "profile": s.energy_profile,
        "joules": round3(j),
        "j_per_mb": round3(j_per_mb(j, bytes)),
        "aware": aware,
    })
}

fn path_json(p: &PathView) -> serde_json::Value {
    let Some(c) = &p.counters else {
        return serde_json::json!({"id": p.id, "name": p.name, "up": false, "state": p.state_name(),
                                  "tier": p.tier.wire(), "tier_name": tier_name(p), "device": p.device,
                                  "held": p.held});
    };
    let s = &p.snap;
    let mut v = serde_json::json!({
        "id": p.id,
        "name": p.name,
        "up": p.state != PathState::Down,
        "state": p.state_name(),
        "backup": p.backup,
        "tier": p.tier.wire(),
        "tier_name": tier_name(p),
        "device": p.device,
        "kind": p.kind,
        "energy_standby": p.energy_standby,
        "energy_j": round3(p.energy.total_j()),
        "energy_j_per_mb": round3(j_per_mb(p.energy.total_j(), p.energy.bytes)),
        "energy_fixed_j": round3(p.energy.fixed_j),
        "energy_promotions": p.energy.promotions,
        "bytes_sent": c.bytes_sent,
        "bytes_received": c.bytes_received,
        "payload_sent": c.payload_sent,
        "payload_resent": c.payload_resent,
        "duplicate_received": c.duplicate_received,
        "failures": c.failures,
        "suspicions": c.suspicions,
        "demotions": c.demotions,
        "stall_reinjections": c.stall_reinjections,
        "tcp_retransmits": c.tcp_retransmits,
        "datagrams_sent": c.datagrams_sent,
        "cap": p.cap,
        "wifi_signal_dbm": p.wifi_signal_dbm,
        "rekeys_sent": p.rekeys.0,
        "rekeys_received": p.rekeys.1,
        "link_weak": p.link_weak,
        "owd_us": p.owd_us.map(|(o, _)| o),
        "owd_dev_us": p.owd_us.map(|(_, d)| d),
        "queue_delay_us": p.queue_delay.map(|d| d.as_micros() as u64),
        "srtt_us": s.srtt.as_micros() as u64,
        "min_rtt_us": s.min_rtt.as_micros() as u64,
        "rttvar_us": s.rttvar.as_micros() as u64,
        "cwnd": s.cwnd,
        "mss": s.mss,
        "in_flight": s.in_flight,
        "notsent": s.notsent,
        "delivery_rate": s.delivery_rate,
    });
    v["held"] = p.held.into();
    v
}

/// Per class with samples: how long its bytes took from the application to the peer.
/// `p50_ms` and `p99_ms` are the upper bounds of the histogram buckets (1, 2, 4 … 16384
/// ms) holding them; `null` beyond the last.
fn class_latency_json(l: &ClassLatency) -> serde_json::Value {
    let finite = |x: f64| x.is_finite().then_some(x);
    let per_class: Vec<serde_json::Value> = l
        .summaries()
        .into_iter()
        .map(|s| {
            serde_json::json!({
                "class": s.class.name(),
                "count": s.count,
                "mean_ms": (s.mean_ms * 10.0).round() / 10.0,
                "p50_ms": finite(s.p50_ms),
                "p99_ms": finite(s.p99_ms),
            })
        })
        .collect();
    serde_json::Value::Array(per_class)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(state: PathState, link: Option<Unusable>, held: bool, dial: Option<DialState>) -> PathView {
        PathView {
            id: 0,
            name: "lte".into(),
            state,
            backup: false,
            tier: Tier::Primary,
            counters: None,
            snap: PathSnapshot::default(),
            owd_us: None,
            queue_delay: None,
            device: None,
            link,
            dial,
            kind: "cellular",
            energy: PathEnergy::default(),
            energy_standby: false,
            held,
            cap: None,
            wifi_signal_dbm: None,
            rekeys: (0, 0),
            link_weak: false,
        }
    }

    #[test]
    fn a_path_that_is_not_up_is_named_by_where_its_dial_stands() {
        let down = PathState::Down;
        let waiting = Some(DialState::WaitingForLink);
        assert_eq!(path(down, None, false, waiting).state_name(), "waiting for link");
        assert_eq!(
            path(down, None, false, Some(DialState::Dialing)).state_name(),
            "dialing"
        );
        assert_eq!(
            path(down, None, false, Some(DialState::Retrying)).state_name(),
            "retrying"
        );
        assert_eq!(path(down, None, false, None).state_name(), "down");
        // What the interface lacks, or the energy-aware mode's hold, says more.
        let no_carrier = Some(Unusable::NoCarrier);
        assert_eq!(path(down, no_carrier, false, waiting).state_name(), "no carrier");
        assert_eq!(path(down, None, true, waiting).state_name(), "held back");
        // Up, the engine's state is the path's.
        assert_eq!(path(PathState::Active, None, false, waiting).state_name(), "active");
    }
}
