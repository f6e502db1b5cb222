//! Datagram runs across flows: records built by `DatagramRun::push` from any sequence of
//! datagrams (flows, numbers, classes and sizes as the input says, so runs start, grow
//! and break anywhere) decode to exactly those datagrams in order, and such a record cut
//! or altered anywhere never panics the decoder.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mpflex_wire::{decode_all, DatagramRun, Frame};

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    let mut run = None;
    let mut want: Vec<(u32, u16, bool, Vec<u8>)> = Vec::new();
    let mut rest = data;
    // Each datagram: flow (1 byte of 4 flows), seq step (1), copied (1 bit), length (1).
    while let [flow, step, flags, len, tail @ ..] = rest {
        let n = (*len as usize).min(tail.len());
        let (payload, tail) = tail.split_at(n);
        let (flow, copied) = (u32::from(*flow % 4), flags & 1 == 1);
        // A zero step continues the last datagram's numbering (a run may grow).
        let seq = match want.last() {
            Some(&(_, last, _, _)) if *step == 0 => last.wrapping_add(1),
            _ => u16::from(*step) << 8 | u16::from(*flags),
        };
        run = Some(DatagramRun::push(run, &mut out, flow, seq, copied, payload));
        want.push((flow, seq, copied, payload.to_vec()));
        rest = tail;
    }
    let frames = decode_all(Bytes::from(out.clone())).expect("a built record decodes");
    let mut got = Vec::new();
    for f in frames {
        match f {
            Frame::Datagram {
                flow,
                seq,
                copied,
                data,
            } => got.push((flow, seq, copied, data.to_vec())),
            Frame::Datagrams {
                flow,
                seq,
                copied,
                data,
            } => {
                for (i, d) in data.into_iter().enumerate() {
                    got.push((flow, seq.wrapping_add(i as u16), copied, d.to_vec()));
                }
            }
            other => panic!("not a datagram: {other:?}"),
        }
    }
    assert_eq!(got, want);
    // The same record cut short or with one byte changed: an error or frames, never a panic.
    if !out.is_empty() {
        let at = usize::from(data.first().copied().unwrap_or(0)) % out.len();
        let _ = decode_all(Bytes::copy_from_slice(&out[..at]));
        out[at] ^= data.last().copied().unwrap_or(1) | 1;
        let _ = decode_all(Bytes::from(out));
    }
});
