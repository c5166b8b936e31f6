#!/bin/sh
# Builds OpenWrt's web stack (ubusd, rpcd, uci, ucode, LuCI, cgi-io and
# uhttpd with its ubus and ucode plugins, and its TLS plugin when SRC has
# ustream-ssl) from its sources and lays it out in OUT/root with OpenWrt's
# paths and root's login for rpcd and LuCI.
#
#   board/openwrt/stack.sh SRC OUT        (or OPENWRT_SRC_DIR, OPENWRT_STACK_DIR)
#   OPENWRT_STACK_DIR=OUT tests/run.sh luci
#   STACK_ARCH=mipsel board/openwrt/stack.sh SRC OUT
#
# For this machine (the default), OUT/root is what tests/luci/compare.sh
# wants as OPENWRT_STACK_DIR: with the empty usr/bin, usr/sbin,
# usr/lib/MULTIARCH and usr/lib64 the host's are bound on. With
# STACK_ARCH=mipsel it is built with Debian's gcc-mipsel-linux-gnu against
# Debian's mipsel libraries (json-c, OpenSSL, libxcrypt, libnl-3: their
# packages fetched with `apt-get download` into STACK_DEBS, default
# OUT/build/debs, and unpacked into OUT/build/sysroot; the mipsel
# architecture is added to dpkg for that and removed again), and OUT/root
# is a root for a mipsel guest but for its shell and init: the stack and
# those libraries with glibc. bench/luci-guest.sh boots it.
#
# SRC holds one source tree per project: libubox ubus uci ucode rpcd
# lucihttp cgi-io uhttpd, iwinfo (only its include/ is used), luci (a
# whole tree or only modules/luci-base, modules/luci-mod-{admin-full,status,
# system,network}, themes/luci-theme-bootstrap, libs/rpcd-mod-luci and
# contrib/package/ucode-mod-html), and optionally ustream-ssl (uhttpd's
# HTTPS, with OpenSSL) and procd with udebug (the service manager init
# scripts talk to, run beside ubusd: tests/init/uhttpd.sh). Run as root on
# Debian 12 (x86_64): the Debian packages it builds with are installed with
# apt-get when missing.
# Builds go to OUT/build; OUT/root is written over. Root's password in
# root/etc/shadow is OPENWRT_STACK_PASSWORD (default marmoset).
#
# Checked with (2026-12-05): libubox 1aa36ee7, ubus 3cc98db1, uci 66127cd7,
# ucode 81205a25, rpcd 44766874, lucihttp 9b5b683f, cgi-io 901b0f04,
# uhttpd f682ccab, ustream-ssl 99bd3d2, iwinfo f5dd57a8 (its header),
# LuCI 459941fb; and (2026-12-07) procd 2c1834a, udebug 875e1a7.
set -eu

src=${1:-${OPENWRT_SRC_DIR:-}}
out=${2:-${OPENWRT_STACK_DIR:-}}
if [ -z "$src" ] || [ -z "$out" ]; then
	echo "usage: $0 SRC OUT (or OPENWRT_SRC_DIR and OPENWRT_STACK_DIR)" >&2
	exit 2
fi
src=$(cd "$src" && pwd -P)
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
root=$out/root
build=$out/build
password=${OPENWRT_STACK_PASSWORD:-marmoset}
jobs=$(nproc)
arch=${STACK_ARCH:-}
case $arch in
"" | "$(dpkg --print-architecture)") arch="" ;;
mipsel) triple=mipsel-linux-gnu ;;
*)
	echo "STACK_ARCH=$arch: only mipsel (or this machine's) is known" >&2
	exit 2
	;;
esac
debs=${STACK_DEBS:-$out/build/debs}

for p in libubox ubus uci ucode rpcd lucihttp cgi-io uhttpd iwinfo/include luci/modules/luci-base; do
	[ -d "$src/$p" ] || { echo "$src/$p: missing" >&2; exit 1; }
done

# Debian's packages for the build and the password hash.
need="cmake make gcc pkg-config libc6-dev libjson-c-dev libssl-dev libnl-3-dev zlib1g-dev openssl"
[ -z "$arch" ] || need="$need gcc-$triple libc6-dev-$arch-cross"
missing=""
for p in $need; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "apt-get install$missing"
	apt-get -o DPkg::Lock::Timeout=600 update -qq || echo "apt-get update failed: installing from the lists there are"
	# shellcheck disable=SC2086 # one word per package
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $missing
fi

multiarch=$(gcc -print-multiarch)
mkdir -p "$root" "$build"
cc=cc
sysroot=""
cross_flags=""
cross_ld=""
newest() { find "$debs" -maxdepth 1 -name "${1}_*_$arch.deb" | sort -V | tail -n 1; }
if [ -n "$arch" ]; then
	cc=$triple-gcc
	multiarch=$triple
	sysroot=$build/sysroot
	# Debian's packages of the target: the -dev ones into the sysroot, the
	# libraries into the root as well (the guest runs them).
	dev="libjson-c-dev libssl-dev libcrypt-dev libnl-3-dev"
	run="libc6 libgcc-s1 libatomic1 libjson-c5 libssl3 libcrypt1 libnl-3-200"
	mkdir -p "$debs"
	get=""
	for p in $dev $run; do
		[ -n "$(newest "$p")" ] || get="$get $p:$arch"
	done
	if [ -n "$get" ]; then
		added=""
		if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
			dpkg --add-architecture "$arch"
			added=1
		fi
		echo "apt-get download$get"
		apt-get -o DPkg::Lock::Timeout=600 update -qq || echo "apt-get update failed: downloading from the lists there are"
		rc=0
		# shellcheck disable=SC2086 # one word per package
		(cd "$debs" && apt-get download -qq $get) || rc=$?
		# A foreign architecture left behind makes every later apt-get update
		# depend on that architecture's indexes.
		[ -z "$added" ] || dpkg --remove-architecture "$arch"
		[ "$rc" = 0 ] || { echo "apt-get download failed" >&2; exit 1; }
	fi
	rm -rf "$sysroot"
	mkdir -p "$sysroot"
	for p in $dev $run; do dpkg-deb -x "$(newest "$p")" "$sysroot"; done
	# Links the packages make absolute (libcrypt.so -> /lib/...) point into the sysroot.
	find "$sysroot" -type l | while read -r l; do
		t=$(readlink "$l")
		case $t in /*) ln -sf "$sysroot$t" "$l" ;; esac
	done
	slib=$sysroot/usr/lib/$triple
	cross_flags="-I$sysroot/usr/include -I$sysroot/usr/include/$triple"
	for d in "$slib" "$sysroot/lib/$triple"; do cross_ld="$cross_ld -L$d -Wl,-rpath-link,$d"; done
	cat >"$build/toolchain.cmake" <<TOOLCHAIN
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR mips)
set(CMAKE_C_COMPILER $cc)
set(CMAKE_LIBRARY_ARCHITECTURE $triple)
set(CMAKE_FIND_ROOT_PATH $sysroot $root)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
TOOLCHAIN
	export PKG_CONFIG_LIBDIR="$slib/pkgconfig:$sysroot/usr/share/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$sysroot"
	# The libraries, where the packages put them (glibc's loader is /lib/ld.so.1).
	for p in $run; do
		dpkg-deb --fsys-tarfile "$(newest "$p")" | tar -C "$root" --no-same-owner -xf - \
			--exclude=./usr/share --exclude='./usr/lib/*/gconv' --exclude=./usr/lib/ssl --exclude=./etc
	done
fi

# glibc 2.36 has no strlcpy, which rpcd and procd use. No libc header here:
# included first, one would fix the feature macros before a source sets them.
cat >"$build/strlcpy.h" <<'EOF'
#include <stddef.h>
static inline size_t stack_strlcpy(char *dst, const char *from, size_t size)
{
	size_t len = __builtin_strlen(from), n = len < size ? len : size - 1;

	if (size > 0) {
		__builtin_memcpy(dst, from, n);
		dst[n] = '\0';
	}
	return len;
}
#define strlcpy stack_strlcpy
EOF

# cmake_configure NAME [CFLAGS] [CMAKE OPTION...]: configures SRC/NAME in
# BUILD/NAME for the root (prefix /usr), finding what earlier ones installed.
cmake_configure() {
	name=$1 extra=$2
	shift 2
	echo "== $name"
	ld="-L$root/usr/lib -Wl,-rpath-link,$root/usr/lib"
	toolchain=""
	if [ -n "$arch" ]; then
		ld="$ld $cross_ld"
		toolchain=-DCMAKE_TOOLCHAIN_FILE=$build/toolchain.cmake
	fi
	rm -rf "${build:?}/$name"
	cmake -S "$src/$name" -B "$build/$name" -Wno-dev --no-warn-unused-cli -DCMAKE_BUILD_TYPE=Release \
		${toolchain:+"$toolchain"} -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib \
		-DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_C_FLAGS="-I$root/usr/include $cross_flags $extra" \
		-DCMAKE_EXE_LINKER_FLAGS="$ld" -DCMAKE_SHARED_LINKER_FLAGS="$ld" -DCMAKE_MODULE_LINKER_FLAGS="$ld" \
		"$@" >"$build/$name.log"
}

# cmake_build NAME [CFLAGS] [CMAKE OPTION...]: configures, builds and installs it.
cmake_build() {
	cmake_configure "$@"
	cmake --build "$build/$1" -j "$jobs" >>"$build/$1.log"
	DESTDIR=$root cmake --install "$build/$1" >>"$build/$1.log"
}

echo "skipped: Lua bindings, examples, tests, rpcd's iwinfo plugin, ucode's rtnl and nl80211 modules"
cmake_build libubox "" -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF
cmake_build ubus "" -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF
cmake_build uci "" -DBUILD_LUA=OFF
cmake_build ucode "" -DRTNL_SUPPORT=OFF -DNL80211_SUPPORT=OFF
cmake_build rpcd "-D_GNU_SOURCE= -include $build/strlcpy.h" -DIWINFO_SUPPORT=OFF
cmake_build lucihttp "-D_GNU_SOURCE=" -DBUILD_LUA=OFF -DBUILD_TESTS=OFF
cmake_build cgi-io ""
tls=OFF
if [ -d "$src/ustream-ssl" ]; then
	# Its CMakeLists sets the linker flags itself: the libraries' directory in the compiler's.
	cmake_build ustream-ssl "$cross_ld" -DBUILD_EXAMPLES=OFF
	tls=ON
else
	echo "skipped: uhttpd's HTTPS (no $src/ustream-ssl)"
fi
cmake_build uhttpd "-D_GNU_SOURCE= -Wno-stringop-overread" -DTLS_SUPPORT=$tls -DLUA_SUPPORT=OFF
# procd (optional) as a service manager beside ubusd, not as PID 1: only its
# daemon is built, with udebug, which it links. Its -Werror would stop at two
# warnings of Debian 12's gcc, in code that runs only in PID 1 or never.
if [ -d "$src/procd" ] && [ -d "$src/udebug" ]; then
	cmake_build udebug ""
	cmake_configure procd "-D_GNU_SOURCE= -include $build/strlcpy.h -Wno-format-overflow -Wno-unused-function"
	cmake --build "$build/procd" -j "$jobs" --target procd >>"$build/procd.log"
	install -D -m 755 "$build/procd/procd" "$root/usr/sbin/procd"
else
	echo "skipped: procd (no $src/procd and $src/udebug): init scripts meet a stand-in for it"
fi

# LuCI: its files where OpenWrt's packages put them, then the pieces only
# OpenWrt's package Makefiles build.
echo "== luci"
luci=$src/luci
mkdir -p "$root/www" "$root/usr/share/ucode/luci" "$root/usr/lib/ucode/luci" "$root/usr/lib/rpcd"
for m in modules/luci-base modules/luci-mod-admin-full modules/luci-mod-status modules/luci-mod-system \
	modules/luci-mod-network themes/luci-theme-bootstrap; do
	if [ ! -d "$luci/$m" ]; then
		echo "skipped: $m (not in $luci)"
		continue
	fi
	[ ! -d "$luci/$m/htdocs" ] || cp -R "$luci/$m/htdocs/." "$root/www/"
	[ ! -d "$luci/$m/ucode" ] || cp -R "$luci/$m/ucode/." "$root/usr/share/ucode/luci/"
	[ ! -d "$luci/$m/root" ] || cp -R "$luci/$m/root/." "$root/"
done
version=${LUCI_VERSION:-$(git -C "$luci" log -1 --format=%h 2>/dev/null || echo unknown)}
echo "export const revision = '$version', branch = 'master';" >"$root/usr/share/ucode/luci/version.uc"
# The version in templates, and on the scripts and styles they link (a cache buster).
find "$root/usr/share/ucode/luci" -name '*.ut' -exec sed -i \
	-e "s/{# *\([^ ]*\)PKG_VERSION *#}/\1$version/g" \
	-e "s/\"\({{ *\(media\|resource\) *}}[^\"]*\.\(js\|css\)\)\"/\"\1?v=$version\"/g" {} +

rm -rf "$build/luci-base" && cp -R "$luci/modules/luci-base/src" "$build/luci-base"
make -C "$build/luci-base" -s CC="$cc" FPIC=-fPIC CFLAGS="-O2 -D_GNU_SOURCE= -I$root/usr/include $cross_flags" \
	LDFLAGS="$cross_ld" core.so >"$build/luci-base.log"
cp "$build/luci-base/core.so" "$root/usr/lib/ucode/luci/core.so"

# shellcheck disable=SC2086 # flags, one word each
"$cc" -O2 -fPIC -shared -D_GNU_SOURCE= -I"$root/usr/include" $cross_flags -o "$root/usr/lib/ucode/html.so" \
	"$luci/contrib/package/ucode-mod-html/src/html.c"

# shellcheck disable=SC2086
"$cc" -O2 -fPIC -shared -D_GNU_SOURCE= -I"$root/usr/include" -I"$src/rpcd/include" -I"$src/iwinfo/include" \
	$cross_flags -I"$sysroot/usr/include/libnl3" -o "$root/usr/lib/rpcd/luci.so" "$luci/libs/rpcd-mod-luci/src/luci.c" \
	-L"$root/usr/lib" $cross_ld -lubox -lubus -luci -ldl -lnl-3

# rpcd lets an anonymous session log in only with this ACL.
mkdir -p "$root/usr/share/rpcd/acl.d"
cp "$src/rpcd/unauthenticated.json" "$root/usr/share/rpcd/acl.d/"

# OpenWrt's paths: programs in /bin and /sbin (the root's usr/bin and
# usr/sbin get the host's), cgi-io in /usr/libexec behind /www/cgi-bin.
mkdir -p "$root/bin" "$root/sbin" "$root/usr/libexec" "$root/www/cgi-bin"
mv "$root/usr/sbin/cgi-io" "$root/usr/libexec/cgi-io"
for f in "$root"/usr/bin/* "$root"/usr/sbin/*; do
	[ -e "$f" ] || [ -L "$f" ] || continue
	case $f in */usr/bin/*) mv "$f" "$root/bin/" ;; *) mv "$f" "$root/sbin/" ;; esac
done
for c in upload download backup exec; do ln -sf /usr/libexec/cgi-io "$root/www/cgi-bin/cgi-$c"; done
mkdir -p "$root/lib" "$root/dev" "$root/proc" "$root/tmp" "$root/var/run" "$root/root" "$root/etc/config"
if [ -z "$arch" ]; then
	# Where the host's are bound.
	mkdir -p "$root/usr/lib/$multiarch" "$root/usr/lib64"
	[ -e "$root/lib64" ] || ln -s usr/lib64 "$root/lib64"
fi
# uhttpd's TLS plugin, where OpenWrt's uhttpd init looks for it.
[ ! -e "$root/usr/lib/libustream-ssl.so" ] || ln -sf ../usr/lib/libustream-ssl.so "$root/lib/libustream-ssl.so"

# /etc: root with its password, rpcd's login for it, a host name, a LAN.
hash=$(openssl passwd -6 "$password")
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
echo "root:$hash:20000:0:99999:7:::" >"$root/etc/shadow"
chmod 600 "$root/etc/shadow"
cat >"$root/etc/config/rpcd" <<'EOF'
config rpcd
	option socket /var/run/ubus/ubus.sock
	option timeout 30

config login
	option username 'root'
	option password '$p$root'
	list read '*'
	list write '*'
EOF
cat >"$root/etc/config/system" <<'EOF'
config system
	option hostname 'OpenWrt'
	option timezone 'UTC'
EOF
cat >"$root/etc/config/network" <<'EOF'
config interface 'loopback'
	option device 'lo'
	option proto 'static'
	option ipaddr '127.0.0.1'
	option netmask '255.0.0.0'

config interface 'lan'
	option device 'br-lan'
	option proto 'static'
	option ipaddr '192.168.1.1'
	option netmask '255.255.255.0'
EOF
# The theme entries luci-theme-bootstrap's uci-defaults add at first boot
# (written as uci writes them: the mipsel uci does not run here).
sed -i "/^config internal 'themes'/a\\
	option Bootstrap '/luci-static/bootstrap'\\
	option BootstrapDark '/luci-static/bootstrap-dark'\\
	option BootstrapLight '/luci-static/bootstrap-light'" "$root/etc/config/luci"

# Every program and library of the guest's root finds the libraries it needs there.
if [ -n "$arch" ]; then
	missing=$(find "$root" -type f \( -perm -u+x -o -name '*.so*' \) | while read -r f; do
		readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | while read -r l; do
			for d in lib "lib/$triple" usr/lib "usr/lib/$triple"; do [ -e "$root/$d/$l" ] && continue 2; done
			echo "${f#"$root"} needs $l"
		done
	done)
	[ -z "$missing" ] || { echo "missing from $root: $missing" >&2; exit 1; }
fi

echo "OpenWrt web stack for ${arch:-$(uname -m)} built: OPENWRT_STACK_DIR=$out"
