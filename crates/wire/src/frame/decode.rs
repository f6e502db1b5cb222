//! Frame bodies from bytes: each frame type's layout read back, every length and flag
//! checked before it is trusted, so a malformed body is a typed error and never a panic.

use bytes::{Buf, Bytes};

use super::{run, Frame, FrameType, DATAGRAM_HEADER};
use crate::{CloseCode, FlowCloseCode, ResetCode, TargetAddr, Tier, WireError, MAX_DATAGRAM};

/// A frame body being read: its type's name for errors, and the checks every layout
/// makes.
struct Body {
    name: &'static str,
    bytes: Bytes,
}

impl Body {
    fn malformed(&self, what: &'static str) -> WireError {
        WireError::Malformed { frame: self.name, what }
    }

    /// The body, which must be `n` bytes long.
    fn exact(&self, n: usize) -> Result<&[u8], WireError> {
        match self.bytes.len() == n {
            true => Ok(&self.bytes),
            false => Err(self.malformed("wrong body length")),
        }
    }

    /// The body, which must be at least `n` bytes long.
    fn at_least(&self, n: usize) -> Result<&[u8], WireError> {
        match self.bytes.len() >= n {
            true => Ok(&self.bytes),
            false => Err(self.malformed("body too short")),
        }
    }

    /// A one-byte flag: 0 or 1, anything else a peer this side does not understand.
    fn flag(&self, b: &mut &[u8], what: &'static str) -> Result<bool, WireError> {
        match b.get_u8() {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.malformed(what)),
        }
    }
}

/// Decodes the body of a frame of type `ty`.
pub(super) fn decode_body(ty: FrameType, bytes: Bytes) -> Result<Frame, WireError> {
    let body = Body { name: ty.name(), bytes };
    Ok(match ty {
        FrameType::Hello => {
            let mut b = body.exact(18)?;
            let version = b.get_u8();
            let mut session = [0u8; 16];
            b.copy_to_slice(&mut session);
            Frame::Hello {
                version,
                session,
                path: b.get_u8(),
            }
        }
        FrameType::HelloAck => hello_ack(&body)?,
        FrameType::Open => open(&body)?,
        FrameType::Data => data(&body)?,
        FrameType::Fin => {
            let mut b = body.exact(20)?;
            Frame::Fin {
                seq: b.get_u64(),
                stream: b.get_u32(),
                offset: b.get_u64(),
            }
        }
        FrameType::Reset => {
            let mut b = body.exact(13)?;
            let (seq, stream) = (b.get_u64(), b.get_u32());
            let code = ResetCode::from_wire(b.get_u8())?;
            if !code.on_wire() {
                return Err(body.malformed("a reset code that is never sent"));
            }
            Frame::Reset { seq, stream, code }
        }
        FrameType::Ack => Frame::Ack {
            cum: body.exact(8)?.get_u64(),
        },
        FrameType::MaxData => Frame::MaxData {
            max: body.exact(8)?.get_u64(),
        },
        FrameType::Ping => Frame::Ping {
            id: body.exact(8)?.get_u64(),
        },
        FrameType::Pong => Frame::Pong {
            id: body.exact(8)?.get_u64(),
        },
        FrameType::Window => {
            let mut b = body.exact(12)?;
            Frame::Window {
                stream: b.get_u32(),
                max: b.get_u64(),
            }
        }
        FrameType::Close => Frame::Close {
            code: CloseCode::from_wire(body.exact(1)?.get_u8())?,
        },
        FrameType::Owd => {
            let mut b = body.exact(17)?;
            Frame::Owd {
                path: b.get_u8(),
                seq: b.get_u64(),
                ts: b.get_u32(),
                delay: b.get_u32(),
            }
        }
        FrameType::Stall => Frame::Stall {
            cum: body.exact(8)?.get_u64(),
        },
        FrameType::Tier => Frame::Tier {
            tier: Tier::from_wire(body.exact(1)?.get_u8())?,
        },
        FrameType::Datagram | FrameType::Datagrams => datagram(ty, &body)?,
        FrameType::FlowOpen => {
            let mut b = body.at_least(4 + 1)?;
            let flow = b.get_u32();
            let addr = TargetAddr::decode(&mut b)?;
            if !b.is_empty() {
                return Err(body.malformed("bytes after the address"));
            }
            Frame::FlowOpen { flow, addr }
        }
        FrameType::FlowClose => {
            let mut b = body.exact(5)?;
            Frame::FlowClose {
                flow: b.get_u32(),
                code: FlowCloseCode::from_wire(b.get_u8())?,
            }
        }
        FrameType::PathGone => {
            let mut b = body.exact(5)?;
            Frame::PathGone {
                path: b.get_u8(),
                joins: b.get_u32(),
            }
        }
        FrameType::Allowance => Frame::Allowance {
            limit: body.exact(8)?.get_u64(),
        },
    })
}

fn hello_ack(body: &Body) -> Result<Frame, WireError> {
    let mut b = body.at_least(16 + 1 + 2 + 1)?;
    let mut session = [0u8; 16];
    b.copy_to_slice(&mut session);
    let fresh = body.flag(&mut b, "flag is not 0 or 1")?;
    let server = b.get_u16();
    let join = match b[0] {
        0 => {
            b.advance(1);
            None
        }
        _ => match TargetAddr::decode(&mut b)? {
            TargetAddr::Ip(a) => Some(a),
            TargetAddr::Domain(..) => return Err(body.malformed("join address is a name")),
        },
    };
    if !b.is_empty() {
        return Err(body.malformed("bytes after the join address"));
    }
    Ok(Frame::HelloAck {
        session,
        fresh,
        server,
        join,
    })
}

fn open(body: &Body) -> Result<Frame, WireError> {
    let mut b = body.at_least(16 + 10 + 1)?;
    let seq = b.get_u64();
    let stream = b.get_u32();
    let ts = b.get_u32();
    let paths = b.get_u64();
    let scheduler = b.get_u8();
    let energy = b.get_u8();
    let addr = TargetAddr::decode(&mut b)?;
    let used = body.bytes.len() - b.len();
    Ok(Frame::Open {
        seq,
        stream,
        ts,
        paths,
        scheduler,
        energy,
        addr,
        data: body.bytes.slice(used..),
    })
}

fn data(body: &Body) -> Result<Frame, WireError> {
    let mut b = body.at_least(24)?;
    let seq = b.get_u64();
    let stream = b.get_u32();
    let offset = b.get_u64();
    let ts = b.get_u32();
    if offset.checked_add(body.bytes.len() as u64 - 24).is_none() {
        return Err(body.malformed("stream offset overflows"));
    }
    Ok(Frame::Data {
        seq,
        stream,
        offset,
        ts,
        data: body.bytes.slice(24..),
    })
}

/// A `Datagram`, or a `Datagrams` run: the same header, then one payload or a run of
/// length-prefixed ones.
fn datagram(ty: FrameType, body: &Body) -> Result<Frame, WireError> {
    let mut b = body.at_least(DATAGRAM_HEADER)?;
    let flow = b.get_u32();
    let seq = b.get_u16();
    // Only bit 0 has a meaning; any other set bit is a peer we do not understand.
    let copied = body.flag(&mut b, "unknown flag bits")?;
    let payload = body.bytes.slice(DATAGRAM_HEADER..);
    if ty == FrameType::Datagrams {
        return run::decode_run(flow, seq, copied, payload).map_err(|what| body.malformed(what));
    }
    if payload.len() > MAX_DATAGRAM {
        return Err(body.malformed("payload larger than a UDP datagram"));
    }
    Ok(Frame::Datagram {
        flow,
        seq,
        copied,
        data: payload,
    })
}
