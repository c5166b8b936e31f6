#!/usr/bin/env bash
# The firmware binary must not depend on the build host's paths: builds the
# aarch64 firmware with board/release.sh twice, from this checkout and from a
# copy of it at another path with another CARGO_HOME (a second "host"), with
# the rust-src component installed (it makes rustc point std's panic
# locations at the local toolchain). Fails if either binary contains a host
# path ($HOME, either checkout, the sysroot, either CARGO_HOME) or if the two
# differ in a single byte. Ends with PASS or FAIL; exit status 0 or 1.
# About 1-2 minutes on 2 cores (two cold release builds).
#
#   tests/reproducible.sh        honours CARGO_TARGET_DIR (default: target/)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd -P)
TARGET=aarch64-unknown-linux-musl
TGT=${CARGO_TARGET_DIR:-target}
case $TGT in /*) ;; *) TGT=$ROOT/$TGT ;; esac
OUT=$TGT/reproducible
CARGO_HOME_A=${CARGO_HOME:-${HOME:-/root}/.cargo}

fail() {
	echo "reproducible: FAIL: $*"
	exit 1
}

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	rustup component add rust-src >&2 || fail "rustup component add rust-src"
fi
if ! rustup target list --installed | grep -qx "$TARGET"; then
	rustup target add "$TARGET" >&2 || fail "rustup target add $TARGET"
fi
SYSROOT=$(rustc --print sysroot)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/marmoset-repro.XXXXXX") || fail mktemp
trap 'rm -rf "$TMP"' EXIT
# The second host: this working tree (tracked and untracked files, as they
# are now) at another path, and a CARGO_HOME of its own (registry index and
# crate archives copied, so no download is needed).
OTHER=$TMP/other-path/marmoset
CARGO_HOME_B=$TMP/other-cargo-home
mkdir -p "$OTHER" "$CARGO_HOME_B/registry"
git ls-files -z --cached --others --exclude-standard |
	tar --null -T - -cf - | tar -C "$OTHER" -xf - || fail "copying the checkout"
for d in index cache; do
	[ ! -d "$CARGO_HOME_A/registry/$d" ] || cp -R "$CARGO_HOME_A/registry/$d" "$CARGO_HOME_B/registry/"
done

rm -rf "$OUT"
echo "building from $ROOT" >&2
CARGO_TARGET_DIR=$OUT/a board/release.sh "$TARGET" >&2 || fail "board/release.sh in $ROOT"
echo "building from $OTHER (CARGO_HOME=$CARGO_HOME_B)" >&2
CARGO_HOME=$CARGO_HOME_B CARGO_TARGET_DIR=$OUT/b "$OTHER/board/release.sh" "$TARGET" >&2 ||
	fail "board/release.sh in $OTHER"
A=$OUT/a/$TARGET/release/marmoset
B=$OUT/b/$TARGET/release/marmoset

bad=0
for bin in "$A" "$B"; do
	for p in "${HOME:-/root}/" "$ROOT" "$OTHER" "$SYSROOT" "$CARGO_HOME_A" "$CARGO_HOME_B" "$TMP" "$TGT"; do
		n=$(grep -aoF -- "$p" "$bin" | wc -l)
		if [ "$n" -gt 0 ]; then
			echo "$bin: $n x $p, e.g.:"
			grep -aoE -- "$(printf '%s' "$p" | sed 's/[]\/$*.^[]/\\&/g')[[:alnum:]_./@+-]*" "$bin" | sort -u | head -n 3 | sed 's/^/    /'
			bad=1
		fi
	done
done
sa=$(stat -c %s "$A") sb=$(stat -c %s "$B")
echo "$TARGET: $sa bytes from $ROOT, $sb bytes from $OTHER"
if ! cmp -s "$A" "$B"; then
	echo "the two binaries differ: $(cmp "$A" "$B" 2>&1 | head -n 1)"
	bad=1
fi
[ $bad = 0 ] || fail "the firmware depends on the build host's paths"
echo "reproducible: PASS (no host path; the two builds are byte-identical, sha256 $(sha256sum <"$A" | cut -c1-16))"
