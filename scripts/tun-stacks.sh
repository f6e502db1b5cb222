#!/usr/bin/env bash
# The TUN ingress's TCP/IP stack beside ipstack (docs/tun.md "Choosing the stack"):
# builds crates/mpflex/examples/tun_stacks/ and runs PAIRS interleaved pairs of trials
# (ours, then ipstack, in each), each in a network namespace of its own with curl as the
# client, appending one JSON record per trial (with the commit) to RECORD. Needs root.
#
# Environment: PAIRS (5), SIZE_MB (256, each bulk transfer), BURST (100 connections),
# MTU (1500, the same for both stacks), STACKS (smoltcp,ipstack: the order in each pair;
# one name runs that stack alone), RECORD (lab-results/tun-stacks.jsonl; empty: no
# record), TUN_STACKS_BIN (a prebuilt example; otherwise `cargo build --release`,
# honouring CARGO_TARGET_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
RECORD=${RECORD-$root/lab-results/tun-stacks.jsonl}
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/tun-stacks.sh: needs root (a network namespace and a TUN device): sudo env \"PATH=\$PATH\" $0" >&2
  exit 1
fi
if [ -z "${TUN_STACKS_BIN:-}" ]; then
  cargo build --release -q -p mpflex --example tun_stacks --manifest-path "$root/Cargo.toml"
  TUN_STACKS_BIN=${CARGO_TARGET_DIR:-$root/target}/release/examples/tun_stacks
fi
args=(--pairs "${PAIRS:-5}" --size-mb "${SIZE_MB:-256}" --burst "${BURST:-100}" --mtu "${MTU:-1500}" --stacks "${STACKS:-smoltcp,ipstack}")
[ -n "$RECORD" ] && args+=(--out "$RECORD")
exec "$TUN_STACKS_BIN" "${args[@]}"
