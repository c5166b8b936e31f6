#!/bin/sh
# Build marmoset (release) for a target rustup ships no rust-std for:
# armv7-unknown-linux-musleabihf, mipsel-unknown-linux-musl,
# mips-unknown-linux-musl. The standard library is built from source
# (-Zbuild-std, allowed on stable through RUSTC_BOOTSTRAP=1) and zig links it
# (PyPI: ziglang + cargo-zigbuild); cargo-zigbuild also gives ring's C and
# assembly (the `tls` feature) zig as the target's C compiler.
# `-C link-self-contained=no` is essential: otherwise rustc looks for a
# self-contained crt1.o these targets do not ship.
#
# Usage: board/build-std.sh TARGET [--features tls]
# Honours CARGO_TARGET_DIR (default: target/). Installs rust-src, ziglang and
# cargo-zigbuild when missing. Logs to stderr; prints the binary path last.
set -eu

[ $# -ge 1 ] || { echo "usage: $0 TARGET [--features tls]" >&2; exit 2; }
TARGET=$1
shift
features=""
case "$*" in
"") ;;
"--features tls") features="--features tls" ;;
*) echo "usage: $0 TARGET [--features tls]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
TGT=${CARGO_TARGET_DIR:-target}

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	rustup component add rust-src >&2
fi
if ! command -v cargo-zigbuild >/dev/null 2>&1 || ! python3 -c 'import ziglang' 2>/dev/null; then
	python3 -m pip install --quiet ziglang cargo-zigbuild >&2
fi

# MIPS: a plain static executable. Rust makes a static PIE for these targets,
# and that one dies with SIGSEGV before it serves (seen under qemu-user and on
# a Malta kernel alike: its relocations are not all applied).
flags='-C link-self-contained=no'
case $TARGET in mips*) flags="$flags -C relocation-model=static" ;; esac

start=$(date +%s)
# shellcheck disable=SC2086 # $features: none or two words
RUSTC_BOOTSTRAP=1 RUSTFLAGS="$flags" \
	cargo zigbuild --release --locked --target "$TARGET" $features -Zbuild-std=std,panic_abort >&2
bin=$TGT/$TARGET/release/marmoset
echo "$TARGET${features:+ ($features)}: built in $(($(date +%s) - start)) s, $(stat -c %s "$bin") bytes" >&2
echo "$bin"
