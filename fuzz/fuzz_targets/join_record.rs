//! The join record: a path's first record (its plaintext, after the Noise handshake) as
//! the server checks it, and the answer as the client checks it. Neither panics,
//! whatever the bytes, and a join accepted names a path the engine has.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mpflex_engine::join::{accept_hello, accept_hello_ack};
use mpflex_wire::decode_all;

fuzz_target!(|data: &[u8]| {
    if let Ok(frames) = decode_all(Bytes::copy_from_slice(data)) {
        if let Ok(req) = accept_hello(&frames) {
            assert!(req.path < mpflex_engine::MAX_PATHS, "{req:?}");
        }
        let _ = accept_hello_ack(&frames, [7; 16]);
    }
});
