//! The mpflex session engine, sans-IO.
//!
//! One [`Session`] joins a client and a server over any number of paths. Every application
//! connection is a *stream*; stream bytes become sequenced frames in one session-wide
//! sequence space, handed to paths by a [`mpflex_sched::Scheduler`] only when a path can
//! send them soon (late binding). A frame stays buffered until the peer's cumulative
//! data-ACK covers it, so when a path dies everything it had not delivered is sent again on
//! the others; the receiver reorders and drops duplicates.
//!
//! The engine does no I/O and reads no clock: the driver feeds it decoded frames, path
//! statistics and the current time, and pulls out bytes to write and events to act on.

mod config;
mod owd;
mod path;
mod session;
mod stream;

pub use config::{EngineConfig, Role};
pub use owd::OwdEstimator;
pub use path::{PathCounters, PathStatus};
pub use session::{Event, PollTransmit, ProtocolError, RecvResult, Session, MIN_SPLIT, SEQUENCE_AHEAD};

/// Application stream identifier (chosen by the client, which opens all streams).
pub type StreamId = u32;

/// Maximum number of paths in one session (paths are tracked in a 64-bit mask).
pub const MAX_PATHS: usize = 64;
