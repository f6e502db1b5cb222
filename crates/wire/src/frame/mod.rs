//! Frame types and their codec.

use bytes::{Buf, BufMut, Bytes};
use std::net::SocketAddr;

use crate::{CloseCode, FlowCloseCode, ResetCode, TargetAddr, Tier, WireError, MAX_FRAME_BODY};

/// `type: u8 | len: u32`.
pub const HEADER_LEN: usize = 5;

/// A `Datagram`'s body ahead of its payload: `flow: u32 | seq: u16 | flags: u8`. With the
/// largest payload ([`crate::MAX_DATAGRAM`]) the frame fills a record exactly.
pub const DATAGRAM_HEADER: usize = 4 + 2 + 1;

/// Each datagram's length ahead of its payload in a [`Frame::Datagrams`].
pub const RUN_LEN: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameType {
    Hello = 1,
    HelloAck = 2,
    Open = 3,
    Data = 4,
    Fin = 5,
    Reset = 6,
    Ack = 7,
    Window = 8,
    MaxData = 9,
    Ping = 10,
    Pong = 11,
    Close = 12,
    Owd = 13,
    Stall = 14,
    Tier = 15,
    Datagram = 16,
    FlowOpen = 17,
    FlowClose = 18,
    PathGone = 19,
    Allowance = 20,
    Datagrams = 21,
}

impl FrameType {
    /// The frame type's name, for errors and logs.
    pub fn name(self) -> &'static str {
        match self {
            FrameType::Hello => "Hello",
            FrameType::HelloAck => "HelloAck",
            FrameType::Open => "Open",
            FrameType::Data => "Data",
            FrameType::Fin => "Fin",
            FrameType::Reset => "Reset",
            FrameType::Ack => "Ack",
            FrameType::Window => "Window",
            FrameType::MaxData => "MaxData",
            FrameType::Ping => "Ping",
            FrameType::Pong => "Pong",
            FrameType::Close => "Close",
            FrameType::Owd => "Owd",
            FrameType::Stall => "Stall",
            FrameType::Tier => "Tier",
            FrameType::Datagram => "Datagram",
            FrameType::Datagrams => "Datagrams",
            FrameType::FlowOpen => "FlowOpen",
            FrameType::FlowClose => "FlowClose",
            FrameType::PathGone => "PathGone",
            FrameType::Allowance => "Allowance",
        }
    }

    fn from_u8(t: u8) -> Option<Self> {
        use FrameType::*;
        Some(match t {
            1 => Hello,
            2 => HelloAck,
            3 => Open,
            4 => Data,
            5 => Fin,
            6 => Reset,
            7 => Ack,
            8 => Window,
            9 => MaxData,
            10 => Ping,
            11 => Pong,
            12 => Close,
            13 => Owd,
            14 => Stall,
            15 => Tier,
            16 => Datagram,
            17 => FlowOpen,
            18 => FlowClose,
            19 => PathGone,
            20 => Allowance,
            21 => Datagrams,
            _ => return None,
        })
    }
}

/// One protocol message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// First frame on a new path connection: which session it joins and which path it is.
    Hello {
        version: u8,
        session: [u8; 16],
        path: u8,
    },
    /// The server's answer; `fresh` says the server created the session just now (so a
    /// client that had streams in flight knows the server lost them). `server` is the
    /// server's routing id, which the client's later path connections name in their
    /// routing preamble (0: the server has none), and `join` an address where the
    /// session's later paths may reach this server directly, bypassing a balancer.
    HelloAck {
        session: [u8; 16],
        fresh: bool,
        server: u16,
        join: Option<SocketAddr>,
    },
    /// Opens `stream` towards `addr`, carrying the first bytes the application sent.
    /// `paths` (a bit per path index) are the paths the stream's bytes may use in both
    /// directions, its policy rule's choice; `scheduler` the scheduler the client asks
    /// for (1 + its index in the scheduler list; 0: the peer's default); `energy` its
    /// energy mode (0: the session's, 1: energy-aware, 2: off).
    Open {
        seq: u64,
        stream: u32,
        ts: u32,
        paths: u64,
        scheduler: u8,
        energy: u8,
        addr: TargetAddr,
        data: Bytes,
    },
    Data {
        seq: u64,
        stream: u32,
        /// Where `data` starts in the stream (an `Open`'s bytes start at 0): the receiver
        /// hands a frame to its stream as soon as the stream's earlier bytes are in, even
        /// while other streams' frames before it in the session are still missing.
        offset: u64,
        /// Sender's clock in microseconds (wrapping), for one-way-delay estimation.
        ts: u32,
        data: Bytes,
    },
    /// The sender will write no more on `stream` (half-close); `offset` is the stream's
    /// final length.
    Fin {
        seq: u64,
        stream: u32,
        offset: u64,
    },
    /// Abort `stream` in both directions.
    Reset {
        seq: u64,
        stream: u32,
        code: ResetCode,
    },
    /// Every sequence number below `cum` has been received (each sequenced frame takes
    /// [`Frame::seq_span`] of them).
    Ack {
        cum: u64,
    },
    /// The sender may send `stream` bytes up to offset `max`.
    Window {
        stream: u32,
        max: u64,
    },
    /// The sender may send stream bytes up to `max`, summed over all streams.
    MaxData {
        max: u64,
    },
    Ping {
        id: u64,
    },
    Pong {
        id: u64,
    },
    /// The session ends.
    Close {
        code: CloseCode,
    },
    /// Arrival report: sequenced frame `seq`, stamped `ts` (the sender's clock), arrived on
    /// path `path` when the receiver's clock read `ts + delay` (both microseconds,
    /// wrapping). The two clocks are not synchronised, so `delay` is the one-way delay
    /// plus a constant offset: only differences between paths mean anything. It also tells
    /// the sender that `seq` needs no further copy (a selective acknowledgement).
    Owd {
        path: u8,
        seq: u64,
        ts: u32,
        delay: u32,
    },
    /// The receiver's reorder buffer passed 75% of its window while it waits for
    /// sequence `cum`: the frames from `cum` on are stuck on a slow or broken path.
    Stall {
        cum: u64,
    },
    /// (client) The path this frame arrives on is of tier `tier`: the server schedules by
    /// it too, as MPTCP's MP_PRIO tells the peer of a backup subflow.
    Tier {
        tier: Tier,
    },
    /// One UDP datagram of `flow`. Not sequenced: it is never acknowledged, re-sent or
    /// reordered, and one lost with its path stays lost (UDP's own contract; RFC 768).
    /// `seq` numbers the flow's datagrams (wrapping), one numbering for `copied` ones and
    /// one for the rest: a receiver drops the second of two `copied` datagrams (a
    /// realtime flow's datagrams go on two paths), and puts the others back in the order
    /// the sender's paths took them.
    Datagram {
        flow: u32,
        seq: u16,
        copied: bool,
        data: Bytes,
    },
    /// Datagrams of `flow` numbered `seq`, `seq + 1`, … (wrapping), all `copied` or none:
    /// what a path takes of one flow in a row, under one header. Each datagram then costs
    /// its 2-byte length instead of a 12-byte frame of its own (1 % of a 1,200-byte QUIC
    /// packet, which a link carrying datagrams over TCP pays in capacity). The receiver
    /// handles each as a [`Frame::Datagram`].
    Datagrams {
        flow: u32,
        seq: u16,
        copied: bool,
        data: Vec<Bytes>,
    },
    /// (client) Opens datagram `flow` towards `addr`. Sent on each path ahead of the
    /// flow's first datagram there (paths deliver in order, datagrams may go on any), so
    /// it arrives more than once: opening an open flow again changes nothing.
    FlowOpen {
        flow: u32,
        addr: TargetAddr,
    },
    /// Datagram `flow` is gone, for the reason `code`.
    FlowClose {
        flow: u32,
        code: FlowCloseCode,
    },
    /// (client) Path `path`'s connection of join count `joins` (the `joins`-th time that
    /// path joined the session) is gone: its link went down, lost its carrier or its
    /// address. Sent on the other paths, so the server re-sends what it had sent on that
    /// path at once instead of waiting for the path to fall silent (MPTCP-MA: act on the
    /// link's own signal). A server that counted another number of joins for the path
    /// has a newer connection there and ignores it.
    PathGone {
        path: u8,
        joins: u32,
    },
    /// (client) The path this frame arrives on is under a data cap: the server may have
    /// handed it at most `limit` frame bytes in all (its `bytes_sent` count of the path).
    /// Absolute, so a frame that arrives late or twice grants nothing more; the client
    /// reserves what it grants from what is left of the cap.
    Allowance {
        limit: u64,
    },
}

impl Frame {
    /// The stream a stream frame belongs to.
    pub fn stream(&self) -> Option<u32> {
        match self {
            Frame::Open { stream, .. }
            | Frame::Data { stream, .. }
            | Frame::Fin { stream, .. }
            | Frame::Reset { stream, .. } => Some(*stream),
            _ => None,
        }
    }

    pub fn frame_type(&self) -> FrameType {
        match self {
            Frame::Hello { .. } => FrameType::Hello,
            Frame::HelloAck { .. } => FrameType::HelloAck,
            Frame::Open { .. } => FrameType::Open,
            Frame::Data { .. } => FrameType::Data,
            Frame::Fin { .. } => FrameType::Fin,
            Frame::Reset { .. } => FrameType::Reset,
            Frame::Ack { .. } => FrameType::Ack,
            Frame::Window { .. } => FrameType::Window,
            Frame::MaxData { .. } => FrameType::MaxData,
            Frame::Ping { .. } => FrameType::Ping,
            Frame::Pong { .. } => FrameType::Pong,
            Frame::Close { .. } => FrameType::Close,
            Frame::Owd { .. } => FrameType::Owd,
            Frame::Stall { .. } => FrameType::Stall,
            Frame::Tier { .. } => FrameType::Tier,
            Frame::Datagram { .. } => FrameType::Datagram,
            Frame::Datagrams { .. } => FrameType::Datagrams,
            Frame::FlowOpen { .. } => FrameType::FlowOpen,
            Frame::FlowClose { .. } => FrameType::FlowClose,
            Frame::PathGone { .. } => FrameType::PathGone,
            Frame::Allowance { .. } => FrameType::Allowance,
        }
    }

    /// Restamps a data-carrying frame with the sender's clock at (re)transmission.
    pub fn set_ts(&mut self, now: u32) {
        if let Frame::Open { ts, .. } | Frame::Data { ts, .. } = self {
            *ts = now;
        }
    }

    /// The sender's timestamp of a data-carrying frame.
    pub fn ts(&self) -> Option<u32> {
        match self {
            Frame::Open { ts, .. } | Frame::Data { ts, .. } => Some(*ts),
            _ => None,
        }
    }

    /// The session sequence number of a sequenced frame: the first of the
    /// [`Frame::seq_span`] numbers it takes.
    pub fn seq(&self) -> Option<u64> {
        match self {
            Frame::Open { seq, .. } | Frame::Data { seq, .. } | Frame::Fin { seq, .. } | Frame::Reset { seq, .. } => {
                Some(*seq)
            }
            _ => None,
        }
    }

    /// How many session sequence numbers a sequenced frame takes: one per payload byte, and
    /// one for a frame without payload (a Fin, a Reset, an Open with no data). The next
    /// frame's `seq` is this frame's plus its span, so a frame never sent yet can be split
    /// into two that cover the same numbers (see the engine's sending).
    pub fn seq_span(&self) -> u64 {
        (self.payload_len() as u64).max(1)
    }

    /// Stream payload bytes carried (counted by flow control).
    pub fn payload_len(&self) -> usize {
        match self {
            Frame::Open { data, .. } | Frame::Data { data, .. } => data.len(),
            _ => 0,
        }
    }

    fn body_len(&self) -> usize {
        match self {
            Frame::Hello { .. } => 1 + 16 + 1,
            Frame::HelloAck { join, .. } => 16 + 1 + 2 + join.map_or(1, |a| TargetAddr::Ip(a).encoded_len()),
            Frame::Open { addr, data, .. } => 8 + 4 + 4 + 8 + 1 + 1 + addr.encoded_len() + data.len(),
            Frame::Data { data, .. } => 8 + 4 + 8 + 4 + data.len(),
            Frame::Fin { .. } => 8 + 4 + 8,
            Frame::Reset { .. } => 8 + 4 + 1,
            Frame::Ack { .. }
            | Frame::MaxData { .. }
            | Frame::Ping { .. }
            | Frame::Pong { .. }
            | Frame::Stall { .. } => 8,
            Frame::Window { .. } => 4 + 8,
            Frame::Close { .. } | Frame::Tier { .. } => 1,
            Frame::PathGone { .. } => 1 + 4,
            Frame::Allowance { .. } => 8,
            Frame::Owd { .. } => 1 + 8 + 4 + 4,
            Frame::Datagram { data, .. } => DATAGRAM_HEADER + data.len(),
            Frame::Datagrams { data, .. } => DATAGRAM_HEADER + data.iter().map(|d| RUN_LEN + d.len()).sum::<usize>(),
            Frame::FlowOpen { addr, .. } => 4 + addr.encoded_len(),
            Frame::FlowClose { .. } => 4 + 1,
        }
    }

    /// Bytes this frame takes on the wire.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }

    /// Appends the frame to `out`.
    pub fn encode(&self, out: &mut impl BufMut) {
        out.put_u8(self.frame_type() as u8);
        out.put_u32(self.body_len() as u32);
        match self {
            Frame::Hello { version, session, path } => {
                out.put_u8(*version);
                out.put_slice(session);
                out.put_u8(*path);
            }
            Frame::HelloAck {
                session,
                fresh,
                server,
                join,
            } => {
                out.put_slice(session);
                out.put_u8(*fresh as u8);
                out.put_u16(*server);
                match join {
                    Some(a) => TargetAddr::Ip(*a).encode(out),
                    None => out.put_u8(0),
                }
            }
            Frame::Open { .. } => self.encode_open(out),
            Frame::Data {
                seq,
                stream,
                offset,
                ts,
                data,
            } => {
                out.put_u64(*seq);
                out.put_u32(*stream);
                out.put_u64(*offset);
                out.put_u32(*ts);
                out.put_slice(data);
            }
            Frame::Fin { seq, stream, offset } => {
                out.put_u64(*seq);
                out.put_u32(*stream);
                out.put_u64(*offset);
            }
            Frame::Reset { seq, stream, code } => {
                out.put_u64(*seq);
                out.put_u32(*stream);
                out.put_u8(code.wire());
            }
            Frame::Ack { cum: v }
            | Frame::MaxData { max: v }
            | Frame::Ping { id: v }
            | Frame::Pong { id: v }
            | Frame::Stall { cum: v } => out.put_u64(*v),
            Frame::Owd { path, seq, ts, delay } => {
                out.put_u8(*path);
                out.put_u64(*seq);
                out.put_u32(*ts);
                out.put_u32(*delay);
            }
            Frame::Window { stream, max } => {
                out.put_u32(*stream);
                out.put_u64(*max);
            }
            Frame::Close { code } => out.put_u8(code.wire()),
            Frame::Tier { tier } => out.put_u8(tier.wire()),
            Frame::Datagram {
                flow,
                seq,
                copied,
                data,
            } => {
                encode_datagram_header(out, *flow, *seq, *copied);
                out.put_slice(data);
            }
            Frame::Datagrams {
                flow,
                seq,
                copied,
                data,
            } => {
                encode_datagram_header(out, *flow, *seq, *copied);
                for d in data {
                    out.put_u16(d.len() as u16);
                    out.put_slice(d);
                }
            }
            Frame::FlowOpen { flow, addr } => {
                out.put_u32(*flow);
                addr.encode(out);
            }
            Frame::FlowClose { flow, code } => {
                out.put_u32(*flow);
                out.put_u8(code.wire());
            }
            Frame::PathGone { path, joins } => {
                out.put_u8(*path);
                out.put_u32(*joins);
            }
            Frame::Allowance { limit } => out.put_u64(*limit),
        }
    }

    /// An `Open`'s body: its numbers, then the address, then the first bytes.
    fn encode_open(&self, out: &mut impl BufMut) {
        let Frame::Open {
            seq,
            stream,
            ts,
            paths,
            scheduler,
            energy,
            addr,
            data,
        } = self
        else {
            unreachable!("encode_open on another frame")
        };
        out.put_u64(*seq);
        out.put_u32(*stream);
        out.put_u32(*ts);
        out.put_u64(*paths);
        out.put_u8(*scheduler);
        out.put_u8(*energy);
        addr.encode(out);
        out.put_slice(data);
    }

    /// Decodes one frame from the front of `buf`, advancing it. Payloads are sliced out of
    /// `buf` without copying.
    pub fn decode(buf: &mut Bytes) -> Result<Frame, WireError> {
        if buf.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                need: HEADER_LEN - buf.len(),
            });
        }
        let t = buf[0];
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        if len > MAX_FRAME_BODY {
            return Err(WireError::Oversized {
                len,
                max: MAX_FRAME_BODY,
            });
        }
        let ty = FrameType::from_u8(t).ok_or(WireError::UnknownType(t))?;
        if buf.len() < HEADER_LEN + len {
            return Err(WireError::Truncated {
                need: HEADER_LEN + len - buf.len(),
            });
        }
        buf.advance(HEADER_LEN);
        let body = buf.split_to(len);
        decode_body(ty, body)
    }
}

/// The header a `Datagram` and a `Datagrams` run share ([`DATAGRAM_HEADER`] bytes).
fn encode_datagram_header(out: &mut impl BufMut, flow: u32, seq: u16, copied: bool) {
    out.put_u32(flow);
    out.put_u16(seq);
    out.put_u8(copied as u8);
}

/// Decodes every frame of a record. A record must hold whole frames only.
pub fn decode_all(mut record: Bytes) -> Result<Vec<Frame>, WireError> {
    let mut out = Vec::new();
    while !record.is_empty() {
        out.push(Frame::decode(&mut record)?);
    }
    Ok(out)
}

mod decode;
mod run;
use decode::decode_body;
pub use run::DatagramRun;

#[cfg(test)]
mod tests;
