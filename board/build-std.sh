#!/bin/sh
# Release build of marmoset for a target rustup ships no standard library
# for: armv7-unknown-linux-musleabihf, mipsel-unknown-linux-musl,
# mips-unknown-linux-musl (MIPS32r2 soft float: OpenWrt's mipsel_24kc and
# mips_24kc).
#
# The standard library is built from source (-Zbuild-std, allowed on stable
# through RUSTC_BOOTSTRAP=1) and zig compiles the C (ring) and links
# (PyPI: ziglang + cargo-zigbuild). `-C link-self-contained=no` is essential:
# otherwise rustc looks for a self-contained crt1.o these targets do not ship.
#
# Usage: board/build-std.sh TARGET [--features tls|tls,ubus] [--if-changed]
#                           [--no-install] [--print-key]
#   --features tls  the HTTPS build; its binary is copied to marmoset-tls
#                   beside marmoset, so both builds can be kept.
#   --features tls,ubus  the HTTPS build with the ubus endpoint (OpenWrt's
#                   marmoset-uhttpd), copied to marmoset-tls-ubus.
#   --if-changed  skip the build when its inputs (rustc version, Cargo.lock,
#                 Cargo.toml, .cargo/config.toml, src/, the patched crates,
#                 the build scripts) are unchanged since the last successful
#                 run for this target and features and its binary is still
#                 there. The key of that run is kept in $MARMOSET_CI_CACHE
#                 (default ~/.cache/marmoset-ci)/TARGET[-tls[-ubus]].key. Used by CI.
#   --no-install  do not install missing tools (fail instead).
#   --print-key   print the key of the current inputs and exit.
# Honours CARGO_TARGET_DIR (default: target/). Prints the binary path last.
set -eu

usage() {
	echo "usage: $0 TARGET [--features tls|tls,ubus] [--if-changed] [--no-install] [--print-key]" >&2
	exit 2
}
[ $# -ge 1 ] || usage
TARGET=$1
shift
cd "$(dirname "$0")/.."
TGT=${CARGO_TARGET_DIR:-target}
CACHE=${MARMOSET_CI_CACHE:-${HOME:-/root}/.cache/marmoset-ci}
if_changed=0 install=1 features=""
while [ $# -gt 0 ]; do
	case $1 in
	--if-changed) if_changed=1 ;;
	--no-install) install=0 ;;
	--print-key) if_changed=2 ;;
	--features)
		[ $# -ge 2 ] || usage
		case $2 in tls | tls,ubus) features=$2 ;; *) usage ;; esac
		shift ;;
	*) usage ;;
	esac
	shift
done

# Per target: qemu-user runner, zig's target for the C code, and the
# release profile's opt-level for marmoset itself. MIPS has no compressed
# instructions (every one is 4 bytes) and opt-level 3's inlining and
# unrolling cost it far more flash than on ARM: "s" there (board/README.md,
# "MIPS sizes").
opt=""
case $TARGET in
armv7-unknown-linux-musleabihf) RUNNER=qemu-arm-static ZIG=arm-linux-musleabihf ;;
mipsel-unknown-linux-musl) RUNNER=qemu-mipsel-static ZIG=mipsel-linux-musleabi opt=s ;;
mips-unknown-linux-musl) RUNNER=qemu-mips-static ZIG=mips-linux-musleabi opt=s ;;
*) echo "$0: $TARGET is not a build-std target here" >&2; exit 2 ;;
esac
suffix=$(echo "$features" | tr , -)
name=$TARGET${suffix:+-$suffix}
out=$TGT/$TARGET/release/marmoset${suffix:+-$suffix}

key() {
	{
		rustc -V
		echo "$TARGET $features"
		cat Cargo.lock Cargo.toml .cargo/config.toml board/build-std.sh \
			board/rustc-remap.sh board/discard-eh-frame.ld
		git ls-files -z src board/patched | xargs -0 cat
	} | sha256sum | cut -d' ' -f1
}

if [ $if_changed = 2 ]; then
	key
	exit 0
fi
if [ $if_changed = 1 ]; then
	k=$(key)
	if [ -f "$CACHE/$name.key" ] && [ "$(cat "$CACHE/$name.key")" = "$k" ] && [ -x "$out" ]; then
		echo "$name: inputs unchanged since last successful build ($k), skipped" >&2
		echo "$out"
		exit 0
	fi
fi

need() { command -v "$1" >/dev/null 2>&1; }
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	[ $install = 1 ] || { echo "rust-src component missing" >&2; exit 1; }
	rustup component add rust-src >&2
fi
if ! need cargo-zigbuild || ! python3 -c 'import ziglang' 2>/dev/null; then
	[ $install = 1 ] || { echo "cargo-zigbuild/ziglang missing (pip install ziglang cargo-zigbuild)" >&2; exit 1; }
	python3 -m pip install --quiet ziglang cargo-zigbuild >&2
fi
if ! need "$RUNNER"; then
	[ $install = 1 ] || { echo "$RUNNER missing" >&2; exit 1; }
	apt-get install -y -qq qemu-user-static >/dev/null || { apt-get update -qq && apt-get install -y -qq qemu-user-static >/dev/null; }
fi

# zig as the C compiler for the target (ring), named explicitly: MIPS needs
# zig's soft-float musleabi target (the Rust targets are soft float, and a
# hard-float object does not link with them).
wrap=$(readlink -f "$TGT")/zig-cc
mkdir -p "$wrap"
cc=$wrap/$ZIG-cc
# cc-rs adds its own --target=TRIPLE, which zig cannot parse: dropped.
cat >"$cc.tmp" <<EOF
#!/bin/sh
for a; do
	shift
	case \$a in --target=*) ;; *) set -- "\$@" "\$a" ;; esac
done
exec python3 -m ziglang cc -target $ZIG "\$@"
EOF
printf '#!/bin/sh\nexec python3 -m ziglang ar "$@"\n' >"$wrap/ar.tmp"
chmod +x "$cc.tmp" "$wrap/ar.tmp"
mv "$cc.tmp" "$cc"
mv "$wrap/ar.tmp" "$wrap/ar"
tvar=$(echo "$TARGET" | tr - _)

# Flags through --config are appended to .cargo/config.toml's target
# rustflags (RUSTFLAGS would replace them).
set -- --config "target.$TARGET.rustflags=[\"-C\", \"link-self-contained=no\"]"
[ -z "$opt" ] || set -- "$@" --config "profile.release.opt-level=\"$opt\""
[ -z "$features" ] || set -- "$@" --features "$features"

bin=$TGT/$TARGET/release/marmoset
# cargo leaves either build at the same path: the default one is kept there.
keep=""
if [ -n "$features" ] && [ -f "$bin" ]; then
	keep=$bin.default
	cp -p "$bin" "$keep"
fi
# std without its default features: no backtrace symbolizer (board/README.md,
# "Sizes of the build-std targets").
start=$(date +%s)
env "CC_$tvar=$cc" "AR_$tvar=$wrap/ar" RUSTC_BOOTSTRAP=1 \
	cargo zigbuild --release --locked --target "$TARGET" -Zbuild-std=std,panic_abort -Zbuild-std-features= "$@" >&2
if [ -n "$features" ]; then
	cp "$bin" "$out"
	if [ -n "$keep" ]; then mv "$keep" "$bin"; else rm -f "$bin"; fi
fi
echo "$name: built in $(($(date +%s) - start)) s, $(stat -c %s "$out") bytes" >&2

# Smoke test under qemu-user: the binary must at least start.
$RUNNER "$out" --version >&2

if [ $if_changed = 1 ]; then
	mkdir -p "$CACHE"
	echo "$k" >"$CACHE/$name.key"
fi
echo "$out"
