//! Datagram and flow frames built from arbitrary fields: each encodes to a record that
//! decodes to the same frame, and payloads over a UDP datagram's size are refused.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mpflex_wire::{decode_all, Frame, MAX_DATAGRAM, MAX_RECORD};

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
            data: payload,
        },
        Frame::FlowClose { flow, code },
    ];
    let mut out = Vec::new();
    for f in &frames {
        f.encode(&mut out);
    }
    if out.len() <= MAX_RECORD {
        assert_eq!(decode_all(Bytes::from(out)).expect("valid frames decode"), frames);
    }
});
