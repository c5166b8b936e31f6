#!/bin/sh
# Runs the shipped SysV script init/S50marmoset against the real binary, once
# with Debian's start-stop-daemon and dash, once in a BusyBox userland (busybox
# sh + applets only), then `systemd-analyze verify` on init/marmoset.service.
# Needs root (installs busybox, curl, systemd when missing).
# Env: MARMOSET_BIN (default ${CARGO_TARGET_DIR:-target}/release/marmoset,
# built when missing). Last line: "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1

# shellcheck source=tests/results.sh
. tests/results.sh

if [ "$(id -u)" != 0 ]; then
	echo "tests/init/sysv.sh: must run as root"
	echo "0 passed, 1 failed"
	exit 1
fi

need_pkgs=""
command -v busybox >/dev/null || need_pkgs="$need_pkgs busybox"
command -v curl >/dev/null || need_pkgs="$need_pkgs curl"
command -v systemd-analyze >/dev/null || need_pkgs="$need_pkgs systemd"
command -v start-stop-daemon >/dev/null || need_pkgs="$need_pkgs dpkg"
if [ -n "$need_pkgs" ]; then
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086
	apt-get install -y -qq $need_pkgs >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq $need_pkgs >/dev/null; }
fi

BIN=${MARMOSET_BIN:-${CARGO_TARGET_DIR:-target}/release/marmoset}
if [ ! -x "$BIN" ]; then
	cargo build --release --locked || { echo "0 passed, 1 failed"; exit 1; }
fi
BIN=$(readlink -f "$BIN")

TMP=$(mktemp -d /tmp/marmoset-sysv.XXXXXX)
cleanup() {
	if [ -f "$TMP/marmoset.pid" ]; then
		kill "$(cat "$TMP/marmoset.pid")" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The shipped script, with only the defaults file redirected to a temp file.
sed "s|/etc/default/\$DAEMON|$TMP/default|g" init/S50marmoset >"$TMP/S50marmoset"
check "defaults path redirected in the test copy" grep -q "$TMP/default" "$TMP/S50marmoset"
check "rootfs-overlay/etc/init.d/S50marmoset is identical to init/S50marmoset" \
	cmp -s init/S50marmoset rootfs-overlay/etc/init.d/S50marmoset
check "init/S50marmoset parses (sh -n)" sh -n init/S50marmoset
check "shipped marmoset.conf passes --check-config" \
	"$BIN" --check-config --config rootfs-overlay/etc/marmoset/marmoset.conf

mkdir -p "$TMP/www" "$TMP/bb"
TOKEN="marmoset-sysv-$$"
echo "$TOKEN" >"$TMP/www/index.html"
: >"$TMP/test.conf"
echo "bogus-key-for-test 1" >"$TMP/bad.conf"
busybox --install -s "$TMP/bb"

PORT=
write_defaults() { # write_defaults CONF
	PORT=$(free_port)
	cat >"$TMP/default" <<EOT
EXEC="$BIN"
PIDFILE="$TMP/marmoset.pid"
MARMOSET_ARGS="--config $1 --root $TMP/www --listen 127.0.0.1:$PORT"
EOT
}

# Wait (at most 10 s) until the server answers with the token.
serving() { eventually 10 answers_token; }
answers_token() { [ "$(curl -s --max-time 2 "http://127.0.0.1:$PORT/index.html")" = "$TOKEN" ]; }
# Alive and not a zombie: in a container, pid 1 may never reap the daemon
# that start-stop-daemon --background detached.
alive() {
	[ -r "/proc/$1/stat" ] || return 1
	st=$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)
	[ "$st" != Z ] && [ "$st" != X ]
}
pid_now() { cat "$TMP/marmoset.pid" 2>/dev/null; }

# run_suite NAME SHELL PATH
run_suite() {
	name=$1 sh_=$2 path=$3
	initd() { PATH=$path $sh_ "$TMP/S50marmoset" "$@"; }
	write_defaults "$TMP/test.conf"

	out=$(initd start); rc=$?
	check "[$name] start exits 0" [ $rc = 0 ]
	check "[$name] start prints 'Starting marmoset: OK'" [ "$out" = "Starting marmoset: OK" ]
	pid=$(pid_now)
	check "[$name] pidfile written, process alive" alive "${pid:-none}"
	check "[$name] serves HTTP" serving
	# (after it serves: Debian's start-stop-daemon writes the pidfile
	# before it execs)
	check "[$name] pid is the marmoset binary itself" \
		[ "$(readlink "/proc/${pid:-none}/exe")" = "$BIN" ]
	out=$(initd status); rc=$?
	check "[$name] status exits 0 and names the pid" \
		[ $rc = 0 ] && [ "$out" = "marmoset is running (pid $pid)" ]
	out=$(initd start); rc=$?
	check "[$name] second start fails (already running)" [ $rc != 0 ]
	check "[$name] second start left the first process alone" alive "${pid:-none}"

	out=$(initd reload); rc=$?
	check "[$name] reload prints OK" [ $rc = 0 ] && [ "$out" = "Reloading marmoset: OK" ]
	sleep 0.3
	check "[$name] same process after reload" [ "$(pid_now)" = "$pid" ] && alive "$pid"
	check "[$name] still serving after reload" serving

	out=$(initd restart); rc=$?
	check "[$name] restart exits 0" [ $rc = 0 ]
	check "[$name] restart prints stop then start" \
		[ "$out" = "Stopping marmoset: OK
Starting marmoset: OK" ]
	check "[$name] old process gone after restart" eval "! alive $pid"
	pid2=$(pid_now)
	check "[$name] new process after restart" [ -n "$pid2" ] && [ "$pid2" != "$pid" ] && alive "$pid2"
	check "[$name] serves HTTP after restart" serving

	out=$(initd stop); rc=$?
	check "[$name] stop prints OK" [ $rc = 0 ] && [ "$out" = "Stopping marmoset: OK" ]
	# No waiting here: stop must only return once the process is gone.
	check "[$name] process gone when stop returns" eval "! alive $pid2"
	check "[$name] pidfile removed" [ ! -e "$TMP/marmoset.pid" ]
	out=$(initd status); rc=$?
	check "[$name] status exits 3 when stopped" [ $rc = 3 ] && [ "$out" = "marmoset is not running" ]
	out=$(initd stop); rc=$?
	check "[$name] stop when stopped fails" [ $rc != 0 ] && [ "$out" = "Stopping marmoset: FAIL" ]

	write_defaults "$TMP/bad.conf"
	out=$(initd start 2>/dev/null); rc=$?
	check "[$name] start with a bad config prints FAIL" [ $rc != 0 ] && [ "$out" = "Starting marmoset: FAIL" ]
	check "[$name] nothing started with a bad config" [ ! -e "$TMP/marmoset.pid" ]
	rm -f "$TMP/marmoset.pid"
}

run_suite debian /bin/sh "$(dirname "$(command -v start-stop-daemon)"):/usr/bin:/bin:/usr/sbin:/sbin"
run_suite busybox "$(command -v busybox) sh" "$TMP/bb"

# systemd unit: verified in a scratch root holding the unit, the binary
# (ExecStart must be executable) and the distribution's units.
R=$TMP/root
mkdir -p "$R/usr/bin" "$R/bin" "$R/etc/systemd/system" "$R/usr/lib/systemd"
cp "$BIN" "$R/usr/bin/marmoset"
printf '#!/bin/sh\nexec kill "$@"\n' >"$R/bin/kill" # must only exist
chmod +x "$R/bin/kill"
cp -r /lib/systemd/system "$R/usr/lib/systemd/"
cp init/marmoset.service "$R/etc/systemd/system/"
out=$(systemd-analyze verify --root="$R" marmoset.service 2>&1); rc=$?
[ -z "$out" ] || echo "$out"
check "systemd-analyze verify marmoset.service: exit 0, no warnings" [ $rc = 0 ] && [ -z "$out" ]
exposure=$(systemd-analyze security --offline=yes --root="$R" marmoset.service 2>/dev/null |
	sed -n 's/.*Overall exposure level for marmoset.service: \([0-9.]*\).*/\1/p')
echo "systemd-analyze security exposure: ${exposure:-?}"
check "systemd exposure level below 2.0 (got ${exposure:-?})" \
	awk -v e="${exposure:-99}" 'BEGIN { exit !(e < 2.0) }'
# shellcheck disable=SC2016 # literal $MAINPID
for k in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
	CapabilityBoundingSet=CAP_NET_BIND_SERVICE AmbientCapabilities=CAP_NET_BIND_SERVICE \
	User=marmoset Group=marmoset Restart=on-failure 'ExecReload=/bin/kill -HUP $MAINPID'; do
	check "unit has $k" grep -qx "$k" init/marmoset.service
done

echo "$pass passed, $fail failed"
[ $fail = 0 ]
