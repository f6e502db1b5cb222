//! Arbitrary bytes as a record: decoding must never panic, and whatever decodes must
//! re-encode to the same bytes.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mpflex_wire::decode_all;

fuzz_target!(|data: &[u8]| {
    if let Ok(frames) = decode_all(Bytes::copy_from_slice(data)) {
        let mut out = Vec::new();
        for f in &frames {
            f.encode(&mut out);
        }
        assert_eq!(out, data, "decode/encode is not the identity");
    }
});
