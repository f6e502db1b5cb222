#!/usr/bin/env python3
"""The energy table of docs/energy.md from lab records (JSON lines): per profile and
size, each system's median completion time and modelled energy over its repetitions,
and both as a ratio of kernel MPTCP's medians.

usage: scripts/energy-table.py lab-results/energy-*.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if r.get("energy_j") is None or r.get("completion_ms") is None:
            continue
        rows[(r["profile"], r["size"], r["system"])].append(r)


def size(b):
    return f"{b >> 20} MB" if b >= 1 << 20 else f"{b >> 10} KB"


print("| profile | size | system | reps | time s (median) | energy J (median) | LTE J | J/MB | time / MPTCP | energy / MPTCP |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(rows, key=lambda k: (k[0], k[1], k[2] != "mpflex:emptcp", k[2])):
    prof, sz, system = key
    rs = rows[key]
    t = statistics.median(r["completion_ms"] for r in rs) / 1000
    e = statistics.median(r["energy_j"] for r in rs)
    lte = statistics.median(r["energy_path_j"][1] for r in rs)
    base = rows.get((prof, sz, "mptcp"))
    if base:
        bt = statistics.median(r["completion_ms"] for r in base) / 1000
        be = statistics.median(r["energy_j"] for r in base)
        rt, re = f"{t / bt:.2f}", f"{e / be:.2f}"
    else:
        rt = re = "–"
    print(f"| {prof} | {size(sz)} | {system} | {len(rs)} | {t:.2f} | {e:.2f} | {lte:.2f} | {e / (sz / 1e6):.3f} | {rt} | {re} |")
