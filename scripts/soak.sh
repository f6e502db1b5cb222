#!/usr/bin/env bash
# The soak (docs/security.md): a lab client and server (network namespaces; needs root,
# python3, curl) under 1,000 streams opening and closing continuously, each exchange
# checked byte by byte, with a random path's connection killed every 10 to 30 s; the RSS
# of server and client sampled 60 times (each minute of the hour). Fails if any byte is
# lost or altered, or if either RSS's last ten samples are more than 5 % off samples 10–20.
#
#   scripts/soak.sh [SECONDS] [STREAMS]      (defaults: 3600 and 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
export MPFLEX_SOAK_SECS=${1:-3600} MPFLEX_SOAK_STREAMS=${2:-1000} CI=true
cargo test --release -p mpflex --test soak -- --ignored --nocapture 2>&1 | tee "${TMPDIR:-/tmp}/mpflex-soak.log"
