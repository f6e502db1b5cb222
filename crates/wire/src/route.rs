//! The routing preamble: the bytes a client sends in the clear at the start of every path
//! connection, before the Noise handshake, so that an L4 balancer in front of a pool of
//! servers can send every path of a session to the server that holds it.
//!
//! ```text
//!  0        1         2                3
//! +--------+---------+--------+--------+
//! | 'm'    | version | server id (BE)  |     version 1: 4 bytes
//! +--------+---------+--------+--------+
//! ```
//!
//! Server id 0 means "any server": the first path of a new session carries it, and the
//! server that takes the session names its own id in its (encrypted) `HelloAck`; every
//! later path connection of the session carries that id. The preamble names a server and
//! nothing else — no session, no client — so an observer learns from it only what the
//! balancer needs. A balancer matches the first four bytes (HAProxy:
//! `req.payload(0,4),hex`, `6D01` followed by the id in hex).
//!
//! The magic byte tells a preamble from the 2-byte length that opens a Noise handshake of
//! a client without one (its first byte is 0), and from any other protocol on the port.
//! The version byte says how many bytes follow, so a later version may carry more (an
//! encrypted id, QUIC-LB style) and an old parser refuses it by name.

use std::fmt;

/// First byte of every preamble (ASCII `m`).
pub const MAGIC: u8 = b'm';
/// The preamble version this build sends and accepts.
pub const ROUTE_VERSION: u8 = 1;
/// Bytes of a version-1 preamble.
pub const ROUTE_LEN: usize = 4;

/// Where a path connection asks to be routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// Any server of the pool: the first path of a new session.
    Any,
    /// The server with this id (1..=65535).
    Server(std::num::NonZeroU16),
}

impl Route {
    /// The route naming server `id`; 0 is [`Route::Any`].
    pub fn from_id(id: u16) -> Route {
        std::num::NonZeroU16::new(id).map_or(Route::Any, Route::Server)
    }

    /// The id on the wire (0 for any).
    pub fn id(self) -> u16 {
        match self {
            Route::Any => 0,
            Route::Server(id) => id.get(),
        }
    }

    /// The preamble's bytes.
    pub fn encode(self) -> [u8; ROUTE_LEN] {
        let id = self.id().to_be_bytes();
        [MAGIC, ROUTE_VERSION, id[0], id[1]]
    }

    /// Parses the preamble at the start of `buf`: `Ok(None)` if more bytes are needed,
    /// else the route and the bytes it took. Only the preamble's own bytes are looked at,
    /// so a caller may read exactly [`ROUTE_LEN`] bytes before calling this.
    pub fn decode(buf: &[u8]) -> Result<Option<(Route, usize)>, RouteError> {
        match buf {
            [] => Ok(None),
            [m, ..] if *m != MAGIC => Err(RouteError::NotAPreamble(*m)),
            [_] => Ok(None),
            [_, v, ..] if *v != ROUTE_VERSION => Err(RouteError::Version(*v)),
            [_, _, a, b, ..] => Ok(Some((Route::from_id(u16::from_be_bytes([*a, *b])), ROUTE_LEN))),
            _ => Ok(None),
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Any => f.write_str("any server"),
            Route::Server(id) => write!(f, "server {id}"),
        }
    }
}

/// Why the first bytes of a path connection are not a routing preamble.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error(
        "no routing preamble (first byte {0:#04x}, expected {MAGIC:#04x}): a client of an older release, or not mpflex"
    )]
    NotAPreamble(u8),
    #[error("routing preamble version {0}, this build reads version {ROUTE_VERSION}: run the same mpflex release on both ends")]
    Version(u8),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_bytes() {
        assert_eq!(Route::Any.encode(), [0x6d, 1, 0, 0]);
        assert_eq!(Route::from_id(0x0203).encode(), [0x6d, 1, 2, 3]);
        assert_eq!(Route::decode(&[0x6d, 1, 0, 7, 9]), Ok(Some((Route::from_id(7), 4))));
        assert_eq!(Route::decode(&[0x6d, 1, 0]), Ok(None));
        assert_eq!(Route::decode(&[]), Ok(None));
        // A Noise handshake without a preamble starts with its length's high byte, 0.
        assert_eq!(Route::decode(&[0, 0x68]), Err(RouteError::NotAPreamble(0)));
        assert_eq!(Route::decode(&[0x6d, 2, 0, 1]), Err(RouteError::Version(2)));
        assert_eq!(Route::decode(&[0x6d, 2]), Err(RouteError::Version(2)));
    }

    proptest! {
        #[test]
        fn roundtrip(id in any::<u16>(), tail in prop::collection::vec(any::<u8>(), 0..8)) {
            let r = Route::from_id(id);
            let mut b = r.encode().to_vec();
            b.extend_from_slice(&tail);
            prop_assert_eq!(Route::decode(&b), Ok(Some((r, ROUTE_LEN))));
            for cut in 0..ROUTE_LEN {
                prop_assert_eq!(Route::decode(&b[..cut]), Ok(None));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..16)) {
            if let Ok(Some((r, n))) = Route::decode(&b) {
                prop_assert_eq!(&r.encode()[..], &b[..n]);
            }
        }
    }
}
