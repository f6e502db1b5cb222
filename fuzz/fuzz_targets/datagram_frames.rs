//! Datagram and flow frames built from arbitrary fields: each encodes to a record that
//! decodes to the same frame, and payloads over a UDP datagram's size are refused. The
//! payload, cut in pieces and appended as a run of one flow's datagrams, decodes to the
//! same pieces numbered in a row.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mpflex_wire::{decode_all, DatagramRun, FlowCloseCode, Frame, MAX_DATAGRAM, MAX_RECORD};

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let flow = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
    let seq = u16::from_be_bytes([data[4], data[5]]);
    let copied = data[6] & 1 == 1;
    let code = data[7];
    let payload = Bytes::copy_from_slice(&data[8..data.len().min(8 + MAX_DATAGRAM)]);
    let frames = vec![
        Frame::Datagram {
            flow,
            seq,
            copied,
            data: payload.clone(),
        },
        Frame::FlowClose {
            flow,
            code: FlowCloseCode::ALL[usize::from(code) % FlowCloseCode::ALL.len()],
        },
    ];
    let mut out = Vec::new();
    for f in &frames {
        f.encode(&mut out);
    }
    if out.len() <= MAX_RECORD {
        assert_eq!(decode_all(Bytes::from(out)).expect("valid frames decode"), frames);
    }

    // Pieces of `code % 16 + 1` bytes (the last shorter), appended as one flow's run.
    let step = usize::from(code % 16) + 1;
    let pieces: Vec<Bytes> = payload.chunks(step).map(Bytes::copy_from_slice).collect();
    let mut out = Vec::new();
    let mut run = None;
    for (i, p) in pieces.iter().enumerate() {
        run = Some(DatagramRun::push(
            run,
            &mut out,
            flow,
            seq.wrapping_add(i as u16),
            copied,
            p,
        ));
    }
    let mut got = Vec::new();
    for f in decode_all(Bytes::from(out)).expect("a run decodes") {
        match f {
            Frame::Datagram {
                flow: f,
                seq: s,
                copied: c,
                data,
            } => got.push((f, s, c, data)),
            Frame::Datagrams {
                flow: f,
                seq: s,
                copied: c,
                data,
            } => {
                for (i, d) in data.into_iter().enumerate() {
                    got.push((f, s.wrapping_add(i as u16), c, d));
                }
            }
            other => panic!("{other:?} in a run"),
        }
    }
    let want: Vec<_> = pieces
        .into_iter()
        .enumerate()
        .map(|(i, d)| (flow, seq.wrapping_add(i as u16), copied, d))
        .collect();
    assert_eq!(got, want);
});
