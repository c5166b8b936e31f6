#!/bin/sh
# Checks meta-marmoset with the real OpenEmbedded tools, offline:
#  1. marmoset-crates.inc matches Cargo.lock (and the check catches drift);
#     this part runs without the oe trees too, the rest is skipped then;
#  2. bitbake (as a non-root user, BB_NO_NETWORK=1, a build directory written
#     here with oe-core's meta + meta-marmoset, MACHINE qemuarm64) runs
#     `bitbake -e marmoset` and `bitbake -n marmoset` (dry run of the whole
#     task graph) under INIT_MANAGER "sysvinit" and "systemd", checks S,
#     DEPENDS, the init variables, and runs the recipe's expanded do_install
#     shell code against this checkout to see which init files it installs;
#  3. reproduces cargo.bbclass's build for aarch64: the crates of
#     marmoset-crates.inc fetched and unpacked as bitbake's crate fetcher does
#     (sha256 checked, .cargo-checksum.json), $CARGO_HOME/config.toml as
#     cargo_common_do_configure writes it, `cargo build -v --frozen --target
#     ... --release --manifest-path=...` from a separate build directory; the
#     binary then answers curl under qemu-aarch64-static.
# Not covered: the real do_fetch/do_compile (no network for oe's sources,
# and rust-native would be built from source), the glibc target (Debian has
# no arm64 cross libcrypt; the musl target is what TCLIBC = "musl" builds),
# packaging QA, images, booting.
# Env: OE_CORE_DIR, BITBAKE_DIR (default ../shared/upstream/... next to the
# checkout), MARMOSET_YOCTO_USER (default marmoset-bb when run as root),
# MARMOSET_YOCTO_WORK (build dirs and caches, default ~USER/.cache/marmoset-yocto;
# the parse cache there makes a second run fast).
# Last line: "N passed, M failed".
# shellcheck disable=SC2317 # helpers called through check
set -u
cd "$(dirname "$0")/../.." || exit 1
repo=$(pwd)

# shellcheck source=tests/results.sh
. tests/results.sh
finish() {
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
}

LAYER=board/yocto/meta-marmoset
RE=$LAYER/recipes-httpd/marmoset
INC=$RE/marmoset-crates.inc
VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
TMP=$(mktemp -d /tmp/marmoset-yocto.XXXXXX)
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT

# --- 1. Crates include vs Cargo.lock (needs no oe tree).
check "marmoset-crates.inc in sync with Cargo.lock (board/crates-inc.sh --check)" board/crates-inc.sh --check
# The same check on a copy whose Cargo.lock drifted (one checksum changed)
# must fail.
mkdir -p "$TMP/drift/board" "$TMP/drift/$RE"
cp board/crates-inc.sh "$TMP/drift/board/"
cp "$INC" "$TMP/drift/$INC"
awk '/^checksum = / && !done { sub(/"[0-9a-f]/, "\"x"); done = 1 } { print }' Cargo.lock >"$TMP/drift/Cargo.lock"
check "a drifted Cargo.lock makes the check fail" not "$TMP/drift/board/crates-inc.sh" --check 2>/dev/null
n_lock=$(grep -c '^source = "registry+https://github.com/rust-lang/crates.io-index"' Cargo.lock)

OE_CORE_DIR=${OE_CORE_DIR:-$repo/../shared/upstream/openembedded-core-wrynose}
BITBAKE_DIR=${BITBAKE_DIR:-$repo/../shared/upstream/bitbake-2.18}
if [ ! -f "$OE_CORE_DIR/meta/conf/layer.conf" ] || [ ! -x "$BITBAKE_DIR/bin/bitbake" ]; then
	echo "skip - bitbake and the oe build: no oe-core/bitbake trees (OE_CORE_DIR=$OE_CORE_DIR BITBAKE_DIR=$BITBAKE_DIR)"
	finish
fi
OE_CORE_DIR=$(cd "$OE_CORE_DIR" && pwd)
BITBAKE_DIR=$(cd "$BITBAKE_DIR" && pwd)

# --- Host packages (what the Yocto manual lists for Debian, plus the cross
# linker and qemu-user for step 3).
need=""
for c in gcc:build-essential g++:g++ make:make chrpath:chrpath cpio:cpio diffstat:diffstat \
	file:file gawk:gawk git:git lz4c:lz4 zstd:zstd pzstd:zstd xz:xz-utils wget:wget \
	rpcgen:rpcsvc-proto patch:patch bzip2:bzip2 perl:perl makeinfo:texinfo unzip:unzip \
	curl:curl aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu qemu-aarch64-static:qemu-user-static; do
	command -v "${c%%:*}" >/dev/null || need="$need ${c#*:}"
done
[ -x /usr/bin/python3 ] || need="$need python3"
locale -a 2>/dev/null | grep -qix 'en_US.utf-\{0,1\}8' || need="$need locales"
if [ -n "$need" ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "installing:$need"
		# shellcheck disable=SC2086 # a list of package names
		{ apt-get -o DPkg::Lock::Timeout=600 install -y -qq $need >/dev/null 2>&1 ||
			{ apt-get -o DPkg::Lock::Timeout=600 update -qq &&
				DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq $need >/dev/null; }; } ||
			bad "apt-get install$need"
	else
		bad "missing host packages (run as root to install):$need"
	fi
fi
# bitbake switches to en_US.UTF-8 and refuses to start without it.
if ! locale -a 2>/dev/null | grep -qix 'en_US.utf-\{0,1\}8' && [ "$(id -u)" = 0 ]; then
	sed -i 's/^# *\(en_US.UTF-8 UTF-8\)/\1/' /etc/locale.gen && locale-gen >/dev/null 2>&1
fi
check "en_US.UTF-8 locale available" sh -c "locale -a | grep -qix 'en_US.utf-\{0,1\}8'"

# --- 2. bitbake, as a non-root user.
if [ "$(id -u)" = 0 ]; then
	BBUSER=${MARMOSET_YOCTO_USER:-marmoset-bb}
	id "$BBUSER" >/dev/null 2>&1 || useradd -m "$BBUSER" || bad "useradd $BBUSER"
	as_user() { runuser -u "$BBUSER" -- "$@"; }
else
	BBUSER=$(id -un)
	as_user() { "$@"; }
fi
BBHOME=$(getent passwd "$BBUSER" | cut -d: -f6)
WORK=${MARMOSET_YOCTO_WORK:-$BBHOME/.cache/marmoset-yocto}
as_user mkdir -p "$WORK/layers" || bad "mkdir $WORK as $BBUSER"
# The layer is copied where the user can read it (and the trees stay untouched).
as_user rm -rf "$WORK/layers/meta-marmoset"
tar -cf - -C board/yocto meta-marmoset | as_user tar -xf - -C "$WORK/layers"
# S for the do_install check: the tracked files of this checkout.
as_user rm -rf "$WORK/src"
as_user mkdir -p "$WORK/src"
git ls-files -z | tar --null -T - -cf - | as_user tar -xf - -C "$WORK/src"

bb() { # bb BUILDDIR ARGS...: bitbake in a clean environment
	_b=$1; shift
	(cd "$_b" && as_user env -i HOME="$BBHOME" USER="$BBUSER" LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8 \
		PATH="$BITBAKE_DIR/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" bitbake "$@")
}
var() { sed -n "s/^\(export \)\{0,1\}$1=\"\(.*\)\"\$/\2/p" "$E" | head -n 1; } # var NAME: from bitbake -e
words() { echo " $(var "$1" | tr -s ' \t' '  ') "; }
contains() { case $1 in *" $2 "*) return 0 ;; *) return 1 ;; esac; } # contains " W1 W2 " W
one_of() { contains "$1" "$2" && ! contains "$1" "$3"; } # WORDS HAS HAS-NOT
both() { contains "$1" "$2" && contains "$1" "$3"; }
same() { [ "$1" = "$2" ]; }

strip=""
for im in sysvinit systemd; do
	BD=$WORK/build-$im
	as_user mkdir -p "$BD/conf"
	as_user sh -c "cat >'$BD/conf/local.conf'" <<EOF
# Written by tests/packaging/yocto.sh
MACHINE = "qemuarm64"
INIT_MANAGER = "$im"
TMPDIR = "$BD/tmp"
DL_DIR = "$WORK/downloads"
SSTATE_DIR = "$BD/sstate-cache"
BB_NO_NETWORK = "1"
CONF_VERSION = "2"
EOF
	as_user sh -c "cat >'$BD/conf/bblayers.conf'" <<EOF
# Written by tests/packaging/yocto.sh
BBPATH = "\${TOPDIR}"
BBFILES ?= ""
BBLAYERS = "$OE_CORE_DIR/meta $WORK/layers/meta-marmoset"
EOF
	E=$TMP/env-$im
	t0=$(date +%s)
	if ! bb "$BD" -e marmoset >"$E" 2>"$TMP/err-$im"; then
		bad "[$im] bitbake -e marmoset"
		grep -E '^(ERROR|WARNING)' "$E" "$TMP/err-$im" | head -n 20
		continue
	fi
	ok "[$im] bitbake -e marmoset ($(($(date +%s) - t0)) s)"
	grep '^WARNING' "$E" | cut -c1-150 | sed 's/^/     /'

	series=$(var LAYERSERIES_CORENAMES)
	check "[$im] LAYERSERIES_COMPAT_marmoset names oe-core's series ($series)" \
		contains "$(words LAYERSERIES_COMPAT_marmoset)" "$series"
	S=$(var S) UNPACKDIR=$(var UNPACKDIR)
	check "[$im] S = \${UNPACKDIR}/marmoset-$VERSION (where the git fetcher unpacks; S is $S)" \
		same "$S" "${UNPACKDIR:-?}/marmoset-$VERSION"
	check "[$im] DEPENDS has virtual/crypt" contains "$(words DEPENDS)" virtual/crypt
	check "[$im] CARGO_BUILD_FLAGS has --frozen" contains "$(words CARGO_BUILD_FLAGS)" --frozen
	# The recipe's cargo environment, used again in step 3.
	strip=$(sed -n 's/^export CARGO_PROFILE_RELEASE_STRIP="\(.*\)"$/\1/p' "$E")
	check "[$im] binary left unstripped for do_package (CARGO_PROFILE_RELEASE_STRIP=${strip:-unset})" same "$strip" false
	n_src=$(words SRC_URI | tr ' ' '\n' | grep -c '^crate://crates.io/')
	check "[$im] SRC_URI has one crate:// per Cargo.lock crate ($n_src/$n_lock)" [ "$n_src" = "$n_lock" ]
	check "[$im] SYSTEMD_SERVICE:marmoset = marmoset.service" [ "$(var 'SYSTEMD_SERVICE:marmoset')" = marmoset.service ]
	check "[$im] INITSCRIPT_NAME marmoset, INITSCRIPT_PARAMS 'defaults 50'" \
		same "$(var INITSCRIPT_NAME) $(var INITSCRIPT_PARAMS)" "marmoset defaults 50"
	check "[$im] useradd: USERADD_PACKAGES marmoset" same "$(var USERADD_PACKAGES)" marmoset
	check "[$im] useradd: a --system user marmoset" both "$(words 'USERADD_PARAM:marmoset')" --system marmoset
	check "[$im] LIC_FILES_CHKSUM is LICENSE's md5" \
		[ "$(var LIC_FILES_CHKSUM)" = "file://LICENSE;md5=$(md5sum LICENSE | cut -d' ' -f1)" ]
	df=$(words DISTRO_FEATURES) deps=$(words DEPENDS)
	if [ $im = sysvinit ]; then
		check "[$im] DISTRO_FEATURES: sysvinit, not systemd" one_of "$df" sysvinit systemd
		check "[$im] DEPENDS has update-rc.d initscripts" both "$deps" update-rc.d initscripts
	else
		check "[$im] DISTRO_FEATURES: systemd, not sysvinit" one_of "$df" systemd sysvinit
		check "[$im] DEPENDS has no initscripts" not contains "$deps" initscripts
	fi

	# The recipe's do_install as bitbake expanded it, run with this checkout
	# as S (cargo_do_install stubbed: the binary is step 3's).
	D=$(var D) unitdir=$(var systemd_system_unitdir) sysconfdir=$(var sysconfdir)
	{
		echo 'cargo_do_install() { :; }'
		sed -n '/^do_install() {$/,/^}$/p' "$E"
		echo 'do_install'
	} >"$TMP/install-$im.sh"
	as_user sh -c "rm -rf '$D' '$S' && mkdir -p '$D' '$UNPACKDIR' && ln -s '$WORK/src' '$S'"
	if check "[$im] expanded do_install runs" as_user sh -e "$TMP/install-$im.sh"; then
		(cd "$D" && find . -type f | sort | sed 's/^/     /')
		check "[$im] installs $sysconfdir/marmoset/marmoset.conf" test -f "$D$sysconfdir/marmoset/marmoset.conf"
		if [ $im = sysvinit ]; then
			check "[$im] installs $sysconfdir/init.d/marmoset (0755), no unit" \
				test -x "$D$sysconfdir/init.d/marmoset" -a ! -e "$D$unitdir/marmoset.service"
			check "[$im] the init script is init/S50marmoset" cmp -s "$D$sysconfdir/init.d/marmoset" init/S50marmoset
		else
			check "[$im] installs $unitdir/marmoset.service, no init.d script" \
				test -f "$D$unitdir/marmoset.service" -a ! -e "$D$sysconfdir/init.d/marmoset"
		fi
	fi

	t0=$(date +%s)
	if bb "$BD" -n marmoset >"$TMP/dry-$im" 2>&1; then
		ok "[$im] bitbake -n marmoset ($(grep -o 'Attempted [0-9]* tasks' "$TMP/dry-$im"), $(($(date +%s) - t0)) s)"
		grep '^WARNING' "$TMP/dry-$im" | cut -c1-150 | sed 's/^/     /'
		for t in do_fetch do_compile do_install do_package_qa; do
			check "[$im] dry run includes marmoset's $t" grep -q "marmoset_$VERSION.bb:$t" "$TMP/dry-$im"
		done
	else
		bad "[$im] bitbake -n marmoset"
		grep -E '^(ERROR|WARNING)' "$TMP/dry-$im" | head -n 20
	fi
done

# --- 3. cargo build as cargo.bbclass runs it, for aarch64 (musl).
TARGET=aarch64-unknown-linux-musl
if ! rustup target list --installed 2>/dev/null | grep -qx $TARGET; then
	rustup target add $TARGET >/dev/null 2>&1 || bad "rustup target add $TARGET"
fi
CW=$TMP/cargo # stands for ${WORKDIR}
CS=$CW/sources/marmoset-$VERSION CH=$CW/sources/cargo_home CB=$CW/build
CDL=${MARMOSET_YOCTO_CRATES:-$HOME/.cache/marmoset-yocto-crates}
mkdir -p "$CS" "$CH/bitbake" "$CB" "$CDL"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$CS"
# do_fetch + do_unpack of the crate:// entries (bitbake's crate fetcher:
# https://static.crates.io/crates/NAME/VERSION/download, checked against
# SRC_URI[NAME-VERSION.sha256sum], unpacked into cargo_home/bitbake with a
# .cargo-checksum.json naming the package's sha256 and no files).
fetched=0 fetch_bad=""
# shellcheck disable=SC2013 # NAME/VERSION words
for nv in $(sed -n 's|^ *crate://crates.io/\([^/]*\)/\([^ ]*\) .*|\1/\2|p' "$INC"); do
	n=${nv%/*} v=${nv#*/}
	sum=$(sed -n "s/^SRC_URI\[$n-$v\.sha256sum\] = \"\([0-9a-f]*\)\"\$/\1/p" "$INC")
	f=$CDL/$n-$v.crate
	if [ ! -s "$f" ]; then
		curl -fsSL -o "$f.part" "https://static.crates.io/crates/$n/$v/download" && mv "$f.part" "$f"
	fi
	if [ -s "$f" ] && [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$sum" ]; then
		tar -xz --no-same-owner -f "$f" -C "$CH/bitbake" &&
			printf '{"files": {}, "package": "%s"}' "$sum" >"$CH/bitbake/$n-$v/.cargo-checksum.json" &&
			fetched=$((fetched + 1))
	else
		fetch_bad="$fetch_bad $n-$v"
		rm -f "$f"
	fi
done
check "crates fetched, sha256 as in marmoset-crates.inc, unpacked ($fetched/$n_lock)" \
	same "$fetched${fetch_bad:+ bad:$fetch_bad}" "$n_lock" || echo "     bad:$fetch_bad"
# do_configure: cargo_common_do_configure's config.toml.
cat >"$CH/config.toml" <<EOF
# EXTRA_OECARGO_PATHS
paths = [
]

# Local mirror vendored by bitbake
[source.bitbake]
directory = "$CH/bitbake"

[source.crates-io]
replace-with = "bitbake"
local-registry = "/nonexistent"

[http]
multiplexing = false

# HOST_SYS
[target.$TARGET]
linker = "aarch64-linux-gnu-gcc"

# BUILD_SYS
[target.x86_64-unknown-linux-gnu]
linker = "gcc"

[build]
target-dir = "$CB/target"
EOF
# do_compile: oe_cargo_build from ${B}, so the checkout's .cargo/config.toml
# (rust-lld, rustflags, rustc wrapper) is not read, as in oe.
# CARGO_PROFILE_RELEASE_STRIP as the recipe exports it (bitbake -e above).
BIN=$CB/target/$TARGET/release/marmoset
if (cd "$CB" && env -u RUSTC_WRAPPER -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET -u RUSTFLAGS \
	CARGO_HOME="$CH" RUSTFLAGS="--remap-path-prefix=$CW=/usr/src/debug/marmoset/$VERSION" \
	${strip:+CARGO_PROFILE_RELEASE_STRIP=$strip} PKG_CONFIG_ALLOW_CROSS=1 RUST_BACKTRACE=1 \
	cargo build -v --frozen --target $TARGET --release --manifest-path="$CS/Cargo.toml") >"$TMP/cargo.log" 2>&1; then
	ok "cargo build -v --frozen --target $TARGET --release (oe's config, vendored crates)"
else
	bad "cargo build --frozen (oe's config)"
	tail -n 20 "$TMP/cargo.log"
fi
check "the build did not use the checkout's .cargo/config.toml (no rustc-remap.sh, rust-lld)" \
	not grep -q "rustc-remap.sh\|rust-lld" "$TMP/cargo.log"
check "linked by aarch64-linux-gnu-gcc (oe: RUST_TARGET_CCLD)" grep -q 'linker=aarch64-linux-gnu-gcc' "$TMP/cargo.log" ||
	grep -o -- '-C linker=[^ ]*' "$TMP/cargo.log" | sort -u | sed 's/^/     /'
if [ -x "$BIN" ]; then
	info=$(file -b "$BIN")
	echo "     $info"
	arm_unstripped() { case $info in *aarch64*"not stripped"*) return 0 ;; *) return 1 ;; esac; }
	check "aarch64 ELF, not stripped (left to do_package)" arm_unstripped
	# What the image gets: do_package strips it.
	aarch64-linux-gnu-strip -o "$TMP/marmoset.stripped" "$BIN" &&
		echo "     size with oe's flags, stripped as do_package does: $(stat -c %s "$TMP/marmoset.stripped") bytes"
	mkdir -p "$TMP/www"
	echo "marmoset on aarch64" >"$TMP/www/index.html"
	: >"$TMP/empty.conf"
	port=$((20000 + $$ % 20000))
	qemu-aarch64-static "$BIN" --config "$TMP/empty.conf" --listen "127.0.0.1:$port" --root "$TMP/www" \
		>"$TMP/server.log" 2>&1 &
	qpid=$!
	got=""
	for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		got=$(curl -fsS "http://127.0.0.1:$port/" 2>/dev/null) && break
		sleep 0.5
	done
	check "qemu-aarch64-static: the binary answers curl on 127.0.0.1:$port" [ "$got" = "marmoset on aarch64" ] ||
		sed 's/^/     /' "$TMP/server.log"
	kill "$qpid" 2>/dev/null
	wait "$qpid" 2>/dev/null
else
	bad "no binary at $BIN"
fi

finish
