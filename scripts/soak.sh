#!/usr/bin/env bash
# The soak (docs/security.md): a lab client and server (network namespaces; needs root,
# python3, curl) under 1,000 streams opening and closing continuously, each exchange
# checked byte by byte, with a random path's connection killed every 10 to 30 s; the RSS
# of server and client read every 2 s, each minute's median kept. Fails if any exchange
# fails or arrives altered (each failure is printed with its reason), or if either RSS's
# last ten minutes are more than 5 % off minutes 10–20.
#
#   scripts/soak.sh [SECONDS] [STREAMS]      (defaults: 3600 and 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
export MPFLEX_SOAK_SECS=${1:-3600} MPFLEX_SOAK_STREAMS=${2:-1000} CI=true
# Each stream the peer resets is logged with its reset code (the daemons' logs are kept
# in the lab's directory when the soak fails).
export MPFLEX_TEST_RUST_LOG=${MPFLEX_TEST_RUST_LOG:-info,mpflex::driver::events=debug}
cargo test --release -p mpflex --test soak -- --ignored --nocapture 2>&1 | tee "${TMPDIR:-/tmp}/mpflex-soak.log"
