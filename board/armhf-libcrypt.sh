#!/bin/sh
# Puts Debian's static libcrypt (libxcrypt) for armhf where the
# armv7-unknown-linux-gnueabihf build finds it: Basic auth uses crypt(3),
# and Debian's armhf cross packages have no libcrypt.a. musl targets have
# crypt(3) in libc and need none of this.
#
# Usage: board/armhf-libcrypt.sh   (as root the first time; cached after)
# Result: board/armhf-sysroot/libcrypt.a (gitignored), named by
# .cargo/config.toml. The .deb is only unpacked, never installed.
set -eu
cd "$(dirname "$0")"
out=armhf-sysroot
[ -f "$out/libcrypt.a" ] && exit 0
cache=${MARMOSET_ARMHF_CACHE:-$HOME/.cache/marmoset-armhf}
mkdir -p "$cache" "$out"
deb=$(ls "$cache"/libcrypt-dev_*_armhf.deb 2>/dev/null | head -n 1 || true)
if [ -z "$deb" ]; then
	added=''
	if ! dpkg --print-foreign-architectures | grep -qx armhf; then
		dpkg --add-architecture armhf
		added=1
	fi
	# A foreign index mid-sync can make update exit 100; the download may still work.
	apt-get update -qq >/dev/null 2>&1 || true
	(cd "$cache" && apt-get download -qq libcrypt-dev:armhf) || status=$?
	[ -n "$added" ] && dpkg --remove-architecture armhf && { apt-get update -qq >/dev/null 2>&1 || true; }
	[ "${status:-0}" = 0 ] || { echo "could not download libcrypt-dev:armhf" >&2; exit 1; }
	deb=$(ls "$cache"/libcrypt-dev_*_armhf.deb | head -n 1)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
cp "$tmp"/usr/lib/arm-linux-gnueabihf/libcrypt.a "$out/libcrypt.a"
echo "board/$out/libcrypt.a from $(basename "$deb")"
