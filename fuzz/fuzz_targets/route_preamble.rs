//! Arbitrary bytes as the start of a path connection: parsing the routing preamble must
//! never panic, and a preamble that parses re-encodes to the bytes it took.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpflex_wire::Route;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((route, n))) = Route::decode(data) {
        assert_eq!(&route.encode()[..], &data[..n], "decode/encode is not the identity");
    }
});
