#!/usr/bin/env bash
# Every test, on a Debian or Ubuntu machine: installs the system packages the tests need,
# then runs `cargo test --workspace --release`. `.ci/run` calls this too, so the README's
# command and CI cannot drift apart. The end-to-end tests build network namespaces, veth
# links and iptables/nftables rules, and one installs the .deb with dpkg: all need root.
set -euo pipefail
cd "$(dirname "$0")/.."
# --install-only: install what the tests need and stop (`.ci/run` does this while clippy
# builds, so the downloads and cargo-deb's build overlap the lints).
install_only=0
if [ "${1:-}" = "--install-only" ]; then install_only=1; shift; fi

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: needs root (network namespaces, apt-get, dpkg): run sudo env \"PATH=\$PATH\" scripts/test.sh" >&2
  exit 1
fi
command -v cargo >/dev/null || { echo "scripts/test.sh: cargo not found: install Rust (https://rustup.rs); under sudo keep your PATH: sudo env \"PATH=\$PATH\" scripts/test.sh" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "scripts/test.sh: no apt-get: install the packages listed in this script by hand, then run cargo test --workspace --release" >&2; exit 1; }

# package:command pairs; a package is installed only when its command is missing.
export DEBIAN_FRONTEND=noninteractive
need=()
for pkg in build-essential:cc iproute2:ip iproute2:ss iproute2:tc iptables:iptables nftables:nft \
           iperf3:iperf3 curl:curl ethtool:ethtool procps:sysctl procps:kill python3:python3 \
           adduser:adduser util-linux:setpriv systemd:systemd-analyze dpkg:dpkg-deb haproxy:haproxy \
           bind9-dnsutils:dig iputils-ping:ping; do
  command -v "${pkg#*:}" >/dev/null 2>&1 || need+=("${pkg%%:*}")
done
# The font `mpflex-lab report --plots` draws its text with (tested).
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
# The live view's test drives Debian's headless Chromium, and the metrics test parses
# /metrics with the Prometheus project's Python parser (Debian installs it for
# /usr/bin/python3).
command -v chromium-headless-shell >/dev/null 2>&1 || command -v chromium >/dev/null 2>&1 || need+=(chromium-headless-shell)
/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null || need+=(python3-prometheus-client)
# The lab's `quic` workload runs aioquic (PyPI only) from a virtual environment.
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "scripts/test.sh: installing ${need[*]}"
  apt-get update -qq
  # Without recommends: the browser's would add a desktop's services.
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Builds the .deb the package test installs (crates/mpflex/tests/e2e_package.rs).
if ! command -v cargo-deb >/dev/null; then
  echo "scripts/test.sh: installing cargo-deb"
  cargo install cargo-deb --version 3.8.0 --locked --quiet
fi

# aioquic for the lab's `quic` test (crates/lab/src/workload/quic.rs), pinned.
venv=target/lab-venv
if ! "$venv/bin/python" -c 'import aioquic' 2>/dev/null; then
  echo "scripts/test.sh: installing aioquic into $venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet aioquic==1.7.2
fi
export MPFLEX_LAB_PYTHON="$PWD/$venv/bin/python"
[ $install_only = 1 ] && exit 0

# A stale lab or test topology from a killed run is removed by the next one that starts
# (mpflex_netns::clean_stale: a group whose owner's lock is free); a live one, a lab run
# beside these tests, is left alone.

cargo test --workspace --release "$@"
