#!/usr/bin/env bash
# Throughput and latency benchmark, on loopback (no namespaces, no root needed), in one run:
#   (a) curl fetching SIZE_MB from a local origin directly over TCP,
#   (b) the same through mpflex client + server over PATHS encrypted paths (SOCKS5; the
#       paths are TCP connections over lo, from source addresses 127.0.0.1, 127.0.0.2, …),
#   (c) as root: the same through the TUN ingress of the same client and session (curl in
#       a namespace whose default route is the client's TUN device, docs/tun.md),
# interleaved REPS times; prints the median throughputs and every transfer's rate, the
# ratios b/a and c/b, the CPU seconds per GB that the mpflex client and server each spent
# for (b) and (c), against what curl + origin spend for (a) (the bare kernel TCP transfer's
# cost: CPU time is the process's own accounting, /proc/<pid>/stat, so it stays
# meaningful on a busy machine where rates do not), how the bytes were split over the
# paths (and for each transfer of (b): its rate, its split, the CPU per GB and the
# wake-ups per GB of each process), and the time to first byte of a 10 KB object over the
# established session vs over a fresh direct TCP connection.
#
# As root the whole run happens in a network namespace of its own (its loopback is the
# paths' and the origin's; the origin is also at 198.18.0.1 there, the address (c) fetches
# from), so nothing of the host's network is touched; TUN=0 leaves (c) out.
#
# The origin (same for (a) and (b)) is a small Python server that answers each GET with
# sendfile(2) from a file in /dev/shm: zero-copy, so it is not what limits (a).
# Every transfer's length and HTTP status are checked, and one transfer through mpflex is
# checked byte for byte.
#
# Each run appends one JSON record (the figures above, every transfer's rate and TTFB,
# the commit of the source tree: `git describe --always --dirty`, the binary that ran:
# its size and the start of its sha256, as `mpflex_id`, the machine's cores and load) to
# RECORD: the docs' loopback figures come from these records.
#
# Environment: SIZE_MB (512), REPS (5), TTFB_REPS (20), SCHEDULER (roundrobin), PATHS (2;
# 1 to 8 paths, from 127.0.0.1 to 127.0.0.PATHS), TUN (1 as root, else 0), TUN_MTU (the
# client's default), CLIENT_CPUS and SERVER_CPUS (see below), RECORD
# (lab-results/bench-loopback.jsonl; empty: no record), MPFLEX_BIN (a prebuilt binary;
# otherwise `cargo build --release`, honouring CARGO_TARGET_DIR), PERF (a directory: the
# client and server are sampled with `perf record $PERF_ARGS` (-g) during the transfers,
# into client.data and server.data there; `perf report -i <file> --no-children` reads
# them, docs/performance.md), SYSCALLS (below).
set -euo pipefail
SIZE_MB=${SIZE_MB:-512}
REPS=${REPS:-5}
TTFB_REPS=${TTFB_REPS:-20}
SCHEDULER=${SCHEDULER:-roundrobin}
PATHS=${PATHS:-2}
[[ $PATHS =~ ^[1-8]$ ]] || { echo "bench: PATHS is 1 to 8, not $PATHS" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
RECORD=${RECORD-$root/lab-results/bench-loopback.jsonl}
commit=$(git -C "$root" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
[ "$(id -u)" = 0 ] && TUN=${TUN:-1} || TUN=0

if [ "$TUN" = 1 ] && [ -z "${BENCH_TUN_NS:-}" ]; then
  # Re-run inside a namespace of our own ("mpfl-" names: the test suite's cleanup knows
  # them); the applications' namespace for (c) beside it.
  if [ -z "${MPFLEX_BIN:-}" ]; then
    cargo build --release -q -p mpflex --manifest-path "$root/Cargo.toml"
    MPFLEX_BIN=${CARGO_TARGET_DIR:-$root/target}/release/mpflex
  fi
  ns=mpfl-bench-$$ apps=mpfl-benchc-$$
  ip netns add "$ns"; ip netns add "$apps"
  trap 'ip netns del "$ns" 2>/dev/null; ip netns del "$apps" 2>/dev/null' EXIT
  ip netns exec "$ns" env BENCH_TUN_NS="$apps" MPFLEX_BIN="$MPFLEX_BIN" bash "$0"
  exit $?
fi
work=$(mktemp -d /tmp/mpflex-bench.XXXXXX)
data=$(mktemp -d /dev/shm/mpflex-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work" "$data"
}
trap cleanup EXIT INT TERM
die() { echo "bench: $*" >&2; for f in "$work"/*.log; do [ -s "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done; exit 1; }

if [ -n "${MPFLEX_BIN:-}" ]; then
  B=$MPFLEX_BIN
else
  cargo build --release -q -p mpflex --manifest-path "$root/Cargo.toml"
  B=${CARGO_TARGET_DIR:-$root/target}/release/mpflex
fi
[ -x "$B" ] || die "no mpflex binary at $B"

$B keygen >"$work/s.key"; $B keygen >"$work/c.key"
key() { grep "^$2" "$1" | cut -d'"' -f2; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PP=$(port); SOCKS=$(port); ORIGIN=$(port); CST=$(port); SST=$(port)
cat >"$work/server.toml" <<TOML
listen = ["127.0.0.1:$PP"]
private_key = "$(key "$work/s.key" private_key)"
status_listen = "127.0.0.1:$SST"
[[clients]]
name = "bench"
public_key = "$(key "$work/c.key" public_key)"
[acl]
allow_loopback = true
TOML
TUN_DEV=mpflb$$
TUN_ADDR=198.18.0.1
if [ "$TUN" = 1 ]; then
  ip link set lo up
  ip addr add "$TUN_ADDR/32" dev lo
  printf 'allow_private = true\nallow_own = ["%s/32"]\n' "$TUN_ADDR" >>"$work/server.toml"
fi
cat >"$work/client.toml" <<TOML
private_key = "$(key "$work/c.key" private_key)"
server_public_key = "$(key "$work/s.key" public_key)"
scheduler = "$SCHEDULER"
socks_listen = "127.0.0.1:$SOCKS"
status_listen = "127.0.0.1:$CST"
TOML
for i in $(seq "$PATHS"); do
  printf '[[paths]]\nname = "p%s"\nserver = "127.0.0.1:%s"\nsource = "127.0.0.%s"\n' "$i" "$PP" "$i" >>"$work/client.toml"
done
if [ "$TUN" = 1 ]; then
  printf '[tun]\nname = "%s"\nipv6 = ""\n' "$TUN_DEV" >>"$work/client.toml"
  [ -n "${TUN_MTU:-}" ] && printf 'mtu = %s\n' "$TUN_MTU" >>"$work/client.toml"
fi

cat >"$work/origin.py" <<'PY'
import os, socket, sys, threading
root, port, bind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def serve(c):
    try:
        req = b""
        while b"\r\n\r\n" not in req:
            d = c.recv(4096)
            if not d:
                return
            req += d
        parts = req.split(b"\r\n", 1)[0].split()
        name = os.path.basename(parts[1].decode()) if len(parts) >= 2 else ""
        path = os.path.join(root, name)
        if parts[0] != b"GET" or not name or not os.path.isfile(path):
            c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                      b"Content-Length: %d\r\nConnection: close\r\n\r\n" % size)
            c.sendfile(f)
    except OSError:
        pass
    finally:
        c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((bind, port))
s.listen(1024)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
head -c $((SIZE_MB << 20)) /dev/urandom >"$data/blob"
head -c 10240 /dev/urandom >"$data/small"
[ "$TUN" = 1 ] && BIND=0.0.0.0 || BIND=127.0.0.1
python3 "$work/origin.py" "$data" "$ORIGIN" "$BIND" >"$work/origin.log" 2>&1 & opid=$!; pids+=($opid)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$ORIGIN/small" && break; sleep 0.1; done
# CLIENT_CPUS, SERVER_CPUS: pin a process to these cores (taskset lists), to tell core
# placement from code paths when transfers' rates differ.
pin_c=(); pin_s=()
[ -n "${CLIENT_CPUS:-}" ] && pin_c=(taskset -c "$CLIENT_CPUS")
[ -n "${SERVER_CPUS:-}" ] && pin_s=(taskset -c "$SERVER_CPUS")
RUST_LOG=warn "${pin_s[@]}" $B server --config "$work/server.toml" \
  >"$work/server.log" 2>&1 & spid=$!; pids+=($spid)
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PP") 2>/dev/null && break; sleep 0.1; done
RUST_LOG=warn "${pin_c[@]}" $B client --config "$work/client.toml" \
  >"$work/client.log" 2>&1 & cpid=$!; pids+=($cpid)
paths_up() {
  $B status --json --addr "127.0.0.1:$CST" 2>/dev/null |
    python3 -c 'import json,sys; print(sum(1 for p in json.load(sys.stdin)["paths"] if p["up"]))' 2>/dev/null || echo 0
}
for _ in $(seq 100); do [ "$(paths_up)" = "$PATHS" ] && break; sleep 0.1; done
[ "$(paths_up)" = "$PATHS" ] || die "the client's $PATHS paths did not come up"
if [ "$TUN" = 1 ]; then
  # The client made its device here; the applications of (c) get it, as their default
  # route (a device keeps its descriptor and MTU across namespaces, not its addresses).
  ip link set "$TUN_DEV" netns "$BENCH_TUN_NS" || die "no TUN device $TUN_DEV"
  ip -n "$BENCH_TUN_NS" link set lo up
  ip -n "$BENCH_TUN_NS" addr add 10.233.0.1/30 dev "$TUN_DEV"
  ip -n "$BENCH_TUN_NS" link set "$TUN_DEV" up
  ip -n "$BENCH_TUN_NS" route add default dev "$TUN_DEV"
fi

want=$((SIZE_MB << 20))
# fetch [--tun] <curl args...>: prints the speed and the CPU milliseconds curl spent;
# fails unless the whole object arrived. --tun: curl runs in the namespace routed into
# the TUN.
fetch() {
  local pre=() out code size speed
  [ "$1" = --tun ] && { pre=(ip netns exec "$BENCH_TUN_NS"); shift; }
  # `times` in the command substitution's shell: its second line is its children's (curl's)
  # user and system time.
  out=$("${pre[@]}" curl -s -o /dev/null -w '%{http_code} %{size_download} %{speed_download}\n' "$@" && times) ||
    die "curl $* failed"
  read -r code size speed <<<"$(head -1 <<<"$out")"
  [ "$code" = 200 ] && [ "$size" = "$want" ] || die "curl $*: HTTP $code, $size of $want bytes"
  echo "$speed $(tail -1 <<<"$out" | sed 's/m/ /g; s/s//g' | awk '{printf "%d", ($1 * 60 + $2 + $3 * 60 + $4) * 1000}')"
}
via=(--socks5-hostname "127.0.0.1:$SOCKS")
# One checked transfer through mpflex (not timed).
[ "$(curl -s "${via[@]}" "http://127.0.0.1:$ORIGIN/blob" | sha256sum)" = "$(sha256sum <"$data/blob")" ] ||
  die "a transfer through mpflex arrived corrupted"
tun_url=http://$TUN_ADDR:$ORIGIN/blob
if [ "$TUN" = 1 ]; then
  [ "$(ip netns exec "$BENCH_TUN_NS" curl -s "$tun_url" | sha256sum)" = "$(sha256sum <"$data/blob")" ] ||
    die "a transfer through the TUN arrived corrupted"
fi

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
# Times a process's threads went to sleep waiting (voluntary context switches, summed over
# its threads): one per wake-up that found too little to do.
waits() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/ {n += $2} END {print n + 0}'; }
hz=$(getconf CLK_TCK)
# What each path received (client side) so far, comma-separated.
path_bytes() {
  $B status --json --addr "127.0.0.1:$CST" |
    python3 -c 'import json,sys; print(",".join(str(p["bytes_received"]) for p in json.load(sys.stdin)["paths"]))'
}
perfs=()
if [ -n "${PERF:-}" ]; then
  mkdir -p "$PERF"
  for side in client:$cpid server:$spid; do
    # shellcheck disable=SC2086 # PERF_ARGS is a list of perf's options
    perf record -q -F "${PERF_FREQ:-999}" ${PERF_ARGS:--g} -p "${side#*:}" -o "$PERF/${side%%:*}.data" \
      >"$work/perf-${side%%:*}.log" 2>&1 &
    perfs+=($!)
  done
  sleep 0.5
fi
# SYSCALLS: count the system calls each process makes during the transfers (perf stat on
# their syscalls:sys_enter_* tracepoints; root, or kernel.perf_event_paranoid <= -1), the
# calls named (comma-separated), or with 1 those the data path makes.
stats=()
if [ -n "${SYSCALLS:-}" ]; then
  [ "$SYSCALLS" = 1 ] && SYSCALLS=recvfrom,sendto,writev,read,write,getsockopt,setsockopt,epoll_wait,futex,poll,madvise
  events=$(tr , '\n' <<<"$SYSCALLS" | sed 's/^/syscalls:sys_enter_/' | paste -sd,)
  for side in client:$cpid server:$spid; do
    perf stat -x, -e "$events" -p "${side#*:}" -o "$work/syscalls-${side%%:*}.csv" >/dev/null 2>&1 &
    stats+=($!)
  done
  sleep 0.5
fi
# The difference of two comma-separated lists of counts.
delta='import sys; a, b = (x.split(",") for x in sys.argv[1:]); print(",".join(str(int(y) - int(x)) for x, y in zip(a, b)))'
splits=(); cpus=()
direct=(); through=(); tun=(); ctick=0; stick=0; tctick=0; tstick=0; dtick=0; dms=0
for _ in $(seq "$REPS"); do
  o0=$(cpu $opid)
  read -r speed ms <<<"$(fetch "http://127.0.0.1:$ORIGIN/blob")"
  direct+=("$speed"); dtick=$((dtick + $(cpu $opid) - o0)); dms=$((dms + ms))
  c0=$(cpu $cpid); s0=$(cpu $spid); b0=$(path_bytes); cw0=$(waits $cpid); sw0=$(waits $spid)
  read -r speed _ <<<"$(fetch "${via[@]}" "http://127.0.0.1:$ORIGIN/blob")"
  through+=("$speed")
  c1=$(cpu $cpid); s1=$(cpu $spid)
  ctick=$((ctick + c1 - c0)); stick=$((stick + s1 - s0))
  cpus+=("$((c1 - c0)),$((s1 - s0)),$(($(waits $cpid) - cw0)),$(($(waits $spid) - sw0))")
  splits+=("$(python3 -c "$delta" "$b0" "$(path_bytes)")")
  if [ "$TUN" = 1 ]; then
    c0=$(cpu $cpid); s0=$(cpu $spid)
    read -r speed _ <<<"$(fetch --tun "$tun_url")"
    tun+=("$speed")
    tctick=$((tctick + $(cpu $cpid) - c0)); tstick=$((tstick + $(cpu $spid) - s0))
  fi
done
if [ ${#perfs[@]} -gt 0 ]; then
  kill -INT "${perfs[@]}"
  wait "${perfs[@]}" || true
  echo "perf: $PERF/client.data, $PERF/server.data (perf report -i <file> --no-children)"
fi
if [ ${#stats[@]} -gt 0 ]; then
  kill -INT "${stats[@]}"
  wait "${stats[@]}" || true
fi
# Each side's system calls, "name=count,…" (empty without SYSCALLS).
syscalls() { [ -s "$work/syscalls-$1.csv" ] && awk -F, '$3 ~ /sys_enter_/ {sub(/.*sys_enter_/, "", $3); printf "%s%s=%s", n++ ? "," : "", $3, $1}' "$work/syscalls-$1.csv"; true; }
split=$(path_bytes | tr , ' ')
want=10240
ttfb_direct=(); ttfb_via=()
for _ in $(seq "$TTFB_REPS"); do
  ttfb_direct+=("$(curl -s -o /dev/null -w '%{time_starttransfer}' "http://127.0.0.1:$ORIGIN/small")")
  ttfb_via+=("$(curl -s -o /dev/null -w '%{time_starttransfer}' "${via[@]}" "http://127.0.0.1:$ORIGIN/small")")
done
python3 - "$SIZE_MB" "$REPS" "$hz" "$ctick" "$stick" "${direct[*]}" "${through[*]}" \
  "${ttfb_direct[*]}" "${ttfb_via[*]}" "$SCHEDULER" "$split" "$(nproc)" "${tun[*]}" "$tctick" "$tstick" \
  "$RECORD" "$commit" "$($B --version 2>/dev/null || echo mpflex)" "$PATHS" "$dtick" "$dms" "${splits[*]}" "${cpus[*]}" \
  "$(stat -c %s "$B")-$(sha256sum "$B" | cut -c1-16)" "$(syscalls client)" "$(syscalls server)" <<'PY'
import json, os, statistics as st, sys
size_mb, reps, hz, ct, stk = (int(x) for x in sys.argv[1:6])
d = [float(x) for x in sys.argv[6].split()]; v = [float(x) for x in sys.argv[7].split()]
td = sorted(float(x) * 1000 for x in sys.argv[8].split()); tv = sorted(float(x) * 1000 for x in sys.argv[9].split())
split = [int(x) for x in sys.argv[11].split()]
gbit = lambda bps: bps * 8 / 1e9
md, mv = st.median(d), st.median(v)
gb = size_mb * reps / 1024
p90 = lambda xs: xs[max(0, int(round(0.9 * len(xs))) - 1)]
npaths, dtk, dms = int(sys.argv[19]), int(sys.argv[20]), int(sys.argv[21])
# CPU seconds per GB: each mpflex process for (b), and curl + origin for (a), which is
# what the kernel's TCP costs both ends of the bare transfer.
cpu_c, cpu_s = ct / hz / gb, stk / hz / gb
cpu_d = (dtk / hz + dms / 1000) / gb
of_d = lambda x: f"{x / cpu_d:.2f} x direct" if cpu_d > 0 else "direct not measured"
rates = lambda xs: " ".join(f"{gbit(x):.2f}" for x in xs)
print(f"transfer: {size_mb} MB x {reps}, loopback, {npaths} paths, scheduler {sys.argv[10]}, Noise AES-GCM, {sys.argv[12]} cores")
print(f"(a) direct TCP      : {gbit(md):6.2f} Gbit/s (median; each: {rates(d)})")
print(f"(b) through mpflex  : {gbit(mv):6.2f} Gbit/s (median; each: {rates(v)})")
print(f"ratio b/a           : {mv / md:.3f}")
print(f"CPU, direct TCP     : {cpu_d:.2f} s per GB (curl + origin, both ends of (a))")
print(f"CPU, mpflex client  : {cpu_c:.2f} s per GB ({of_d(cpu_c)})")
print(f"CPU, mpflex server  : {cpu_s:.2f} s per GB ({of_d(cpu_s)})")
print(f"CPU, client+server  : {cpu_c + cpu_s:.2f} s per GB ({of_d(cpu_c + cpu_s)})")
if sys.argv[13]:
    t = [float(x) for x in sys.argv[13].split()]; tct, tst = int(sys.argv[14]), int(sys.argv[15])
    mt = st.median(t)
    print(f"(c) through the TUN : {gbit(mt):6.2f} Gbit/s (median; min {gbit(min(t)):.2f}, max {gbit(max(t)):.2f})")
    print(f"ratio c/b (TUN/SOCKS5): {mt / mv:.3f}")
    print(f"CPU, TUN, client+server: {(tct + tst) / hz / gb:.2f} s per GB (client {tct / hz / gb:.2f}, server {tst / hz / gb:.2f})")
    print(f"CPU per GB, TUN/SOCKS5: {(tct + tst) / max(ct + stk, 1):.2f} (client alone {tct / max(ct, 1):.2f})")
tot = sum(split) or 1
print("bytes per path      : " + ", ".join(f"{b / tot:.0%}" for b in split) + " (client, received)")
# Each transfer of (b): its rate beside its split over the paths and the CPU it cost.
per = [[int(x) for x in t.split(",")] for t in sys.argv[22].split()]
per_cpu = [[int(x) for x in t.split(",")] for t in sys.argv[23].split()]
per_cpu = [(c / hz / (size_mb / 1024), s / hz / (size_mb / 1024), cw, sw) for c, s, cw, sw in per_cpu]
for r, sp, (c, s, cw, sw) in zip(v, per, per_cpu):
    per_gb = 1024 / size_mb
    print(f"  {gbit(r):6.2f} Gbit/s, paths " + " ".join(f"{b / (sum(sp) or 1):.0%}" for b in sp) +
          f", CPU s/GB client {c:.2f} server {s:.2f}," +
          f" wake-ups per GB client {cw * per_gb:.0f} server {sw * per_gb:.0f}")
# System calls per GB of each process (SYSCALLS), largest first.
calls = {}
for side, arg in (("client", sys.argv[25]), ("server", sys.argv[26])):
    if arg:
        counts = {k: int(v) for k, v in (x.split("=") for x in arg.split(","))}
        calls[side] = {k: round(v / gb) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}
        print(f"system calls per GB, {side}: {sum(calls[side].values())} (" +
              ", ".join(f"{k} {v}" for k, v in calls[side].items() if v) + ")")
print(f"TTFB 10 KB, direct fresh TCP  : median {st.median(td):.2f} ms (p90 {p90(td):.2f})")
print(f"TTFB 10 KB, mpflex session    : median {st.median(tv):.2f} ms (p90 {p90(tv):.2f})")
record, commit, version = sys.argv[16], sys.argv[17], sys.argv[18]
if record:
    rec = {
        "bench": "loopback", "commit": commit, "mpflex": version, "mpflex_id": sys.argv[24], "size_mb": size_mb, "reps": reps,
        "scheduler": sys.argv[10], "paths": npaths, "cores": int(sys.argv[12]), "loadavg": [float(x) for x in os.getloadavg()],
        "direct_gbit": [round(gbit(x), 3) for x in d], "mpflex_gbit": [round(gbit(x), 3) for x in v],
        "ratio": round(mv / md, 4), "cpu_s_per_gb": round((ct + stk) / hz / gb, 3),
        "cpu_s_per_gb_client": round(cpu_c, 3), "cpu_s_per_gb_server": round(cpu_s, 3),
        "cpu_s_per_gb_direct": round(cpu_d, 3),
        "path_bytes": split, "transfer_path_bytes": per,
        "transfer_cpu_s_per_gb": [[round(c, 3), round(s, 3)] for c, s, _, _ in per_cpu],
        "transfer_waits": [[cw, sw] for _, _, cw, sw in per_cpu], "ttfb_direct_ms": [round(x, 3) for x in td], "ttfb_mpflex_ms": [round(x, 3) for x in tv],
    }
    if calls:
        rec["syscalls_per_gb"] = calls
    if sys.argv[13]:
        rec["tun_gbit"] = [round(gbit(x), 3) for x in t]
        rec["tun_cpu_s_per_gb"] = round((tct + tst) / hz / gb, 3)
    with open(record, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(f"record appended to {record}")
PY
