//! The mpflex wire format.
//!
//! Inside an authenticated, encrypted path connection the peers exchange *records*
//! (one Noise transport message each, at most [`MAX_RECORD`] bytes of plaintext). A record
//! holds one or more *frames*. Every frame is `type: u8 | len: u32 (big endian) | body`,
//! so a decoder can always skip to the next frame and reject an oversized one before it
//! allocates anything.
//!
//! Sequenced frames (`Open`, `Data`, `Fin`, `Reset`) carry a session-level sequence number
//! and are delivered to the peer's streams in that order, whatever path carried them. A
//! frame takes one number per payload byte (one if it has none, [`Frame::seq_span`]), so a
//! sender may cut a frame it has not sent yet into two that take the same numbers.
//! The others (`Ack`, `Window`, `MaxData`, `Ping`, `Pong`, `Hello`, `HelloAck`, `Close`,
//! `Owd`, `Stall`) are idempotent control frames.
#![forbid(unsafe_code)]

mod addr;
mod frame;
mod ids;
pub mod record;
mod route;

pub use addr::TargetAddr;
pub use frame::{decode_all, DatagramRun, Frame, FrameType, DATAGRAM_HEADER, HEADER_LEN, RUN_LEN};
pub use ids::{CloseCode, FlowCloseCode, Refusal, ResetCode, Tier, UnknownTier};
pub use route::{Route, RouteError, MAGIC as ROUTE_MAGIC, ROUTE_LEN, ROUTE_VERSION};

/// Protocol version carried in `Hello`; a peer of another version is refused at the join
/// (peers of different versions would misread each other's frames). 2: sequence numbers
/// count payload bytes (1 counted frames). 3: `Data` and `Fin` frames carry their stream
/// offset. 4: `Tier`. 5: `Datagram`, `FlowOpen`, `FlowClose`, `PathGone`. 6: `HelloAck`
/// names the server (its routing id and join address). 7: `Open` carries the stream's
/// allowed paths, the scheduler the client asks for and its energy mode; `Tier` 3
/// (energy standby) and 4 (off: a path at its data cap); `Allowance`. 8: `Datagrams` (a
/// flow's datagrams in a row under one header). 9: a datagram flow to port 0 carries ICMP
/// echo messages (requests out, replies back). 10: the server sends a stream's first
/// `Window` once its destination is connected (and none before), so a client may hold
/// the application's connection until then. 11: a record with no plaintext is a key
/// update: the records after it are sealed under the next key (Noise REKEY). 12: a
/// session's credit starts at [`INITIAL_SESSION_CREDIT`] each way, whatever either end's
/// configured window, until the receiver's first `MaxData`.
pub const VERSION: u8 = 12;

/// Stream payload a sender may put on its paths before the receiver's first `MaxData`
/// (the receiver sends one as soon as it has a path). Explicit, as QUIC's
/// `initial_max_data` transport parameter, so a receiver can grant less than its window
/// (a server sharing a budget among one client's sessions) or more, and no end relies on
/// the other's configuration.
pub const INITIAL_SESSION_CREDIT: u64 = 1 << 20;
/// Largest payload of a `Datagram`: the largest UDP payload over IPv4 (65535 − 20-byte IP
/// header − 8-byte UDP header; RFC 768, RFC 791).
pub const MAX_DATAGRAM: usize = 65_507;
/// Largest plaintext a record may carry (a Noise message is at most 65535 bytes, 16 of
/// which are the authentication tag).
pub const MAX_RECORD: usize = 65535 - 16;
/// Bytes a record takes on the wire beyond its plaintext: the 2-byte length and the 16-byte
/// authentication tag. A path's congestion window carries them too.
pub const RECORD_OVERHEAD: usize = record::LEN_PREFIX + record::TAG_LEN;
/// Largest frame body a decoder accepts. Frames never span records, so nothing larger
/// than a record can be legitimate.
pub const MAX_FRAME_BODY: usize = MAX_RECORD - HEADER_LEN;
/// Longest domain name in an `Open` (RFC 1035, also the SOCKS5 limit).
pub const MAX_DOMAIN: usize = 255;

/// Why a byte string is not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated frame: need {need} more bytes")]
    Truncated { need: usize },
    #[error("frame body of {len} bytes exceeds the limit of {max}")]
    Oversized { len: usize, max: usize },
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    #[error("malformed {frame} frame: {what}")]
    Malformed { frame: &'static str, what: &'static str },
    /// A tier or reason code with a number no variant has ([`Tier`], [`ResetCode`], …).
    #[error("unknown {what} number {value}")]
    UnknownId { what: &'static str, value: u8 },
}

// The largest datagram must fit one record, or a peer could not send it at all.
const _: () = assert!(DATAGRAM_HEADER + MAX_DATAGRAM <= MAX_FRAME_BODY);
