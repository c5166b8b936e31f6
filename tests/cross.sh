#!/bin/sh
# Cross-built marmoset against the repo's integration tests.
#
# Usage: tests/cross.sh TARGET
#   e.g. aarch64-unknown-linux-musl, armv7-unknown-linux-gnueabihf,
#        armv7-unknown-linux-musleabihf, x86_64-unknown-linux-musl
#
# Builds marmoset for TARGET (release, through board/release.sh's toolchain
# set-up), checks it starts under qemu-user, then runs the integration tests
# (`cargo test --test '*'`, compiled natively for this machine) against it:
# the harness in tests/ starts `$MARMOSET_RUNNER $MARMOSET_BIN ARGS...`.
# binfmt_misc is not assumed: the runner is given explicitly.
# Honours CARGO_TARGET_DIR (default: target/). Last line: "N passed, M failed".
set -u
cd "$(dirname "$0")/.." || exit 1

[ $# = 1 ] || { echo "usage: $0 TARGET" >&2; exit 2; }
TARGET=$1
TGT=${CARGO_TARGET_DIR:-target}
mkdir -p "$TGT"
VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)

# shellcheck source=tests/results.sh
. tests/results.sh
finish() {
	echo "$pass passed, $fail failed"
	[ $fail = 0 ]
	exit
}

case $TARGET in
x86_64-unknown-linux-musl) RUNNER="" ;;
aarch64-*) RUNNER=qemu-aarch64-static ;;
arm*) RUNNER=qemu-arm-static ;;
*) echo "no qemu runner known for $TARGET" >&2; exit 2 ;;
esac

# release.sh installs what the target needs, builds, and packs dist/.
start=$(date +%s)
if out=$(board/release.sh "$TARGET" 2>"$TGT/cross-$TARGET.log"); then
	ok "build $TARGET ($(($(date +%s) - start)) s): $(echo "$out" | sed -n 2p)"
else
	tail -n 30 "$TGT/cross-$TARGET.log"
	bad "build $TARGET"
	finish
fi
BIN=$(readlink -f "$TGT/$TARGET/release/marmoset")

v=$($RUNNER "$BIN" --version 2>&1)
if [ "$v" = "marmoset $VERSION" ]; then
	ok "'${RUNNER:+$RUNNER }marmoset --version' prints 'marmoset $VERSION'"
else
	bad "'${RUNNER:+$RUNNER }marmoset --version' printed '$v'"
fi
if file "$BIN" | grep -Eq 'statically linked|static-pie linked'; then
	ok "statically linked"
else
	bad "not statically linked: $(file -b "$BIN")"
fi

if ls tests/*.rs >/dev/null 2>&1; then
	echo "integration tests against $BIN${RUNNER:+ (runner: $RUNNER)}"
	if MARMOSET_BIN=$BIN MARMOSET_RUNNER=$RUNNER cargo test --locked --no-fail-fast --test '*'; then
		ok "cargo test --test '*' with MARMOSET_BIN=$TARGET binary"
	else
		bad "cargo test --test '*' with MARMOSET_BIN=$TARGET binary"
	fi
else
	echo "no integration tests (tests/*.rs) yet: skipped"
fi
finish
