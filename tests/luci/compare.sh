#!/usr/bin/env bash
# marmoset against uhttpd, on one real ubusd and rpcd with LuCI's rpcd plugins, each server set up as
# OpenWrt's default /etc/config/uhttpd sets it (a ubus endpoint, LuCI in a warm ucode interpreter):
# - the ubus endpoint: tests/luci/compare.py sends each exchange to both, and the answers must match
#   (its header lists them);
# - LuCI's pages: tests/luci/pages.py loads the same pages through both (the login page, a wrong and
#   the right password, the admin pages, the logout), uhttpd running LuCI in-process (`-o /cgi-bin/luci
#   -O /usr/share/ucode/luci/uhttpd.uc`), marmoset through `scgi /cgi-bin/luci unix:SOCKET` and
#   board/openwrt/marmoset/files/luci-scgi.uc, started as marmoset-uhttpd's init script starts it. The
#   answers must be identical but for the session id and CSRF token of each server's own login
#   (masked) and the fields Date, Server, Connection, Keep-Alive, Transfer-Encoding and Content-Length
#   (its header says more).
#
#   OPENWRT_STACK_DIR=/path tests/luci/compare.sh
#
# OPENWRT_STACK_DIR holds an OpenWrt web stack already built for this machine (board/openwrt/stack.sh
# builds one), in root/: an OpenWrt file layout (sbin/ubusd, sbin/rpcd, sbin/uhttpd or bin/uhttpd,
# bin/ucode; usr/lib with libubox, libubus, libuci, libucode, uhttpd's ucode and ubus plugins, rpcd's
# plugins and ucode's modules; usr/share/rpcd/acl.d; LuCI under www and usr/share/ucode/luci;
# etc with config/rpcd granting root a login and shadow holding root's password) whose usr/bin,
# usr/sbin, usr/lib/MULTIARCH and usr/lib64 are empty directories: the host's are bound there read-only.
# On a merged-/usr host the loader is an absolute link into /lib/MULTIARCH: when root/lib is a directory
# of its own, the host's /lib/MULTIARCH is bound at root/lib/MULTIARCH too (made empty if missing).
# Nothing is fetched or built here. ubusd, rpcd, uhttpd, luci-scgi.uc and marmoset run chrooted there,
# as root, in a private mount namespace with their own /var/run and /tmp, on free ports, without
# CAP_SYS_TIME, CAP_SYS_BOOT or CAP_SYS_MODULE (LuCI's rpcd plugin can set the clock); the host's /etc
# is not used. A stack without uhttpd's ucode plugin, LuCI's uhttpd.uc, or ucode with its fs, socket
# and uloop modules skips the pages with one line.
# OPENWRT_STACK_PASSWORD: root's password in that shadow (default marmoset).
# LUCI_PAGE_LOADS=N: after the checks, each admin page is loaded N times through each server (curl, one
# after the other) and the medians printed (figures, not checks).
# LUCI_BROWSER_ROUNDS=N: then headless Chromium (bench/luci-guest.mjs, as on the MIPS guest) logs in
# and opens the admin pages through each server in turn, N rounds (the order alternating), and each
# page's median time to its last ubus answer is printed, with the time its ubus answers took to
# their first byte and from there to their last (figures, not checks).
# MARMOSET_UBUS_BIN: a marmoset built with `--features ubus`; by default the `tls,ubus` build
# marmoset-uhttpd ships, in $CARGO_TARGET_DIR/release-tls-ubus (built when out of date).
# Skips with one line and exit 77 when OPENWRT_STACK_DIR is unset or not run as root. Last line: "N passed,
# M failed"; exit 1 if any failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd -P)
cd "$repo" || exit 1
# shellcheck source=tests/results.sh
. tests/results.sh
stack=${OPENWRT_STACK_DIR:-}
if [ -z "$stack" ]; then
	skip "no OpenWrt web stack (set OPENWRT_STACK_DIR; board/openwrt/stack.sh builds one): marmoset's ubus endpoint and LuCI's pages not compared with uhttpd's"
	exit "$SKIPPED"
fi
if [ "$(id -u)" != 0 ]; then
	skip "not root (a mount namespace and chroot are needed): ubus endpoint and LuCI's pages not compared with uhttpd's"
	exit "$SKIPPED"
fi
root=$stack/root
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
# uhttpd's cmake build installs it in bin/, OpenWrt's package in sbin/.
uhttpd=sbin/uhttpd
[ -e "$root/$uhttpd" ] || [ ! -e "$root/bin/uhttpd" ] || uhttpd=bin/uhttpd
missing=""
for f in sbin/ubusd sbin/rpcd "$uhttpd" www/cgi-bin/luci etc/config/rpcd etc/shadow usr/share/rpcd/acl.d \
	usr/bin usr/sbin "usr/lib/$multiarch"; do
	[ -e "$root/$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
	bad "OPENWRT_STACK_DIR=$stack: root/ lacks$missing"
	echo "$pass passed, $fail failed"
	exit 1
fi

# LuCI's pages need uhttpd's ucode plugin, and ucode with the modules luci-scgi.uc uses.
ucode=""
for f in bin/ucode sbin/ucode; do [ -x "$root/$f" ] && ucode=/$f && break; done
pages=""
[ -n "$ucode" ] || pages=" bin/ucode"
for f in usr/lib/uhttpd_ucode.so usr/share/ucode/luci/uhttpd.uc usr/lib/ucode/fs.so usr/lib/ucode/socket.so \
	usr/lib/ucode/uloop.so; do
	[ -e "$root/$f" ] || pages="$pages $f"
done

tgt=${CARGO_TARGET_DIR:-target}
work=$(mktemp -d)
pids=()
holder=""
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	if [ -n "$holder" ]; then
		kill "$holder" 2>/dev/null
		wait "$holder" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT

bin=${MARMOSET_UBUS_BIN:-}
if [ -z "$bin" ]; then
	echo "cargo build --release --locked --features tls,ubus"
	CARGO_TARGET_DIR=$tgt/release-tls-ubus cargo build --release --locked --quiet --features tls,ubus ||
		{ bad "cargo build --features tls,ubus"; echo "$pass passed, $fail failed"; exit 1; }
	bin=$tgt/release-tls-ubus/release/marmoset
fi

ref_port=$(free_port)
mar_port=$(free_port)
mkdir -p "$work/run/ubus"
mkdir -p "$work/run/bin"
cp "$bin" "$work/run/bin/marmoset"
cat >"$work/run/marmoset.conf" <<EOF
listen 127.0.0.1:$mar_port
root /www
cgi-prefix /cgi-bin/
ubus /ubus /var/run/ubus/ubus.sock
EOF
# As marmoset-uhttpd's init script maps OpenWrt's default ucode_prefix.
scgi_sock=/var/run/marmoset/uhttpd-main-ucode1.sock
luci_prefix=()
if [ -z "$pages" ]; then
	echo "scgi /cgi-bin/luci unix:$scgi_sock" >>"$work/run/marmoset.conf"
	mkdir -p "$work/run/marmoset"
	cp board/openwrt/marmoset/files/luci-scgi.uc "$work/run/luci-scgi.uc"
	luci_prefix=(-o /cgi-bin/luci -O /usr/share/ucode/luci/uhttpd.uc)
fi

# The namespace: host programs and libraries bound read-only into the root, its own /proc, /var/run
# (this run's scratch directory: the socket and marmoset) and /tmp; then it waits to be killed.
# shellcheck disable=SC2016 # expanded by the inner shell, from its arguments
unshare --mount --propagation private -- /bin/bash -c '
	set -e
	R=$1 W=$2 M=$3
	for d in usr/bin usr/sbin usr/lib/$M usr/lib64; do
		[ -d "$R/$d" ] && [ -d "/$d" ] || continue
		mount --bind "/$d" "$R/$d"
		mount -o remount,bind,ro "$R/$d"
	done
	# The loader the host names (/lib64/ld-linux-x86-64.so.2) may be a link to /lib/$M/...: the
	# root needs that path. Not through a link in the root, which could lead out of it.
	if [ -d "/lib/$M" ] && [ -d "$R/lib" ] && [ ! -L "$R/lib" ] && [ ! -L "$R/lib/$M" ] &&
		{ [ ! -e "$R/lib/$M" ] || [ -z "$(ls -A "$R/lib/$M")" ]; }; then
		mkdir -p "$R/lib/$M"
		mount --bind "/lib/$M" "$R/lib/$M"
		mount -o remount,bind,ro "$R/lib/$M"
	fi
	mount --rbind /dev "$R/dev"
	mount -t proc proc "$R/proc"
	mount -t tmpfs -o size=64m tmpfs "$R/tmp"
	mount --bind "$W/run" "$R/var/run"
	touch "$W/ready"
	exec sleep infinity' ns "$root" "$work" "$multiarch" &
holder=$!
for _ in $(seq 100); do [ -f "$work/ready" ] && break; sleep 0.1; done
[ -f "$work/ready" ] || { bad "mount namespace set up"; echo "$pass passed, $fail failed"; exit 1; }

# in_ns LOG COMMAND...: runs COMMAND chrooted in the namespace, in the background; its pid (the
# command's own: nsenter, setpriv, chroot and env exec each other) is kept for the cleanup.
in_ns() {
	local log=$1
	shift
	nsenter --mount="/proc/$holder/ns/mnt" -- setpriv --bounding-set -sys_time,-sys_boot,-sys_module -- \
		chroot "$root" /usr/bin/env -i PATH=/sbin:/usr/sbin:/bin:/usr/bin HOME=/root "$@" >"$work/$log" 2>&1 &
	pids+=($!)
}
wait_for() { # DESC SECONDS COMMAND...: waits for COMMAND to succeed
	local desc=$1
	shift
	eventually "$@" || { bad "$desc"; return 1; }
}
answers() { curl -s -o /dev/null -m 2 "$1"; }

in_ns ubusd.log /sbin/ubusd -s /var/run/ubus/ubus.sock
wait_for "ubusd socket" 10 test -S "$work/run/ubus/ubus.sock" || { echo "$pass passed, $fail failed"; exit 1; }
in_ns rpcd.log /sbin/rpcd -s /var/run/ubus/ubus.sock -t 30
in_ns uhttpd.log "/$uhttpd" -f -h /www -x /cgi-bin -u /ubus -U /var/run/ubus/ubus.sock -t 60 -T 30 -k 20 \
	-A 1 -n 3 -N 100 -R "${luci_prefix[@]}" -p "127.0.0.1:$ref_port"
in_ns marmoset.log /var/run/bin/marmoset --config /var/run/marmoset.conf
[ -n "$pages" ] ||
	in_ns luci-scgi.log "$ucode" /var/run/luci-scgi.uc "$scgi_sock" /usr/share/ucode/luci/uhttpd.uc
login='{"jsonrpc":"2.0","id":1,"method":"call","params":["00000000000000000000000000000000","session","login",{"username":"root","password":"x"}]}'
rpcd_up() { curl -s -m 2 -H 'Content-Type: application/json' -d "$login" "http://127.0.0.1:$ref_port/ubus" | grep -q '"result"'; }
wait_for "uhttpd answers" 10 answers "http://127.0.0.1:$ref_port/" &&
	wait_for "marmoset answers" 10 answers "http://127.0.0.1:$mar_port/" &&
	wait_for "rpcd's session object on the bus" 10 rpcd_up &&
	{ [ -n "$pages" ] || wait_for "luci-scgi.uc's socket" 10 test -S "$work/run/marmoset/${scgi_sock##*/}"; }
if [ "$fail" != 0 ]; then
	tail -n 5 "$work"/*.log
	echo "$pass passed, $fail failed"
	exit 1
fi
ok "ubusd, rpcd, uhttpd (127.0.0.1:$ref_port) and marmoset (127.0.0.1:$mar_port) started"

# add_counts OUTPUT: prints a script's lines but its last, and adds that "N passed, M failed" line's counts.
add_counts() {
	local last
	echo "$1" | sed '$d'
	last=$(echo "$1" | tail -n 1)
	case $last in
	*" passed, "*" failed") ;;
	*) bad "no count at the end: $last"; return ;;
	esac
	pass=$((pass + ${last%% passed*}))
	fail=$((fail + $(echo "$last" | sed -n 's/.*, \([0-9]*\) failed/\1/p')))
}
add_counts "$(python3 tests/luci/compare.py "http://127.0.0.1:$ref_port" "http://127.0.0.1:$mar_port" \
	"${OPENWRT_STACK_PASSWORD:-marmoset}")"
if [ -n "$pages" ]; then
	skip "OPENWRT_STACK_DIR=$stack: root/ lacks$pages: LuCI's pages not compared with uhttpd's"
else
	add_counts "$(python3 tests/luci/pages.py "http://127.0.0.1:$ref_port" "http://127.0.0.1:$mar_port" \
		"${OPENWRT_STACK_PASSWORD:-marmoset}" "${LUCI_PAGE_LOADS:-0}")"
fi
if [ -z "$pages" ] && [ "${LUCI_BROWSER_ROUNDS:-0}" -gt 0 ]; then
	# The login lands on Status -> Overview; it is opened again on its own at the end.
	browser_pages="admin/status/overview admin/system/system admin/network/network admin/system/admin admin/status/processes admin/status/overview"
	: >"$work/browser.rows"
	for round in $(seq "$LUCI_BROWSER_ROUNDS"); do
		order="uhttpd marmoset"
		[ $((round % 2)) = 0 ] && order="marmoset uhttpd"
		for server in $order; do
			port=$ref_port
			[ "$server" = marmoset ] && port=$mar_port
			# shellcheck disable=SC2086 # page names, one word each
			LUCI_URL=http://127.0.0.1:$port LUCI_PASSWORD=${OPENWRT_STACK_PASSWORD:-marmoset} \
				node bench/luci-guest.mjs $browser_pages >"$work/browser.out" 2>"$work/browser.log" ||
				bad "Chromium's visit through $server, round $round" || cat "$work/browser.log"
			sed "s/^/$server /" "$work/browser.out" >>"$work/browser.rows"
		done
	done
	python3 - "$work/browser.rows" <<'EOF'
import json, statistics, sys
times = {}
parts = ('ms_last_ubus', 'ubus_ms_to_first_byte', 'ubus_ms_first_to_last_byte')
for line in open(sys.argv[1]):
    server, row = line.split(' ', 1)
    row = json.loads(row)
    times.setdefault(row['page'], {}).setdefault(server, []).append([row[p] for p in parts])
for page, t in times.items():
    u, m = ([statistics.median(v[i] for v in t.get(s, [[0] * 3])) for i in range(3)]
            for s in ('uhttpd', 'marmoset'))
    print(f"time - {page}: uhttpd {u[0]:.0f} ms, marmoset {m[0]:.0f} ms to the last ubus answer; "
          f"the answers to their first byte {u[1]:.0f} and {m[1]:.0f} ms, first to last byte {u[2]:.0f} "
          f"and {m[2]:.0f} ms (summed; Chromium, median of {len(t.get('marmoset', []))} visits each)")
EOF
fi
if [ "$fail" != 0 ]; then
	echo "marmoset's log:"
	tail -n 20 "$work/marmoset.log"
	if [ -s "$work/luci-scgi.log" ]; then
		echo "luci-scgi.uc's log:"
		tail -n 20 "$work/luci-scgi.log"
	fi
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
