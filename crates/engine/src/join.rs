//! Joining a session: the first exchange on every path connection.
//!
//! After the Noise handshake the client's first record is a `Hello` naming the protocol
//! version, the session (a random token the client chose for its lifetime) and the path;
//! the server answers `HelloAck`, saying whether it created the session just now. A
//! client that carried data before and hears `fresh` knows the server lost its state
//! (it restarted), so every stream of the session is gone ([`crate::Session::joined`]).
//! Only then do sequenced frames flow on the path.

use std::net::SocketAddr;

use mpflex_wire::{CloseCode, Frame, VERSION};

use crate::MAX_PATHS;

/// The most bytes a peer may send before its join record is complete.
pub const MAX_JOIN_BYTES: usize = 4096;

/// Why a join failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    #[error("client speaks protocol version {theirs}, this server {ours}: run the same mpflex release on both ends")]
    Version { theirs: u8, ours: u8 },
    #[error("path index {0} out of range")]
    PathOutOfRange(u8),
    #[error("first record is not a valid Hello: {0}")]
    NotHello(String),
    #[error("unexpected answer to Hello: {0}")]
    NotHelloAck(String),
    #[error("{}", refusal(*.0))]
    Refused(CloseCode),
}

/// What a client says of a join the server answered with `Close { code }`.
fn refusal(code: CloseCode) -> String {
    match code {
        CloseCode::Limit => "the server refused the join at its limits: this client key holds as many \
            sessions or descriptors as the server's [limits] allow (max_sessions_per_client, \
            max_descriptors_per_client); stop another client that uses this key, or ask the server's operator"
            .to_string(),
        c => format!("the server refused the join ({c})"),
    }
}

/// A path's request to join a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinRequest {
    pub session: [u8; 16],
    pub path: usize,
}

/// (client) The `Hello` for `path` of `session`.
pub fn hello(session: [u8; 16], path: usize) -> Frame {
    Frame::Hello {
        version: VERSION,
        session,
        path: path as u8,
    }
}

/// (server) Checks a path connection's first record.
pub fn accept_hello(frames: &[Frame]) -> Result<JoinRequest, JoinError> {
    match frames {
        [Frame::Hello {
            version: VERSION,
            session,
            path,
        }] if (*path as usize) < MAX_PATHS => Ok(JoinRequest {
            session: *session,
            path: *path as usize,
        }),
        [Frame::Hello {
            version: VERSION, path, ..
        }] => Err(JoinError::PathOutOfRange(*path)),
        [Frame::Hello { version, .. }] => Err(JoinError::Version {
            theirs: *version,
            ours: VERSION,
        }),
        _ => Err(JoinError::NotHello(kinds(frames))),
    }
}

/// What a server says about itself in its answer to a join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerInfo {
    /// Its routing id (0: none), for the routing preamble of the session's later paths.
    pub id: u16,
    /// Where the session's later paths may reach it directly.
    pub join: Option<SocketAddr>,
}

/// The server's answer to a join, as the client reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinAck {
    /// The server created the session for this join.
    pub fresh: bool,
    pub server: ServerInfo,
}

/// (server) The answer to a join; `fresh`: the session was created for it.
pub fn hello_ack(session: [u8; 16], fresh: bool, server: ServerInfo) -> Frame {
    Frame::HelloAck {
        session,
        fresh,
        server: server.id,
        join: server.join,
    }
}

/// (server) The answer to a join the server refuses: the client reads it as
/// [`JoinError::Refused`].
pub fn refuse(code: CloseCode) -> Frame {
    Frame::Close { code }
}

/// (client) Checks the server's answer for `session`.
pub fn accept_hello_ack(frames: &[Frame], session: [u8; 16]) -> Result<JoinAck, JoinError> {
    match frames {
        [Frame::HelloAck {
            session: s,
            fresh,
            server,
            join,
        }] if *s == session => Ok(JoinAck {
            fresh: *fresh,
            server: ServerInfo {
                id: *server,
                join: *join,
            },
        }),
        [Frame::Close { code }] => Err(JoinError::Refused(*code)),
        _ => Err(JoinError::NotHelloAck(kinds(frames))),
    }
}

/// The kinds of `frames` ("2 frames: Data, Ack"), for an error: never their contents,
/// which were decrypted and may be anyone's data.
fn kinds(frames: &[Frame]) -> String {
    let names: Vec<String> = frames
        .iter()
        .map(|f| {
            let d = format!("{f:?}");
            d.split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    format!("{} frames: {}", frames.len(), names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_round_trips_and_its_answer_is_matched_to_the_session() {
        let req = accept_hello(&[hello([7; 16], 3)]).unwrap();
        assert_eq!(
            req,
            JoinRequest {
                session: [7; 16],
                path: 3
            }
        );
        let me = ServerInfo {
            id: 3,
            join: Some("192.0.2.3:7000".parse().unwrap()),
        };
        assert_eq!(
            accept_hello_ack(&[hello_ack([7; 16], true, me)], [7; 16]),
            Ok(JoinAck {
                fresh: true,
                server: me
            })
        );
        assert!(
            accept_hello_ack(&[hello_ack([8; 16], true, me)], [7; 16]).is_err(),
            "another session"
        );
    }

    #[test]
    fn a_bad_join_is_refused_with_its_reason() {
        let old = Frame::Hello {
            version: VERSION - 1,
            session: [0; 16],
            path: 0,
        };
        assert_eq!(
            accept_hello(&[old]),
            Err(JoinError::Version {
                theirs: VERSION - 1,
                ours: VERSION
            })
        );
        assert_eq!(
            accept_hello(&[hello([0; 16], 200)]),
            Err(JoinError::PathOutOfRange(200))
        );
        assert!(matches!(
            accept_hello(&[Frame::Ping { id: 1 }]),
            Err(JoinError::NotHello(_))
        ));
        assert!(matches!(accept_hello(&[]), Err(JoinError::NotHello(_))));
        // A refusal says why in words.
        let e = accept_hello_ack(&[refuse(CloseCode::Limit)], [1; 16]).unwrap_err();
        assert!(e.to_string().contains("max_sessions_per_client"), "{e}");
        // The error names what came, never what it carried (decrypted: anyone's data).
        let e = accept_hello(&[Frame::Ping { id: 0x5ec2e7 }, hello([0x42; 16], 0)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "first record is not a valid Hello: 2 frames: Ping, Hello"
        );
    }
}
