//! `[tuning]`: engine and socket tunables shared by client and server.

use std::time::Duration;

use anyhow::{bail, Result};
use mpflex_engine::{EngineConfig, Role};
use serde::Deserialize;

/// Engine and socket tunables shared by client and server.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tuning {
    /// Keepalive interval on idle paths, ms.
    pub keepalive_ms: u64,
    /// Keepalive interval on the paths of a session that carries nothing (no stream, no
    /// datagram flow), ms; never below `keepalive_ms`. Such a path is declared dead
    /// `path_timeout_ms + idle_keepalive_ms - keepalive_ms` after it last heard anything,
    /// or `path_timeout_ms` after the session starts carrying.
    pub idle_keepalive_ms: u64,
    /// A path silent for this long is declared dead, ms.
    pub path_timeout_ms: u64,
    /// Per-stream flow-control window, bytes.
    pub stream_window: u64,
    /// Session-wide flow-control window, bytes.
    pub session_window: u64,
    /// Most bytes a session holds for its peer until acknowledged, whatever credit the
    /// peer grants (docs/security.md).
    pub send_buffer: u64,
    /// A session whose peer acknowledges nothing for this long while data waits and a
    /// path is up is closed, ms.
    pub ack_timeout_ms: u64,
    /// A path's sender moves to its next record key (Noise REKEY) after sealing this many
    /// bytes under one key (docs/security.md).
    pub rekey_after_bytes: u64,
    /// ... or after using one key this long, ms.
    pub rekey_after_ms: u64,
    /// Upper bound of unsent bytes kept in a path's kernel socket (late binding), bytes.
    pub notsent_lowat: u32,
    /// Most concurrent streams per session.
    pub max_streams: usize,
    /// Most concurrent datagram flows per session (docs/udp.md).
    pub max_flows: usize,
    /// Most datagrams waiting for a path per session; beyond, the oldest of the largest
    /// flow is dropped.
    pub datagram_queue: usize,
    /// Congestion control for path connections (e.g. "cubic", "bbr"); the system
    /// default when unset.
    pub congestion: Option<String>,
    /// Sets the host's `net.ipv4.tcp_slow_start_after_idle` (per network namespace) at
    /// startup. `false` keeps a path's congestion window across idle periods, which is what
    /// persistent paths are for: otherwise the kernel shrinks an idle connection's window
    /// back towards the initial one, and the next object starts slowly on every path.
    /// It applies to every TCP connection of the namespace. Unset: leave the system setting.
    pub slow_start_after_idle: Option<bool>,
    /// Turn on the kernel's TCP pacing on path connections (a congestion control such as
    /// CUBIC otherwise sends an opened window as one burst, which overflows small
    /// bottleneck buffers, e.g. after an idle period). BBR paces anyway.
    pub pacing: bool,
    /// A path that restarts from the initial window after an idle spell (the kernel does
    /// so when `net.ipv4.tcp_slow_start_after_idle` is on) with a slow-start threshold
    /// below the initial window drops it, as a new connection has none: otherwise one
    /// keepalive lost while the path idled caps its next bursts' slow start at 7 segments.
    /// Loss-based congestion controls only; needs `bbr` available (switching to it and
    /// back resets the threshold). BBR's setup also switches the kernel's pacing on, and
    /// switching back leaves it on: with `pacing = false` a path that had a reset paces
    /// from then on.
    pub fresh_ssthresh: bool,
    /// Queue control: keep the bytes queued at each path's bottleneck at about this many
    /// milliseconds of the path's rate (the path writer holds bulk bytes back while what
    /// the path holds exceeds rate × (min RTT + target), steered by the queue the peer
    /// measures), and what the session accepts from applications ahead of the paths
    /// within the same target, so an upload does not fill a cellular uplink buffer in
    /// front of interactive traffic (QCUT-D's 20 ms). It engages while an interactive
    /// stream is active and (`queue_control_sustained`) once a transfer has kept the paths
    /// busy for a second; a short transfer alone runs at full rate. 0: off.
    pub queue_target_ms: u64,
    /// Queue control engages also while applications keep the session backlogged for a
    /// second (a bulk upload or download that outruns the paths), so the bottleneck queue
    /// is already short when interactive traffic starts: otherwise the first requests of a
    /// page load wait for a full bottleneck buffer to drain (QCUT keeps the on-device queue
    /// short whatever the traffic). Its cost, a little of the transfer's rate, and its
    /// gain are in docs/latency.md. `false`: a lone transfer runs the paths' buffers full.
    pub queue_control_sustained: bool,
    /// Hedge small interactive frames (a request, a response of at most 2 KB): each also
    /// goes as a copy on the path that would deliver it next, when that copy arrives
    /// before the first path could repair a loss of it (two of its round trips); the first
    /// to arrive counts. A request lost in a loaded uplink's queue otherwise waits a round
    /// trip for its retransmission, or a retransmission timeout. Paths that do not carry
    /// (a standby tier, an energy standby) take no copies, and copies stay within an
    /// eighth of the session's bytes beyond the first 64 KB. With it, requests beside a
    /// BBR upload on `seed-default` took idle + 33–68 ms at the 99th percentile, against
    /// idle + 67–97 ms without it on an earlier build (docs/latency.md). `false`: no copies.
    pub hedge_interactive: bool,
    /// Proactive handover (WearMan): a path whose retransmissions, RTT or delivery rate
    /// trend towards failure takes no new data, and what it holds is copied to a healthy
    /// path before it fails. `false` (the default; docs/paths.md has the measurements):
    /// paths leave only when they fall silent or die.
    pub proactive: bool,
    /// Suspect a path that falls silent while holding data: copy what it holds to the
    /// others and probe it (docs/paths.md). `false`: a silent path keeps its frames until
    /// `path_timeout_ms` declares it dead, as a plain TCP application waits for its socket
    /// to fail; for measuring against (the lab's reactive baseline), not for use.
    pub suspicion: bool,
    /// The energy-aware mode's κ: bytes a burst moves over WiFi before cellular may carry
    /// (eMPTCP's 1 MB; docs/energy.md).
    pub energy_kappa_bytes: u64,
    /// The ceiling of its τ, the time a burst runs before cellular may carry below κ
    /// (eMPTCP's 3 s); below it τ follows the thesis' Eq. 4.1 at the WiFi path's round trip
    /// and rate (docs/energy.md).
    pub energy_tau_ms: u64,
}

/// The engine's defaults are the shipped defaults: `[tuning]` reads each of its engine
/// settings from [`EngineConfig::new`], so the two cannot differ.
impl Default for Tuning {
    fn default() -> Self {
        let e = EngineConfig::new(Role::Client);
        let ms = |d: Duration| d.as_millis() as u64;
        Tuning {
            keepalive_ms: ms(e.keepalive),
            idle_keepalive_ms: ms(e.idle_keepalive),
            path_timeout_ms: ms(e.path_timeout),
            stream_window: e.stream_window,
            session_window: e.session_window,
            send_buffer: e.send_buffer,
            ack_timeout_ms: ms(e.ack_timeout),
            rekey_after_bytes: crate::crypto::REKEY_AFTER_BYTES,
            rekey_after_ms: ms(crate::crypto::REKEY_AFTER_TIME),
            notsent_lowat: e.notsent_lowat,
            max_streams: e.max_streams,
            max_flows: e.max_flows,
            datagram_queue: e.datagram_queue,
            congestion: None,
            slow_start_after_idle: None,
            pacing: true,
            fresh_ssthresh: e.fresh_ssthresh,
            queue_target_ms: ms(e.queue_target),
            queue_control_sustained: e.queue_control_sustained,
            hedge_interactive: e.hedge_interactive,
            proactive: e.proactive,
            suspicion: e.suspicion,
            energy_kappa_bytes: mpflex_engine::emptcp::KAPPA,
            energy_tau_ms: mpflex_engine::emptcp::TAU_US / 1000,
        }
    }
}

impl Tuning {
    pub(super) fn validate(&self) -> Result<()> {
        if self.keepalive_ms == 0 {
            bail!("tuning.keepalive_ms: must be > 0");
        }
        if self.path_timeout_ms <= self.keepalive_ms {
            bail!(
                "tuning.path_timeout_ms: must exceed tuning.keepalive_ms ({} <= {})",
                self.path_timeout_ms,
                self.keepalive_ms
            );
        }
        if self.stream_window < 65536 {
            bail!("tuning.stream_window: must be at least 65536 bytes");
        }
        if self.session_window < self.stream_window {
            bail!("tuning.session_window: must be at least tuning.stream_window");
        }
        if self.send_buffer < self.stream_window {
            bail!("tuning.send_buffer: must be at least tuning.stream_window");
        }
        if self.ack_timeout_ms <= self.path_timeout_ms {
            bail!("tuning.ack_timeout_ms: must exceed tuning.path_timeout_ms");
        }
        if self.rekey_after_bytes < 65536 || self.rekey_after_bytes > 1 << 36 {
            bail!("tuning.rekey_after_bytes: must be between 65536 and 2^36 (AES-GCM's margin under one key)");
        }
        if self.rekey_after_ms == 0 {
            bail!("tuning.rekey_after_ms: must be > 0");
        }
        if self.notsent_lowat < 4096 {
            bail!("tuning.notsent_lowat: must be at least 4096 bytes");
        }
        if self.max_streams == 0 {
            bail!("tuning.max_streams: must be > 0");
        }
        if self.max_flows == 0 {
            bail!("tuning.max_flows: must be > 0");
        }
        if self.datagram_queue == 0 {
            bail!("tuning.datagram_queue: must be > 0");
        }
        Ok(())
    }

    /// Applies the host-wide settings this configuration asks for.
    pub fn apply_host_settings(&self) -> Result<()> {
        if let Some(on) = self.slow_start_after_idle {
            let key = "/proc/sys/net/ipv4/tcp_slow_start_after_idle";
            std::fs::write(key, if on { "1\n" } else { "0\n" }).map_err(|e| {
                anyhow::anyhow!(
                    "tuning.slow_start_after_idle: cannot write {key}: {e}; it needs root or CAP_NET_ADMIN \
                     and a writable /proc/sys (under the systemd units, which keep /proc/sys read-only, \
                     remove the key and set net.ipv4.tcp_slow_start_after_idle in /etc/sysctl.d/)"
                )
            })?;
            tracing::info!(on, "set net.ipv4.tcp_slow_start_after_idle");
        }
        Ok(())
    }

    /// When path connections move to their next record key.
    pub fn rekey(&self) -> crate::crypto::Rekey {
        crate::crypto::Rekey {
            after_bytes: self.rekey_after_bytes,
            after: Duration::from_millis(self.rekey_after_ms),
        }
    }

    pub fn engine(&self, role: Role) -> EngineConfig {
        let mut c = EngineConfig::new(role);
        c.keepalive = Duration::from_millis(self.keepalive_ms);
        c.idle_keepalive = Duration::from_millis(self.idle_keepalive_ms);
        c.path_timeout = Duration::from_millis(self.path_timeout_ms);
        c.stream_window = self.stream_window;
        c.session_window = self.session_window;
        c.send_buffer = self.send_buffer;
        c.ack_timeout = Duration::from_millis(self.ack_timeout_ms);
        c.notsent_lowat = self.notsent_lowat;
        c.fresh_ssthresh = self.fresh_ssthresh;
        c.max_streams = self.max_streams;
        c.max_flows = self.max_flows;
        c.datagram_queue = self.datagram_queue;
        c.queue_target = Duration::from_millis(self.queue_target_ms);
        c.queue_control_sustained = self.queue_control_sustained;
        c.hedge_interactive = self.hedge_interactive;
        c.proactive = self.proactive;
        c.suspicion = self.suspicion;
        c
    }
}
