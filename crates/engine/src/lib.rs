//! The mpflex session engine, sans-IO.
//!
//! One [`Session`] joins a client and a server over any number of paths. Every application
//! connection is a *stream*; stream bytes become sequenced frames in one session-wide
//! sequence space, handed to paths by a [`mpflex_sched::Scheduler`] only when a path can
//! send them soon (late binding, [`PathWriter`]). A frame stays buffered until the peer's
//! cumulative data-ACK covers it, so when a path dies everything it had not delivered is
//! sent again on the others; the receiver reorders and drops duplicates.
//!
//! The engine does no I/O and reads no clock: the driver feeds it decoded frames, the
//! kernel's path statistics ([`TcpInfo`]) and the current time, and pulls out bytes to
//! write and events to act on. `harness` (feature `harness`, for tests) runs a client and a
//! server engine against each other over simulated paths and sockets, with a virtual clock.
//!
//! Datagram flows (UDP) ride beside the streams, outside the sequence: `datagram`.
//!
//! Module map: `session` (the thin owner), `send`, `recv`, `flow`, `paths`, `control`,
//! `reinject` (its sub-machines), `supervisor` (path states, suspicion, quality trends,
//! tiers), `class` (traffic classes), `writer` and `kernel` (late binding), `join` (the path
//! join exchange), `owd` (one-way-delay estimation), `config`.
#![forbid(unsafe_code)]

mod class;
mod config;
mod control;
mod datagram;
pub mod emptcp;
pub mod energy;
mod flow;
#[cfg(any(test, feature = "harness"))]
pub mod harness;
pub mod join;
mod kernel;
mod owd;
mod paths;
mod recv;
mod reinject;
mod send;
mod session;
mod supervisor;
mod writer;

pub use class::{ClassLatency, LatencySummary, TrafficClass, UnknownClass, BULK_BURST, BURST_IDLE, TURN_GAP};
pub use config::{EngineConfig, Role, IDLE_KEEPALIVE, NOTSENT_LOWAT, QUICK_ACK_READ};
pub use datagram::{
    DatagramClass, DatagramCounters, FlowId, COPY_WAIT, MAX_WAIT, QUEUE_BYTES, REALTIME_MAX_LEN, REALTIME_MAX_RATE,
};
pub use flow::{CreditPool, MIN_CREDIT};
pub use kernel::{RateEstimate, TcpInfo, INFINITE_SSTHRESH, INIT_CWND};
pub use mpflex_sched::{SchedulerKind, UnknownScheduler};
pub use mpflex_wire::{CloseCode, FlowCloseCode, ResetCode, Tier, UnknownTier};
pub use owd::OwdEstimator;
pub use paths::{LinkHint, PathCounters, PathStatus};
pub use send::{ALL_PATHS, MIN_SPLIT, SEQUENCE_AHEAD};
pub use session::{
    EnergyAwareView, EnergyMode, Event, PollTransmit, ProtocolError, RecvResult, Session, SessionCounters,
};
pub use supervisor::PathState;
pub use writer::{
    Budget, PathSocket, PathWriter, QueuePhase, RampTest, SocketWants, WriterStep, INITIAL_LOWAT, MIN_LOWAT,
};

/// Application stream identifier (chosen by the client, which opens all streams).
pub type StreamId = u32;

/// Maximum number of paths in one session (paths are tracked in a 64-bit mask).
pub const MAX_PATHS: usize = 64;
