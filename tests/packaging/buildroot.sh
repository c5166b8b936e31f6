#!/usr/bin/env bash
# The br2-external tree (board/buildroot) checked with Buildroot's own tools,
# then built the way Buildroot's cargo infrastructure builds it:
#   1. utils/check-package on the whole tree: no warning;
#   2. each defconfig loads and keeps BR2_PACKAGE_MARMOSET=y; `make printvars`
#      shows the package's dependencies (host-rustc; libxcrypt on glibc);
#      board/qemu/post-image.sh writes start-qemu.sh for it;
#      Buildroot's qemu_mips32r2el_malta defconfig with the package drops it
#      (glibc and musl): Buildroot has no Rust for mips32;
#   3. for each defconfig: the release path (tarball unpacked, crates vendored
#      and .cargo/config.toml written as support/download/cargo-post-process
#      does) and the checkout path (MARMOSET_OVERRIDE_SRCDIR: the checkout
#      rsynced with the package's exclusions, crates from the cargo home),
#      each built with `cargo build` and `cargo install` and the environment
#      that `make printvars` reports for them (TARGET_MAKE_ENV,
#      TARGET_CONFIGURE_OPTS, PKG_CARGO_ENV, the package's options), stripped
#      with Buildroot's STRIPCMD, and run under qemu-user answering an HTTP
#      request;
#   4. the same defconfigs with BR2_PACKAGE_MARMOSET_TLS=y: both cargo steps
#      get --features tls, the release path builds with that configuration's
#      printvars, ring's C and assembly go through its TARGET_CC, and the
#      binary serves HTTPS under qemu-user on the certificate it makes
#      (curl --cacert), with TLS settings the plain build refuses.
# Buildroot's toolchain is stood in for by Debian's cross tools under the names
# Buildroot gives them (TARGET_CROSS, in HOST_DIR/bin), and its staging
# libxcrypt by Debian's (board/armhf-libcrypt.sh). Buildroot's host-rust-bin
# by rustup's rustc.
#
#   tests/packaging/buildroot.sh     (as root: installs what it needs)
# BUILDROOT_DIR: the Buildroot tree (default ../shared/upstream/buildroot-2026.02.3
# beside the repository), never written to. MARMOSET_BR_WORK: work directory
# (default /tmp/marmoset-buildroot; kept between runs, so warm runs rebuild
# little). It must be outside the checkout, like Buildroot's output directory
# should be: cargo reads the .cargo/config.toml of every parent directory.
# Last line: "N passed, M failed"; exit 1 if any failed; without the tree, one
# "skip - " line and exit 77 (skipped).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd -P)
cd "$repo" || exit 1
# shellcheck source=tests/results.sh
. tests/results.sh
# shellcheck source=tests/apt.sh
. tests/apt.sh
BR=${BUILDROOT_DIR:-$repo/../shared/upstream/buildroot-2026.02.3}
if [ ! -f "$BR/Makefile" ] || [ ! -x "$BR/utils/check-package" ]; then
	skip "no Buildroot tree at $BR (set BUILDROOT_DIR): Buildroot checks not run"
	exit "$SKIPPED"
fi
BR=$(cd "$BR" && pwd -P)
EXT=$repo/board/buildroot
work=${MARMOSET_BR_WORK:-/tmp/marmoset-buildroot}
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
case $work/ in
"$repo"/*) echo "MARMOSET_BR_WORK=$work is inside the checkout: cargo would read its .cargo/config.toml"; echo "0 passed, 1 failed"; exit 1 ;;
esac
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
# What the caller's cargo setup would add is not part of Buildroot's build.
unset RUSTFLAGS CARGO_BUILD_RUSTFLAGS RUSTC_WRAPPER CARGO_BUILD_RUSTC_WRAPPER CARGO_TARGET_DIR CARGO_BUILD_TARGET
# Buildroot's downloads would go under the (read-only) tree: point them here.
export BR2_DL_DIR=$work/dl

note() { echo "note - $*"; }
# shellcheck disable=SC2317 # called through check
quiet() { "$@" >/dev/null; } # a command whose output is not the test's
finish() {
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
}

# --- what this needs -------------------------------------------------------
pkgs=(make gcc g++ rsync file bc cpio unzip patch perl python3 python3-magic python3-flake8 shellcheck curl
	gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static)
if ! apt_install "$work/apt.log" "${pkgs[@]}"; then
	bad "apt-get install ($work/apt.log)"
	finish
fi
if ! rustup target add aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf >/dev/null 2>&1; then
	bad "rustup target add aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf"
	finish
fi
# check-package imports python-magic and flake8: Debian's python3, not another one on PATH.
PY=/usr/bin/python3

# --- 1. check-package --------------------------------------------------------
out=$(cd "$EXT" && find . -type f -print0 | sort -z | xargs -0 "$PY" "$BR/utils/check-package" -b 2>&1)
warnings=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) warnings generated$/\1/p')
if [ "$warnings" = 0 ]; then
	ok "utils/check-package -b on board/buildroot: $(printf '%s\n' "$out" | grep 'lines processed'), 0 warnings"
else
	printf '%s\n' "$out" | sed 's/^/    /'
	bad "utils/check-package -b on board/buildroot: ${warnings:-?} warnings"
fi

# --- 2. configurations -------------------------------------------------------
# printvars NAME VAR...: "VAR=value" lines for the loaded defconfig NAME.
printvars() {
	local o=$work/o-$1
	shift
	make -s -C "$o" printvars VARS="$*" 2>/dev/null
}
var() { sed -n "s/^$1=//p" "$2" | head -n 1; } # var NAME FILE

# What pkg-cargo.mk's build and install commands expand (TARGET_MAKE_ENV
# and TARGET_CONFIGURE_OPTS: PATH, CC, AR, CFLAGS, ... ; PKG_CARGO_ENV; the
# package's own), and what the test needs besides.
varlist=(MARMOSET_DEPENDENCIES RUSTC_TARGET_NAME TARGET_CROSS TARGET_CC TARGET_MAKE_ENV TARGET_CONFIGURE_OPTS
	PKG_CARGO_ENV MARMOSET_CARGO_ENV MARMOSET_CARGO_BUILD_OPTS MARMOSET_CARGO_INSTALL_OPTS
	MARMOSET_OVERRIDE_SRCDIR MARMOSET_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS RSYNC_VCS_EXCLUSIONS STRIPCMD HOST_DIR
	BR2_ROOTFS_POST_IMAGE_SCRIPT BR2_ROOTFS_POST_SCRIPT_ARGS BR2_ROOTFS_POST_IMAGE_SCRIPT_ARGS)
declare -A TRIPLE
for c in "$EXT"/configs/*_defconfig; do
	name=$(basename "$c" _defconfig)
	o=$work/o-$name
	rm -rf "$o"
	if ! make -s -C "$BR" O="$o" BR2_EXTERNAL="$EXT" "${name}_defconfig" >"$work/$name-defconfig.log" 2>&1; then
		bad "$name: defconfig does not load ($work/$name-defconfig.log)"
		continue
	fi
	# The checkout path's override, where Buildroot reads it (BR2_PACKAGE_OVERRIDE_FILE).
	echo "MARMOSET_OVERRIDE_SRCDIR = $repo" >"$o/local.mk"
	if grep -qx BR2_PACKAGE_MARMOSET=y "$o/.config"; then
		ok "$name: loads, BR2_PACKAGE_MARMOSET=y kept"
	else
		bad "$name: BR2_PACKAGE_MARMOSET dropped by kconfig (unmet dependencies)"
	fi
	# Without C++ on musl, menuconfig says why marmoset is not offered.
	if grep -qx BR2_TOOLCHAIN_USES_MUSL=y "$o/.config"; then
		n=$work/o-$name-nocxx
		rm -rf "$n"
		mkdir -p "$n"
		cp "$o/.config" "$n/.config"
		"$BR/utils/config" --file "$n/.config" --disable BR2_TOOLCHAIN_BUILDROOT_CXX
		make -s -C "$BR" O="$n" BR2_EXTERNAL="$EXT" olddefconfig >"$work/$name-nocxx.log" 2>&1
		if grep -qx '# marmoset needs a toolchain w/ C++' "$n/.config" && ! grep -qx BR2_PACKAGE_MARMOSET=y "$n/.config"; then
			ok "$name without C++: marmoset off, \"marmoset needs a toolchain w/ C++\" shown"
		else
			bad "$name without C++: no comment saying why marmoset is off"
		fi
		rm -rf "$n"
	fi
	# The HTTPS option turns the tls cargo feature on, for pkg-cargo.mk's
	# `cargo build` and for its `cargo install`, which builds again with
	# only the install options. Its output directory is kept for step 3.
	t=$work/o-$name-tls
	rm -rf "$t"
	mkdir -p "$t"
	cp "$o/.config" "$t/.config"
	"$BR/utils/config" --file "$t/.config" --enable BR2_PACKAGE_MARMOSET_TLS
	make -s -C "$BR" O="$t" BR2_EXTERNAL="$EXT" olddefconfig >"$work/$name-tls.log" 2>&1
	printvars "$name-tls" "${varlist[@]}" >"$work/$name-tls.vars"
	tls_build=$(var MARMOSET_CARGO_BUILD_OPTS "$work/$name-tls.vars")
	tls_install=$(var MARMOSET_CARGO_INSTALL_OPTS "$work/$name-tls.vars")
	if grep -qx BR2_PACKAGE_MARMOSET_TLS=y "$t/.config" && [[ $tls_build == *"--features tls"* ]] &&
		[[ $tls_install == *"--features tls"* ]]; then
		ok "$name with BR2_PACKAGE_MARMOSET_TLS: cargo build and cargo install get --features tls"
	else
		bad "$name with BR2_PACKAGE_MARMOSET_TLS: build options '$tls_build', install options '$tls_install'"
	fi
	printvars "$name" "${varlist[@]}" >"$work/$name.vars"
	deps=" $(var MARMOSET_DEPENDENCIES "$work/$name.vars" | xargs) "
	want="host-rustc"
	grep -qx BR2_TOOLCHAIN_USES_GLIBC=y "$o/.config" && want="$want libxcrypt"
	miss=""
	for d in $want; do
		case $deps in *" $d "*) ;; *) miss="$miss $d" ;; esac
	done
	if [ -z "$miss" ]; then
		ok "$name: MARMOSET_DEPENDENCIES has $want (${deps:1:-1})"
	else
		bad "$name: MARMOSET_DEPENDENCIES lacks$miss (${deps:1:-1})"
	fi
	# start-qemu.sh, as Buildroot's post-image step would write it (the
	# images themselves are not built here).
	# The values as make expands them, unquoted (qstrip).
	qvar() { var "$1" "$2" | sed 's/^"\(.*\)"$/\1/'; }
	script=$(qvar BR2_ROOTFS_POST_IMAGE_SCRIPT "$work/$name.vars")
	args="$(qvar BR2_ROOTFS_POST_SCRIPT_ARGS "$work/$name.vars") $(qvar BR2_ROOTFS_POST_IMAGE_SCRIPT_ARGS "$work/$name.vars")"
	if grep -q start-qemu.sh "$c" || [ -n "$script" ]; then
		img=$work/images-$name
		rm -rf "$img"
		mkdir -p "$img"
		# shellcheck disable=SC2086 # the arguments are split as Buildroot does
		(cd "$BR" && BINARIES_DIR=$img HOST_DIR=$(var HOST_DIR "$work/$name.vars") \
			"$script" "$img" $args) >"$work/$name-post-image.log" 2>&1
		if [ -x "$img/start-qemu.sh" ] && grep -q 'qemu-system-' "$img/start-qemu.sh"; then
			ok "$name: $script writes start-qemu.sh ($(grep -o 'qemu-system-[a-z0-9]*' "$img/start-qemu.sh" | head -n 1))"
		else
			bad "$name: $script $args writes no start-qemu.sh, which the defconfig promises"
		fi
	fi
	TRIPLE[$name]=$(var RUSTC_TARGET_NAME "$work/$name.vars")
done

# MIPS: Buildroot offers Rust only where Rust ships a prebuilt standard
# library, and mips32 has none (tier 3), so there is no MIPS defconfig here.
# Its Kconfig says so: Buildroot's qemu_mips32r2el_malta with this tree,
# from-source host-rust and the package, glibc and musl (C++ on).
# shellcheck disable=SC2317 # called through check
mips_no_rust() { grep -qx BR2_mipsel=y "$1" && ! grep -q '^BR2_PACKAGE_HOST_RUSTC_TARGET_ARCH_SUPPORTS=y' "$1"; }
for libc in GLIBC MUSL; do
	o=$work/o-mips32r2el-$libc
	rm -rf "$o"
	mkdir -p "$o"
	{
		cat "$BR/configs/qemu_mips32r2el_malta_defconfig"
		printf '%s\n' "BR2_TOOLCHAIN_BUILDROOT_$libc=y" BR2_TOOLCHAIN_BUILDROOT_CXX=y \
			BR2_PACKAGE_HOST_RUSTC=y BR2_PACKAGE_HOST_RUST=y BR2_PACKAGE_MARMOSET=y
	} >"$o/in_defconfig"
	if make -s -C "$BR" O="$o" BR2_EXTERNAL="$EXT" BR2_DEFCONFIG="$o/in_defconfig" defconfig >"$o/log" 2>&1; then
		check "qemu_mips32r2el_malta ($libc): mipsel, no Rust for the target (BR2_PACKAGE_HOST_RUSTC_TARGET_ARCH_SUPPORTS unset)" \
			mips_no_rust "$o/.config"
		check "qemu_mips32r2el_malta ($libc): BR2_PACKAGE_MARMOSET and from-source host-rust dropped" \
			not grep -qE '^BR2_PACKAGE_(MARMOSET|HOST_RUST)=y' "$o/.config"
	else
		bad "qemu_mips32r2el_malta ($libc): defconfig does not load ($o/log)"
	fi
done

# --- 3. builds ---------------------------------------------------------------
# Buildroot's toolchain: Debian's cross tools under the names TARGET_CROSS
# gives them, in the configuration's HOST_DIR/bin, where the PATH of
# TARGET_MAKE_ENV, CC and AR of TARGET_CONFIGURE_OPTS and STRIPCMD name them.
# The compiler logs each source file it is given (ring's C and assembly).
standins() { # standins VARS DEBIAN_PREFIX [EXTRA_LINK_ARGS]
	local cross t
	cross=$(var TARGET_CROSS "$1")
	mkdir -p "${cross%/*}"
	cat >"${cross}gcc" <<-END
		#!/bin/sh
		for a; do case \$a in *.c|*.S) echo "\$a" >>"$work/cc-sources.log" ;; esac; done
		exec ${2}gcc "\$@" ${3-}
	END
	for t in gcc-ar gcc-nm gcc-ranlib strip; do
		printf '#!/bin/sh\nexec %s%s "$@"\n' "$2" "$t" >"$cross$t"
	done
	chmod +x "${cross}gcc" "${cross}gcc-ar" "${cross}gcc-nm" "${cross}gcc-ranlib" "${cross}strip"
}
# Buildroot's glibc toolchain has libxcrypt in its staging sysroot; here
# Debian's static libcrypt.a stands in (board/armhf-libcrypt.sh).
if ! board/armhf-libcrypt.sh >"$work/armhf-libcrypt.log" 2>&1; then
	bad "board/armhf-libcrypt.sh ($work/armhf-libcrypt.log)"
fi

# The release path: the tree as a tag's tarball has it (tracked files, with
# uncommitted changes), vendored once per Cargo.lock.
tree=$(git stash create 2>/dev/null)
tree=${tree:-HEAD}
dlsrc=$work/src-release/marmoset
lockkey=$(sha256sum Cargo.lock | cut -c1-16)
# Unchanged files keep their times (rsync by checksum), so a warm run rebuilds
# only what changed.
rm -rf "$work/archive"
mkdir -p "$work/archive" "$dlsrc"
git archive "$tree" | tar -x -C "$work/archive"
rsync -rlc --delete --exclude /target --exclude /VENDOR --exclude /.cargo "$work/archive/" "$dlsrc/"
if [ ! -e "$work/vendor-$lockkey/complete" ]; then
	rm -rf "$work"/vendor-*
	mkdir -p "$work/vendor-$lockkey/.cargo"
	cp Cargo.toml Cargo.lock "$work/vendor-$lockkey/"
	# The crates patched in-tree ([patch.crates-io] paths) are part of the
	# tarball, as their registry dependencies are of what cargo vendors.
	mkdir -p "$work/vendor-$lockkey/board" && cp -r board/patched "$work/vendor-$lockkey/board/"
	mkdir -p "$work/vendor-$lockkey/src" && echo 'fn main() {}' >"$work/vendor-$lockkey/src/main.rs"
	if ! (cd "$work/vendor-$lockkey" && CARGO_HOME=$work/cargo-home-vendor cargo vendor --locked VENDOR \
		>.cargo/config.toml 2>"$work/vendor.log"); then
		bad "cargo vendor ($work/vendor.log)"
	else
		# Kept for the next run with this Cargo.lock only once it is whole.
		touch "$work/vendor-$lockkey/complete"
	fi
fi
# What cargo-post-process leaves: VENDOR/ and the .cargo/config.toml it writes,
# which replaces the project's.
rsync -a --delete "$work/vendor-$lockkey/VENDOR" "$work/vendor-$lockkey/.cargo" "$dlsrc/"
if [ -d "$dlsrc/VENDOR" ] && grep -q '^directory = "VENDOR"$' "$dlsrc/.cargo/config.toml"; then
	ok "release path: crates vendored, .cargo/config.toml replaced as cargo-post-process does"
else
	bad "release path: vendoring"
fi

# The checkout path: `cargo fetch` into Buildroot's cargo home (board/README.md),
# then the rsync Buildroot does for MARMOSET_OVERRIDE_SRCDIR.
cohome=$work/dl/br-cargo-home
if ! CARGO_HOME=$cohome cargo fetch --locked >"$work/fetch.log" 2>&1; then
	bad "CARGO_HOME=.../br-cargo-home cargo fetch --locked ($work/fetch.log)"
fi

# A port nothing listens on yet, so that the answer is this server's.
port=18600
free_port() {
	port=$((port + 1))
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
}
# serve LABEL LOG URL WANT CURL_ARGS... -- COMMAND...: runs the server,
# passes once curl gets a body matching WANT (grep -i) within 30 s.
serve() {
	local label=$1 log=$2 url=$3 want=$4 got="" pid deadline
	shift 4
	local args=()
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	"$@" >"$log" 2>&1 &
	pid=$!
	deadline=$(($(date +%s) + 30))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		got=$(curl -fsS --max-time 2 "${args[@]}" "$url" 2>/dev/null) && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	if printf '%s' "$got" | grep -qi "$want"; then
		ok "$label"
	else
		sed 's/^/    /' "$log" | head -n 5
		bad "$label: no answer (${got:0:80})"
	fi
}

for name in "${!TRIPLE[@]}"; do
	triple=${TRIPLE[$name]}
	if [ -z "$triple" ]; then
		bad "$name: no RUSTC_TARGET_NAME (host-rustc not available for this configuration): no build"
		continue
	fi
	declare -A SIZE=()
	# The HTTPS variant is built from the release path only.
	for path in release checkout tls; do
		vars=$work/$name.vars
		[ $path = tls ] && vars=$work/$name-tls.vars
		label="$name ($triple, $path path)"
		[ $path = tls ] && label="$name with BR2_PACKAGE_MARMOSET_TLS ($triple, release path)"
		case $triple in
		aarch64-*) standins "$vars" aarch64-linux-gnu- ; qemu=(qemu-aarch64-static) ;;
		armv7-*)
			# libcrypt is in the sysroot only when the package depends on libxcrypt.
			sysroot=""
			case " $(var MARMOSET_DEPENDENCIES "$vars") " in
			*" libxcrypt "*) sysroot="-L$repo/board/armhf-sysroot" ;;
			esac
			standins "$vars" arm-linux-gnueabihf- "$sysroot"
			qemu=(qemu-arm-static -L /usr/arm-linux-gnueabihf) ;;
		*) bad "$name: no stand-in toolchain for $triple"; continue 2 ;;
		esac
		# pkg-cargo.mk: $(TARGET_MAKE_ENV) $(TARGET_CONFIGURE_OPTS) $(PKG_CARGO_ENV) $(MARMOSET_CARGO_ENV)
		env_line="$(var TARGET_MAKE_ENV "$vars") $(var TARGET_CONFIGURE_OPTS "$vars") $(var PKG_CARGO_ENV "$vars") $(var MARMOSET_CARGO_ENV "$vars")"
		build_opts=$(var MARMOSET_CARGO_BUILD_OPTS "$vars")
		install_opts=$(var MARMOSET_CARGO_INSTALL_OPTS "$vars")
		if [ $path = checkout ]; then
			src=$work/src-checkout
			home=$cohome
			mkdir -p "$src"
			excl=$(var MARMOSET_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS "$vars")
			vcs=$(var RSYNC_VCS_EXCLUSIONS "$vars")
			from=$(var MARMOSET_OVERRIDE_SRCDIR "$vars")
			if [ "$from" != "$repo" ]; then
				bad "$label: local.mk's MARMOSET_OVERRIDE_SRCDIR not seen (${from:-empty})"
				continue
			fi
			# shellcheck disable=SC2086 # split as make splits them
			rsync -au --chmod=u=rwX,go=rX $excl $vcs "$from/" "$src"
		else
			src=$dlsrc
			home=$work/cargo-home-release
		fi
		if [ -f "$src/.cargo/config.toml" ] && [ $path = checkout ]; then
			note "$label: the checkout's .cargo/config.toml is in the build directory"
		fi
		tdir=$work/target-$name-$path
		root=$work/root-$name-$path
		log=$work/$name-$path.log
		rm -rf "$root" "$work/cc-sources.log"
		t0=$(date +%s)
		# The commands of pkg-cargo.mk's build and install steps, in the
		# package's source directory, with its environment. CARGO_HOME is
		# Buildroot's (checkout) or a private empty one (release: vendored).
		# shellcheck disable=SC2086 # options split as make splits them
		if (cd "$src" && eval "env $env_line CARGO_HOME='$home' CARGO_TARGET_DIR='$tdir' \
			cargo build --offline --release --manifest-path Cargo.toml --locked $build_opts" &&
			eval "env $env_line CARGO_HOME='$home' CARGO_TARGET_DIR='$tdir' \
			cargo install --offline --root '$root/usr/' --bins --path ./ --no-track --force --locked \
			-Z target-applies-to-host $install_opts") >"$log" 2>&1; then
			ok "$label: cargo build + install --offline --locked in $(($(date +%s) - t0)) s"
		else
			grep -E '^(error|warning: unused)|error:' "$log" | head -n 5 | sed 's/^/    /'
			bad "$label: build ($log)"
			continue
		fi
		bin=$root/usr/bin/marmoset
		# Buildroot strips the target tree with STRIPCMD.
		eval "$(var STRIPCMD "$vars") '$bin'"
		size=$(stat -c %s "$bin")
		SIZE[$path]=$size
		echo "size - $label: /usr/bin/marmoset $size bytes stripped ($(date -u +%F))"
		static=dynamic
		file "$bin" | grep -q 'statically linked\|static-pie' && static=static
		echo "     $(file -b "$bin" | cut -d, -f1-2), $static"
		if [ $static = static ] && [ "$triple" = armv7-unknown-linux-gnueabihf ]; then
			bad "$label: statically linked glibc binary (the project's +crt-static reached Buildroot's build)"
		fi
		free_port
		if [ $path != tls ]; then
			# Serve the overlay's demo UI under qemu-user.
			serve "$label: ${qemu[0]} marmoset answers GET / on 127.0.0.1:$port" "$work/$name-$path.serve.log" \
				"http://127.0.0.1:$port/" '<html' -- \
				"${qemu[@]}" "$bin" --root "$repo/rootfs-overlay/www" --listen "127.0.0.1:$port"
			continue
		fi
		# ring's C and assembly went through TARGET_CC (CC of
		# TARGET_CONFIGURE_OPTS, which cc-rs takes when no CC_<target> or
		# TARGET_CC is set). A warm build compiles nothing: then ring's
		# build script output says which compiler it ran.
		cc=$(var TARGET_CC "$vars")
		if [ -s "$work/cc-sources.log" ]; then
			n_ring=$(grep -cE '/ring(-[0-9.]+)?/(crypto|third_party|pregenerated)/' "$work/cc-sources.log")
			check "$label: ring's C and assembly compiled by TARGET_CC, ${cc##*/} ($n_ring files)" [ "$n_ring" -gt 0 ]
		else
			check "$label: ring built (earlier) with TARGET_CC, ${cc##*/} (its build script's output)" \
				grep -rqx --include=output "CC = Some($cc)" "$tdir/$triple/release/build"
		fi
		# HTTPS under qemu-user with a certificate made at first start.
		h=$work/https-$name
		rm -rf "$h"
		mkdir -p "$h/www"
		body="marmoset over HTTPS, $name"
		echo "$body" >"$h/www/index.html"
		printf '%s\n' "listen 127.0.0.1:$port tls" "tls-cert $h/cert.pem" "tls-key $h/key.pem" \
			"tls-self-signed on" "root $h/www" >"$h/marmoset.conf"
		check "$label: marmoset --check-config accepts the TLS settings" \
			quiet "${qemu[@]}" "$bin" --config "$h/marmoset.conf" --check-config
		plain=$work/root-$name-release/usr/bin/marmoset
		if [ -x "$plain" ]; then
			check "$label: the plain build of the same defconfig refuses them (built without TLS)" \
				not "${qemu[@]}" "$plain" --config "$h/marmoset.conf" --check-config 2>/dev/null
		fi
		serve "$label: ${qemu[0]} marmoset answers https://localhost:$port/ 200 with the page (curl --cacert on its own certificate)" \
			"$work/$name-tls.serve.log" "https://localhost:$port/" "^$body\$" \
			--cacert "$h/cert.pem" --resolve "localhost:$port:127.0.0.1" -- \
			"${qemu[@]}" "$bin" --config "$h/marmoset.conf"
	done
	if [ -n "${SIZE[release]-}" ] && [ -n "${SIZE[checkout]-}" ]; then
		# Paths differ between the two trees (panic locations of the vendored
		# crates), which can move the size by a page; leaked flags move it by
		# far more (+crt-static: hundreds of KB; the project's linker script: 90 KB).
		diff=$((SIZE[release] - SIZE[checkout]))
		if [ "${diff#-}" -le 16384 ]; then
			ok "$name: the checkout builds like the release (${SIZE[checkout]} and ${SIZE[release]} bytes)"
		else
			bad "$name: checkout ${SIZE[checkout]} bytes, release ${SIZE[release]}: other flags reached one of them"
		fi
	fi
done
finish
