#!/bin/sh
# Build marmoset for armv7-unknown-linux-musleabihf (release).
#
# rustup ships no rust-std for this target, so the standard library is built
# from source (-Zbuild-std, allowed on stable through RUSTC_BOOTSTRAP=1) and
# zig links it (PyPI: ziglang + cargo-zigbuild). `-C link-self-contained=no`
# is essential: otherwise rustc looks for a self-contained crt1.o that the
# target does not ship.
#
# Usage: board/build-armv7-musl.sh [--if-changed] [--no-install]
#   --if-changed  skip the build when the inputs that can break it (rustc
#                 version, Cargo.lock, Cargo.toml, .cargo/config.toml, this
#                 script) are unchanged since the last successful run. The key
#                 of the last success is kept in $MARMOSET_CI_CACHE
#                 (default ~/.cache/marmoset-ci)/armv7-musl.key. Used by CI.
#   --no-install  do not install missing tools (fail instead).
#   --print-key   print the key of the current inputs and exit.
# Honours CARGO_TARGET_DIR (default: target/). Prints the binary path last.
set -eu

TARGET=armv7-unknown-linux-musleabihf
cd "$(dirname "$0")/.."
TGT=${CARGO_TARGET_DIR:-target}
CACHE=${MARMOSET_CI_CACHE:-${HOME:-/root}/.cache/marmoset-ci}
if_changed=0 install=1
for a in "$@"; do
	case $a in
	--if-changed) if_changed=1 ;;
	--no-install) install=0 ;;
	--print-key) if_changed=2 ;;
	*) echo "usage: $0 [--if-changed] [--no-install] [--print-key]" >&2; exit 2 ;;
	esac
done

key() {
	{
		rustc -V
		cat Cargo.lock Cargo.toml .cargo/config.toml board/build-armv7-musl.sh board/rustc-remap.sh
	} | sha256sum | cut -d' ' -f1
}

if [ $if_changed = 2 ]; then
	key
	exit 0
fi
if [ $if_changed = 1 ]; then
	k=$(key)
	if [ -f "$CACHE/armv7-musl.key" ] && [ "$(cat "$CACHE/armv7-musl.key")" = "$k" ]; then
		echo "armv7-musl: inputs unchanged since last successful build ($k), skipped"
		exit 0
	fi
fi

need() { command -v "$1" >/dev/null 2>&1; }
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	[ $install = 1 ] || { echo "rust-src component missing" >&2; exit 1; }
	rustup component add rust-src
fi
if ! need cargo-zigbuild || ! python3 -c 'import ziglang' 2>/dev/null; then
	[ $install = 1 ] || { echo "cargo-zigbuild/ziglang missing (pip install ziglang cargo-zigbuild)" >&2; exit 1; }
	python3 -m pip install --quiet ziglang cargo-zigbuild
fi
if ! need qemu-arm-static; then
	[ $install = 1 ] || { echo "qemu-arm-static missing" >&2; exit 1; }
	apt-get install -y -qq qemu-user-static >/dev/null || { apt-get update -qq && apt-get install -y -qq qemu-user-static >/dev/null; }
fi

start=$(date +%s)
RUSTC_BOOTSTRAP=1 RUSTFLAGS='-C link-self-contained=no' \
	cargo zigbuild --release --locked --target $TARGET -Zbuild-std=std,panic_abort
bin=$TGT/$TARGET/release/marmoset
echo "armv7-musl: built in $(($(date +%s) - start)) s, $(stat -c %s "$bin") bytes" >&2

# Smoke test under qemu-user: the binary must at least start.
qemu-arm-static "$bin" --version >&2

if [ $if_changed = 1 ]; then
	mkdir -p "$CACHE"
	echo "$k" >"$CACHE/armv7-musl.key"
fi
echo "$bin"
