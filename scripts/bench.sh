#!/usr/bin/env bash
# Throughput and latency benchmark, on loopback, in one run:
#   (a) curl fetching SIZE_MB from a local origin directly over TCP,
#   (b) the same through mpflex client + server over 2 encrypted paths (SOCKS5),
# interleaved REPS times; prints the median throughputs, the ratio b/a, the CPU seconds
# per GB that mpflex client + server spent, and the time to first byte of a 10 KB object
# over the established session vs over a fresh direct TCP connection.
set -euo pipefail
SIZE_MB=${SIZE_MB:-512}
REPS=${REPS:-5}
SCHEDULER=${SCHEDULER:-roundrobin}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/mpflex-bench.XXXXXX)
data=$(mktemp -d /dev/shm/mpflex-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work" "$data"; }
trap cleanup EXIT INT TERM

cargo build --release -q -p mpflex --manifest-path "$root/Cargo.toml"
B=$root/target/release/mpflex
$B keygen >"$work/s.key"; $B keygen >"$work/c.key"
key() { grep "^$2" "$1" | cut -d'"' -f2; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PP=$(port); SOCKS=$(port); ORIGIN=$(port); CST=$(port)
cat >"$work/server.toml" <<TOML
listen = ["127.0.0.1:$PP"]
private_key = "$(key "$work/s.key" private_key)"
scheduler = "$SCHEDULER"
[[clients]]
name = "bench"
public_key = "$(key "$work/c.key" public_key)"
[acl]
allow_loopback = true
TOML
cat >"$work/client.toml" <<TOML
private_key = "$(key "$work/c.key" private_key)"
server_public_key = "$(key "$work/s.key" public_key)"
scheduler = "$SCHEDULER"
socks_listen = "127.0.0.1:$SOCKS"
status_listen = "127.0.0.1:$CST"
[[paths]]
name = "a"
server = "127.0.0.1:$PP"
source = "127.0.0.1"
[[paths]]
name = "b"
server = "127.0.0.1:$PP"
source = "127.0.0.2"
TOML
head -c $((SIZE_MB << 20)) /dev/zero | tr '\0' 'x' >"$data/blob"
head -c 10240 /dev/urandom >"$data/small"
(cd "$data" && exec python3 -m http.server "$ORIGIN" --bind 127.0.0.1 >/dev/null 2>&1) & pids+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$ORIGIN/small" && break; sleep 0.1; done
RUST_LOG=warn $B server --config "$work/server.toml" & spid=$!; pids+=($spid)
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PP") 2>/dev/null && break; sleep 0.1; done
RUST_LOG=warn $B client --config "$work/client.toml" & cpid=$!; pids+=($cpid)
for _ in $(seq 50); do $B status --addr "127.0.0.1:$CST" 2>/dev/null | grep -q "^  b .*yes" && break; sleep 0.1; done

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
direct=(); via=(); cpu_ticks=0
for i in $(seq "$REPS"); do
  d=$(curl -s -o /dev/null -w '%{speed_download}' "http://127.0.0.1:$ORIGIN/blob")
  c0=$(( $(cpu $spid) + $(cpu $cpid) ))
  m=$(curl -s -o /dev/null -w '%{speed_download}' --socks5-hostname "127.0.0.1:$SOCKS" "http://127.0.0.1:$ORIGIN/blob")
  c1=$(( $(cpu $spid) + $(cpu $cpid) ))
  cpu_ticks=$((cpu_ticks + c1 - c0))
  direct+=("$d"); via+=("$m")
done
ttfb_direct=(); ttfb_via=()
for i in $(seq 20); do
  ttfb_direct+=("$(curl -s -o /dev/null -w '%{time_starttransfer}' "http://127.0.0.1:$ORIGIN/small")")
  ttfb_via+=("$(curl -s -o /dev/null -w '%{time_starttransfer}' --socks5-hostname "127.0.0.1:$SOCKS" "http://127.0.0.1:$ORIGIN/small")")
done
python3 - "$SIZE_MB" "$REPS" "$hz" "$cpu_ticks" "${direct[*]}" "${via[*]}" "${ttfb_direct[*]}" "${ttfb_via[*]}" "$SCHEDULER" <<'PY'
import statistics as st, sys
size_mb, reps, hz, ticks = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
d = [float(x) for x in sys.argv[5].split()]; v = [float(x) for x in sys.argv[6].split()]
td = [float(x) * 1000 for x in sys.argv[7].split()]; tv = [float(x) * 1000 for x in sys.argv[8].split()]
gbit = lambda bps: bps * 8 / 1e9
md, mv = st.median(d), st.median(v)
gb = size_mb * reps / 1024
print(f"transfer: {size_mb} MB x {reps}, loopback, 2 paths, scheduler {sys.argv[9]}, Noise AES-GCM")
print(f"(a) direct TCP      : {gbit(md):6.2f} Gbit/s (median; min {gbit(min(d)):.2f}, max {gbit(max(d)):.2f})")
print(f"(b) through mpflex  : {gbit(mv):6.2f} Gbit/s (median; min {gbit(min(v)):.2f}, max {gbit(max(v)):.2f})")
print(f"ratio b/a           : {mv / md:.3f}")
print(f"CPU, client+server  : {ticks / hz / gb:.2f} s per GB")
print(f"TTFB 10 KB, direct fresh TCP  : median {st.median(td):.2f} ms (p90 {sorted(td)[int(0.9*len(td))-1]:.2f})")
print(f"TTFB 10 KB, mpflex session    : median {st.median(tv):.2f} ms (p90 {sorted(tv)[int(0.9*len(tv))-1]:.2f})")
PY
