use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Opens streams (the side with the applications).
    Client,
    /// Accepts streams and connects them to their destinations.
    Server,
}

/// The keepalive interval of a session that carries nothing. An idle session must cost
/// next to nothing — a phone's radio, a server holding thousands of them — and 25 s is
/// WireGuard's persistent keepalive (long enough for the stateful firewalls and NATs it
/// was chosen for) and twice an LTE radio's 11.6 s tail (Huang et al., MobiSys 2012: a
/// shorter interval keeps the radio in its high-power state for good).
pub const IDLE_KEEPALIVE: Duration = Duration::from_secs(25);

/// The shipped ceiling of a path writer's `TCP_NOTSENT_LOWAT` ([`EngineConfig::notsent_lowat`]).
pub const NOTSENT_LOWAT: u32 = 1 << 20;

/// Under queue control, a read of at least this many bytes from a path carries data (a
/// full segment), not only the peer's control frames: it is acknowledged at once
/// ([`EngineConfig::quick_ack`]).
pub const QUICK_ACK_READ: usize = 1448;

/// Engine tunables. The defaults are what ships (`[tuning]`'s defaults are read from
/// them); they suit paths from a few Mbit/s to a few Gbit/s.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub role: Role,
    /// Bytes one stream may have in flight beyond what the receiving application has read.
    pub stream_window: u64,
    /// The same, summed over all streams of the session. Bounds receiver memory.
    pub session_window: u64,
    /// Most bytes the session holds for the peer: queued from applications and sent but
    /// not yet acknowledged (framing included). The peer's credit (`MaxData`, `Window`)
    /// says what it can take, not what this side can keep: a peer that grants any credit
    /// and never acknowledges holds at most this much of our memory.
    pub send_buffer: u64,
    /// A session whose peer acknowledges nothing new for this long, while data waits for
    /// its acknowledgement and a path is up, is closed (`CloseCode::NoProgress`): an honest
    /// peer acknowledges within round trips, and a dark path is dropped long before.
    pub ack_timeout: Duration,
    /// Most unsent bytes a path's writer keeps in its kernel socket (the ceiling of its
    /// `TCP_NOTSENT_LOWAT`, late binding).
    pub notsent_lowat: u32,
    /// A path restarting from the initial window after an idle spell drops a slow-start
    /// threshold below that window (see [`crate::PathWriter`]), where its socket allows it
    /// ([`crate::PathSocket::ssthresh_reset`]).
    pub fresh_ssthresh: bool,
    /// Largest payload of one Data frame.
    pub max_frame_data: usize,
    /// Acknowledge at least this often while data is arriving.
    pub ack_delay: Duration,
    /// ... or after this many payload bytes, whichever comes first.
    pub ack_every_bytes: u64,
    /// Send a keepalive on an idle path this often.
    pub keepalive: Duration,
    /// The same while the session carries nothing (no stream, no datagram flow): never
    /// less than `keepalive`. Such a path's silence is excused for the difference, so it
    /// is declared dead `path_timeout + idle_keepalive - keepalive` after it last heard
    /// anything; once a stream or flow opens, `path_timeout` after that at the latest.
    pub idle_keepalive: Duration,
    /// A path that has received nothing for this long is declared dead.
    pub path_timeout: Duration,
    /// Most concurrent streams a peer may open.
    pub max_streams: usize,
    /// Smart reinjection: when frames waiting behind a gap plus data the applications have
    /// not read fill this fraction of the session window, the receiver asks for the
    /// missing frame to be sent again on another path (`Stall`).
    pub stall_fraction: f64,
    /// Queue control's delay target ([`crate::PathWriter::with_queue_target`]): QCUT-D's
    /// 20 ms. It also bounds what the session accepts from applications ahead of the paths
    /// (see [`crate::Session::send_capacity`]). Zero: off.
    pub queue_target: Duration,
    /// Queue control engages for a sustained backlog too (an upload that outruns the
    /// paths for [`crate::session::SUSTAINED_BACKLOG`]), not only while interactive
    /// traffic is active.
    pub queue_control_sustained: bool,
    /// Hedge small interactive frames: one of at most [`crate::session::HEDGE_MAX_PAYLOAD`]
    /// bytes also goes, as a copy, on the path that would deliver it next, when that copy
    /// arrives before the first path could repair a loss of it (see
    /// [`crate::Session`]'s `hedge`). A request lost at a bottleneck otherwise waits a
    /// round trip for the fast retransmission, or a retransmission timeout.
    pub hedge_interactive: bool,
    /// Proactive handover (WearMan, see [`crate::supervisor`]): a path whose quality
    /// trends say it is failing takes no new data and its frames are copied elsewhere
    /// before it fails. Off: paths leave only when they fall silent or die. Off by
    /// default: its loss and RTT indicators read the queues and drops of a bulk upload as
    /// failure, and it shortened no handover gap (docs/paths.md).
    pub proactive: bool,
    /// Suspect a silent path (see [`crate::supervisor`]): what a path holding data that
    /// shows no sign of life for max(3 × its minimum RTT, 150 ms) holds is copied to the
    /// others (from two thirds of that silence), it takes nothing new, and it is probed
    /// with fresh connections. Off, a silent path keeps its frames until `path_timeout`
    /// declares it dead: the reactive handling of a plain TCP application, which waits
    /// for its socket to fail (WearMan's baseline H1, Guo ch. VI), kept for measuring
    /// against.
    pub suspicion: bool,
    /// The least time a path hinted weak by its link layer stays degraded after the last
    /// weak hint ([`crate::Session::set_link_hint`]): a hint that clears sooner takes
    /// effect only then, so a source that alternates cannot make the path ping-pong.
    pub link_hint_hold: Duration,
    /// Most datagrams waiting for a path; beyond it the oldest are dropped
    /// ([`crate::DatagramCounters::dropped_queue_full`]).
    pub datagram_queue: usize,
    /// Most datagram flows a peer may open; a `FlowOpen` beyond it is refused with
    /// [`mpflex_wire::FlowCloseCode::TooMany`].
    pub max_flows: usize,
}

impl EngineConfig {
    /// Whether queue control is on (a non-zero [`EngineConfig::queue_target`]).
    pub fn queue_control(&self) -> bool {
        !self.queue_target.is_zero()
    }

    /// Whether the driver acknowledges a read of `len` bytes from a path at once
    /// (`TCP_QUICKACK`). Under queue control the peer's writer keeps its path
    /// application-limited and counts what is unacknowledged as held: an ACK delayed here
    /// (up to tens of ms for a lone segment) reads as a queue there and throttles the
    /// path below its rate. Not for reads of the peer's control frames alone (its
    /// acknowledgements and arrival reports, well under a segment): their ACKs ride on
    /// this side's own data, and acknowledged at once they go as pure ACKs, about one per
    /// data segment on a slow uplink.
    pub fn quick_ack(&self, len: usize) -> bool {
        self.queue_control() && len >= QUICK_ACK_READ
    }

    /// The keepalive interval of a session that carries nothing.
    pub fn idle_keepalive(&self) -> Duration {
        self.idle_keepalive.max(self.keepalive)
    }

    pub fn new(role: Role) -> Self {
        EngineConfig {
            role,
            stream_window: 4 << 20,
            session_window: 64 << 20,
            // Half the receive window: 2.6 Gbit/s at a 100 ms round trip.
            send_buffer: 32 << 20,
            ack_timeout: Duration::from_secs(30),
            notsent_lowat: NOTSENT_LOWAT,
            fresh_ssthresh: true,
            max_frame_data: 16 * 1024,
            ack_delay: Duration::from_millis(5),
            ack_every_bytes: 128 * 1024,
            keepalive: Duration::from_secs(1),
            idle_keepalive: IDLE_KEEPALIVE,
            path_timeout: Duration::from_secs(5),
            max_streams: 16384,
            stall_fraction: 0.75,
            queue_target: Duration::from_millis(20),
            queue_control_sustained: true,
            hedge_interactive: true,
            proactive: false,
            suspicion: true,
            link_hint_hold: Duration::from_secs(3),
            datagram_queue: 1024,
            max_flows: 16384,
        }
    }
}
