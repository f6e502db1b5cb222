#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer, via cargo-fuzz and a nightly compiler, with
# AddressSanitizer) of what a peer sends: record plaintexts (decode_frames), datagram
# frames and runs (datagram_frames, datagram_runs), the join record (join_record) and the
# routing preamble (route_preamble). Not run in CI: the recorded run is in
# docs/security.md.
#
#   [FUZZ_TARGETS="t1 t2 ..."] scripts/fuzz.sh [EXECUTIONS] [JOBS]
#
# EXECUTIONS in total (default 100,000,000), split evenly over the five targets (or those
# FUZZ_TARGETS names, to finish a run in parts) and, within each, over JOBS parallel
# processes (default: the number of CPUs). Each target's
# corpus is kept in fuzz/corpus/<target> and grows from run to run; a crash stops the run
# and its input is written to fuzz/artifacts/<target>/. Needs: rustup's nightly toolchain
# and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

total=${1:-100000000}
jobs=${2:-$(nproc)}
read -r -a targets <<<"${FUZZ_TARGETS:-decode_frames datagram_frames datagram_runs join_record route_preamble}"
per_job=$(( total / ${#targets[@]} / jobs ))

command -v cargo-fuzz >/dev/null || { echo "fuzz.sh: needs cargo-fuzz (cargo install cargo-fuzz)" >&2; exit 1; }
rustup run nightly rustc --version >/dev/null || { echo "fuzz.sh: needs the nightly toolchain (rustup toolchain install nightly)" >&2; exit 1; }

for t in "${targets[@]}"; do
    cargo +nightly fuzz build --release "$t"
done
start=$(date +%s)
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    log="run-$t.log"
    echo "== $t: $jobs × $per_job executions"
    # -runs counts each process's executions; -jobs runs that many processes.
    cargo +nightly fuzz run --release "$t" "corpus/$t" -- \
        -runs="$per_job" -jobs="$jobs" -workers="$jobs" -max_len=4096 -print_final_stats=1 \
        >"$log" 2>&1 || { tail -40 "$log" fuzz-[0-9]*.log 2>/dev/null; echo "fuzz.sh: $t FAILED" >&2; exit 1; }
    grep -h "stat::number_of_executed_units" fuzz-[0-9]*.log 2>/dev/null | awk '{s += $2} END {print "   executions:", s}'
    rm -f fuzz-[0-9]*.log "$log"
done
echo "== done: $(( total / ${#targets[@]} / jobs * jobs * ${#targets[@]} )) executions over ${#targets[@]} targets, 0 crashes, in $(( $(date +%s) - start )) s"
