#!/usr/bin/env bash
# A working demo on one machine: an HTTP origin, `mpflex server`, and `mpflex client` with
# two paths over loopback (source addresses 127.0.0.1 and 127.0.0.2), then a download of
# SIZE_MB through SOCKS5 with curl, its sha256 checked, and the per-path counters printed.
set -euo pipefail
SIZE_MB=${SIZE_MB:-100}
SCHEDULER=${SCHEDULER:-roundrobin}
root=$(cd "$(dirname "$0")/.." && pwd)

# What the demo needs, as command:Debian-package pairs: a C toolchain (ring and mimalloc
# compile C), curl (the download), python3 (the origin, free ports), sha256sum.
command -v cargo >/dev/null || { echo "demo: cargo not found: install Rust (https://rustup.rs), then open a new shell" >&2; exit 1; }
missing=()
for dep in cc:build-essential curl:curl python3:python3 sha256sum:coreutils; do
  command -v "${dep%%:*}" >/dev/null || missing+=("${dep#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "demo: installing ${missing[*]} (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "demo: missing packages ${missing[*]}: install them (sudo apt-get install ${missing[*]}) and run again" >&2
    exit 1
  fi
fi
work=$(mktemp -d /tmp/mpflex-demo.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM

echo "building mpflex (release)..."
cargo build --release -q -p mpflex --manifest-path "$root/Cargo.toml"
B=$root/target/release/mpflex

$B keygen >"$work/server.key"
$B keygen >"$work/client.key"
key() { grep "^$2" "$1" | cut -d'"' -f2; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PATHPORT=$(port); SOCKS=$(port); ORIGIN=$(port); CST=$(port); SST=$(port)

cat >"$work/server.toml" <<TOML
listen = ["127.0.0.1:$PATHPORT"]
private_key = "$(key "$work/server.key" private_key)"
status_listen = "127.0.0.1:$SST"
[[clients]]
name = "demo"
public_key = "$(key "$work/client.key" public_key)"
[acl]
allow_loopback = true   # the demo origin is on 127.0.0.1
TOML
cat >"$work/client.toml" <<TOML
private_key = "$(key "$work/client.key" private_key)"
server_public_key = "$(key "$work/server.key" public_key)"
scheduler = "$SCHEDULER"
socks_listen = "127.0.0.1:$SOCKS"
status_listen = "127.0.0.1:$CST"
[[paths]]
name = "path-a"
server = "127.0.0.1:$PATHPORT"
source = "127.0.0.1"
[[paths]]
name = "path-b"
server = "127.0.0.1:$PATHPORT"
source = "127.0.0.2"
TOML

head -c $((SIZE_MB << 20)) /dev/urandom >"$work/blob"
want=$(sha256sum "$work/blob" | cut -c1-64)
(cd "$work" && exec python3 -m http.server "$ORIGIN" --bind 127.0.0.1 >/dev/null 2>&1) & pids+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$ORIGIN/" && break; sleep 0.1; done
RUST_LOG=warn $B server --config "$work/server.toml" & pids+=($!)
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PATHPORT") 2>/dev/null && break; sleep 0.1; done
RUST_LOG=warn $B client --config "$work/client.toml" & pids+=($!)
for _ in $(seq 50); do $B status --addr "127.0.0.1:$CST" 2>/dev/null | grep -q "path-b .*yes" && break; sleep 0.1; done

echo "downloading $SIZE_MB MB through mpflex (scheduler $SCHEDULER)..."
start=$(date +%s.%N)
got=$(curl -sS --socks5-hostname "127.0.0.1:$SOCKS" "http://127.0.0.1:$ORIGIN/blob" | sha256sum | cut -c1-64)
secs=$(echo "$(date +%s.%N) - $start" | bc -l 2>/dev/null || python3 -c "print($(date +%s.%N) - $start)")
[ "$got" = "$want" ] && echo "sha256 OK ($got)" || { echo "sha256 MISMATCH: $got != $want"; exit 1; }
python3 -c "print(f'{$SIZE_MB*8.388608/$secs:.0f} Mbit/s in {$secs:.2f} s')"
echo
$B status --addr "127.0.0.1:$CST"
