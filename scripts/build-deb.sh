#!/usr/bin/env bash
# Builds the Debian package (target/debian/mpflex_<version>-1_<arch>.deb, its path printed
# last): the release binary, the man pages and shell completions it generates itself, the
# systemd units, postinst and example configurations in packaging/. Needs cargo-deb
# (`cargo install cargo-deb --locked`; scripts/test.sh installs it). With --no-build it
# packages target/release/mpflex as it is: the package test ships the binary it tested.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deb >/dev/null || { echo "build-deb: cargo-deb not found: cargo install cargo-deb --locked" >&2; exit 1; }
build=1
[ "${1:-}" = "--no-build" ] && build=0
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
[ $build = 1 ] && cargo build --release -p mpflex
bin=$target/release/mpflex
[ -x "$bin" ] || { echo "build-deb: no $bin: build it first (cargo build --release -p mpflex)" >&2; exit 1; }

# Generated files go under target/release/, the prefix cargo-deb maps to the real target
# directory (the assets in crates/mpflex/Cargo.toml name them there).
out=$target/release/deb-assets
rm -rf "$out"
mkdir -p "$out/man" "$out/completions"
"$bin" man --dir "$out/man"
gzip -9n "$out"/man/*.1
"$bin" completions bash >"$out/completions/mpflex"
"$bin" completions zsh >"$out/completions/_mpflex"
"$bin" completions fish >"$out/completions/mpflex.fish"

# Stripped: the release profile keeps line tables for profiling, 30 MB a package need not carry.
cargo deb -p mpflex --no-build --strip --quiet
