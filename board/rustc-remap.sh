#!/bin/sh
# Host-independent builds: --remap-path-prefix for every build-host path that
# would otherwise end up in the binary (panic locations), so two hosts build
# the same bytes:
#   this checkout                    -> ""      (src/main.rs, as cargo gives it)
#   $CARGO_HOME                      -> /cargo  (git dependencies)
#   $CARGO_HOME/registry/src/<index> -> ""      (httparse-1.10.1/src/lib.rs)
#   <sysroot>/lib/rustlib/src/rust   -> /rustc/<commit-hash>, where std's
#     paths point; with the rust-src component installed rustc rewrites them
#     to the local copy otherwise (+2.3 KB on aarch64, and host-specific).
# rustc applies the last prefix that matches: the more specific come later.
#
#   board/rustc-remap.sh RUSTC ARGS...  as build.rustc-wrapper (.cargo/config.toml):
#                                       runs RUSTC ARGS plus the flags
#   board/rustc-remap.sh --toml [RUSTC] prints the flags as a TOML array, for
#                                       cargo --config 'target.T.rustflags=...'
#                                       (board/release.sh); arrays from --config
#                                       are appended to the config file's.
# Added by a wrapper, the flags survive RUSTFLAGS in the environment (which
# replaces config rustflags) and stay out of cargo's metadata hashes.
set -eu
toml=""
if [ "${1-}" = --toml ]; then
	toml=1
	shift
fi
rustc=${1:-${RUSTC:-rustc}}
[ $# = 0 ] || shift
root=$(cd "$(dirname "$0")/.." && pwd -P)
home=${CARGO_HOME:-${HOME:-/root}/.cargo}

set -- "$@" --remap-path-prefix="$root=" --remap-path-prefix="$home=/cargo"
for index in "$home"/registry/src/*/; do
	[ -d "$index" ] && set -- "$@" --remap-path-prefix="${index%/}="
done
sysroot=$("$rustc" --print sysroot)
if [ -d "$sysroot/lib/rustlib/src/rust" ]; then
	hash=$("$rustc" -vV | sed -n 's/^commit-hash: //p')
	set -- "$@" --remap-path-prefix="$sysroot/lib/rustlib/src/rust=/rustc/$hash"
fi

[ -n "$toml" ] || exec "$rustc" "$@"
sep="["
for flag do
	case $flag in
	--remap-path-prefix=*) ;;
	*) continue ;;
	esac
	printf '%s"%s"' "$sep" "$(printf '%s' "$flag" | sed 's/[\\"]/\\&/g')"
	sep=", "
done
echo "]"
