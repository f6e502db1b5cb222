//! Appending datagrams to a record so that those of one flow in a row share a frame.

use bytes::{Buf, BufMut, Bytes};

use super::{Frame, FrameType, DATAGRAM_HEADER, HEADER_LEN, RUN_LEN};
use crate::MAX_DATAGRAM;

/// The datagram frame that ends a record being built: where it starts and which
/// datagram would continue it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramRun {
    start: usize,
    flow: u32,
    next: u16,
    copied: bool,
}

impl DatagramRun {
    /// Appends datagram `seq` of `flow` to `out` and returns the run it now ends. It
    /// joins `run`'s frame when that frame still ends `out` and the datagram continues
    /// it (same flow and class, the next number): a lone [`Frame::Datagram`] becomes a
    /// [`Frame::Datagrams`] of two, a run grows by one. Otherwise it goes in a
    /// `Datagram` frame of its own. It adds at most [`Frame::encoded_len`] of that lone
    /// frame to `out`, so a record's room is checked against that.
    pub fn push(
        run: Option<DatagramRun>,
        out: &mut Vec<u8>,
        flow: u32,
        seq: u16,
        copied: bool,
        data: &[u8],
    ) -> DatagramRun {
        if let Some(r) = run.filter(|r| r.flow == flow && r.next == seq && r.copied == copied) {
            if let Some(body) = r.body_len(out) {
                let first_len = body - DATAGRAM_HEADER;
                if out[r.start] == FrameType::Datagram as u8 {
                    // Its one payload gets its length ahead of it.
                    let at = r.start + HEADER_LEN + DATAGRAM_HEADER;
                    out.splice(at..at, (first_len as u16).to_be_bytes());
                    out[r.start] = FrameType::Datagrams as u8;
                }
                out.put_u16(data.len() as u16);
                out.put_slice(data);
                let body = out.len() - r.start - HEADER_LEN;
                out[r.start + 1..r.start + HEADER_LEN].copy_from_slice(&(body as u32).to_be_bytes());
                return DatagramRun {
                    next: seq.wrapping_add(1),
                    ..r
                };
            }
        }
        let start = out.len();
        // Encoded from a borrowed payload: the frame's own encoding, without a copy into
        // a `Bytes` first.
        out.put_u8(FrameType::Datagram as u8);
        out.put_u32((DATAGRAM_HEADER + data.len()) as u32);
        out.put_u32(flow);
        out.put_u16(seq);
        out.put_u8(copied as u8);
        out.put_slice(data);
        debug_assert_eq!(
            out.len() - start,
            Frame::Datagram {
                flow,
                seq,
                copied,
                data: bytes::Bytes::new(),
            }
            .encoded_len()
                + data.len()
        );
        DatagramRun {
            start,
            flow,
            next: seq.wrapping_add(1),
            copied,
        }
    }

    /// The body length of the run's frame, if that frame still ends `out`.
    fn body_len(&self, out: &[u8]) -> Option<usize> {
        let header = out.get(self.start..self.start + HEADER_LEN)?;
        let ty = header[0];
        if ty != FrameType::Datagram as u8 && ty != FrameType::Datagrams as u8 {
            return None;
        }
        let body = u32::from_be_bytes(header[1..].try_into().expect("4 bytes")) as usize;
        (self.start + HEADER_LEN + body == out.len()).then_some(body)
    }
}

/// A [`Frame::Datagrams`] body after its header: `(len: u16, payload)` repeated, at
/// least once, to the end.
pub(super) fn decode_run(flow: u32, seq: u16, copied: bool, mut rest: Bytes) -> Result<Frame, &'static str> {
    let mut data = Vec::new();
    while !rest.is_empty() {
        if rest.len() < RUN_LEN {
            return Err("a datagram's length cut short");
        }
        let len = rest.get_u16() as usize;
        if len > MAX_DATAGRAM {
            return Err("payload larger than a UDP datagram");
        }
        if rest.len() < len {
            return Err("a datagram longer than the frame");
        }
        data.push(rest.split_to(len));
    }
    if data.is_empty() {
        return Err("no datagram");
    }
    Ok(Frame::Datagrams {
        flow,
        seq,
        copied,
        data,
    })
}
