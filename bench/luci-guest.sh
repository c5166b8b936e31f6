#!/usr/bin/env bash
# LuCI on a MIPS router guest, through Marmoset and through uhttpd, as a user meets it. One QEMU
# Malta guest (`qemu-system-mipsel -M malta -cpu 24Kc -m 256`, Debian bookworm's 4kc-malta kernel,
# a BusyBox initramfs: tests/qemu/boot.sh's steps) holds OpenWrt's web stack built for mipsel by
# `STACK_ARCH=mipsel board/openwrt/stack.sh` (ubusd, rpcd with LuCI's plugin, ucode, LuCI, uhttpd with
# its ubus, ucode and TLS plugins) and Marmoset (the `tls,ubus` build marmoset-uhttpd ships, for
# mipsel-unknown-linux-musl). At boot, under OpenWrt's own rc.common, procd.sh and uci.sh:
# - `/etc/init.d/uhttpd start`, marmoset-uhttpd's script, from OpenWrt's default /etc/config/uhttpd
#   (with the ubus_prefix and ucode_prefix uhttpd-mod-ubus and luci-base add): Marmoset on 80 and 443
#   (ECDSA P-256, px5g's `key_type ec`), LuCI's pages through luci-scgi.uc;
# - OpenWrt's own uhttpd init script as /etc/init.d/uhttpd-openwrt, on the same file but for the
#   ports (UCI_CONFIG_DIR=/etc/uhttpd-openwrt): uhttpd on 8080 and 8443 with `-o /cgi-bin/luci -O
#   /usr/share/ucode/luci/uhttpd.uc`;
# - each file has a second section `rsa` listening on HTTPS only (Marmoset 4443, uhttpd 8444) with an
#   RSA-2048 pair, as px5g makes by default.
# procd, when the stack has it (board/openwrt/stack.sh builds it from SRC/procd and SRC/udebug),
# runs beside ubusd as OpenWrt's service manager (not as PID 1) and takes the init scripts' calls;
# without it, a stand-in for its end of `ubus call service set` (guest /bin/ubus) starts each
# instance it is given and starts it again when it exits (procd's respawn). The browser and curl
# reach the guest over a tap link (host 198.18.0.1, guest 198.18.0.2: the benchmarking range), as a
# LAN client reaches a router, with a TCP stack of its own at each end; LUCI_LINK=user goes through
# QEMU's user networking instead, its six ports forwarded to 127.0.0.1, where the guest's peer is
# QEMU's own TCP stack (which acknowledges at once, so a server's small writes never wait there for
# a client's delayed ACK).
#
# Measured: the time from QEMU's start to each server's LuCI login page (403 with the form); then for
# ROUNDS rounds, over HTTP, HTTPS with the ECDSA key and HTTPS with the RSA key, each server in turn
# (the order alternates by round): headless Chromium on the host (bench/luci-guest.mjs) logs in and
# opens LUCI_PAGES, and per page the browser's time to its last ubus answer; the server's CPU
# across the whole visit (utime+stime of its processes and their children, reaped or waiting:
# luci-scgi.uc's forks of the warm ucode VM); then the bulk cost of each server's TLS: LuCI's
# luci.js 20 times on one connection (curl) over HTTP and TLS 1.3 with AES-128-GCM and with
# ChaCha20-Poly1305, the server's CPU; at the end each server process's peak RSS (VmHWM), RSS and
# private memory (and its waiting children's), all from /proc in the guest.
#
#   OPENWRT_SRC_DIR=/path/to/src OPENWRT_DIR=/path/to/openwrt bench/luci-guest.sh
#
# OPENWRT_SRC_DIR: the upstream trees board/openwrt/stack.sh takes (with ustream-ssl for uhttpd's
# HTTPS). OPENWRT_DIR: an OpenWrt tree (rc.common, functions.sh, procd.sh, uci.sh and uhttpd's init
# script are taken from it). LUCI_STACK_DIR: the mipsel stack (default bench/out/luci-guest/stack,
# built when it has no root/). MARMOSET_BIN: the mipsel `tls,ubus` build (default: built with
# board/build-std.sh). ROUNDS (3). LUCI_LINK: tap (default; user when no tap can be made) or
# user. LUCI_MODE: icount (default: `-icount shift=3 -rtc clock=vm`,
# the guest's CPU figures count instructions, whatever the host's load) or wall (plain TCG).
# LUCI_PAGES: the pages (default below). Writes bench/out/luci-guest/results.md and rows.txt.
# Run as root (tests/qemu/boot.sh fetches the kernel and BusyBox packages).
# boot.sh, sourced as a library, returns early, which shellcheck -x takes for the end of this script.
# shellcheck disable=SC2317
set -u -o pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$BENCH")
SRC=${OPENWRT_SRC_DIR:-}
OW=${OPENWRT_DIR:-}
ROUNDS=${ROUNDS:-3}
MODE=${LUCI_MODE:-icount}
LINK=${LUCI_LINK:-tap}
# The login lands on Status -> Overview; it is opened again on its own at the end.
PAGES=${LUCI_PAGES:-admin/status/overview admin/system/system admin/network/network admin/system/admin admin/status/processes admin/status/overview}
PASSWORD=${OPENWRT_STACK_PASSWORD:-marmoset}
export MARMOSET_QEMU_OUT=${MARMOSET_QEMU_OUT:-$BENCH/out/luci-guest}
STACK=${LUCI_STACK_DIR:-$MARMOSET_QEMU_OUT/stack}

# shellcheck source=tests/qemu/boot.sh disable=SC1091
MARMOSET_QEMU_LIBRARY=1 . "$REPO_ROOT/tests/qemu/boot.sh" qemu-mipsel
# shellcheck disable=SC2034 # boot.sh's
TAG=luci-guest
OVERLAY=$(mktemp -d "${TMPDIR:-/tmp}/marmoset-luci-guest.XXXXXX")
chmod 0755 "$OVERLAY"
TAP=""
# Run by boot.sh's cleanup, which its finish and abort run too.
own_cleanup() {
  rm -rf "$OVERLAY"
  [ -z "$TAP" ] || ip link del "$TAP" 2>/dev/null
  TAP=""
}

[ "$(id -u)" = 0 ] || abort "run as root"
[ -d "$SRC/luci" ] || abort "OPENWRT_SRC_DIR (the upstream trees board/openwrt/stack.sh takes) is needed"
[ -f "$OW/package/base-files/files/etc/rc.common" ] || abort "OPENWRT_DIR (an OpenWrt tree) is needed"
case $MODE in
icount) export MARMOSET_QEMU_ARGS="-smp 1 -icount shift=3 -rtc clock=vm" ;;
wall) export MARMOSET_QEMU_ARGS="-smp 1" ;;
*) abort "LUCI_MODE=$MODE: icount or wall" ;;
esac
case $LINK in
tap)
  TAP=mlg$$
  if ip tuntap add dev "$TAP" mode tap 2>/dev/null && ip addr add 198.18.0.1/24 dev "$TAP" &&
    ip link set "$TAP" up; then
    MARMOSET_QEMU_ARGS="$MARMOSET_QEMU_ARGS -netdev tap,id=lan,ifname=$TAP,script=no,downscript=no"
    MARMOSET_QEMU_ARGS="$MARMOSET_QEMU_ARGS -device $QEMU_NET_DEVICE,netdev=lan"
  else
    ip link del "$TAP" 2>/dev/null
    TAP=""
    LINK=user
    say "no tap link could be made (ip tuntap): the browser goes through QEMU's user networking"
  fi
  ;;
user) ;;
*) abort "LUCI_LINK=$LINK: tap or user" ;;
esac
host_prereqs
command -v node >/dev/null || apt_install nodejs npm || abort "could not install node"
[ -x /usr/bin/chromium ] || apt_install chromium || abort "could not install chromium"
[ -d "$REPO_ROOT/tests/browser/node_modules/playwright-core" ] ||
  (cd "$REPO_ROOT/tests/browser" && npm ci --no-audit --no-fund --loglevel=error) || abort "npm ci in tests/browser failed"

# ---- the stack and marmoset for mipsel ----------------------------------------------------------
if [ ! -x "$STACK/root/sbin/rpcd" ]; then
  say "STACK_ARCH=mipsel board/openwrt/stack.sh $SRC $STACK"
  STACK_ARCH=mipsel STACK_DEBS="$CACHE/debs/$DEB_ARCH" "$REPO_ROOT/board/openwrt/stack.sh" "$SRC" "$STACK" \
    >"$OUT/stack.log" 2>&1 || { tail -n 20 "$OUT/stack.log"; abort "the mipsel stack did not build (see $OUT/stack.log)"; }
fi
[ -e "$STACK/root/lib/libustream-ssl.so" ] || abort "$STACK has no uhttpd TLS plugin (OPENWRT_SRC_DIR needs ustream-ssl)"
if [ -n "${MARMOSET_BIN:-}" ]; then
  BINARY=$MARMOSET_BIN
else
  say "board/build-std.sh $RUST_TARGET --features tls,ubus"
  BINARY=$(cd "$REPO_ROOT" && board/build-std.sh "$RUST_TARGET" --features tls,ubus 2>"$OUT/build.log" | tail -n 1) ||
    { tail -n 20 "$OUT/build.log"; abort "board/build-std.sh failed"; }
  case $BINARY in /*) ;; *) BINARY=$REPO_ROOT/$BINARY ;; esac
fi
readelf -h "$BINARY" 2>/dev/null | grep -q 'Machine:.*MIPS' || abort "$BINARY is not a MIPS binary"

# ---- the image -------------------------------------------------------------------------------------
fetch_debs
say "laying out the guest's root"
# The stack without what builds use.
# /var/run and /var/lock are links in the image.
tar -C "$STACK/root" --exclude='*.a' --exclude=./usr/include --exclude=./usr/lib/pkgconfig --exclude=./var -cf - . |
  tar -C "$OVERLAY" -xf - || abort "copying the stack failed"
# OpenWrt's paths for what the stack's cmake installs elsewhere.
mkdir -p "$OVERLAY/usr/sbin" "$OVERLAY/usr/libexec" "$OVERLAY/lib/functions" "$OVERLAY/lib/config" \
  "$OVERLAY/usr/share/marmoset" "$OVERLAY/etc/init.d" "$OVERLAY/etc/uhttpd-openwrt"
mv "$OVERLAY/bin/uhttpd" "$OVERLAY/usr/sbin/uhttpd"
ln -sf ../bin/uci "$OVERLAY/sbin/uci"
mkdir -p "$OVERLAY/usr/bin"
ln -sf ../../bin/ucode "$OVERLAY/usr/bin/ucode"
[ -x "$STACK/root/sbin/procd" ] || mv "$OVERLAY/bin/ubus" "$OVERLAY/usr/libexec/ubus-cli"
cp "$OW/package/base-files/files/etc/rc.common" "$OVERLAY/etc/"
cp "$OW/package/base-files/files/lib/functions.sh" "$OVERLAY/lib/"
cp "$OW/package/base-files/files/lib/functions/service.sh" "$OVERLAY/lib/functions/"
cp "$OW/package/system/procd/files/procd.sh" "$OVERLAY/lib/functions/"
cp "$OW/package/system/uci/files/lib/config/uci.sh" "$OVERLAY/lib/config/"
install -m 0755 "$OW/package/network/services/uhttpd/files/uhttpd.init" "$OVERLAY/etc/init.d/uhttpd-openwrt"
install -m 0755 "$REPO_ROOT/board/openwrt/marmoset/files/uhttpd.init" "$OVERLAY/etc/init.d/uhttpd"
install -m 0644 "$REPO_ROOT/board/openwrt/marmoset/files/luci-scgi.uc" "$OVERLAY/usr/share/marmoset/luci-scgi.uc"

# OpenWrt's /etc/config/uhttpd (its package's default, with what uhttpd-mod-ubus and luci-base add),
# ports aside, and the section `rsa`.
uhttpd_config() { # HTTP HTTPS HTTPS-RSA
  sed -e "s/0.0.0.0:80\$/0.0.0.0:$1/; s/\[::\]:80\$/[::]:$1/; s/0.0.0.0:443\$/0.0.0.0:$2/; s/\[::\]:443\$/[::]:$2/" \
    -e "s|^\(\tlist lua_prefix.*\)|\1\n\toption ubus_prefix\t/ubus\n\tlist ucode_prefix\t'/cgi-bin/luci=/usr/share/ucode/luci/uhttpd.uc'|" \
    -e '/^\s*#/d' "$OW/package/network/services/uhttpd/files/uhttpd.config"
  cat <<EOF

config uhttpd rsa
	list listen_https	0.0.0.0:$3
	option home		/www
	option rfc1918_filter 1
	option max_requests 3
	option max_connections 100
	option cert		/etc/uhttpd-rsa.crt
	option key		/etc/uhttpd-rsa.key
	option cgi_prefix	/cgi-bin
	option script_timeout	60
	option network_timeout	30
	option http_keepalive	20
	option ubus_prefix	/ubus
	list ucode_prefix	'/cgi-bin/luci=/usr/share/ucode/luci/uhttpd.uc'
EOF
}
uhttpd_config 80 443 4443 >"$OVERLAY/etc/config/uhttpd"
uhttpd_config 8080 8443 8444 >"$OVERLAY/etc/uhttpd-openwrt/uhttpd"
if ! grep -q "ucode_prefix" "$OVERLAY/etc/config/uhttpd" || ! grep -q 'listen_http.*0.0.0.0:80$' "$OVERLAY/etc/config/uhttpd"; then
  abort "OpenWrt's uhttpd.config is not as expected"
fi
cp "$OVERLAY/etc/config/system" "$OVERLAY/etc/uhttpd-openwrt/"
# The pairs, as px5g makes them (`key_type ec`, and its default RSA-2048), for both servers.
pair() { # NAME OPENSSL-NEWKEY-ARGS...
  local name=$1
  shift
  openssl req -x509 "$@" -nodes -sha256 -days 397 -keyout "$OVERLAY/etc/$name.key" -out "$OVERLAY/etc/$name.crt" \
    -subj /C=ZZ/ST=Somewhere/L=Unknown/O=OpenWrt/CN=OpenWrt -addext subjectAltName=DNS:OpenWrt \
    >"$OUT/openssl-$name.log" 2>&1 || abort "openssl req ($name) failed"
}
pair uhttpd -newkey ec -pkeyopt ec_paramgen_curve:P-256
pair uhttpd-rsa -newkey rsa:2048

# Without procd, a stand-in for its end of `ubus call service set|list|delete`: each instance's
# command, one argument a line, run and run again when it exits; its pid in
# /var/run/procd/SERVICE.INSTANCE.pid. Other calls go to the real ubus.
[ -x "$STACK/root/sbin/procd" ] || write_file "$OVERLAY/bin/ubus" 0755 <<'EOF'
#!/bin/sh
[ "$1 $2" = "call service" ] || exec /usr/libexec/ubus-cli "$@"
. /usr/share/libubox/jshn.sh
dir=/var/run/procd
mkdir -p "$dir"
case $3 in
set)
	json_load "$4"
	json_get_var name name
	json_select instances || exit 0
	json_get_keys instances
	for i in $instances; do
		json_select "$i"
		json_select command
		json_get_keys args
		: >"$dir/$name.$i.cmd"
		for a in $args; do
			json_get_var v "$a"
			printf '%s\n' "$v" >>"$dir/$name.$i.cmd"
		done
		json_select ..
		json_select ..
		rm -f "$dir/$name.$i.stop"
		setsid /bin/procd-respawn "$dir/$name.$i" </dev/null >>/tmp/procd.log 2>&1 &
	done
	;;
delete)
	json_load "$4"
	json_get_var name name
	for p in "$dir/$name".*.pid; do
		[ -e "$p" ] || continue
		touch "${p%.pid}.stop"
		kill "$(cat "$p")" 2>/dev/null
	done
	;;
list) echo '{ }' ;;
esac
EOF
[ -x "$STACK/root/sbin/procd" ] || write_file "$OVERLAY/bin/procd-respawn" 0755 <<'EOF'
#!/bin/sh
# procd-respawn BASE: runs the command in BASE.cmd until BASE.stop exists.
while [ ! -e "$1.stop" ]; do
	set -- "$1"
	while IFS= read -r a; do set -- "$@" "$a"; done <"$1.cmd"
	base=$1
	shift
	"$@" &
	echo $! >"$base.pid"
	wait $!
	echo "procd-respawn: $* exited ($?)"
	set -- "$base"
	sleep 1
done
EOF
# Replaces the image's own marmoset start: ubusd and rpcd as OpenWrt starts them, then both inits.
write_file "$OVERLAY/etc/init.d/S50marmoset" 0755 <<'EOF'
#!/bin/sh
case $1 in start) ;; *) exit 0 ;; esac
printf 'Starting ubusd, procd, rpcd, /etc/init.d/uhttpd and /etc/init.d/uhttpd-openwrt: '
# The tap link, when the host made one: the second NIC.
if [ -e /sys/class/net/eth1 ]; then
	ip link set eth1 up && ip addr add 198.18.0.2/24 dev eth1
fi
mkdir -p /var/run/ubus /var/lock
setsid /sbin/ubusd -s /var/run/ubus/ubus.sock </dev/null >>/tmp/procd.log 2>&1 &
i=0
while [ ! -S /var/run/ubus/ubus.sock ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if [ -x /sbin/procd ]; then
	setsid /sbin/procd -S -s /var/run/ubus/ubus.sock </dev/null >>/tmp/procd.log 2>&1 &
	i=0
	until ubus -t 1 list service >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
fi
setsid /sbin/rpcd -s /var/run/ubus/ubus.sock -t 30 </dev/null >>/tmp/procd.log 2>&1 &
/etc/init.d/uhttpd start >>/tmp/procd.log 2>&1 &&
	UCI_CONFIG_DIR=/etc/uhttpd-openwrt /etc/init.d/uhttpd-openwrt start >>/tmp/procd.log 2>&1 &&
	echo OK || echo FAIL
EOF
# In the guest: each server's processes, their CPU ticks (utime+stime+cutime+cstime) and VmHWM.
write_file "$OVERLAY/bench/stat.sh" 0755 <<'EOF'
#!/bin/sh
if [ -x /sbin/procd ]; then
	# procd's instances, named as the stand-in names them: SERVICE.INSTANCE
	# (ucode reads the names as they are; jshn would turn a dash into _).
	mkdir -p /var/run/procd
	rm -f /var/run/procd/*.pid
	ubus call service list | ucode -e 'let d = json(require("fs").stdin.read("all"));
for (let s, v in d) for (let i, x in v.instances ?? {}) if (x.running) print(`${s}.${i} ${x.pid}\n`);' |
		while read -r n pid; do echo "$pid" >"/var/run/procd/$n.pid"; done
fi
for p in /var/run/procd/*.pid; do
	pid=$(cat "$p")
	[ -r "/proc/$pid/stat" ] || continue
	n=${p##*/}
	set -- $(sed 's/^.*) //' "/proc/$pid/stat")
	hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$pid/status")
	rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$pid/status")
	priv=$(awk '/^Private_(Clean|Dirty):/ { k += $2 } END { print k + 0 }' "/proc/$pid/smaps_rollup")
	ticks=$((${12} + ${13} + ${14} + ${15}))
	# Children still running (luci-scgi.uc's spares): their CPU so far and
	# the memory they do not share.
	kids=0 kids_priv=0
	for kid in $(cat "/proc/$pid/task/$pid/children" 2>/dev/null); do
		[ -r "/proc/$kid/stat" ] || continue
		set -- $(sed 's/^.*) //' "/proc/$kid/stat")
		ticks=$((ticks + ${12} + ${13}))
		kids=$((kids + 1))
		kids_priv=$((kids_priv + $(awk '/^Private_(Clean|Dirty):/ { k += $2 } END { print k + 0 }' "/proc/$kid/smaps_rollup")))
	done
	echo "@@S ${n%.pid} pid=$pid ticks=$ticks hwm_kb=$hwm rss_kb=$rss priv_kb=$priv kids=$kids kids_priv_kb=$kids_priv"
done
EOF
export MARMOSET_QEMU_EXTRA_OVERLAY=$OVERLAY
say "packing the initramfs"
build_initramfs
say "kernel $KVER; initramfs $(stat -c %s "$INITRAMFS") bytes"

# ---- boot ------------------------------------------------------------------------------------------
declare -A HP
for gp in 443 4443 8080 8443 8444; do HP[$gp]=$(free_port); done
fwd=""
for gp in "${!HP[@]}"; do fwd="$fwd tcp:127.0.0.1:${HP[$gp]}-:$gp"; done
export MARMOSET_QEMU_HOSTFWD=$fwd
# shellcheck disable=SC2034 # boot.sh's
CONSOLE_LOG="$OUT/console.log"
boot
HP[80]=$PORT
# at GUEST-PORT: where the host reaches that port of the guest.
at() { if [ "$LINK" = tap ]; then echo "198.18.0.2:$1"; else echo "127.0.0.1:${HP[$1]}"; fi; }
# LuCI's login page (403 with the password field) through each server, from QEMU's start.
LOGIN_M="" LOGIN_U=""
login_page() { curl -s --max-time 5 "http://$(at "$1")/cgi-bin/luci/" 2>/dev/null | grep -q 'name="luci_password"'; }
deadline=$(($(date +%s) + BOOT_DEADLINE))
while { [ -z "$LOGIN_M" ] || [ -z "$LOGIN_U" ]; } && [ "$(date +%s)" -lt "$deadline" ]; do
  [ -n "$LOGIN_M" ] || ! login_page 80 || LOGIN_M=$(elapsed "$T_QEMU" "$(now)")
  [ -n "$LOGIN_U" ] || ! login_page 8080 || LOGIN_U=$(elapsed "$T_QEMU" "$(now)")
  sleep 0.1
done
if [ -z "$LOGIN_M" ] || [ -z "$LOGIN_U" ]; then
  guest 30 "cat /tmp/procd.log"
  printf '%s\n' "$GOUT"
  abort "LuCI's login page did not answer through both servers"
fi
pass "LuCI's login page: through marmoset $LOGIN_M s, through uhttpd $LOGIN_U s after qemu started"
guest 30 "cat /tmp/procd.log; ls /var/run/procd; cat /var/etc/marmoset/uhttpd-main.conf
  if [ -x /sbin/procd ]; then ubus call service list; else tr '\\n' ' ' </var/run/procd/uhttpd-openwrt.instance1.cmd; fi"
printf '%s\n' "$GOUT" >"$OUT/guest-setup.txt"

# ---- rounds ----------------------------------------------------------------------------------------
ROWS="$OUT/rows.txt"
: >"$ROWS"
stat_of() { # stat_of SERVICE -> "TICKS HWM-KB" summed over its instances (set in S_TICKS, S_HWM)
  guest 60 "sh /bench/stat.sh" || abort "stat.sh failed in the guest"
  S_LINES=$(printf '%s\n' "$GOUT" | grep "^@@S $1\.")
  S_TICKS=$(printf '%s\n' "$S_LINES" | sed -n 's/.* ticks=\([0-9]*\).*/\1/p' | awk '{ t += $1 } END { print t + 0 }')
}
# shellcheck disable=SC2086 # page names, one word each
for round in $(seq 1 "$ROUNDS"); do
  for scheme in http https-ec https-rsa; do
    servers="marmoset uhttpd"
    [ $((round % 2)) = 0 ] && servers="uhttpd marmoset"
    for server in $servers; do
      case $server-$scheme in
      marmoset-http) url="http://$(at 80)" service=uhttpd ;;
      marmoset-https-ec) url="https://$(at 443)" service=uhttpd ;;
      marmoset-https-rsa) url="https://$(at 4443)" service=uhttpd ;;
      uhttpd-http) url="http://$(at 8080)" service=uhttpd-openwrt ;;
      uhttpd-https-ec) url="https://$(at 8443)" service=uhttpd-openwrt ;;
      uhttpd-https-rsa) url="https://$(at 8444)" service=uhttpd-openwrt ;;
      esac
      stat_of "$service"
      before=$S_TICKS
      say "round $round, $scheme, $server ($url)"
      t0=$(now)
      LUCI_URL=$url LUCI_PASSWORD=$PASSWORD node "$BENCH/luci-guest.mjs" $PAGES >"$OUT/pages.json" 2>"$OUT/driver.log"
      drc=$?
      wall=$(elapsed "$t0" "$(now)")
      stat_of "$service"
      ticks=$((S_TICKS - before))
      sed "s/^/$round $scheme $server /" "$OUT/pages.json" >>"$ROWS"
      echo "$round $scheme $server {\"visit_s\": $wall, \"cpu_ticks\": $ticks, \"driver_rc\": $drc}" >>"$ROWS"
      [ $drc = 0 ] || { fail "round $round $scheme $server: the browser's visit failed"; cat "$OUT/driver.log" "$OUT/pages.json"; }
      awk '{ print "    " $0 }' "$OUT/pages.json"
      echo "    visit ${wall}s, server CPU $ticks ticks"
    done
  done
done
# The bulk cost of each server's TLS: LuCI's luci.js (99,444 bytes) 20 times on one connection
# (curl), over HTTP and over TLS 1.3 with AES-128-GCM (what Chromium on a CPU with AES
# instructions asks for first) and with ChaCha20-Poly1305, the ECDSA section.
for round in $(seq 1 "$ROUNDS"); do
  servers="marmoset uhttpd"
  [ $((round % 2)) = 0 ] && servers="uhttpd marmoset"
  for server in $servers; do
    for c in plain TLS_AES_128_GCM_SHA256 TLS_CHACHA20_POLY1305_SHA256; do
      case $server-$c in
      marmoset-plain) url="http://$(at 80)" service=uhttpd ;;
      marmoset-*) url="https://$(at 443)" service=uhttpd ;;
      uhttpd-plain) url="http://$(at 8080)" service=uhttpd-openwrt ;;
      uhttpd-*) url="https://$(at 8443)" service=uhttpd-openwrt ;;
      esac
      stat_of "$service"
      before=$S_TICKS
      t0=$(now)
      if [ "$c" = plain ]; then
        curl -s --fail "$url/luci-static/resources/luci.js?n=[1-20]" >/dev/null
      else
        curl -sk --fail --tlsv1.3 --tls13-ciphers "$c" "$url/luci-static/resources/luci.js?n=[1-20]" >/dev/null
      fi
      crc=$?
      wall=$(elapsed "$t0" "$(now)")
      stat_of "$service"
      ticks=$((S_TICKS - before))
      echo "$round bulk-$c $server {\"visit_s\": $wall, \"cpu_ticks\": $ticks, \"driver_rc\": $crc}" >>"$ROWS"
      [ "$crc" = 0 ] || fail "round $round: 20 x luci.js from $server over $c failed (curl $crc)"
      echo "    $server $c: 20 x luci.js in ${wall}s, server CPU $ticks ticks"
    done
  done
done
stat_of uhttpd
printf '%s\n' "$GOUT" | grep '^@@S' >"$OUT/peak.txt"
say "peak RSS: $(tr '\n' ';' <"$OUT/peak.txt")"
guest 30 "uname -a; cat /proc/cpuinfo | head -n 8; free"
printf '%s\n' "$GOUT" >"$OUT/guest-info.txt"
printf 'poweroff -f\n' >&7
python3 "$BENCH/luci-guest-report.py" "$ROWS" "$OUT/peak.txt" "$MODE, link $LINK" "$LOGIN_M" "$LOGIN_U" \
  >"$OUT/results.md" || fail "bench/luci-guest-report.py failed"
cat "$OUT/results.md"
finish
