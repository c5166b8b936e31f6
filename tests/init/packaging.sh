#!/bin/sh
# Static checks of the packaging files (Buildroot, Yocto, OpenWrt, overlay):
# copies in sync with init/, versions in sync with Cargo.toml, the
# conventions of each builder, and the CI skip key of the armv7-musl build.
# The Yocto layer and recipe are checked with bitbake itself by
# tests/packaging/yocto.sh (crates include, layer.conf, recipe variables).
# Last line: "N passed, M failed".
# shellcheck disable=SC2016 # literal make/bitbake/shell variables in patterns
set -u
cd "$(dirname "$0")/../.." || exit 1

# shellcheck source=tests/results.sh
. tests/results.sh
has() { grep -qF -- "$2" "$1"; } # has FILE TEXT
hasx() { grep -qxF -- "$2" "$1"; } # has FILE LINE

VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
BR=board/buildroot
BRP=$BR/package/marmoset
YO=board/yocto/meta-marmoset
RE=$YO/recipes-httpd/marmoset
OW=board/openwrt/marmoset

# One source for each init file; the copies must match it.
check "rootfs-overlay S50marmoset == init/S50marmoset" cmp -s init/S50marmoset rootfs-overlay/etc/init.d/S50marmoset
check "OpenWrt files/marmoset.init == init/marmoset.init" cmp -s init/marmoset.init $OW/files/marmoset.init
check "OpenWrt files/marmoset.config == init/marmoset.uci" cmp -s init/marmoset.uci $OW/files/marmoset.config
check "OpenWrt files/uhttpd.init == init/uhttpd.init" cmp -s init/uhttpd.init $OW/files/uhttpd.init
check "OpenWrt files/uhttpd.config == init/uhttpd.uci" cmp -s init/uhttpd.uci $OW/files/uhttpd.config
check "init scripts are executable" test -x init/S50marmoset -a -x rootfs-overlay/etc/init.d/S50marmoset -a -x init/marmoset.init -a -x init/uhttpd.init

# Overlay: merged-usr, nothing but etc/ and www/.
for d in bin sbin lib lib64 usr; do
	check "rootfs-overlay has no /$d" test ! -e rootfs-overlay/$d
done
check "rootfs-overlay/etc/marmoset/marmoset.conf exists" test -f rootfs-overlay/etc/marmoset/marmoset.conf

# Versions.
check "Buildroot MARMOSET_VERSION = $VERSION" hasx $BRP/marmoset.mk "MARMOSET_VERSION = $VERSION"
check "Buildroot hash names marmoset-$VERSION-cargo6.tar.gz" has $BRP/marmoset.hash "marmoset-$VERSION-cargo6.tar.gz"
check "OpenWrt PKG_VERSION:=$VERSION" hasx $OW/Makefile "PKG_VERSION:=$VERSION"

# Buildroot br2-external conventions not covered by tests/packaging/buildroot.sh
# (Buildroot's check-package, defconfig loading, printvars and an emulated build).
for v in SITE LICENSE LICENSE_FILES; do
	check "marmoset.mk sets MARMOSET_$v" grep -q "^MARMOSET_$v = " $BRP/marmoset.mk
done
check "marmoset.mk defines the marmoset user" grep -q '^	marmoset -1 marmoset -1 \* - - - ' $BRP/marmoset.mk
check "marmoset.mk installs SysV and systemd init" \
	grep -q '^define MARMOSET_INSTALL_INIT_SYSV$' $BRP/marmoset.mk &&
	grep -q '^define MARMOSET_INSTALL_INIT_SYSTEMD$' $BRP/marmoset.mk
for c in "$BR"/configs/*_defconfig; do
	check "$(basename "$c"): overlay, merged-usr" \
		has "$c" 'BR2_ROOTFS_OVERLAY="$(BR2_EXTERNAL_MARMOSET_PATH)/../../rootfs-overlay"' &&
		hasx "$c" BR2_ROOTFS_MERGED_USR=y
done
check "both qemu defconfigs exist" test -f $BR/configs/qemu_aarch64_virt_marmoset_defconfig -a -f $BR/configs/qemu_arm_vexpress_marmoset_defconfig

BB=$RE/marmoset_$VERSION.bb

# OpenWrt package.
for l in 'include $(TOPDIR)/rules.mk' 'include $(INCLUDE_DIR)/package.mk' 'PKG_BUILD_DEPENDS:=rust/host' \
	'  DEPENDS:=$(RUST_ARCH_DEPENDS) +USE_GLIBC:libcrypt-compat' '$(eval $(call RustBinPackage,marmoset))' '$(eval $(call BuildPackage,marmoset))'; do
	check "OpenWrt Makefile: $l" hasx $OW/Makefile "$l"
done
check "OpenWrt Makefile includes rust-package.mk" grep -q '^include .*/lang/rust/rust-package.mk$' $OW/Makefile

# HTTPS (the tls cargo feature) in each image builder, off by default.
check "Buildroot option BR2_PACKAGE_MARMOSET_TLS" hasx $BRP/Config.in "config BR2_PACKAGE_MARMOSET_TLS"
check "Buildroot: the option adds --features tls to cargo build and cargo install" \
	hasx $BRP/marmoset.mk "MARMOSET_CARGO_BUILD_OPTS += --features tls" &&
	hasx $BRP/marmoset.mk "MARMOSET_CARGO_INSTALL_OPTS += --features tls"
check "Yocto: PACKAGECONFIG[tls], empty by default" \
	hasx "$RE/marmoset_$VERSION.bb" 'PACKAGECONFIG[tls] = "--features tls"' &&
	hasx "$RE/marmoset_$VERSION.bb" 'PACKAGECONFIG ??= ""'
# rust-package.mk expands RUST_PKG_FEATURES when the variant's compile runs
# (OpenWrt runs it with BUILD_VARIANT set to the package's VARIANT).
check "OpenWrt: variant marmoset-tls with RUST_PKG_FEATURES:=tls" \
	hasx $OW/Makefile '$(eval $(call BuildPackage,marmoset-tls))' &&
	hasx $OW/Makefile '  VARIANT:=tls' &&
	hasx $OW/Makefile 'ifeq ($(BUILD_VARIANT),tls)' &&
	hasx $OW/Makefile '  RUST_PKG_FEATURES:=tls'

# License file hashes (need the LICENSE file at the top of the repo).
if [ -f LICENSE ]; then
	s=$(sha256sum LICENSE | cut -d' ' -f1)
	m=$(md5sum LICENSE | cut -d' ' -f1)
	check "Buildroot hash of LICENSE is $s" grep -q "^sha256  $s  LICENSE$" $BRP/marmoset.hash
	check "Yocto LIC_FILES_CHKSUM md5 of LICENSE is $m" has "$BB" "file://LICENSE;md5=$m"
else
	echo "note - no LICENSE file yet: license hashes in $BRP/marmoset.hash and $BB are placeholders"
fi

# A build-std CI build is skipped when its key is already recorded and its
# binary is there (a stand-in here: nothing is built).
T=$(mktemp -d)
mkdir -p "$T/mips-unknown-linux-musl/release"
printf '#!/bin/sh\n' >"$T/mips-unknown-linux-musl/release/marmoset-tls"
chmod +x "$T/mips-unknown-linux-musl/release/marmoset-tls"
board/build-std.sh mips-unknown-linux-musl --features tls --print-key >"$T/mips-unknown-linux-musl-tls.key"
out=$(CARGO_TARGET_DIR=$T MARMOSET_CI_CACHE=$T board/build-std.sh mips-unknown-linux-musl --features tls --if-changed 2>&1)
case $out in
*"inputs unchanged since last successful build"*) ok "build-std.sh --if-changed skips on a recorded key" ;;
*) bad "build-std.sh --if-changed skips on a recorded key: $out" ;;
esac
check "the key is a sha256" grep -qx '[0-9a-f]\{64\}' "$T/mips-unknown-linux-musl-tls.key"
k=$(board/build-std.sh mips-unknown-linux-musl --print-key)
check "the key depends on the features" not grep -qx "$k" "$T/mips-unknown-linux-musl-tls.key"
rm -rf "$T"

# Shell syntax of every script shipped here (and shellcheck when present).
for f in init/S50marmoset board/release.sh board/build-std.sh board/crates-inc.sh \
	tests/cross.sh tests/init/sysv.sh tests/init/procd.sh tests/init/packaging.sh; do
	check "sh -n $f" sh -n "$f"
done
if command -v shellcheck >/dev/null; then
	check "shellcheck (sh) clean" shellcheck -x -s sh init/S50marmoset board/release.sh \
		board/build-std.sh board/crates-inc.sh tests/cross.sh tests/init/*.sh
	check "shellcheck (bash) clean: tests/packaging/buildroot.sh, openwrt.sh" shellcheck -x tests/packaging/buildroot.sh tests/packaging/openwrt.sh
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
