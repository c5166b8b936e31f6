#!/bin/sh
# Checks meta-marmoset with the real OpenEmbedded tools, offline:
#  1. marmoset-crates.inc matches Cargo.lock (and the check catches drift);
#     this part runs without the oe trees too, the rest is skipped then;
#  2. bitbake (as a non-root user, BB_NO_NETWORK=1, a build directory written
#     here with oe-core's meta + meta-marmoset, MACHINE qemuarm64) runs
#     `bitbake -e marmoset` and `bitbake -g marmoset` (the whole task graph
#     as the runqueue resolves it) under INIT_MANAGER "sysvinit" and
#     "systemd", the latter with PACKAGECONFIG:append:pn-marmoset = " tls"
#     in local.conf; checks S, DEPENDS, the init variables, the cargo command
#     (--features tls only with PACKAGECONFIG tls) and the C compiler
#     do_compile hands to ring, and runs the recipe's expanded do_install
#     shell code against this checkout to see which init files it installs;
#     then MACHINE qemumips (sysvinit, tls): `bitbake -e` and `bitbake -g`,
#     with oe-core's libstd-rs built for mips32 in the graph;
#  3. reproduces cargo.bbclass's build for aarch64, once as each configuration
#     expands the recipe: the crates of marmoset-crates.inc fetched and
#     unpacked as bitbake's crate fetcher does (sha256 checked,
#     .cargo-checksum.json), $CARGO_HOME/config.toml as
#     cargo_common_do_configure writes it, oe_cargo_fix_env's environment,
#     `cargo build -v --frozen --target ... --release --manifest-path=...
#     ${PACKAGECONFIG_CONFARGS}` from a separate build directory; the plain
#     binary then answers curl under qemu-aarch64-static, the tls one HTTPS
#     (curl --cacert on the certificate it makes).
# Not covered: the real do_fetch/do_compile (no network for oe's sources,
# and rust-native would be built from source), the glibc target (Debian has
# no arm64 cross libcrypt; the musl target is what TCLIBC = "musl" builds),
# packaging QA, images, booting.
# Env: OE_CORE_DIR, BITBAKE_DIR (default ../shared/upstream/... next to the
# checkout), MARMOSET_YOCTO_USER (default marmoset-bb when run as root),
# MARMOSET_YOCTO_WORK (build dirs and caches, default ~USER/.cache/marmoset-yocto;
# the parse cache there makes a second run fast), MARMOSET_YOCTO_CRATES (the
# downloaded crates, default ~/.cache/marmoset-yocto-crates) and
# MARMOSET_YOCTO_CARGO (step 3's work directories, kept so that a second run
# builds nothing, default ~/.cache/marmoset-yocto-cargo).
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
	skip "bitbake and the oe build: no oe-core/bitbake trees (OE_CORE_DIR=$OE_CORE_DIR BITBAKE_DIR=$BITBAKE_DIR)"
	# Only the crates check ran: counted as skipped unless it failed.
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ] || exit 1
	exit "$SKIPPED"
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
fn_body() { sed -n "/^$1() {\$/,/^}\$/p" "$E"; } # fn_body NAME: a shell function from bitbake -e
fn_has() { fn_body "$1" | grep -qx "$2"; }        # fn_has NAME LINE-PATTERN
quiet() { "$@" >/dev/null; }                      # a command whose output is not the test's

strip=""
# The systemd build also turns HTTPS on the way board/README.md says (a
# configuration of its own would cost another parse of oe-core); the
# sysvinit one keeps the default.
for im in sysvinit systemd; do
	BD=$WORK/build-$im
	tls_line=""
	[ $im = systemd ] && tls_line='PACKAGECONFIG:append:pn-marmoset = " tls"'
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
$tls_line
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
	# cargo.bbclass's oe_cargo_build runs `cargo build ${CARGO_BUILD_FLAGS}
	# ${PACKAGECONFIG_CONFARGS}`: the command as bitbake expanded it.
	cargo_line=$(fn_body oe_cargo_build | sed -n 's/^[[:space:]]*"cargo" build \(.*\)$/ \1 /p' | tr -s ' \t' '  ')
	if [ $im = systemd ]; then
		check "[$im] PACKAGECONFIG tls from local.conf: PACKAGECONFIG_CONFARGS is '$(var PACKAGECONFIG_CONFARGS)'" \
			contains "$(words PACKAGECONFIG_CONFARGS)" --features
		check "[$im] oe_cargo_build runs cargo build ... --features tls" contains "$cargo_line" "--features tls"
		# ring's C and assembly: do_compile exports CC and TARGET_CC (cc-rs
		# takes TARGET_CC) as the wrapper around the cross gcc, and the
		# cross gcc and libc are in DEPENDS already.
		check "[$im] do_compile runs oe_cargo_fix_env" fn_has do_compile '[[:space:]]*oe_cargo_fix_env'
		check "[$im] oe_cargo_fix_env exports TARGET_CC=\${RUST_TARGET_CC} (wrapper/$(var RUST_TARGET_CC | sed 's|.*/||'))" \
			fn_has oe_cargo_fix_env "[[:space:]]*export TARGET_CC=\"$(var RUST_TARGET_CC)\""
		check "[$im] that wrapper runs the cross gcc (WRAPPER_TARGET_CC: $(var WRAPPER_TARGET_CC | cut -d' ' -f1))" \
			same "$(var WRAPPER_TARGET_CC | cut -d' ' -f1)" "$(var TARGET_PREFIX)gcc"
		check "[$im] DEPENDS has it and the C library already (gcc-cross-$(var TARGET_ARCH), virtual/libc)" \
			both "$(words DEPENDS)" "gcc-cross-$(var TARGET_ARCH)" virtual/libc
	else
		check "[$im] no PACKAGECONFIG: no --features in the cargo command" not contains "$cargo_line" --features
	fi
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

	# The whole task graph as the runqueue resolves it: every provider and
	# task dependency found in oe-core, every task's signature computed. A
	# dry run (-n) adds a no-op execution of each task, most of its time.
	t0=$(date +%s)
	G=$BD/task-depends.dot
	as_user rm -f "$G"
	if bb "$BD" -g marmoset >"$TMP/graph-$im" 2>&1 && [ -s "$G" ]; then
		ok "[$im] bitbake -g marmoset ($(grep -c ' \[label=' "$G") tasks, $(($(date +%s) - t0)) s)"
		grep '^WARNING' "$TMP/graph-$im" | cut -c1-150 | sed 's/^/     /'
		for t in do_fetch do_compile do_install do_package_qa; do
			check "[$im] the task graph has marmoset's $t" \
				grep -q "^\"marmoset\.$t\" \[label=.*marmoset_$VERSION\.bb\"\]" "$G"
		done
		for dep in rust-native cargo-native; do
			check "[$im] marmoset's recipe sysroot gets $dep" \
				grep -q "^\"marmoset\.do_prepare_recipe_sysroot\" -> \"$dep\.do_populate_sysroot\"" "$G"
		done
	else
		bad "[$im] bitbake -g marmoset"
		grep -E '^(ERROR|WARNING)' "$TMP/graph-$im" | head -n 20
	fi
done

# --- 2b. MIPS (qemumips: mips32r2, big-endian): Rust has no prebuilt std
# for it (tier 3), oe-core builds one (libstd-rs) from source for the
# machine. Parse and task graph only; with HTTPS, whose ring has C.
BD=$WORK/build-qemumips
as_user mkdir -p "$BD/conf"
as_user sh -c "cat >'$BD/conf/local.conf'" <<EOF
# Written by tests/packaging/yocto.sh
MACHINE = "qemumips"
INIT_MANAGER = "sysvinit"
TMPDIR = "$BD/tmp"
DL_DIR = "$WORK/downloads"
SSTATE_DIR = "$BD/sstate-cache"
BB_NO_NETWORK = "1"
CONF_VERSION = "2"
PACKAGECONFIG:append:pn-marmoset = " tls"
EOF
as_user cp "$WORK/build-sysvinit/conf/bblayers.conf" "$BD/conf/bblayers.conf"
E=$TMP/env-qemumips
t0=$(date +%s)
if bb "$BD" -e marmoset >"$E" 2>"$TMP/err-qemumips"; then
	ok "[qemumips] bitbake -e marmoset ($(($(date +%s) - t0)) s)"
	check "[qemumips] TARGET_ARCH mips, RUST_TARGET_SYS $(var RUST_TARGET_SYS)" \
		same "$(var TARGET_ARCH) $(var RUST_TARGET_SYS | cut -d- -f1)" "mips mips"
	check "[qemumips] DEPENDS has rust-native and libstd-rs (std built for the target)" \
		both "$(words DEPENDS)" rust-native libstd-rs
	check "[qemumips] oe_cargo_build runs cargo build ... --features tls" \
		contains "$(fn_body oe_cargo_build | sed -n 's/^[[:space:]]*"cargo" build \(.*\)$/ \1 /p' | tr -s ' \t' '  ')" "--features tls"
	G=$BD/task-depends.dot
	as_user rm -f "$G"
	t0=$(date +%s)
	if bb "$BD" -g marmoset >"$TMP/graph-qemumips" 2>&1 && [ -s "$G" ]; then
		ok "[qemumips] bitbake -g marmoset ($(grep -c ' \[label=' "$G") tasks, $(($(date +%s) - t0)) s)"
		for dep in rust-native cargo-native libstd-rs; do
			check "[qemumips] marmoset's recipe sysroot gets $dep" \
				grep -q "^\"marmoset\.do_prepare_recipe_sysroot\" -> \"$dep\.do_populate_sysroot\"" "$G"
		done
		check "[qemumips] libstd-rs is compiled for the machine (libstd-rs.do_compile in the graph)" \
			grep -q '^"libstd-rs\.do_compile" \[label=' "$G"
	else
		bad "[qemumips] bitbake -g marmoset"
		grep -E '^(ERROR|WARNING)' "$TMP/graph-qemumips" | head -n 20
	fi
else
	bad "[qemumips] bitbake -e marmoset"
	grep -E '^(ERROR|WARNING)' "$E" "$TMP/err-qemumips" | head -n 20
fi

# The same machine with musl (OpenWrt's C library on such routers): rustix
# must be told that the C library's time_t is 32-bit there (the recipe's
# RUSTFLAGS), or the event loop's timers never fire.
BD=$WORK/build-qemumips-musl
as_user mkdir -p "$BD/conf"
as_user sh -c "sed 's|build-qemumips/|build-qemumips-musl/|' '$WORK/build-qemumips/conf/local.conf' >'$BD/conf/local.conf'; echo 'TCLIBC = \"musl\"' >>'$BD/conf/local.conf'"
as_user cp "$WORK/build-sysvinit/conf/bblayers.conf" "$BD/conf/bblayers.conf"
E=$TMP/env-qemumips-musl
t0=$(date +%s)
if bb "$BD" -e marmoset >"$E" 2>"$TMP/err-qemumips-musl"; then
	ok "[qemumips musl] bitbake -e marmoset ($(($(date +%s) - t0)) s)"
	check "[qemumips musl] RUST_TARGET_SYS $(var RUST_TARGET_SYS)" \
		same "$(var RUST_TARGET_SYS | sed 's/-.*-linux-/-linux-/')" "mips-linux-musl"
	check "[qemumips musl] RUSTFLAGS has --cfg fix_y2038" contains " $(var RUSTFLAGS) " "--cfg fix_y2038"
else
	bad "[qemumips musl] bitbake -e marmoset"
	grep -E '^(ERROR|WARNING)' "$E" "$TMP/err-qemumips-musl" | head -n 20
fi

# --- 3. cargo build as cargo.bbclass runs it, for aarch64 (musl): the
# recipe as the sysvinit configuration expands it (no PACKAGECONFIG) and as
# the systemd one does (PACKAGECONFIG tls), each in a WORKDIR of its own,
# kept between runs so that an unchanged tree builds nothing.
TARGET=aarch64-unknown-linux-musl
if ! rustup target list --installed 2>/dev/null | grep -qx $TARGET; then
	rustup target add $TARGET >/dev/null 2>&1 || bad "rustup target add $TARGET"
fi
CDL=${MARMOSET_YOCTO_CRATES:-$HOME/.cache/marmoset-yocto-crates}
CWS=${MARMOSET_YOCTO_CARGO:-$HOME/.cache/marmoset-yocto-cargo}
mkdir -p "$CDL" "$CWS"
# do_fetch of the crate:// entries (bitbake's crate fetcher:
# https://static.crates.io/crates/NAME/VERSION/download, checked against
# SRC_URI[NAME-VERSION.sha256sum]).
fetched=0 fetch_bad="" crates=""
# shellcheck disable=SC2013 # NAME/VERSION words
for nv in $(sed -n 's|^ *crate://crates.io/\([^/]*\)/\([^ ]*\) .*|\1/\2|p' "$INC"); do
	n=${nv%/*} v=${nv#*/}
	sum=$(sed -n "s/^SRC_URI\[$n-$v\.sha256sum\] = \"\([0-9a-f]*\)\"\$/\1/p" "$INC")
	f=$CDL/$n-$v.crate
	if [ ! -s "$f" ]; then
		curl -fsSL -o "$f.part" "https://static.crates.io/crates/$n/$v/download" && mv "$f.part" "$f"
	fi
	if [ -s "$f" ] && [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$sum" ]; then
		fetched=$((fetched + 1)) crates="$crates $n-$v:$sum"
	else
		fetch_bad="$fetch_bad $n-$v"
		rm -f "$f"
	fi
done
check "crates fetched, sha256 as in marmoset-crates.inc ($fetched/$n_lock)" \
	same "$fetched${fetch_bad:+ bad:$fetch_bad}" "$n_lock" || echo "     bad:$fetch_bad"

# oe_build KIND: do_unpack, do_configure and do_compile with what bitbake -e
# said in $E, in $CWS/KIND (standing for ${WORKDIR}); the binary in $BIN.
oe_build() {
	kind=$1 BIN=""
	oe_wd=$(var WORKDIR) confargs=$(var PACKAGECONFIG_CONFARGS)
	if [ -z "$oe_wd" ]; then
		bad "[$kind] no bitbake -e output to build from"
		return 1
	fi
	CW=$CWS/$kind
	CS=$CW/sources/marmoset-$VERSION CH=$CW/sources/cargo_home CB=$CW/build
	rm -rf "$CS" "$CH" "$CW/wrapper" "$CW/cc-sources.log"
	mkdir -p "$CS" "$CH/bitbake" "$CB" "$CW/wrapper/bin"
	# The tracked files keep their times, so cargo sees them unchanged.
	git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$CS"
	# do_unpack: each crate into cargo_home/bitbake with a
	# .cargo-checksum.json naming the package's sha256 and no files.
	for c in $crates; do
		tar -xz --no-same-owner -f "$CDL/${c%:*}.crate" -C "$CH/bitbake" &&
			printf '{"files": {}, "package": "%s"}' "${c#*:}" >"$CH/bitbake/${c%:*}/.cargo-checksum.json"
	done
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
	# rust-common.bbclass's wrappers with Debian's cross gcc for oe's:
	# target-rust-cc adds TARGET_CC_ARCH, and CRATE_CC_FLAGS when cc-rs's
	# own defaults are off (CRATE_CC_NO_DEFAULTS) for a target that is not
	# bare metal; it logs the C and assembly files it compiles.
	cat >"$CW/wrapper/target-rust-cc" <<EOF
#!/bin/sh
for a; do case \$a in *.c|*.S) echo "\$a" >>"$CW/cc-sources.log" ;; esac; done
extra=""
if [ -n "\${CRATE_CC_NO_DEFAULTS+set}" ] && [ -n "\${TARGET+set}" ]; then
	case \$TARGET in *-none-*) ;; *) extra="$(var CRATE_CC_FLAGS)" ;; esac
fi
exec aarch64-linux-gnu-gcc $(var TARGET_CC_ARCH) \$extra "\$@"
EOF
	printf '#!/bin/sh\nexec gcc "$@"\n' >"$CW/wrapper/build-rust-cc"
	# AR as oe names it (TARGET_PREFIX), on PATH.
	printf '#!/bin/sh\nexec aarch64-linux-gnu-gcc-ar "$@"\n' >"$CW/wrapper/bin/$(var AR)"
	chmod +x "$CW/wrapper/target-rust-cc" "$CW/wrapper/build-rust-cc" "$CW/wrapper/bin/$(var AR)"
	# do_compile: oe_cargo_fix_env as bitbake expanded it (CC, TARGET_CC,
	# CFLAGS, AR, HOST_CC, ... with this WORKDIR), CRATE_CC_NO_DEFAULTS,
	# then oe_cargo_build from ${B}, so the checkout's .cargo/config.toml
	# (rust-lld, rustflags, rustc wrapper) is not read, as in oe.
	# CARGO_PROFILE_RELEASE_STRIP as the recipe exports it.
	fix_env=$(fn_body oe_cargo_fix_env | sed -e '1d' -e '$d' -e "s|$oe_wd|$CW|g")
	strip=$(sed -n 's/^export CARGO_PROFILE_RELEASE_STRIP="\(.*\)"$/\1/p' "$E")
	log=$CW/cargo.log
	# The checks below read the rustc command lines of the build that made
	# the binary: without them, make cargo build marmoset itself again.
	[ -s "$CW/cargo-built.log" ] || touch "$CS/src/main.rs"
	t0=$(date +%s)
	# shellcheck disable=SC2086 # PACKAGECONFIG_CONFARGS split as the shell splits it in oe_cargo_build
	if (cd "$CB" && unset RUSTC_WRAPPER CARGO_TARGET_DIR CARGO_BUILD_TARGET RUSTFLAGS &&
		eval "$fix_env" && export CRATE_CC_NO_DEFAULTS=1 PATH="$CW/wrapper/bin:$PATH" &&
		env CARGO_HOME="$CH" RUSTFLAGS="--remap-path-prefix=$CW=/usr/src/debug/marmoset/$VERSION" \
			${strip:+CARGO_PROFILE_RELEASE_STRIP=$strip} PKG_CONFIG_ALLOW_CROSS=1 RUST_BACKTRACE=1 \
			cargo build -v --frozen --target $TARGET --release --manifest-path="$CS/Cargo.toml" $confargs) >"$log" 2>&1; then
		ok "[$kind] cargo build -v --frozen --target $TARGET --release$confargs (oe's config and environment, vendored crates, $(($(date +%s) - t0)) s)"
	else
		bad "[$kind] cargo build --frozen$confargs (oe's config)"
		tail -n 20 "$log"
		return 1
	fi
	# A warm build runs no rustc: keep the log of the one that did.
	grep -q -- '--crate-name marmoset ' "$log" && cp "$log" "$CW/cargo-built.log"
	log=$CW/cargo-built.log
	check "[$kind] the build did not use the checkout's .cargo/config.toml (no rustc-remap.sh, rust-lld)" \
		sh -c "[ -s '$log' ] && ! grep -q 'rustc-remap.sh\|rust-lld' '$log'"
	check "[$kind] linked by aarch64-linux-gnu-gcc (oe: RUST_TARGET_CCLD)" grep -q 'linker=aarch64-linux-gnu-gcc' "$log" ||
		grep -o -- '-C linker=[^ ]*' "$log" | sort -u | sed 's/^/     /'
	BIN=$CB/target/$TARGET/release/marmoset
	if [ ! -x "$BIN" ]; then
		bad "[$kind] no binary at $BIN"
		return 1
	fi
	info=$(file -b "$BIN")
	echo "     $info"
	arm_unstripped() { case $info in *aarch64*"not stripped"*) return 0 ;; *) return 1 ;; esac; }
	check "[$kind] aarch64 ELF, not stripped (left to do_package)" arm_unstripped
	# What the image gets: do_package strips it.
	aarch64-linux-gnu-strip -o "$TMP/marmoset-$kind.stripped" "$BIN" &&
		echo "     size with oe's flags, stripped as do_package does: $(stat -c %s "$TMP/marmoset-$kind.stripped") bytes ($(date -u +%F))"
}

# serve LOG URL WANT CACERT COMMAND...: runs the server until curl gets WANT
# from URL (30 s at most); true if it did. With CACERT, curl trusts only
# that certificate and takes localhost:$port for 127.0.0.1.
serve() {
	_log=$1 _url=$2 _want=$3 _ca=$4 _got=""
	shift 4
	"$@" >"$_log" 2>&1 &
	_pid=$!
	_deadline=$(($(date +%s) + 30))
	while [ "$(date +%s)" -lt "$_deadline" ]; do
		if [ -n "$_ca" ]; then
			_got=$(curl -fsS --max-time 2 --cacert "$_ca" --resolve "localhost:$port:127.0.0.1" "$_url" 2>/dev/null) && break
		else
			_got=$(curl -fsS --max-time 2 "$_url" 2>/dev/null) && break
		fi
		kill -0 "$_pid" 2>/dev/null || break
		sleep 0.2
	done
	kill "$_pid" 2>/dev/null
	wait "$_pid" 2>/dev/null
	[ "$_got" = "$_want" ] || { sed 's/^/     /' "$_log" | head -n 5; return 1; }
}

port=$(free_port)
mkdir -p "$TMP/www"
echo "marmoset on aarch64" >"$TMP/www/index.html"
: >"$TMP/empty.conf"

E=$TMP/env-sysvinit
if oe_build plain; then
	PLAIN=$BIN
	check "[plain] qemu-aarch64-static: the binary answers curl on 127.0.0.1:$port" \
		serve "$TMP/server.log" "http://127.0.0.1:$port/" "marmoset on aarch64" "" \
		qemu-aarch64-static "$BIN" --config "$TMP/empty.conf" --listen "127.0.0.1:$port" --root "$TMP/www"
fi

E=$TMP/env-systemd
if oe_build tls; then
	n_ring=$(grep -cE '/ring-[0-9.]+/(crypto|third_party|pregenerated)/' "$CW/cc-sources.log" 2>/dev/null)
	if [ "${n_ring:-0}" -gt 0 ]; then
		ok "[tls] ring's C and assembly compiled through TARGET_CC, wrapper/target-rust-cc ($n_ring files)"
	else
		# A warm build compiles nothing: ring is then fresh, and its
		# build script's output says which compiler it ran.
		check "[tls] ring built (earlier) with TARGET_CC, wrapper/target-rust-cc (its build script's output)" \
			sh -c "grep -q 'Fresh ring v' '$CW/cargo.log' && grep -rqx --include=output \
				'TARGET_CC = Some($CW/wrapper/target-rust-cc)' '$CB/target/$TARGET/release/build'"
	fi
	h=$TMP/https
	mkdir -p "$h/www"
	echo "marmoset over HTTPS on aarch64" >"$h/www/index.html"
	port=$(free_port)
	printf '%s\n' "listen 127.0.0.1:$port tls" "tls-cert $h/cert.pem" "tls-key $h/key.pem" \
		"tls-self-signed on" "root $h/www" >"$h/marmoset.conf"
	check "[tls] marmoset --check-config accepts the TLS settings" \
		quiet qemu-aarch64-static "$BIN" --config "$h/marmoset.conf" --check-config
	if [ -n "${PLAIN-}" ]; then
		check "[tls] the plain build refuses them (built without TLS)" \
			not qemu-aarch64-static "$PLAIN" --config "$h/marmoset.conf" --check-config 2>/dev/null
	fi
	check "[tls] qemu-aarch64-static: https://localhost:$port/ answers 200 with the page (curl --cacert on the certificate it made)" \
		serve "$TMP/server-tls.log" "https://localhost:$port/" "marmoset over HTTPS on aarch64" "$h/cert.pem" \
		qemu-aarch64-static "$BIN" --config "$h/marmoset.conf"
fi

finish
