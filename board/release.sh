#!/bin/sh
# Builds a release of marmoset for TARGET and packs
#   dist/marmoset-VERSION-TARGET.tar.gz
# holding the stripped binary at usr/bin/marmoset plus everything under
# rootfs-overlay/ (etc/marmoset/marmoset.conf, etc/init.d/S50marmoset, www/),
# ready to unpack over a device's root. Prints the binary's size.
#
# Usage: board/release.sh TARGET
#   TARGET: x86_64-unknown-linux-musl, aarch64-unknown-linux-musl,
#           armv7-unknown-linux-gnueabihf, or any target whose toolchain is
#           set up in .cargo/config.toml; armv7-unknown-linux-musleabihf,
#           mipsel-unknown-linux-musl and mips-unknown-linux-musl through
#           board/build-std.sh (no standard library from rustup).
# Honours CARGO_TARGET_DIR (default: target/). Installs missing Debian
# cross packages and rustup targets. The tarball is reproducible: file times
# are SOURCE_DATE_EPOCH (default: the last commit's time), owner root; and
# the binary is the same bytes on any host (source paths remapped, see
# board/rustc-remap.sh).
set -eu

[ $# = 1 ] || { echo "usage: $0 TARGET" >&2; exit 2; }
TARGET=$1
cd "$(dirname "$0")/.."
TGT=${CARGO_TARGET_DIR:-target}
VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
NAME=marmoset-$VERSION-$TARGET

apt_install() {
	missing=""
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "installing$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086
	apt-get install -y -qq $missing >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq $missing >/dev/null; }
}

# Toolchain for the target, and the command that runs its binaries here.
case $TARGET in
x86_64-unknown-linux-musl) RUNNER="" ;;
aarch64-unknown-linux-musl)
	apt_install qemu-user-static
	RUNNER=qemu-aarch64-static ;;
armv7-unknown-linux-gnueabihf)
	apt_install gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static
	board/armhf-libcrypt.sh >&2
	RUNNER=qemu-arm-static ;;
armv7-unknown-linux-musleabihf) RUNNER=qemu-arm-static ;;
mipsel-unknown-linux-musl) RUNNER=qemu-mipsel-static ;;
mips-unknown-linux-musl) RUNNER=qemu-mips-static ;;
*) RUNNER="" ;;
esac

case $TARGET in
armv7-unknown-linux-musleabihf | mips-unknown-linux-musl | mipsel-unknown-linux-musl) build_std=1 ;;
*) build_std=0 ;;
esac
if [ $build_std = 1 ]; then
	board/build-std.sh "$TARGET" >&2
else
	if ! rustup target list --installed | grep -qx "$TARGET"; then
		rustup target add "$TARGET" >&2
	fi
	# Host-independent bytes: remap the checkout, $CARGO_HOME and the
	# rust-src sysroot out of panic locations (board/rustc-remap.sh, also the
	# rustc wrapper). Through --config the flags are appended to
	# .cargo/config.toml's target rustflags (RUSTFLAGS would replace them),
	# and cargo rebuilds when they change. Fetch first so the registry's
	# source directory exists when the flags are computed.
	cargo fetch --locked >&2
	remap=$(board/rustc-remap.sh --toml)
	# strip explicitly: do not depend on [profile.release] for it
	cargo build --release --locked --target "$TARGET" \
		--config 'profile.release.strip="symbols"' \
		--config "target.$TARGET.rustflags=$remap" >&2
fi
BIN=$TGT/$TARGET/release/marmoset

# The binary must start on its architecture (qemu-user for foreign ones).
if [ "$(uname -m)-unknown-linux-musl" = "$TARGET" ] || [ -n "$RUNNER" ]; then
	$RUNNER "$BIN" --version >&2
fi
if readelf -S "$BIN" 2>/dev/null | grep -q '\.symtab'; then
	echo "error: $BIN is not stripped" >&2
	exit 1
fi

STAGE=$TGT/release-stage/$NAME
rm -rf "$STAGE"
mkdir -p "$STAGE/usr/bin" dist
cp -R rootfs-overlay/. "$STAGE/"
install -m 0755 "$BIN" "$STAGE/usr/bin/marmoset"
for d in bin sbin lib; do
	[ ! -e "$STAGE/$d" ] || { echo "error: /$d in the overlay (merged-usr)" >&2; exit 1; }
done

EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
(cd "$STAGE" && find . -mindepth 1 | sed "s,^\./,," | LC_ALL=C sort) >"$STAGE.list"
tar -C "$STAGE" --no-recursion --owner=0 --group=0 --numeric-owner \
	--mtime="@$EPOCH" -cf - -T "$STAGE.list" | gzip -9n >"dist/$NAME.tar.gz"

size=$(stat -c %s "$BIN")
tsize=$(stat -c %s "dist/$NAME.tar.gz")
kib=$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1024 }')
echo "dist/$NAME.tar.gz ($tsize bytes)"
echo "$TARGET: usr/bin/marmoset $size bytes ($kib KiB)"
echo "| $TARGET | $size | $kib | $tsize | $(date -u +%Y-%m-%d) |"
