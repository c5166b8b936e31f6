# Stand-ins for OpenWrt's /lib/functions.sh (UCI), sourced into the
# harnesses of tests/init/procd.sh and tests/init/uhttpd.sh together with
# an init script (the rules they follow: tests/init/procd.sh). Reads
# $UCI_DIR/NAME; records each config_load in $REC.
# shellcheck shell=sh disable=SC2034,SC2154,SC2015 # set through eval
_uq() { echo "$1" | sed "s/^'\(.*\)'\$/\1/; s/^\"\(.*\)\"\$/\1/"; }
config_load() {
	_sect="" _SECTIONS=""
	while read -r _kw _a _b || [ -n "$_kw" ]; do
		_a=$(_uq "$_a")
		_b=$(_uq "$_b")
		case $_kw in
		config)
			_sect=$_b
			_SECTIONS="$_SECTIONS $_sect"
			eval "CONFIG_${_sect}_TYPE=\$_a"
			;;
		option) eval "CONFIG_${_sect}_$_a=\$_b" ;;
		list)
			eval "_n=\$((\${CONFIG_${_sect}_${_a}_LENGTH:-0} + 1))"
			eval "CONFIG_${_sect}_${_a}_LENGTH=\$_n; CONFIG_${_sect}_${_a}_ITEM$_n=\$_b"
			eval "CONFIG_${_sect}_$_a=\"\${CONFIG_${_sect}_$_a:+\$CONFIG_${_sect}_$_a }\$_b\""
			;;
		esac
	done <"$UCI_DIR/$1"
	# Values the file format above cannot hold (a newline, as `uci set`
	# stores one), as shell assignments.
	if [ -f "$UCI_DIR/$1.sh" ]; then
		# shellcheck disable=SC1090 # written by the test
		. "$UCI_DIR/$1.sh"
	fi
	echo "config_load $*" >>"$REC"
}
config_get() {
	case $# in
	2|3) [ $# = 3 ] && [ -n "$3" ] || { eval "echo \"\${CONFIG_$1_$2-}\""; return; } ;;
	esac
	eval "$1=\${CONFIG_$2_$3:-\${4-}}"
}
config_get_bool() {
	config_get _b "$2" "$3" "${4-}"
	case $_b in
	1|on|true|yes|enabled) _b=1 ;;
	0|off|false|no|disabled) _b=0 ;;
	*) _b=${4-} ;;
	esac
	eval "$1=\$_b"
}
config_list_foreach() {
	_s=$1 _o=$2 _f=$3
	shift 3
	eval "_len=\${CONFIG_${_s}_${_o}_LENGTH:-0}"
	_i=1
	while [ "$_i" -le "$_len" ]; do
		eval "_item=\$CONFIG_${_s}_${_o}_ITEM$_i"
		"$_f" "$_item" "$@"
		_i=$((_i + 1))
	done
}
config_foreach() { # FUNC TYPE ARGS...
	_fn=$1 _ty=$2
	shift 2
	for _s in $_SECTIONS; do
		eval "_t=\$CONFIG_${_s}_TYPE"
		[ "$_t" = "$_ty" ] && "$_fn" "$_s" "$@"
	done
}
