#!/bin/sh
# Cross-built marmoset against the repo's integration tests.
#
# Usage: tests/cross.sh TARGET [--tls | --ubus]
#   e.g. aarch64-unknown-linux-musl, armv7-unknown-linux-gnueabihf,
#        armv7-unknown-linux-musleabihf, mipsel-unknown-linux-musl,
#        mips-unknown-linux-musl, x86_64-unknown-linux-musl
#
# Builds marmoset for TARGET (release, through board/release.sh's toolchain
# set-up; the build-std targets through board/build-std.sh --if-changed, so
# a binary built from the same inputs is reused), checks it starts under
# qemu-user, then runs the integration tests (`cargo test --test '*'`,
# compiled natively for this machine) against it: the harness in tests/
# starts `$MARMOSET_RUNNER $MARMOSET_BIN ARGS...`. binfmt_misc is not
# assumed: the runner is given explicitly. With --tls (build-std targets
# only), also the `tls` build against tests/tls.rs; with --ubus, the
# `tls,ubus` build (OpenWrt's marmoset-uhttpd) against tests/tls.rs and
# tests/ubus.rs instead.
# Honours CARGO_TARGET_DIR (default: target/). Last line: "N passed, M failed".
set -u
cd "$(dirname "$0")/.." || exit 1

usage() { echo "usage: $0 TARGET [--tls | --ubus]" >&2; exit 2; }
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
TARGET=$1
tls=0 features=""
if [ $# = 2 ]; then
	case $2 in
	--tls) features=tls ;;
	--ubus) features=tls,ubus ;;
	*) usage ;;
	esac
	tls=1
fi
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
mipsel-*) RUNNER=qemu-mipsel-static ;;
mips-*) RUNNER=qemu-mips-static ;;
*) echo "no qemu runner known for $TARGET" >&2; exit 2 ;;
esac

case $TARGET in
armv7-unknown-linux-musleabihf | mips-unknown-linux-musl | mipsel-unknown-linux-musl) build_std=1 ;;
*) build_std=0 ;;
esac
[ $tls = 0 ] || [ $build_std = 1 ] || usage

# build_std [--features FEATURES]: sets b to the binary's path, or to nothing on failure.
build_std() {
	start=$(date +%s)
	log=$TGT/cross-$TARGET${2:+-$(echo "$2" | tr , -)}.log
	if b=$(board/build-std.sh "$TARGET" "$@" --if-changed 2>"$log"); then
		b=$(readlink -f "$b")
		ok "build $TARGET $* ($(($(date +%s) - start)) s): $(stat -c %s "$b") bytes"
	else
		tail -n 30 "$log"
		bad "build $TARGET $*"
		b=""
	fi
}

if [ $build_std = 1 ]; then
	build_std
	[ -n "$b" ] || finish
	BIN=$b
else
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
fi

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
# System calls per keep-alive request, counted under qemu-user's -d strace
# (natively under strace): at most 3, one clock read, no futex.
if python3 tests/syscalls.py --bin "$BIN" ${RUNNER:+--runner "$RUNNER"}; then
	ok "system calls per request on $TARGET"
else
	bad "system calls per request on $TARGET"
fi

if [ $tls = 1 ]; then
	build_std --features "$features"
	[ -n "$b" ] || finish
	TLS_BIN=$b
	set -- --test tls
	[ "$features" = tls ] || set -- "$@" --test ubus
	echo "$* against the $features build $TLS_BIN (runner: $RUNNER)"
	if MARMOSET_BIN=$TLS_BIN MARMOSET_RUNNER=$RUNNER cargo test --locked --no-fail-fast --features "$features" "$@"; then
		ok "cargo test --features $features $* with MARMOSET_BIN=$TARGET $features binary"
	else
		bad "cargo test --features $features $* with MARMOSET_BIN=$TARGET $features binary"
	fi
fi
finish
