//! `GET /metrics`: the status snapshot in the Prometheus text format.
//!
//! Every value is read from the sessions at scrape time (a [`Collector`]); nothing is
//! counted twice and nothing runs between scrapes. Names follow the Prometheus
//! conventions: the unit in the name (`_bytes`, `_seconds`), `_total` on counters (the
//! encoder appends it), one family per quantity with labels for what varies. Every
//! series carries `role` (client or server) and `session` (the short id both sides
//! show), and on the server `client` (the client's configured name); path series also
//! `path` (the index the client gave the path, the same on both sides) and on the client
//! `name` (the path's configured name).

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use mpflex_engine::{ClassLatency, TrafficClass};

use super::snapshot::{PathState, PathView, SessionView};

/// The Prometheus text format's media type (version 0.0.4), served by default.
pub const PROMETHEUS_TEXT: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
/// OpenMetrics text, served to scrapers that ask for it (`Accept`).
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Renders the sessions as metrics text; OpenMetrics if `openmetrics`, else the Prometheus
/// text format. Returns (content type, body).
pub fn render(
    role: &'static str,
    sessions: Vec<SessionView>,
    counters: Vec<super::Counter>,
    openmetrics: bool,
) -> (&'static str, String) {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape {
        role,
        sessions,
        counters,
    }));
    let mut body = String::new();
    // Writing to a String cannot fail; an encoder error would be a bug in a label.
    let r = if openmetrics {
        prometheus_client::encoding::text::encode(&mut body, &registry)
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut body, &registry)
    };
    if let Err(e) = r {
        tracing::warn!("metrics: encoding failed: {e}");
    }
    (if openmetrics { OPENMETRICS_TEXT } else { PROMETHEUS_TEXT }, body)
}

#[derive(Debug)]
struct Scrape {
    role: &'static str,
    sessions: Vec<SessionView>,
    counters: Vec<super::Counter>,
}

type Labels = Vec<(&'static str, String)>;

/// A histogram whose buckets were counted elsewhere (the engine's [`ClassLatency`]).
#[derive(Debug)]
struct ConstHistogram {
    sum: f64,
    count: u64,
    /// (upper bound, observations in this bucket alone), ascending.
    buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for ConstHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// One metric family: a descriptor and its series. A family without series is left out.
fn family<M: EncodeMetric>(enc: &mut DescriptorEncoder, name: &str, help: &str, rows: Vec<(Labels, M)>) -> fmt::Result {
    let Some((_, first)) = rows.first() else {
        return Ok(());
    };
    let mut m = enc.encode_descriptor(name, help, None, first.metric_type())?;
    for (labels, metric) in &rows {
        metric.encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

impl Scrape {
    fn session_labels(&self, s: &SessionView) -> Labels {
        let mut l = vec![("role", self.role.to_string())];
        if let Some(c) = &s.client {
            l.push(("client", c.clone()));
        }
        l.push(("session", s.session.clone()));
        l
    }

    fn path_labels(&self, s: &SessionView, p: &PathView) -> Labels {
        let mut l = self.session_labels(s);
        l.push(("path", p.id.to_string()));
        // The server's name for a path holds the peer's port, new with every
        // reconnection: a label of it would start new series each time.
        if self.role == "client" {
            l.push(("name", p.name.clone()));
        }
        l
    }

    /// One row per session.
    fn per_session<M>(&self, f: impl Fn(&SessionView) -> M) -> Vec<(Labels, M)> {
        self.sessions.iter().map(|s| (self.session_labels(s), f(s))).collect()
    }

    /// One row per session and `(label value, value)` that `f` lists, under `key`.
    fn per_session_by<M>(&self, key: &'static str, f: impl Fn(&SessionView) -> Vec<(String, M)>) -> Vec<(Labels, M)> {
        let mut rows = Vec::new();
        for s in &self.sessions {
            for (v, m) in f(s) {
                let mut l = self.session_labels(s);
                l.push((key, v));
                rows.push((l, m));
            }
        }
        rows
    }

    /// One row per path the engine knows (`f` returns `None` to leave one out).
    fn per_path<M>(&self, f: impl Fn(&PathView) -> Option<M>) -> Vec<(Labels, M)> {
        let mut rows = Vec::new();
        for s in &self.sessions {
            for p in s.snap.paths.iter().filter(|p| p.counters.is_some()) {
                if let Some(m) = f(p) {
                    rows.push((self.path_labels(s, p), m));
                }
            }
        }
        rows
    }

    fn path_counter(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        f: fn(&mpflex_engine::PathCounters) -> u64,
    ) -> fmt::Result {
        let rows = self.per_path(|p| p.counters.as_ref().map(|c| ConstCounter::new(f(c))));
        family(enc, name, help, rows)
    }

    fn path_gauge<V: prometheus_client::encoding::EncodeGaugeValue>(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        f: impl Fn(&PathView) -> Option<V>,
    ) -> fmt::Result {
        let rows = self.per_path(|p| f(p).map(ConstGauge::new));
        family(enc, name, help, rows)
    }
}

fn secs(d: std::time::Duration) -> f64 {
    d.as_secs_f64()
}

/// The latency buckets of one class as a Prometheus histogram, in seconds.
fn class_histogram(l: &ClassLatency, class: TrafficClass) -> Option<ConstHistogram> {
    let counts = l.buckets(class);
    let count: u64 = counts.iter().sum();
    if count == 0 {
        return None;
    }
    let buckets = ClassLatency::bounds_ms()
        .iter()
        .zip(counts)
        .map(|(&ms, &n)| (if ms.is_finite() { ms / 1000.0 } else { ms }, n))
        .collect();
    Some(ConstHistogram {
        sum: l.sum_secs(class),
        count,
        buckets,
    })
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let e = &mut enc;
        family(
            e,
            "mpflex_build_info",
            "The running mpflex: its version and role (always 1).",
            vec![(
                vec![
                    ("role", self.role.to_string()),
                    ("version", env!("CARGO_PKG_VERSION").to_string()),
                ],
                ConstGauge::new(1i64),
            )],
        )?;
        family(
            e,
            "mpflex_sessions",
            "Sessions this process holds.",
            vec![(
                vec![("role", self.role.to_string())],
                ConstGauge::new(self.sessions.len() as i64),
            )],
        )?;
        // Counters of one name are one family, a series per label value.
        for group in self.counters.chunk_by(|a, b| a.name == b.name) {
            let rows = group
                .iter()
                .map(|d| {
                    let mut l = vec![("role", self.role.to_string())];
                    l.extend(d.label.map(|(k, v)| (k, v.to_string())));
                    (l, ConstCounter::new(d.value))
                })
                .collect();
            family(e, &format!("mpflex_{}", group[0].name), group[0].help, rows)?;
        }

        // Per session.
        let rows = self.per_session(|s| ConstGauge::new(s.snap.flows as i64));
        family(e, "mpflex_session_flows", "Datagram flows open now.", rows)?;
        let rows = self.per_session(|s| ConstCounter::new(s.snap.streams_refused));
        family(
            e,
            "mpflex_session_streams_refused",
            "Streams refused by the server's [acl]; the application's connection was reset.",
            rows,
        )?;
        let rows = self.per_session(|s| ConstCounter::new(s.snap.datagrams.flows_refused));
        family(
            e,
            "mpflex_session_flows_refused",
            "Datagram flows refused: by this server's [acl] or flow limit, or (client) by the server.",
            rows,
        )?;
        let rows = self.per_session_by("event", |s| {
            let d = &s.snap.datagrams;
            vec![
                ("sent".to_string(), ConstCounter::new(d.sent)),
                ("copy".to_string(), ConstCounter::new(d.copies)),
                ("received".to_string(), ConstCounter::new(d.received)),
                ("duplicate".to_string(), ConstCounter::new(d.duplicates)),
                ("late".to_string(), ConstCounter::new(d.late)),
                ("gap".to_string(), ConstCounter::new(d.gaps)),
            ]
        });
        family(
            e,
            "mpflex_session_datagrams",
            "Datagrams handed to paths (sent, of which realtime copies: copy), delivered to \
             applications (received), second copies dropped (duplicate), bulk datagrams \
             delivered after the receiver gave up waiting for them (late), and gaps it gave up (gap).",
            rows,
        )?;
        let rows = self.per_session_by("reason", |s| {
            let d = &s.snap.datagrams;
            let u = &s.snap.udp;
            [
                ("queue_full", d.dropped_queue_full),
                ("expired", d.dropped_expired),
                ("unknown_flow", d.dropped_unknown_flow),
                ("frag", u.dropped_frag),
                ("malformed", u.dropped_malformed),
                ("oversize", u.dropped_oversize),
                ("foreign", u.dropped_foreign),
                ("refused", u.dropped_refused),
                ("backlog", u.dropped_backlog),
                ("flow_limit", u.dropped_flow_limit),
                ("empty", u.dropped_empty),
                ("rate", u.dropped_rate),
            ]
            .into_iter()
            .map(|(r, n)| (r.to_string(), ConstCounter::new(n)))
            .collect()
        });
        family(
            e,
            "mpflex_session_datagrams_dropped",
            "Datagrams dropped, by reason: the session's queue was full, waited too long for a \
             path, unknown flow, SOCKS5 FRAG not zero, malformed SOCKS5 header, larger than UDP \
             allows, from outside the association, to a refused destination, the flow's socket \
             too far behind, the session's flow limit reached, (server) empty, beyond the flow's rate limit.",
            rows,
        )?;
        let rows = self.per_session_by("reason", |s| {
            let Some(t) = &s.snap.tun else { return Vec::new() };
            [
                ("malformed", t.dropped_malformed),
                ("fragment", t.dropped_fragment),
                ("protocol", t.dropped_protocol),
                ("conn_limit", t.dropped_conn_limit),
                ("oversize", t.dropped_oversize),
                ("refused", t.tcp_refused),
            ]
            .into_iter()
            .map(|(r, n)| (r.to_string(), ConstCounter::new(n)))
            .collect()
        });
        family(
            e,
            "mpflex_tun_dropped",
            "(client) Packets the TUN ingress dropped, by reason: not a well-formed IP packet, an \
             IPv4 fragment, a protocol it does not carry, a new connection over the stack's \
             limit, an answer larger than the device's MTU, a SYN whose destination the server \
             refused or could not reach (answered with an RST).",
            rows,
        )?;
        let rows = self.per_session_by("direction", |s| {
            let Some(t) = &s.snap.tun else { return Vec::new() };
            vec![
                ("in".to_string(), ConstCounter::new(t.packets_in)),
                ("out".to_string(), ConstCounter::new(t.packets_out)),
            ]
        });
        family(
            e,
            "mpflex_tun_packets",
            "(client) Packets read from the TUN device (in) and written into it (out).",
            rows,
        )?;
        let rows = self.per_session_by("class", |s| {
            TrafficClass::ALL
                .iter()
                .map(|&c| {
                    let n = s.snap.stream_list.iter().filter(|st| st.class == c).count();
                    (c.name().to_string(), ConstGauge::new(n as i64))
                })
                .collect()
        });
        family(e, "mpflex_session_streams", "Open streams, by traffic class.", rows)?;
        let rows = self.per_session_by("direction", |s| {
            vec![
                ("send".to_string(), ConstGauge::new(s.snap.held.0)),
                ("receive".to_string(), ConstGauge::new(s.snap.held.1)),
            ]
        });
        family(
            e,
            "mpflex_session_held_bytes",
            "Stream bytes held in memory: to send (queued or unacknowledged) and received but unread.",
            rows,
        )?;
        let rows = self.per_session(|s| ConstGauge::new(s.snap.energy().0));
        family(
            e,
            "mpflex_session_energy_joules",
            "Modelled energy of the session's paths, J (docs/energy.md).",
            rows,
        )?;
        let rows = self.per_session(|s| ConstGauge::new(s.snap.energy_aware.map_or(0, |a| a.wakes as i64)));
        family(
            e,
            "mpflex_session_energy_wakes",
            "Times the energy-aware mode let cellular carry (0 while the mode is off).",
            rows,
        )?;
        let rows = self.per_session(|s| ConstGauge::new(s.snap.buffered));
        family(
            e,
            "mpflex_session_buffered_bytes",
            "The session's memory account: held for the peer until acknowledged (at most tuning.send_buffer), the reorder buffer with a fixed charge per frame, and received but unread.",
            rows,
        )?;
        let rows = self.per_session(|s| ConstGauge::new(s.snap.ahead));
        family(
            e,
            "mpflex_session_ahead_bytes",
            "Bytes accepted from applications and not yet handed to any path (what queue control bounds).",
            rows,
        )?;
        let rows = self.per_session(|s| ConstGauge::new(s.snap.buffered_frames as i64));
        family(
            e,
            "mpflex_session_unacknowledged_frames",
            "Sequenced frames kept until the peer acknowledges them.",
            rows,
        )?;
        let rows = self.per_session(|s| ConstGauge::new(s.snap.reorder_frames as i64));
        family(
            e,
            "mpflex_session_reorder_frames",
            "Frames received out of order, waiting for a gap to fill.",
            rows,
        )?;
        let rows = self.per_session(|s| ConstCounter::new(s.snap.early_delivered));
        family(
            e,
            "mpflex_session_early_delivered_frames",
            "Frames a stream took ahead of the session's order.",
            rows,
        )?;
        let rows = self.per_session_by("decision", |s| {
            let c = &s.snap.counters;
            vec![
                ("send".to_string(), ConstCounter::new(c.decisions_send)),
                ("wait".to_string(), ConstCounter::new(c.decisions_wait)),
                ("reinject".to_string(), ConstCounter::new(c.decisions_reinject)),
            ]
        });
        family(
            e,
            "mpflex_scheduler_decisions",
            "The scheduler's answers to paths asking for bulk bytes.",
            rows,
        )?;
        let rows = self.per_session_by("cause", |s| {
            let c = &s.snap.counters;
            vec![
                ("path_lost".to_string(), ConstCounter::new(c.resent_lost)),
                ("scheduler".to_string(), ConstCounter::new(c.resent_scheduler)),
                ("copy".to_string(), ConstCounter::new(c.resent_copies)),
                ("hedge".to_string(), ConstCounter::new(c.hedged)),
            ]
        });
        family(
            e,
            "mpflex_session_resent_frames",
            "Frames sent again: their path failed or went silent (path_lost), the scheduler \
             reinjected them (scheduler), a path owed a copy (redundant scheduling, the peer's stall), \
             or a small interactive frame went on a second path too (hedge).",
            rows,
        )?;
        let rows = self.per_session_by("class", |s| {
            TrafficClass::ALL
                .iter()
                .filter_map(|&c| class_histogram(&s.snap.class_latency, c).map(|h| (c.name().to_string(), h)))
                .collect()
        });
        family(
            e,
            "mpflex_class_latency_seconds",
            "Time from the application to the peer's acknowledgement of each traffic class's bytes.",
            rows,
        )?;

        // Per path.
        let rows = self.per_path(|p| {
            Some(
                PathState::ALL
                    .iter()
                    .map(|&st| (st, ConstGauge::new((p.state == st) as i64)))
                    .collect::<Vec<_>>(),
            )
        });
        let mut state_rows = Vec::new();
        for (labels, states) in rows {
            for (st, g) in states {
                let mut l = labels.clone();
                l.push(("state", st.name().to_string()));
                state_rows.push((l, g));
            }
        }
        family(
            e,
            "mpflex_path_state",
            "1 for the path's current state (active: carries new data; standby: a better tier carries; degraded: failing, \
             its frames copied elsewhere; draining: delivering what it holds; suspect: silent while holding data; down).",
            state_rows,
        )?;
        self.path_gauge(e, "mpflex_path_backup", "1 for a backup path.", |p| {
            Some(p.backup as i64)
        })?;
        self.path_gauge(
            e,
            "mpflex_path_tier",
            "The path's tier (priority): 0 primary, 1 secondary, 2 backup, 3 energy standby, 4 off (at its data cap).",
            |p| Some(p.tier.wire() as i64),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_energy_joules",
            "Modelled energy the path's radio spent (transfer, promotions and tails; docs/energy.md).",
            |p| Some(p.energy.total_j()),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_energy_standby",
            "1 while the energy-aware mode holds the path back.",
            |p| Some(p.energy_standby as i64),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_wifi_signal_dbm",
            "The WiFi signal last read on the path's interface (nl80211's average), dBm.",
            |p| p.wifi_signal_dbm.map(i64::from),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_cap_bytes",
            "A metered path's data cap per period.",
            |p| p.cap.as_ref().map(|c| c.limit as i64),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_cap_used_bytes",
            "Bytes a capped path carried this period, both directions (frame bytes).",
            |p| p.cap.as_ref().map(|c| c.used as i64),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_capped",
            "1 while a capped path is at its cap (it then runs its at_cap tier: backup or off).",
            |p| p.cap.as_ref().map(|c| c.capped as i64),
        )?;
        self.path_counter(
            e,
            "mpflex_path_sent_bytes",
            "Bytes handed to the path (frames, encoded).",
            |c| c.bytes_sent,
        )?;
        self.path_counter(
            e,
            "mpflex_path_received_bytes",
            "Bytes received on the path (frames, encoded).",
            |c| c.bytes_received,
        )?;
        self.path_counter(
            e,
            "mpflex_path_payload_sent_bytes",
            "Stream payload bytes sent on the path, first copies only.",
            |c| c.payload_sent,
        )?;
        self.path_counter(
            e,
            "mpflex_path_resent_bytes",
            "Stream payload bytes sent again on the path after another path had sent them.",
            |c| c.payload_resent,
        )?;
        self.path_counter(
            e,
            "mpflex_path_duplicate_received_bytes",
            "Payload bytes received on the path that had already arrived.",
            |c| c.duplicate_received,
        )?;
        self.path_counter(
            e,
            "mpflex_path_retransmitted_segments",
            "Segments the kernel retransmitted on the path's connections.",
            |c| c.tcp_retransmits,
        )?;
        self.path_counter(e, "mpflex_path_failures", "Times the path went down.", |c| c.failures)?;
        self.path_counter(
            e,
            "mpflex_path_suspicions",
            "Times the path went silent while holding data.",
            |c| c.suspicions,
        )?;
        self.path_counter(
            e,
            "mpflex_path_demotions",
            "Times the path's quality trends said it was failing (degraded).",
            |c| c.demotions,
        )?;
        self.path_counter(
            e,
            "mpflex_path_stall_reinjections",
            "Frames re-sent on the path because the peer's reorder buffer stalled on them.",
            |c| c.stall_reinjections,
        )?;
        self.path_gauge(e, "mpflex_path_srtt_seconds", "The kernel's smoothed RTT.", |p| {
            Some(secs(p.snap.srtt))
        })?;
        self.path_gauge(
            e,
            "mpflex_path_min_rtt_seconds",
            "The smallest RTT the kernel measured (the path without its queue).",
            |p| Some(secs(p.snap.min_rtt)),
        )?;
        self.path_gauge(e, "mpflex_path_rttvar_seconds", "The kernel's RTT variation.", |p| {
            Some(secs(p.snap.rttvar))
        })?;
        self.path_gauge(e, "mpflex_path_cwnd_segments", "Congestion window.", |p| {
            Some(p.snap.cwnd as i64)
        })?;
        self.path_gauge(
            e,
            "mpflex_path_in_flight_bytes",
            "Bytes sent and not yet acknowledged (segments times the MSS).",
            |p| Some(p.in_flight_bytes()),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_unsent_bytes",
            "Bytes written to the path's socket and not yet sent.",
            |p| Some(p.snap.notsent as i64),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_queue_delay_seconds",
            "How long the path's frames wait in queues now, from the peer's arrival reports \
             (absent while nothing was sent lately).",
            |p| p.queue_delay.map(secs),
        )?;
        self.path_gauge(
            e,
            "mpflex_path_delivery_rate_bytes_per_second",
            "The kernel's delivery-rate estimate.",
            |p| Some(p.snap.delivery_rate),
        )?;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
