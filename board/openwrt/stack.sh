#!/bin/sh
# Builds OpenWrt's web stack (ubusd, rpcd, uci, ucode, LuCI, cgi-io and
# uhttpd with its ubus and ucode plugins) from its sources for this machine
# and lays it out as tests/luci/compare.sh wants OPENWRT_STACK_DIR: OUT/root
# with OpenWrt's paths, root's login for rpcd and LuCI, and the empty
# usr/bin, usr/sbin, usr/lib/MULTIARCH and usr/lib64 the host's are bound on.
#
#   board/openwrt/stack.sh SRC OUT        (or OPENWRT_SRC_DIR, OPENWRT_STACK_DIR)
#   OPENWRT_STACK_DIR=OUT tests/run.sh luci
#
# SRC holds one source tree per project: libubox ubus uci ucode rpcd
# lucihttp cgi-io uhttpd, iwinfo (only its include/ is used), and luci (a
# whole tree or only modules/luci-base, modules/luci-mod-{admin-full,status,
# system,network}, themes/luci-theme-bootstrap, libs/rpcd-mod-luci and
# contrib/package/ucode-mod-html). Run as root on Debian 12 (x86_64): the
# Debian packages it builds with are installed with apt-get when missing.
# Builds go to OUT/build; OUT/root is written over. Root's password in
# root/etc/shadow is OPENWRT_STACK_PASSWORD (default marmoset).
#
# Checked with (2026-12-05): libubox 1aa36ee7, ubus 3cc98db1, uci 66127cd7,
# ucode 81205a25, rpcd 44766874, lucihttp 9b5b683f, cgi-io 901b0f04,
# uhttpd f682ccab, iwinfo f5dd57a8 (its header), LuCI 459941fb.
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

for p in libubox ubus uci ucode rpcd lucihttp cgi-io uhttpd iwinfo/include luci/modules/luci-base; do
	[ -d "$src/$p" ] || { echo "$src/$p: missing" >&2; exit 1; }
done

# Debian's packages for the build and the password hash.
need="cmake make gcc pkg-config libc6-dev libjson-c-dev libssl-dev libnl-3-dev zlib1g-dev openssl"
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

# glibc 2.36 has no strlcpy, which rpcd uses.
cat >"$build/strlcpy.h" <<'EOF'
#include <string.h>
static inline size_t stack_strlcpy(char *dst, const char *from, size_t size)
{
	size_t len = strlen(from), n = len < size ? len : size - 1;

	if (size > 0) {
		memcpy(dst, from, n);
		dst[n] = '\0';
	}
	return len;
}
#define strlcpy stack_strlcpy
EOF

# cmake_build NAME [CFLAGS] [CMAKE OPTION...]: configures, builds and installs
# SRC/NAME into the root (prefix /usr), finding what earlier ones installed.
cmake_build() {
	name=$1 extra=$2
	shift 2
	echo "== $name"
	cmake -S "$src/$name" -B "$build/$name" -Wno-dev --no-warn-unused-cli -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_PREFIX_PATH="$root/usr" \
		-DCMAKE_C_FLAGS="-I$root/usr/include $extra" \
		-DCMAKE_EXE_LINKER_FLAGS="-L$root/usr/lib -Wl,-rpath-link,$root/usr/lib" \
		-DCMAKE_SHARED_LINKER_FLAGS="-L$root/usr/lib -Wl,-rpath-link,$root/usr/lib" \
		-DCMAKE_MODULE_LINKER_FLAGS="-L$root/usr/lib -Wl,-rpath-link,$root/usr/lib" \
		"$@" >"$build/$name.log"
	cmake --build "$build/$name" -j "$jobs" >>"$build/$name.log"
	DESTDIR=$root cmake --install "$build/$name" >>"$build/$name.log"
}

echo "skipped: Lua bindings, examples, tests, TLS, rpcd's iwinfo plugin, ucode's rtnl and nl80211 modules"
cmake_build libubox "" -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF
cmake_build ubus "" -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF
cmake_build uci "" -DBUILD_LUA=OFF
cmake_build ucode "" -DRTNL_SUPPORT=OFF -DNL80211_SUPPORT=OFF
cmake_build rpcd "-D_GNU_SOURCE= -include $build/strlcpy.h" -DIWINFO_SUPPORT=OFF
cmake_build lucihttp "-D_GNU_SOURCE=" -DBUILD_LUA=OFF -DBUILD_TESTS=OFF
cmake_build cgi-io ""
cmake_build uhttpd "-D_GNU_SOURCE= -Wno-stringop-overread" -DTLS_SUPPORT=OFF -DLUA_SUPPORT=OFF

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
make -C "$build/luci-base" -s FPIC=-fPIC CFLAGS="-O2 -D_GNU_SOURCE= -I$root/usr/include" core.so >"$build/luci-base.log"
cp "$build/luci-base/core.so" "$root/usr/lib/ucode/luci/core.so"

cc -O2 -fPIC -shared -D_GNU_SOURCE= -I"$root/usr/include" -o "$root/usr/lib/ucode/html.so" \
	"$luci/contrib/package/ucode-mod-html/src/html.c"

cc -O2 -fPIC -shared -D_GNU_SOURCE= -I"$root/usr/include" -I"$src/rpcd/include" -I"$src/iwinfo/include" -I/usr/include/libnl3 \
	-o "$root/usr/lib/rpcd/luci.so" "$luci/libs/rpcd-mod-luci/src/luci.c" \
	-L"$root/usr/lib" -lubox -lubus -luci -ldl -lnl-3

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
mkdir -p "$root/usr/lib/$multiarch" "$root/usr/lib64" "$root/lib" "$root/dev" "$root/proc" \
	"$root/tmp" "$root/var/run" "$root/root" "$root/etc/config"
[ -e "$root/lib64" ] || ln -s usr/lib64 "$root/lib64"

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
uci() { LD_LIBRARY_PATH=$root/usr/lib "$root/bin/uci" -c "$root/etc/config" "$@"; }
uci set luci.themes.Bootstrap=/luci-static/bootstrap
uci set luci.themes.BootstrapDark=/luci-static/bootstrap-dark
uci set luci.themes.BootstrapLight=/luci-static/bootstrap-light
uci commit luci

echo "OpenWrt web stack for $(uname -m) built: OPENWRT_STACK_DIR=$out"
