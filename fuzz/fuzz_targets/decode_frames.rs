//! Arbitrary bytes as a record: decoding must never panic, whatever decodes must re-encode
//! to the same bytes, and a decoded datagram never exceeds a UDP payload.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mpflex_wire::{decode_all, Frame, MAX_DATAGRAM};

fuzz_target!(|data: &[u8]| {
    if let Ok(frames) = decode_all(Bytes::copy_from_slice(data)) {
        let mut out = Vec::new();
        for f in &frames {
            match f {
                Frame::Datagram { data, .. } => {
                    assert!(data.len() <= MAX_DATAGRAM, "datagram of {} bytes decoded", data.len());
                }
                Frame::Datagrams { data, .. } => {
                    assert!(!data.is_empty(), "an empty run decoded");
                    for d in data {
                        assert!(d.len() <= MAX_DATAGRAM, "datagram of {} bytes decoded", d.len());
                    }
                }
                _ => {}
            }
            f.encode(&mut out);
        }
        assert_eq!(out, data, "decode/encode is not the identity");
    }
});
