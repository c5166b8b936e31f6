#!/usr/bin/env bash
# The OpenWrt package (board/openwrt/marmoset) checked with OpenWrt's own
# tools, offline, in an OpenWrt tree and the packages feed:
#   1. feeds.conf with `src-link packages` and `src-link marmoset` (a copy of
#      board/openwrt), `scripts/feeds update -a`, `scripts/feeds install`:
#      the index lists both packages with a maintainer, a menu line that
#      shows the title (OpenWrt drops it when name and title reach 72
#      characters), and the
#      marmoset-tls variant excluded on i386;
#   2. for each target: a .config with CONFIG_PACKAGE_marmoset=m and
#      CONFIG_PACKAGE_marmoset-tls=m, `make defconfig`: the packages kept
#      where they can build (marmoset-tls dropped on the i386 targets, where
#      ring cannot build), the Rust triple the feed picks, and the cargo
#      environment the feed's Build/Compile/Cargo runs with (`make val.*`):
#      the release profile of Cargo.toml (opt-level 3, panic=abort, no
#      overflow checks) is what cargo sees, not the feed's;
#   3. a glibc configuration pulls in libcrypt-compat (crypt(3));
#   4. `make package/marmoset/check FIXUP=1` on a tarball of this checkout
#      (git archive, as a release tarball is laid out) writes PKG_HASH into
#      the copy's Makefile, and a second check no longer reports PKG_HASH;
#   5. Package/marmoset/install, expanded by OpenWrt's make, on a
#      group-writable source: the UI installed 0644 (its CGI and the
#      directories 0755), the conffiles 0600.
# Nothing is compiled for the target: the toolchain, rust/host and the
# source would be downloaded.
#
#   6. marmoset-uhttpd: provides uhttpd and uhttpd-mod-ubus; with a LuCI
#      feed (OPENWRT_LUCI_DIR), `luci` or `luci-ssl` with marmoset-uhttpd=y
#      leaves uhttpd out of the image and keeps LuCI; its install recipe.
# OpenWrt's host prerequisites are installed with apt-get when missing.
#
#   OPENWRT_DIR=/tmp/openwrt OPENWRT_PACKAGES_DIR=/tmp/packages \
#   [OPENWRT_LUCI_DIR=/tmp/luci] tests/packaging/openwrt.sh
# OPENWRT_DIR is written to (feeds.conf, feeds/, package/feeds/, tmp/,
# .config, the host's scripts/config): use a scratch tree. Skips with one
# line and exit 77 (skipped) when either tree is absent. MARMOSET_OW_WORK: work directory (default
# /tmp/marmoset-openwrt). Last line: "N passed, M failed"; exit 1 if any failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd -P)
cd "$repo" || exit 1
# shellcheck source=tests/results.sh
. tests/results.sh
# shellcheck source=tests/apt.sh
. tests/apt.sh
OW=${OPENWRT_DIR:-}
PK=${OPENWRT_PACKAGES_DIR:-}
if [ -z "$OW" ] || [ ! -x "$OW/scripts/feeds" ] || [ -z "$PK" ] || [ ! -f "$PK/lang/rust/rust-package.mk" ]; then
	skip "no OpenWrt tree and packages feed (set OPENWRT_DIR and OPENWRT_PACKAGES_DIR): OpenWrt checks not run"
	exit "$SKIPPED"
fi
OW=$(cd "$OW" && pwd -P)
PK=$(cd "$PK" && pwd -P)
work=${MARMOSET_OW_WORK:-/tmp/marmoset-openwrt}
rm -rf "$work"
mkdir -p "$work/feed" "$work/dl"
export LC_ALL=C

note() { echo "note - $*"; }

# What OpenWrt's prerequisite check (include/prereq-build.mk) asks of the
# host before `scripts/feeds` and `make defconfig` run.
pkgs=(make gcc g++ libc6-dev libncurses-dev git rsync gawk tar findutils patch diffutils unzip bzip2
	wget file perl python3 python3-distutils)
if ! apt_install "$work/apt.log" "${pkgs[@]}"; then
	bad "apt-get install ($work/apt.log)"
	echo "$pass passed, $fail failed"
	exit 1
fi
same() { [ "$1" = "$2" ]; }
has() { case $1 in *"$2"*) ;; *) return 1 ;; esac; } # has STRING PART
run_log() { "$@" >"$log" 2>&1; }                     # output to $log

note "openwrt $(git -C "$OW" rev-parse HEAD 2>/dev/null || echo '(not git)'), packages $(git -C "$PK" rev-parse HEAD 2>/dev/null || echo '(not git)')"
cp -R board/openwrt/marmoset "$work/feed/"
LU=${OPENWRT_LUCI_DIR:-}
[ -n "$LU" ] && [ -f "$LU/collections/luci/Makefile" ] && LU=$(cd "$LU" && pwd -P) || LU=
{
	printf 'src-link packages %s\n' "$PK"
	[ -z "$LU" ] || printf 'src-link luci %s\n' "$LU"
	printf 'src-link marmoset %s\n' "$work/feed"
} >"$OW/feeds.conf"
cd "$OW" || exit 1
log=$work/feeds-update.log
check "scripts/feeds update -a" run_log ./scripts/feeds update -a || tail -5 "$log"
log=$work/feeds-install.log
check "scripts/feeds install marmoset marmoset-tls marmoset-uhttpd" \
	run_log ./scripts/feeds install marmoset marmoset-tls marmoset-uhttpd || tail -5 "$log"
check "rust installed from the packages feed" test -L package/feeds/packages/rust
idx=feeds/marmoset.index
field() { # PACKAGE FIELD: the field's value in the feed index
	awk -v p="Package: $1" -v f="$2: " '$0 == p { on = 1; next } /^Package: / { on = 0 }
		on && index($0, f) == 1 { print substr($0, length(f) + 1); exit }' "$idx"
}
# The menu as menuconfig shows it: written by prepare-tmpinfo, which
# `scripts/feeds install` does not run.
make -s prepare-tmpinfo >"$work/tmpinfo.log" 2>&1 || tail -5 "$work/tmpinfo.log"
for p in marmoset marmoset-tls marmoset-uhttpd; do
	m=$(field $p Maintainer)
	check "$p: Maintainer '$m'" test -n "$m"
	t=$(field $p Title)
	line=$(awk -v c="	config PACKAGE_$p" '$0 == c { getline; sub(/^[[:space:]]+/, ""); print; exit }' tmp/.config-package.in)
	check "$p: the menu shows the title ($line)" has "$line" " $t\""
done
check "marmoset-tls: excluded on i386 ($(field marmoset-tls Depends))" has "$(field marmoset-tls Depends)" "@!i386"
check "marmoset-uhttpd: excluded on i386" has "$(field marmoset-uhttpd Depends)" "@!i386"
check "marmoset-uhttpd: Provides '$(field marmoset-uhttpd Provides)'" \
	has "$(field marmoset-uhttpd Provides)" "@uhttpd @uhttpd-mod-ubus"
check "marmoset-uhttpd: Conflicts '$(field marmoset-uhttpd Conflicts)'" \
	same "$(field marmoset-uhttpd Conflicts)" "uhttpd uhttpd-mod-ubus marmoset marmoset-tls"
for p in marmoset marmoset-tls; do
	check "$p: libcrypt-compat on glibc" has "$(field $p Depends)" "+USE_GLIBC:libcrypt-compat"
done

# defconfig TARGET SUBTARGET [EXTRA...]: .config for the target with both packages.
defconfig() {
	{
		echo "CONFIG_TARGET_$1=y"
		echo "CONFIG_TARGET_$1_$2=y"
		echo "CONFIG_PACKAGE_marmoset=m"
		echo "CONFIG_PACKAGE_marmoset-tls=m"
		shift 2
		for l in "$@"; do echo "$l"; done
	} >.config
	make defconfig >"$work/defconfig.log" 2>&1
}
cfg() { grep -qx "$1" .config; }
cfgs() { for l in "$@"; do cfg "$l" || return 1; done; }
val() { make -s -C package/feeds/marmoset/marmoset TOPDIR="$OW" "val.$1" 2>/dev/null; }

# target subtarget packages-arch tls(y/n)
while read -r t s arch tls; do
	if ! defconfig "$t" "$s"; then
		bad "$t/$s: make defconfig"
		tail -5 "$work/defconfig.log"
		continue
	fi
	check "$t/$s: arch $arch" cfg "CONFIG_TARGET_ARCH_PACKAGES=\"$arch\""
	check "$t/$s: marmoset kept (=m)" cfg CONFIG_PACKAGE_marmoset=m
	if [ "$tls" = y ]; then
		check "$t/$s: marmoset-tls kept (=m)" cfg CONFIG_PACKAGE_marmoset-tls=m
	else
		check "$t/$s: marmoset-tls dropped (ring needs SSE2)" not grep -q '^CONFIG_PACKAGE_marmoset-tls=' .config
	fi
	vars=$(val CARGO_PKG_VARS)
	triple=$(val RUSTC_TARGET_ARCH)
	# What cargo gets: the command's environment, as sh sets it up.
	seen=$(eval "env -i $vars env" 2>/dev/null | sed -n 's/^CARGO_PROFILE_RELEASE_\(OPT_LEVEL\|OVERFLOW_CHECKS\|PANIC\)=/\1=/p' |
		sort | tr '\n' ' ')
	check "$t/$s: rust $triple, cargo's release profile: $seen" same "$seen" "OPT_LEVEL=3 OVERFLOW_CHECKS=false PANIC=abort "
	# 32-bit MIPS: rustix converts to the C library's 32-bit time_t structs (the Makefile).
	flags=$(eval "env -i $vars env" 2>/dev/null | sed -n 's/^RUSTFLAGS=//p')
	case $arch in
	mips*) check "$t/$s: RUSTFLAGS has --cfg fix_y2038" has "$flags" "--cfg fix_y2038" ;;
	*) check "$t/$s: RUSTFLAGS without --cfg fix_y2038" not has "$flags" "fix_y2038" ;;
	esac
done <<'END'
ramips mt7621 mipsel_24kc y
ath79 generic mips_24kc y
ipq40xx generic arm_cortex-a7_neon-vfpv4 y
bcm27xx bcm2709 arm_cortex-a7_neon-vfpv4 y
mvebu cortexa9 arm_cortex-a9_vfpv3-d16 y
ipq806x generic arm_cortex-a15_neon-vfpv4 y
mediatek filogic aarch64_cortex-a53 y
x86 generic i386_pentium4 n
x86 legacy i386_pentium-mmx n
x86 geode i386_pentium-mmx n
END

# The features each build variant hands cargo (rust-package.mk's --features).
for v in tls:tls uhttpd:tls,ubus; do
	f=$(make -s -C package/feeds/marmoset/marmoset TOPDIR="$OW" BUILD_VARIANT="${v%%:*}" val.RUST_PKG_FEATURES 2>/dev/null)
	check "variant ${v%%:*}: cargo --features ${v#*:}" same "$f" "${v#*:}"
done

# glibc: crypt(3) is in libcrypt-compat there.
if defconfig ramips mt7621 CONFIG_DEVEL=y CONFIG_TOOLCHAINOPTS=y CONFIG_LIBC_USE_GLIBC=y &&
	cfg CONFIG_LIBC_USE_GLIBC=y; then
	check "ramips/mt7621 glibc: libcrypt-compat selected" grep -qE '^CONFIG_PACKAGE_libcrypt-compat=(y|m)$' .config
	for p in marmoset marmoset-tls; do
		check "ramips/mt7621 glibc: $p's menu entry selects it (tmp/.config-package.in)" \
			has "$(awk -v c="	config PACKAGE_$p" '$0 == c { on = 1; next } on && /help/ { exit } on' tmp/.config-package.in)" \
			"select PACKAGE_libcrypt-compat if USE_GLIBC"
	done
	check "ramips/mt7621 glibc: marmoset kept" cfg CONFIG_PACKAGE_marmoset=m
else
	bad "ramips/mt7621 with CONFIG_LIBC_USE_GLIBC=y"
fi

# LuCI (its own feed, OPENWRT_LUCI_DIR) depends on uhttpd and
# uhttpd-mod-ubus; marmoset-uhttpd provides both, so an image with LuCI
# and marmoset-uhttpd leaves uhttpd out.
if [ -n "$LU" ]; then
	log=$work/feeds-install-luci.log
	check "scripts/feeds install luci luci-ssl" run_log ./scripts/feeds install luci luci-ssl || tail -5 "$log"
	note "luci $(git -C "$LU" rev-parse HEAD 2>/dev/null || echo '(not git)')"
	sel() { grep -E "^CONFIG_PACKAGE_($1)=y" .config | sed 's/^CONFIG_PACKAGE_//; s/=y$//' | tr '\n' ' '; }
	w='uhttpd|uhttpd-mod-ubus|marmoset-uhttpd|px5g-mbedtls'
	for c in luci luci-ssl; do
		defconfig ramips mt7621 "CONFIG_PACKAGE_$c=y" "# CONFIG_PACKAGE_marmoset is not set" \
			"# CONFIG_PACKAGE_marmoset-tls is not set" || bad "make defconfig ($c)"
		check "$c alone: uhttpd and uhttpd-mod-ubus in the image ($(sel "$w"))" \
			cfgs CONFIG_PACKAGE_uhttpd=y CONFIG_PACKAGE_uhttpd-mod-ubus=y
		defconfig ramips mt7621 "CONFIG_PACKAGE_$c=y" CONFIG_PACKAGE_marmoset-uhttpd=y \
			"# CONFIG_PACKAGE_marmoset is not set" "# CONFIG_PACKAGE_marmoset-tls is not set" ||
			bad "make defconfig ($c, marmoset-uhttpd)"
		check "$c with marmoset-uhttpd=y: uhttpd left out ($(sel "$w"))" \
			not grep -qE '^CONFIG_PACKAGE_uhttpd(-mod-ubus)?=' .config
		check "$c with marmoset-uhttpd=y: LuCI kept (luci-base, cgi-io, rpcd)" \
			cfgs CONFIG_PACKAGE_luci-base=y CONFIG_PACKAGE_cgi-io=y CONFIG_PACKAGE_rpcd=y
	done
else
	skip "no LuCI feed (set OPENWRT_LUCI_DIR): the image with LuCI and marmoset-uhttpd not checked"
fi

# The release step: the tarball's hash written by OpenWrt's fixup.
defconfig ramips mt7621 || bad "make defconfig"
(cd "$repo" && git archive --prefix=marmoset-0.1.0/ -o "$work/dl/marmoset-0.1.0.tar.gz" HEAD)
sum=$(sha256sum "$work/dl/marmoset-0.1.0.tar.gz" | cut -d' ' -f1)
make package/marmoset/check V=s DL_DIR="$work/dl" >"$work/check0.log" 2>&1
check "check: PKG_HASH:=skip is reported" grep -q 'PKG_HASH uses deprecated hash' "$work/check0.log"
make package/marmoset/check V=s FIXUP=1 DL_DIR="$work/dl" >"$work/check1.log" 2>&1
check "check FIXUP=1 writes PKG_HASH:=$sum" grep -qx "PKG_HASH:=$sum" "$work/feed/marmoset/Makefile"
make package/marmoset/check V=s DL_DIR="$work/dl" >"$work/check2.log" 2>&1
check "check afterwards: no warning about PKG_HASH" not grep -q 'PKG_HASH' "$work/check2.log" ||
	grep PKG_HASH "$work/check2.log"

# The install recipe, expanded by OpenWrt's make (its INSTALL_* commands),
# on a group-writable source tree: the modes are the package's, not the
# tarball's.
i=$work/install
mkdir -p "$i/src/bin" "$i/root" "$i/pkg"
(cd "$repo" && git archive HEAD rootfs-overlay) | tar -xf - -C "$i/src"
chmod -R g+w "$i/src"
printf '#!/bin/sh\n' >"$i/src/bin/marmoset"
cp -R "$repo/board/openwrt/marmoset/files" "$i/pkg/"
# shellcheck disable=SC2016 # make's $(...), not the shell's
mk='$(call Package/marmoset/install,'$i/root')'
# shellcheck disable=SC2016 # make's $(...), not the shell's
{
	echo 'include $(TOPDIR)/rules.mk'
	echo 'PKG_NAME:=marmoset'
	echo 'include $(INCLUDE_DIR)/package.mk'
	echo "PKG_BUILD_DIR:=$i/src"
	echo "PKG_INSTALL_DIR:=$i/src"
	sed -n '/^define Package\/marmoset\/install$/,/^endef$/p' "$repo/board/openwrt/marmoset/Makefile"
	printf 'install-test:\n\t%s\n' "$mk"
} >"$i/pkg/Makefile"
# unexpected_modes: installed entries whose mode is not the one intended.
unexpected_modes() {
	grep -v -e '^644 www-marmoset/[^/]*$' -e '^755 www-marmoset/cgi-bin/status$' -e '^755 [^ ]*$' \
		-e '^600 etc/' "$i/modes"
}
if check "Package/marmoset/install runs" make -s -C "$i/pkg" TOPDIR="$OW" install-test >"$i/log" 2>&1; then
	(cd "$i/root" && find www-marmoset usr etc -printf '%m %p\n' | sort -k2) >"$i/modes"
	check "UI files 0644, directories and the CGI 0755, conffiles 0600 ($(wc -l <"$i/modes") entries)" \
		not unexpected_modes
	check "cgi-bin/status installed" test -x "$i/root/www-marmoset/cgi-bin/status"
	check "index.html installed" test -f "$i/root/www-marmoset/index.html"
else
	sed 's/^/     /' "$i/log"
fi

# marmoset-uhttpd's install recipe, expanded the same way.
u=$work/install-uhttpd
mkdir -p "$u/root"
# shellcheck disable=SC2016 # make's $(...), not the shell's
{
	echo 'include $(TOPDIR)/rules.mk'
	echo 'PKG_NAME:=marmoset'
	echo 'include $(INCLUDE_DIR)/package.mk'
	echo "PKG_BUILD_DIR:=$i/src"
	echo "PKG_INSTALL_DIR:=$i/src"
	sed -n '/^define Package\/marmoset-uhttpd\/install$/,/^endef$/p' "$repo/board/openwrt/marmoset/Makefile"
	printf 'install-test:\n\t%s\n' '$(call Package/marmoset-uhttpd/install,'"$u/root"')'
} >"$i/pkg/Makefile"
if check "Package/marmoset-uhttpd/install runs" make -s -C "$i/pkg" TOPDIR="$OW" install-test >"$u/log" 2>&1; then
	(cd "$u/root" && find . -type f -printf '%m %p\n' | sort -k2) >"$u/files"
	check "marmoset-uhttpd installs /usr/bin/marmoset, /etc/init.d/uhttpd, /etc/config/uhttpd, luci-scgi.uc: $(tr '\n' ' ' <"$u/files")" \
		same "$(cat "$u/files")" "600 ./etc/config/uhttpd
755 ./etc/init.d/uhttpd
755 ./usr/bin/marmoset
644 ./usr/share/marmoset/luci-scgi.uc"
else
	sed 's/^/     /' "$u/log"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
