//! `[limits]` (server): what one peer may hold, before and after it authenticates
//! (docs/security.md lists each limit, its default and what a client sees at it).

use anyhow::{bail, Result};
use serde::Deserialize;

/// The server's `[limits]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Time from accepting a path connection to its join, ms: routing preamble, Noise
    /// handshake and join record together. A connection that has not joined by then is
    /// closed (a slowloris holds nothing longer).
    pub handshake_timeout_ms: u64,
    /// Path connections between accept and join, from all sources together.
    pub max_handshakes: usize,
    /// The same from one source address (an IPv6 source counts by its /64).
    pub max_handshakes_per_source: usize,
    /// Sessions one client key may hold (each `mpflex client` process runs one).
    pub max_sessions_per_client: usize,
    /// Streams open at once in one session, and over all sessions of one client key.
    pub max_streams_per_session: usize,
    pub max_streams_per_client: usize,
    /// Datagram flows open at once in one session, and over all sessions of one key.
    pub max_flows_per_session: usize,
    pub max_flows_per_client: usize,
    /// Descriptors all clients' paths, streams and flows may hold together; 0: the
    /// process's `RLIMIT_NOFILE` less a reserve (a quarter of it, 256 to 16,384) for
    /// listeners, handshakes in progress, the status listener and the resolver.
    pub max_descriptors: usize,
    /// The descriptors one client key may hold; 0: half of `max_descriptors`.
    pub max_descriptors_per_client: usize,
    /// Name lookups in progress (each holds a thread of the resolver pool), overall and
    /// for one client key.
    pub max_dns_lookups: usize,
    pub max_dns_lookups_per_client: usize,
    /// Datagrams a client may send into one flow per second; more are dropped, counted.
    pub max_datagrams_per_second: u32,
    /// Stream bytes, over all sessions of one client key, that its peers may have sent
    /// and the destinations not yet taken (in flight, out of order, or waiting for a slow
    /// destination): the session credit (`MaxData`) the server grants the key's sessions
    /// together. Each session keeps 1 MiB whatever the others hold.
    pub receive_buffer_per_client: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout_ms: 5_000,
            // Room for every source at its own limit up to 256 sources, so a flood from
            // fewer addresses cannot hold every place; a join takes one round trip, so a
            // real client holds its place for milliseconds.
            max_handshakes: 2_048,
            max_handshakes_per_source: 8,
            // An honest client runs one session per process, and a restarted one leaves
            // its old session lingering without paths (such a session makes room for a
            // new one, so restarts never meet the limit): 8 covers several processes on
            // one key, while a key cannot multiply its share by opening sessions.
            max_sessions_per_client: 8,
            // A browser holds some hundreds of connections, a host or a LAN behind the TUN
            // or TPROXY ingress thousands, and a host's UDP (DNS from random ports, peers
            // of a P2P application) ten thousand flows; beyond these a client is scanning
            // or flooding. The descriptor share below usually binds first. The engine
            // refuses more than 16,384 streams in a session as a protocol error, and
            // closes flows beyond 16,384; these refuse the new one only.
            max_streams_per_session: 8_192,
            max_streams_per_client: 16_384,
            max_flows_per_session: 16_384,
            max_flows_per_client: 32_768,
            // From RLIMIT_NOFILE, so LimitNOFILE is the one knob; half to one key, so a
            // key at its limits leaves the other half to everyone else.
            max_descriptors: 0,
            max_descriptors_per_client: 0,
            // A lookup takes milliseconds when the resolver answers and up to its
            // timeout (5 s) when it does not: 64 in progress serve hundreds of lookups a
            // second, and one key's 16 cannot hold the others' up.
            max_dns_lookups: 64,
            max_dns_lookups_per_client: 16,
            // A gigabit QUIC download acknowledges every other packet, some 45,000 a
            // second; a flood of small datagrams into one flow beyond this is dropped.
            max_datagrams_per_second: 50_000,
            // Three quarters of one session's window (`tuning.session_window`): an upload
            // still fills a gigabit link 300 ms away, and a key's sessions together, with
            // each one's own megabyte, stay within the 64 MB a key may cost the server
            // (docs/security.md).
            receive_buffer_per_client: 48 << 20,
        }
    }
}

impl Limits {
    pub fn validate(&self) -> Result<()> {
        if !(100..=60_000).contains(&self.handshake_timeout_ms) {
            bail!("limits.handshake_timeout_ms: between 100 and 60000");
        }
        if self.max_handshakes == 0 || self.max_handshakes_per_source == 0 {
            bail!("limits.max_handshakes, limits.max_handshakes_per_source: at least 1");
        }
        if self.max_handshakes_per_source > self.max_handshakes {
            bail!("limits.max_handshakes_per_source: at most limits.max_handshakes");
        }
        if self.receive_buffer_per_client < mpflex_wire::INITIAL_SESSION_CREDIT {
            bail!(
                "limits.receive_buffer_per_client: at least {} bytes (the protocol's initial session credit)",
                mpflex_wire::INITIAL_SESSION_CREDIT
            );
        }
        let counts = [
            ("max_sessions_per_client", self.max_sessions_per_client),
            ("max_streams_per_session", self.max_streams_per_session),
            ("max_streams_per_client", self.max_streams_per_client),
            ("max_flows_per_session", self.max_flows_per_session),
            ("max_flows_per_client", self.max_flows_per_client),
            ("max_dns_lookups", self.max_dns_lookups),
            ("max_dns_lookups_per_client", self.max_dns_lookups_per_client),
            ("max_datagrams_per_second", self.max_datagrams_per_second as usize),
        ];
        for (key, n) in counts {
            if n == 0 {
                bail!("limits.{key}: at least 1");
            }
        }
        for (per_session, per_client) in [
            ("max_streams_per_session", "max_streams_per_client"),
            ("max_flows_per_session", "max_flows_per_client"),
        ] {
            let value = |k: &str| counts.iter().find(|(n, _)| *n == k).map_or(0, |(_, v)| *v);
            if value(per_session) > value(per_client) {
                bail!("limits.{per_session}: at most limits.{per_client}");
            }
        }
        if self.max_descriptors != 0 && self.max_descriptors_per_client > self.max_descriptors {
            bail!("limits.max_descriptors_per_client: at most limits.max_descriptors");
        }
        Ok(())
    }
}
