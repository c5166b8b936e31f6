#!/bin/sh
# Checks the OpenWrt procd script init/marmoset.init without OpenWrt: it is
# sourced against stand-ins for /lib/functions.sh (config_*) and
# /lib/functions/procd.sh (procd_*) that record what procd would get, under
# dash and busybox sh (OpenWrt's shell is BusyBox ash). Every UCI option the
# script reads gets a test printing the command line it produces; the flags
# are validated by the real binary (`marmoset --check-config`), and the
# syslog option is run against the shared marmoset.conf.
#
# The stand-ins follow the real argument conventions:
#  - config_load NAME reads /etc/config/NAME (here: $UCI_DIR/NAME) into
#    CONFIG_<section>_<option>; a list also into _ITEM1.._LENGTH.
#  - config_get VAR SECTION OPTION [DEFAULT] (an empty value takes DEFAULT,
#    as the real `${...:-default}`); config_get SECTION OPTION prints it.
#  - config_get_bool VAR SECTION OPTION [DEFAULT]: 1|on|true|yes|enabled -> 1,
#    0|off|false|no|disabled -> 0, anything else -> DEFAULT (may be empty).
#  - config_list_foreach SECTION OPTION FUNC [ARGS...] calls FUNC ITEM ARGS...
#  - procd_open_instance [NAME] / procd_close_instance; procd_set_param TYPE
#    VALUE... replaces, procd_append_param TYPE VALUE... adds. Array types
#    (command netdev file respawn watch watchdog) keep every argument, empty
#    ones too, as one element each; table types (env data limits) take
#    KEY=VALUE; any other type is a single string: only its first value.
#  - procd_add_reload_trigger CONFIG... : one config.change trigger each.
# Not covered (no OpenWrt tree or procd here): the uci CLI's own parsing and
# quoting, jshn/ubus (the JSON procd really receives), rc.common (enable,
# boot, the start/stop/reload verbs), procd's respawn timing and logd, and
# reload_config; the stand-ins are stricter than procd where noted
# (set/append outside an instance, extra values to a string type are errors).
# Env: MARMOSET_BIN (default ${CARGO_TARGET_DIR:-target}/release/marmoset,
# built when missing). Last line: "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1

# shellcheck source=tests/results.sh
. tests/results.sh

if ! command -v busybox >/dev/null; then
	apt-get install -y -qq busybox >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq busybox >/dev/null; }
fi

TMP=$(mktemp -d /tmp/marmoset-procd.XXXXXX)
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT

# The harness, sourced by a shell together with the init script.
{
	cat tests/init/uci-standin.sh
	cat <<'EOF_H'
# --- /lib/functions/procd.sh stand-ins. $CMD gets the command, one
# argument a line; everything else goes to $REC.
_instance=""
procd_open_instance() {
	[ -z "$_instance" ] || echo "error open_instance inside an instance" >>"$REC"
	_instance=${1:-instance1}
	echo "open_instance $_instance" >>"$REC"
}
procd_close_instance() {
	[ -n "$_instance" ] || echo "error close_instance without an instance" >>"$REC"
	_instance=""
	echo "close_instance" >>"$REC"
}
_procd_param() { # set|append TYPE VALUE...
	_op=$1 _t=$2
	shift 2
	[ -n "$_instance" ] || { echo "error $_op $_t outside an instance" >>"$REC"; return; }
	case $_t in
	command)
		[ "$_op" = set ] && : >"$CMD"
		while [ "$#" -gt 0 ]; do printf '%s\n' "$1" >>"$CMD"; shift; done
		;;
	netdev|file|respawn|watch|watchdog|env|data|limits)
		echo "$_op $_t $*" >>"$REC"
		;;
	*)
		[ "$#" -le 1 ] || echo "error $_t takes one value, got $#" >>"$REC"
		echo "$_op $_t ${1-}" >>"$REC"
		;;
	esac
}
procd_set_param() { _procd_param set "$@"; }
procd_append_param() { _procd_param append "$@"; }
procd_add_reload_trigger() {
	for _c in "$@"; do echo "reload_trigger $_c" >>"$REC"; done
}
. "$INIT"
echo "START=$START STOP=$STOP USE_PROCD=$USE_PROCD" >>"$REC"
start_service
service_triggers
EOF_H
} >"$TMP/harness.sh"

# run SHELL UCI_FILE: leaves $TMP/rec and $TMP/cmd
run() {
	rm -rf "$TMP/etc-config"
	mkdir -p "$TMP/etc-config"
	cp "$2" "$TMP/etc-config/marmoset"
	: >"$TMP/rec"; : >"$TMP/cmd"
	REC=$TMP/rec CMD=$TMP/cmd UCI_DIR=$TMP/etc-config INIT=init/marmoset.init $1 "$TMP/harness.sh"
}
has() { grep -qxF "$1" "$TMP/rec"; }
cmdline() { tr '\n' ' ' <"$TMP/cmd" | sed 's/ $//'; }
uci() { # uci FILE LINE...: a config file with section main and these lines
	_f=$1; shift
	echo "config marmoset 'main'" >"$_f"
	for _l in "$@"; do printf '\t%s\n' "$_l" >>"$_f"; done
}
# option SHELL DESCRIPTION EXPECTED-ARGS LINE...: the command line for a
# section holding only LINE... is /usr/bin/marmoset EXPECTED-ARGS.
option() {
	_sh=$1 _d=$2 _want=$3
	shift 3
	uci "$TMP/opt.uci" "$@"
	run "$_sh" "$TMP/opt.uci"
	_exp="/usr/bin/marmoset $_want"
	if [ "$(cmdline)" = "$_exp" ] && not grep -q '^error' "$TMP/rec"; then
		ok "[$_sh] $_d -> $(cmdline | sed 's|^/usr/bin/marmoset ||')"
	else
		bad "[$_sh] $_d"
		echo "     want: $_exp"
		echo "     got:  $(cmdline)"
		grep '^error' "$TMP/rec" | sed 's/^/     /'
	fi
}

check "init/marmoset.init parses (sh -n)" sh -n init/marmoset.init
check "init/marmoset.init parses (busybox sh -n)" busybox sh -n init/marmoset.init
check "shebang is '#!/bin/sh /etc/rc.common'" \
	[ "$(head -n1 init/marmoset.init)" = "#!/bin/sh /etc/rc.common" ]

# Every option of the shipped UCI file is one the script reads.
# shellcheck disable=SC2013 # option names, one word each
for o in $(sed -n "s/^[[:space:]]*\(option\|list\) \([a-z_]*\) .*/\2/p" init/marmoset.uci | sort -u); do
	case $o in
	enabled|listen|root|syslog) ;;
	*) check "UCI option '$o' is passed on by the script" grep -q "[ 	]$o\( \|\$\)" init/marmoset.init ;;
	esac
done

sed "s/option enabled '1'/option enabled '0'/" init/marmoset.uci >"$TMP/disabled.uci"
DEFAULT_CMD="/usr/bin/marmoset --listen 0.0.0.0:8080 --listen [::]:8080 --root /www-marmoset --user nobody --group nogroup --workers 1 --log-level info --access-log off --max-connections 64 --syslog=on"

U="--user nobody --group nogroup"
for sh_ in sh "busybox sh"; do
	run "$sh_" init/marmoset.uci
	check "[$sh_] shipped UCI: $(cmdline)" [ "$(cmdline)" = "$DEFAULT_CMD" ] ||
		echo "     want: $DEFAULT_CMD"
	check "[$sh_] config_load marmoset" has "config_load marmoset"
	check "[$sh_] START=50 STOP=50 USE_PROCD=1" has "START=50 STOP=50 USE_PROCD=1"
	check "[$sh_] one instance opened and closed" \
		[ "$(grep -c '^open_instance' "$TMP/rec") $(grep -c '^close_instance' "$TMP/rec")" = "1 1" ]
	check "[$sh_] no stand-in errors (params inside the instance)" not grep -q '^error' "$TMP/rec" ||
		grep '^error' "$TMP/rec" | sed 's/^/     /'
	check "[$sh_] respawn 3600 5 5 (threshold, timeout, retry)" has "set respawn 3600 5 5"
	check "[$sh_] stderr 1" has "set stderr 1"
	check "[$sh_] marmoset.conf watched" has "set file /etc/marmoset/marmoset.conf"
	check "[$sh_] reload trigger on 'marmoset'" has "reload_trigger marmoset"

	# One test per option: the command line it produces. Without user and
	# group options, OpenWrt's nobody/nogroup (marmoset.conf's www-data is
	# no OpenWrt user).
	option "$sh_" "no options" "--root /www-marmoset $U"
	option "$sh_" "enabled '1'" "--root /www-marmoset $U" "option enabled '1'"
	run "$sh_" "$TMP/disabled.uci"
	check "[$sh_] enabled '0': no instance" not grep -q '^open_instance' "$TMP/rec"
	uci "$TMP/off.uci" "option enabled 'off'"
	run "$sh_" "$TMP/off.uci"
	check "[$sh_] enabled 'off': no instance" not grep -q '^open_instance' "$TMP/rec"
	option "$sh_" "list listen (two)" "--listen 127.0.0.1:8081 --listen [::1]:8081 --root /www-marmoset $U" \
		"list listen '127.0.0.1:8081'" "list listen '[::1]:8081'"
	option "$sh_" "root '/srv/www'" "--root /srv/www $U" "option root '/srv/www'"
	option "$sh_" "root '' (empty: the default)" "--root /www-marmoset $U" "option root ''"
	option "$sh_" "workers '2'" "--root /www-marmoset $U --workers 2" "option workers '2'"
	option "$sh_" "user 'daemon'" "--root /www-marmoset --user daemon --group nogroup" "option user 'daemon'"
	option "$sh_" "group 'daemon'" "--root /www-marmoset --user nobody --group daemon" "option group 'daemon'"
	option "$sh_" "log_level 'debug'" "--root /www-marmoset $U --log-level debug" "option log_level 'debug'"
	option "$sh_" "access_log 'syslog'" "--root /www-marmoset $U --access-log syslog" "option access_log 'syslog'"
	option "$sh_" "server_name 'off'" "--root /www-marmoset $U --server-name off" "option server_name 'off'"
	option "$sh_" "max_connections '32'" "--root /www-marmoset $U --max-connections 32" "option max_connections '32'"
	option "$sh_" "header_timeout '10'" "--root /www-marmoset $U --header-timeout 10" "option header_timeout '10'"
	option "$sh_" "keepalive_timeout '3'" "--root /www-marmoset $U --keepalive-timeout 3" "option keepalive_timeout '3'"
	option "$sh_" "send_timeout '20'" "--root /www-marmoset $U --send-timeout 20" "option send_timeout '20'"
	option "$sh_" "max_requests '100'" "--root /www-marmoset $U --max-requests 100" "option max_requests '100'"
	option "$sh_" "grace '2'" "--root /www-marmoset $U --grace 2" "option grace '2'"
	option "$sh_" "index 'index.html index.htm'" "--root /www-marmoset $U --index index.html index.htm" "option index 'index.html index.htm'"
	check "[$sh_] a value with spaces stays one argument" grep -qxF "index.html index.htm" "$TMP/cmd"
	option "$sh_" "syslog '1'" "--root /www-marmoset $U --syslog=on" "option syslog '1'"
	option "$sh_" "syslog '0'" "--root /www-marmoset $U --syslog=off" "option syslog '0'"
	option "$sh_" "syslog 'no'" "--root /www-marmoset $U --syslog=off" "option syslog 'no'"
	option "$sh_" "syslog 'maybe' (not a boolean: marmoset.conf decides)" "--root /www-marmoset $U" "option syslog 'maybe'"
done

# The flags the script produces must be accepted by the real binary.
BIN=${MARMOSET_BIN:-${CARGO_TARGET_DIR:-target}/release/marmoset}
if [ ! -x "$BIN" ]; then
	cargo build --release --locked >&2 || bad "cargo build"
fi
if [ -x "$BIN" ]; then
	: >"$TMP/empty.conf"
	mkdir -p "$TMP/www"
	echo hello >"$TMP/www/index.html"
	run sh init/marmoset.uci
	IFS='
'
	# shellcheck disable=SC2046
	set -- $(tail -n +2 "$TMP/cmd")
	IFS=' 	
'
	check "shipped UCI flags pass '$BIN --check-config'" \
		"$BIN" --check-config --config "$TMP/empty.conf" "$@" --root "$TMP/www" >/dev/null
	uci "$TMP/all.uci" "list listen '127.0.0.1:8081'" "option root '$TMP/www'" "option workers '2'" \
		"option user 'nobody'" "option group 'nogroup'" "option log_level 'debug'" \
		"option access_log 'syslog'" "option server_name 'off'" "option max_connections '32'" \
		"option header_timeout '10'" "option keepalive_timeout '3'" "option send_timeout '20'" \
		"option max_requests '100'" "option grace '2'" "option index 'index.html index.htm'" \
		"option syslog '0'"
	run sh "$TMP/all.uci"
	IFS='
'
	# shellcheck disable=SC2046
	set -- $(tail -n +2 "$TMP/cmd")
	IFS=' 	
'
	check "every option at once passes '$BIN --check-config' ($# arguments)" \
		"$BIN" --check-config --config "$TMP/empty.conf" "$@" >/dev/null

	# syslog against the shared marmoset.conf (which says `syslog on`):
	# '0' must bring the log back to stderr (procd's `stderr 1` -> logd),
	# '1' must keep it off stderr.
	for v in 0 1; do
		port=$(free_port)
		uci "$TMP/sys.uci" "list listen '127.0.0.1:$port'" "option root '$TMP/www'" "option syslog '$v'"
		run sh "$TMP/sys.uci"
		IFS='
'
		# shellcheck disable=SC2046
		set -- $(tail -n +2 "$TMP/cmd")
		IFS=' 	
'
		"$BIN" --config rootfs-overlay/etc/marmoset/marmoset.conf "$@" 2>"$TMP/stderr-$v" &
		pid=$!
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break
			sleep 0.3
		done
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	check "syslog '0' with marmoset.conf's 'syslog on': the log is on stderr" \
		grep -q 'started' "$TMP/stderr-0" || sed 's/^/     /' "$TMP/stderr-0"
	check "syslog '1': nothing on stderr (it goes to syslog)" not grep -q 'started' "$TMP/stderr-1"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
