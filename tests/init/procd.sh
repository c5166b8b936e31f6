#!/bin/sh
# Checks the OpenWrt procd script init/marmoset.init without OpenWrt: it is
# sourced against stand-in config_* (reading a UCI file) and procd_*
# functions that record what procd would get, under dash and busybox sh
# (OpenWrt's shell is BusyBox ash). The recorded command line is then checked
# and, with the real binary, validated by `marmoset --check-config`.
# Env: MARMOSET_BIN (default ${CARGO_TARGET_DIR:-target}/release/marmoset,
# built when missing). Last line: "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() {
	d=$1; shift
	if "$@"; then ok "$d"; else bad "$d"; return 1; fi
}

if ! command -v busybox >/dev/null; then
	apt-get install -y -qq busybox >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq busybox >/dev/null; }
fi

TMP=$(mktemp -d /tmp/marmoset-procd.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# The harness, sourced by a shell together with the init script.
cat >"$TMP/harness.sh" <<'EOF_H'
# Stand-ins for OpenWrt's /lib/functions.sh (UCI) and procd.sh.
# UCI values are kept as shell variables CFG_<section>_<option>; a list
# keeps its items separated by newlines.
config_load() {
	sect=""
	while read -r kw a b || [ -n "$kw" ]; do
		a=$(echo "$a" | sed "s/^'\(.*\)'\$/\1/")
		b=$(echo "$b" | sed "s/^'\(.*\)'\$/\1/")
		case $kw in
		config) sect=$b ;;
		option) eval "CFG_${sect}_$a=\$b" ;;
		list)
			eval "cur=\${CFG_${sect}_$a-}"
			if [ -n "$cur" ]; then
				eval "CFG_${sect}_$a=\"\$cur
\$b\""
			else
				eval "CFG_${sect}_$a=\$b"
			fi
			;;
		esac
	done <"$UCI_FILE"
	echo "config_load $1" >>"$REC"
}
config_get() {
	eval "_v=\${CFG_$2_$3-\${4-}}"
	eval "$1=\$_v"
}
config_get_bool() {
	config_get _b "$2" "$3" "${4-0}"
	case $_b in
	1|on|true|yes|enabled) _b=1 ;;
	*) _b=0 ;;
	esac
	eval "$1=\$_b"
}
config_list_foreach() {
	eval "_l=\${CFG_$1_$2-}"
	[ -n "$_l" ] || return 0
	_ifs=$IFS
	IFS='
'
	for _i in $_l; do
		IFS=$_ifs
		"$3" "$_i"
	done
	IFS=$_ifs
}
procd_open_instance() { echo "open_instance" >>"$REC"; }
procd_close_instance() { echo "close_instance" >>"$REC"; }
procd_set_param() {
	_p=$1; shift
	if [ "$_p" = command ]; then
		: >"$CMD"
		for _a in "$@"; do printf '%s\n' "$_a" >>"$CMD"; done
	else
		echo "param $_p $*" >>"$REC"
	fi
}
procd_append_param() {
	_p=$1; shift
	[ "$_p" = command ] || { echo "append $_p $*" >>"$REC"; return; }
	for _a in "$@"; do printf '%s\n' "$_a" >>"$CMD"; done
}
procd_add_reload_trigger() { echo "reload_trigger $*" >>"$REC"; }
. "$INIT"
echo "START=$START USE_PROCD=$USE_PROCD" >>"$REC"
start_service
service_triggers
EOF_H

# run SHELL UCI_FILE: leaves $TMP/rec and $TMP/cmd
run() {
	: >"$TMP/rec"; : >"$TMP/cmd"
	REC=$TMP/rec CMD=$TMP/cmd UCI_FILE=$2 INIT=init/marmoset.init $1 "$TMP/harness.sh"
}
has() { grep -qxF "$1" "$TMP/rec"; }
cmdline() { tr '\n' ' ' <"$TMP/cmd" | sed 's/ $//'; }

check "init/marmoset.init parses (sh -n)" sh -n init/marmoset.init
check "init/marmoset.init parses (busybox sh -n)" busybox sh -n init/marmoset.init
check "shebang is '#!/bin/sh /etc/rc.common'" \
	[ "$(head -n1 init/marmoset.init)" = "#!/bin/sh /etc/rc.common" ]

cat >"$TMP/custom.uci" <<'EOT'
config marmoset 'main'
	option enabled '1'
	list listen '127.0.0.1:8081'
	option root '/srv/www'
	option server_name 'off'
	option keepalive_timeout '3'
	option index 'index.html index.htm'
	option syslog '0'
EOT
sed "s/option enabled '1'/option enabled '0'/" init/marmoset.uci >"$TMP/disabled.uci"

DEFAULT_CMD="/usr/bin/marmoset --listen 0.0.0.0:8080 --listen [::]:8080 --root /www --workers 1 --user nobody --group nogroup --log-level info --access-log off --max-connections 64 --syslog"

for sh_ in sh "busybox sh"; do
	run "$sh_" init/marmoset.uci
	check "[$sh_] default UCI: command line" [ "$(cmdline)" = "$DEFAULT_CMD" ] ||
		echo "     got: $(cmdline)"
	check "[$sh_] config_load marmoset" has "config_load marmoset"
	check "[$sh_] START=50 USE_PROCD=1" has "START=50 USE_PROCD=1"
	check "[$sh_] one instance opened and closed" \
		[ "$(grep -c '^open_instance$' "$TMP/rec")" = 1 ] && has close_instance
	check "[$sh_] respawn" grep -q '^param respawn' "$TMP/rec"
	check "[$sh_] stderr 1" has "param stderr 1"
	check "[$sh_] marmoset.conf watched" has "param file /etc/marmoset/marmoset.conf"
	check "[$sh_] reload trigger on 'marmoset'" has "reload_trigger marmoset"

	run "$sh_" "$TMP/custom.uci"
	check "[$sh_] custom UCI: underscores become dashes, no --syslog" \
		[ "$(cmdline)" = "/usr/bin/marmoset --listen 127.0.0.1:8081 --root /srv/www --server-name off --keepalive-timeout 3 --index index.html index.htm" ]
	check "[$sh_] a value with spaces stays one argument" grep -qxF "index.html index.htm" "$TMP/cmd"

	run "$sh_" "$TMP/disabled.uci"
	check "[$sh_] enabled '0': no instance" eval '! has open_instance'
done

# The flags the script produces must be accepted by the real binary.
BIN=${MARMOSET_BIN:-${CARGO_TARGET_DIR:-target}/release/marmoset}
if [ ! -x "$BIN" ]; then
	cargo build --release --locked >&2 || bad "cargo build"
fi
if [ -x "$BIN" ]; then
	run sh init/marmoset.uci
	# shellcheck disable=SC2046 # one argument a line, none with spaces
	set -- $(tail -n +2 "$TMP/cmd")
	: >"$TMP/empty.conf"
	check "default UCI flags pass '$BIN --check-config'" \
		"$BIN" --check-config --config "$TMP/empty.conf" "$@"
	run sh "$TMP/custom.uci"
	IFS='
'
	# shellcheck disable=SC2046
	set -- $(tail -n +2 "$TMP/cmd")
	IFS=' 	
'
	check "custom UCI flags pass '$BIN --check-config'" \
		"$BIN" --check-config --config "$TMP/empty.conf" "$@"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
