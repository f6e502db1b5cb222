#!/usr/bin/env python3
"""Earliest completion of a chunk when every path starts from the kernel's initial window.

The lab's `bound` assumes open windows (size / sum of rates + smallest RTT). After an idle
spell longer than an RTO, Linux CUBIC restarts each connection from 10 segments; this model
gives what is reachable then: the request crosses the first path (half its RTT), each path
then sends rounds that double from 10 segments until they fill the path's rate, and bytes
count when they reach the client. No queueing, no loss: a lower bound for `fresh` chunks on
persistent paths under idle restart.

    python3 scripts/slow-start-bound.py          # seed-default's three LTE RTTs
"""

MSS = 1448
INIT_CWND = 10


def arrivals(rate, rtt, start, horizon=4.0):
    """(time at the receiver, cumulative bytes) along one path, in small steps."""
    t, cwnd, cum, out = start, INIT_CWND * MSS, 0.0, []
    while t < start + horizon:
        send = cwnd / rate
        for i in range(1, 51):
            out.append((t + send * i / 50 + rtt / 2, cum + cwnd * i / 50))
        cum += cwnd
        t += max(rtt, send)
        cwnd = min(cwnd * 2, rate * rtt * 2)
    return out


def delivered(arr, t):
    got = 0.0
    for when, cum in arr:
        if when > t:
            break
        got = cum
    return got


def finish(paths, size):
    t = 0.0
    while sum(delivered(a, t) for a in paths) < size:
        t += 0.001
    return t


def main():
    wifi = (7.04e6 / 8, 0.050)
    start = wifi[1] / 2
    for lte_rtt in (0.070, 0.270, 0.470):
        lte = (9.185e6 / 8, lte_rtt)
        both = [arrivals(*wifi, start), arrivals(*lte, start)]
        for size in (256 << 10, 1 << 20):
            print(
                f"seed-default LTE RTT {lte_rtt * 1000:.0f} ms, {size >> 10} KB: "
                f"both paths from 10 segments {finish(both, size) * 1000:.0f} ms, "
                f"WiFi alone {finish(both[:1], size) * 1000:.0f} ms"
            )


if __name__ == "__main__":
    main()
