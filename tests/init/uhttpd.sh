#!/bin/sh
# Checks init/uhttpd.init, the procd script that serves uhttpd's
# /etc/config/uhttpd with Marmoset (package marmoset-uhttpd):
#  1. sourced against stand-ins for OpenWrt's /lib/functions.sh (config_*,
#     uci_get) and procd.sh (procd_*), under dash and busybox sh, for
#     OpenWrt's default /etc/config/uhttpd (as the router has it after
#     uhttpd-mod-ubus and luci-base set their prefixes) and variants: the
#     Marmoset config each produces, line for line, and what is logged;
#  2. every produced config accepted by the real binary
#     (`marmoset --check-config`), and the server started from one answering
#     over real sockets: HTTP, HTTPS with uhttpd's DER certificate,
#     redirect_https, a certificate made from the `cert` section, a CGI;
#  3. with OPENWRT_DIR (an OpenWrt tree) and OPENWRT_STACK_DIR (OpenWrt's
#     web stack built for this machine by board/openwrt/stack.sh, whose
#     uci, jshn and jshn.sh are used): the script run as `/etc/init.d/uhttpd start`
#     under OpenWrt's own rc.common, functions.sh, uci.sh, procd.sh and
#     jshn.sh in a chroot, then the marmoset packages' /etc/init.d/marmoset
#     the same way. With procd in the stack (and ubusd), procd itself takes
#     the call: it starts the server, starts it again when it is killed,
#     restarts it on a new port after a uci change and the config.change
#     event (what LuCI's Save & Apply sends), and stops it. Without, `ubus`
#     is a stand-in recording the call, and the server is started from
#     what it recorded. Skipped with a line otherwise.
# Env: MARMOSET_BIN (a TLS build; default the `tls,ubus` build that
# marmoset-uhttpd ships, target/release-tls-ubus/release/marmoset, built
# when missing); KEEP_TMP=1 keeps the work directory. Last line:
# "N passed, M failed".
# shellcheck disable=SC2016 # all_of evaluates its argument itself
set -u
cd "$(dirname "$0")/../.." || exit 1

# shellcheck source=tests/results.sh
. tests/results.sh

TMP=$(mktemp -d /tmp/marmoset-uhttpd.XXXXXX)
chmod 755 "$TMP"
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	# And what procd started in the chroot.
	for d in /proc/[0-9]*; do
		[ "$(readlink "$d/root" 2>/dev/null)" != "$TMP/root" ] || kill -9 "${d#/proc/}" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
[ -z "${KEEP_TMP:-}" ] || trap - EXIT

# The TLS release build, where tests/run.sh's release stage puts it.
tdir=${CARGO_TARGET_DIR:-target}/release-tls-ubus
BIN=${MARMOSET_BIN:-$tdir/release/marmoset}
if [ -z "${MARMOSET_BIN-}" ]; then
	CARGO_TARGET_DIR=$tdir cargo build --release --locked --features tls,ubus >&2 ||
		bad "cargo build --release --features tls,ubus"
fi
BIN=$(cd "$(dirname "$BIN")" && pwd -P)/$(basename "$BIN")

{
	cat tests/init/uci-standin.sh
	cat <<'EOF_H'
uci_get() { # PACKAGE SECTION OPTION: system hostname and dhcp domain only
	case "$1 $3" in
	"system hostname") echo "${UCI_HOSTNAME-}" ;;
	"dhcp domain") echo "${UCI_DOMAIN-}" ;;
	esac
}
logger() { echo "logger $*" >>"$REC"; }
# --- procd.sh stand-ins: the command of each instance, one argument a line,
# goes to $REC.cmd.NAME; the rest to $REC.
_instance=""
procd_open_instance() { _instance=$1; echo "open_instance $1" >>"$REC"; : >"$REC.cmd.$1"; }
procd_close_instance() { echo "close_instance $_instance" >>"$REC"; _instance=""; }
procd_set_param() {
	_t=$1
	shift
	[ -n "$_instance" ] || { echo "error set $_t outside an instance" >>"$REC"; return; }
	case $_t in
	command) for _a in "$@"; do printf '%s\n' "$_a" >>"$REC.cmd.$_instance"; done ;;
	*) echo "set $_t $*" >>"$REC" ;;
	esac
}
procd_append_param() {
	[ -n "$_instance" ] || { echo "error append $1 outside an instance" >>"$REC"; return; }
	echo "append $*" >>"$REC"
}
procd_add_reload_trigger() { echo "reload_trigger $*" >>"$REC"; }
procd_add_raw_trigger() { echo "raw_trigger $*" >>"$REC"; }
. "$INIT"
# The paths the script writes and runs, for the test.
PROG=$TEST_PROG CONFDIR=$TEST_CONFDIR PX5G_BIN=$TEST_PX5G OPENSSL_BIN=$TEST_OPENSSL
UCODE_BIN=$TEST_UCODE UCODE_LIB=$TEST_UCODE_LIB SCGI_PROG=$TEST_SCGI RUNDIR=$TEST_RUNDIR
start_service
service_triggers
EOF_H
} >"$TMP/harness.sh"

# run SHELL UCI-FILE: the init script's start; leaves $TMP/rec*, $TMP/conf/
SH="sh"
run() {
	rm -rf "$TMP/etc-config" "$TMP/conf" "$TMP"/rec*
	mkdir -p "$TMP/etc-config"
	cp "$2" "$TMP/etc-config/uhttpd"
	[ -z "${HOSTILE-}" ] || printf '%s\n' "$HOSTILE" >"$TMP/etc-config/uhttpd.sh"
	: >"$TMP/rec"
	REC=$TMP/rec UCI_DIR=$TMP/etc-config INIT=init/uhttpd.init TEST_PROG=$BIN \
		TEST_CONFDIR=$TMP/conf TEST_PX5G=${PX5G:-/nonexistent} TEST_OPENSSL=${OPENSSL:-/nonexistent} \
		TEST_UCODE=${UCODE:-/nonexistent} TEST_UCODE_LIB=${UCODE_LIB:-/nonexistent} \
		TEST_SCGI=$PWD/board/openwrt/marmoset/files/luci-scgi.uc TEST_RUNDIR=$TMP/run \
		UCI_HOSTNAME=${UCI_HOSTNAME-OpenWrt} UCI_DOMAIN=${UCI_DOMAIN-lan} \
		$1 "$TMP/harness.sh" 2>"$TMP/stderr"
}
conf() { grep -v '^#' "$TMP/conf/uhttpd-main.conf" 2>/dev/null; }
has() { conf | grep -qxF "$1"; }
logged() { grep -qF "$1" "$TMP/rec"; }
recorded() { for _l in "$@"; do grep -qxF "$_l" "$TMP/rec" || return 1; done; }
# all_of 'A && B': one check of several conditions.
all_of() { eval "$1"; }
has_all() { # TEXT PART...
	_t=$1
	shift
	for _p in "$@"; do case $_t in *"$_p"*) ;; *) return 1 ;; esac; done
}

# OpenWrt's /etc/config/uhttpd: the package's default (openwrt
# package/network/services/uhttpd/files/uhttpd.config), with ubus_prefix as
# uhttpd-mod-ubus's uci-defaults sets it and ucode_prefix as luci-base's
# postinst adds it. Paths under $TMP so that the real binary can use them.
default_uci() { # FILE HTTP-PORT HTTPS-PORT
	cat >"$1" <<EOF
# Server configuration
config uhttpd main

	# HTTP listen addresses, multiple allowed
	list listen_http	127.0.0.1:$2
	list listen_http	[::1]:$2

	list listen_https	127.0.0.1:$3
	list listen_https	[::1]:$3
	option redirect_https	0
	option home		$TMP/www
	option rfc1918_filter 1
	option max_requests 3
	option max_connections 100
	option cert		$TMP/uhttpd.crt
	option key		$TMP/uhttpd.key
	option cgi_prefix	/cgi-bin
	list lua_prefix		"/cgi-bin/luci=/usr/lib/lua/luci/sgi/uhttpd.lua"
	option script_timeout	60
	option network_timeout	30
	option http_keepalive	20
	option tcp_keepalive	1
	option ubus_prefix	/ubus
	list ucode_prefix	'/cgi-bin/luci=/usr/share/ucode/luci/uhttpd.uc'

config cert defaults
	option days		397
	option key_type		ec
	option bits		2048
	option ec_curve		P-256
	option country		ZZ
	option state		Somewhere
	option location		Unknown
	option commonname	'OpenWrt'
EOF
}
mkdir -p "$TMP/www/cgi-bin"
echo hello >"$TMP/www/index.html"
printf '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\necho "$REMOTE_ADDR $SERVER_ADDR $HTTPS $PATH"\n' >"$TMP/www/cgi-bin/env"
chmod 755 "$TMP/www/cgi-bin/env"
# uhttpd's own key and certificate, as its init script has openssl make
# them: the certificate in DER, the key in PEM.
openssl req -x509 -sha256 -outform der -nodes -days 397 -newkey ec \
	-pkeyopt ec_paramgen_curve:P-256 -keyout "$TMP/uhttpd.key" -out "$TMP/uhttpd.crt" \
	-subj /C=ZZ/ST=Somewhere/L=Unknown/O=OpenWrt/CN=OpenWrt >/dev/null 2>&1

ubus_ok=0
printf 'ubus-cors off\n' >"$TMP/probe.conf"
"$BIN" --check-config --config "$TMP/probe.conf" 2>&1 | grep -q 'probe.conf:1:' || ubus_ok=1
[ -n "${MARMOSET_BIN-}" ] || check "the tls,ubus build has the ubus endpoint" [ $ubus_ok = 1 ]
P1=$(free_port) P2=$(free_port)
default_uci "$TMP/default.uci" "$P1" "$P2"

# The default file, line for line.
expected() {
	cat <<EOF
workers 1
syslog off
root $TMP/www
listen 127.0.0.1:$P1
listen [::1]:$P1
tls-cert $TMP/uhttpd.crt
tls-key $TMP/uhttpd.key
listen 127.0.0.1:$P2 tls
listen [::1]:$P2 tls
cgi-prefix /cgi-bin/
cgi-timeout 60
cgi-max 3
cgi-max-body 1073741824
header-timeout 30
send-timeout 30
keepalive-timeout 20
max-connections 100
index index.html index.htm default.html default.htm
symlinks anywhere
listing on
allowed-hosts OpenWrt OpenWrt.lan
EOF
	if [ $ubus_ok = 1 ]; then
		echo "ubus /ubus"
		echo "ubus-timeout 60"
	fi
}
for SH in sh "busybox sh"; do
	run "$SH" "$TMP/default.uci"
	if [ "$(conf)" = "$(expected)" ]; then
		ok "[$SH] OpenWrt's default /etc/config/uhttpd -> $(conf | tr '\n' ';')"
	else
		bad "[$SH] OpenWrt's default /etc/config/uhttpd"
		expected >"$TMP/want"
		conf | diff "$TMP/want" - | sed 's/^/     /'
		sed 's/^/     /' "$TMP/stderr"
	fi
	check "[$SH] one instance 'main', run as: marmoset --config CONFDIR/uhttpd-main.conf" \
		[ "$(tr '\n' ' ' <"$TMP/rec.cmd.main")" = "$BIN --config $TMP/conf/uhttpd-main.conf " ]
	check "[$SH] procd: respawn, stderr; the config, certificate and key watched" \
		recorded "set respawn " "set stderr 1" "set file $TMP/conf/uhttpd-main.conf" "append file $TMP/uhttpd.crt $TMP/uhttpd.key"
	check "[$SH] reload on config 'uhttpd' and on acme.renew" \
		recorded "reload_trigger uhttpd" "raw_trigger acme.renew 5000 /etc/init.d/uhttpd reload"
	check "[$SH] no user: the server runs as root, as uhttpd" not grep -q '^user\|^group' "$TMP/conf/uhttpd-main.conf"
	for o in lua_prefix ucode_prefix tcp_keepalive; do
		check "[$SH] '$o' logged as not honoured" logged "option $o '"
	done
	[ $ubus_ok = 1 ] || check "[$SH] this binary has no ubus endpoint: logged" logged "ubus_prefix is not served"
done

# ucode_prefix with ucode and its modules installed (stand-ins): each
# handler gets an scgi line and a procd instance of luci-scgi.uc.
printf '#!/bin/sh\nexit 1\n' >"$TMP/ucode-standin"
chmod 755 "$TMP/ucode-standin"
mkdir -p "$TMP/ucode-lib"
touch "$TMP/ucode-lib/socket.so" "$TMP/ucode-lib/uloop.so" "$TMP/ucode-lib/fs.so"
scgi_prog=$PWD/board/openwrt/marmoset/files/luci-scgi.uc
for SH in sh "busybox sh"; do
	UCODE=$TMP/ucode-standin UCODE_LIB=$TMP/ucode-lib run "$SH" "$TMP/default.uci"
	check "[$SH] ucode_prefix with ucode -> 'scgi /cgi-bin/luci unix:RUNDIR/uhttpd-main-ucode1.sock'" \
		has "scgi /cgi-bin/luci unix:$TMP/run/uhttpd-main-ucode1.sock"
	check "[$SH] ucode_prefix: instance 'main-ucode1' runs luci-scgi.uc on that socket with LuCI's handler" \
		[ "$(tr '\n' ' ' <"$TMP/rec.cmd.main-ucode1" 2>/dev/null)" = \
		"$TMP/ucode-standin $scgi_prog $TMP/run/uhttpd-main-ucode1.sock /usr/share/ucode/luci/uhttpd.uc " ]
	check "[$SH] ucode_prefix: respawned, its run directory made, nothing logged as not honoured" \
		all_of 'grep -qx "open_instance main-ucode1" "$TMP/rec" && [ -d "$TMP/run" ] &&
			[ "$(grep -c "^set respawn" "$TMP/rec")" = 2 ] && ! logged "option ucode_prefix"'
	check "[$SH] ucode_prefix: the config passes --check-config" \
		sh -c '"$0" --check-config --config "$1" >/dev/null 2>&1' "$BIN" "$TMP/conf/uhttpd-main.conf"
done
rm "$TMP/ucode-lib/uloop.so"
UCODE=$TMP/ucode-standin UCODE_LIB=$TMP/ucode-lib run sh "$TMP/default.uci"
check "ucode_prefix without ucode's uloop module: LuCI as CGI, logged, no handler instance" \
	all_of '! has "scgi /cgi-bin/luci unix:$TMP/run/uhttpd-main-ucode1.sock" &&
		logged "option ucode_prefix '"'/cgi-bin/luci=/usr/share/ucode/luci/uhttpd.uc'"' is not honoured" &&
		! grep -q "^open_instance main-ucode" "$TMP/rec"'

# The package's own /etc/config/uhttpd (for images without uhttpd).
run sh init/uhttpd.uci
check "init/uhttpd.uci (marmoset-uhttpd's default) -> $(conf | tr '\n' ';')" \
	"$BIN" --check-config --config "$TMP/conf/uhttpd-main.conf" --root "$TMP/www" \
	--tls-cert "$TMP/uhttpd.crt" --tls-key "$TMP/uhttpd.key"
check "init/uhttpd.uci: 80 and 443 on IPv4 and IPv6, ubus at /ubus when the binary has it" \
	all_of 'has "listen 0.0.0.0:80" && has "listen [::]:80" && has "listen 0.0.0.0:443 tls" &&
		has "listen [::]:443 tls" && { [ $ubus_ok = 0 ] || has "ubus /ubus"; }'

# Variants: uhttpd option -> Marmoset line.
variant() { # DESCRIPTION WANT-LINE|!NOT-LINE SED-ON-DEFAULT...
	_d=$1 _w=$2
	shift 2
	cp "$TMP/default.uci" "$TMP/v.uci"
	for _e in "$@"; do sed -i "$_e" "$TMP/v.uci"; done
	run sh "$TMP/v.uci"
	case $_w in
	!*) check "$_d: no '${_w#!}'" not has "${_w#!}" ;;
	*) check "$_d -> '$_w'" has "$_w" ;;
	esac || { conf | sed 's/^/     /'; sed 's/^/     /' "$TMP/stderr"; }
	check "$_d: the config passes --check-config" "$BIN" --check-config --config "$TMP/conf/uhttpd-main.conf" >/dev/null 2>&1
}
variant "listen_http '8088' (a bare port)" "listen 0.0.0.0:8088" "s/127.0.0.1:$P1/8088/"
variant "listen_http '8088' (a bare port)" "listen [::]:8088" "s/127.0.0.1:$P1/8088/"
variant "redirect_https '1'" "redirect-https on" "s/redirect_https\t0/redirect_https 1/"
variant "http_keepalive '0'" "max-requests 1" "s/http_keepalive\t20/http_keepalive 0/"
variant "http_keepalive '0'" "!keepalive-timeout 20" "s/http_keepalive\t20/http_keepalive 0/"
variant "max_requests '5'" "cgi-max 5" "s/max_requests 3/max_requests 5/"
variant "max_requests unset: uhttpd's 3" "cgi-max 3" "/max_requests/d"
variant "max_connections '20'" "max-connections 20" "s/max_connections 100/max_connections 20/"
variant "script_timeout '90'" "cgi-timeout 90" "s/script_timeout\t60/script_timeout 90/"
variant "network_timeout '15'" "header-timeout 15" "s/network_timeout\t30/network_timeout 15/"
variant "network_timeout '15'" "send-timeout 15" "s/network_timeout\t30/network_timeout 15/"
variant "cgi_prefix '/scripts/'" "cgi-prefix /scripts/" "s|cgi_prefix\t/cgi-bin|cgi_prefix /scripts/|"
variant "index_page 'main.html start.html' (uhttpd's four follow)" "index main.html start.html index.html index.htm default.html default.htm" "/option home/a\\	list index_page 'main.html'\n	list index_page 'start.html'"
variant "error_page '/404.html'" "error-page 404 /404.html" "/option home/a\\	option error_page '/404.html'"
variant "interpreter '.php=/usr/bin/php-cgi'" "cgi-interpreter .php /usr/bin/php-cgi" "/option home/a\\	list interpreter '.php=/usr/bin/php-cgi'"
variant "no_symlinks '1'" "symlinks inside" "/option home/a\\	option no_symlinks '1'"
variant "no_dirlists '1'" "!listing on" "/option home/a\\	option no_dirlists '1'"
variant "rfc1918_filter '0'" "!allowed-hosts OpenWrt OpenWrt.lan" "s/rfc1918_filter 1/rfc1918_filter 0/"
variant "rfc1918_filter with list allowed_hosts 'router.example'" "allowed-hosts router.example OpenWrt OpenWrt.lan" "/option home/a\\	list allowed_hosts 'router.example'"
variant "no listen_https: no TLS lines" "!tls-key $TMP/uhttpd.key" "/listen_https/d"
variant "httpauth section: its prefix refused (fail closed)" "deny /private all" \
	"/option home/a\\	list httpauth 'prot'" "\$a\\config httpauth 'prot'\n	option prefix '/private'\n	option username 'u'\n	option password 'p'"
check "httpauth: logged" logged "httpauth 'prot' (/private) is not honoured"
if [ $ubus_ok = 1 ]; then
	variant "ubus_socket, ubus_cors, no_ubusauth" "ubus /ubus /tmp/u.sock" "/option home/a\\	option ubus_socket '/tmp/u.sock'\n	option ubus_cors '1'\n	option no_ubusauth '1'"
	check "ubus_cors '1' -> ubus-cors on" has "ubus-cors on"
	check "no_ubusauth '1' -> ubus-auth off" has "ubus-auth off"
fi
cp "$TMP/default.uci" "$TMP/v.uci"
sed -i "/option home/a\\	option config '/etc/httpd.conf'" "$TMP/v.uci"
run sh "$TMP/v.uci"
check "option config (httpd.conf auth): the section is not started, and says why" \
	all_of 'not grep -q ^open_instance "$TMP/rec" &&
		logged "option config '"'/etc/httpd.conf'"' (httpd.conf Basic auth) is not honoured"'
sed "s/^config uhttpd main/config uhttpd main\n\toption enabled '0'/" "$TMP/default.uci" >"$TMP/v.uci"
run sh "$TMP/v.uci"
check "enabled '0': no instance" not grep -q '^open_instance' "$TMP/rec"
sed "s/max_connections 100/max_connections 'many'/" "$TMP/default.uci" >"$TMP/v.uci"
run sh "$TMP/v.uci"
check "a value not of its option's shape: not started, the reason logged" \
	all_of 'not grep -q ^open_instance "$TMP/rec" && logged "option max_connections '"'many'"' is refused"'
sed "s/max_connections 100/max_connections 0/" "$TMP/default.uci" >"$TMP/v.uci"
run sh "$TMP/v.uci"
check "a value marmoset refuses: not started, the reason logged" \
	all_of 'not grep -q ^open_instance "$TMP/rec" && logged max-connections'

# Hostile values, as `uci set` stores them: a newline and Marmoset lines
# after it in every value the script writes, under dash and busybox sh.
# Each is refused, nothing of it is written, and the section is not started.
nl='
'
inject="${nl}proxy / http://127.0.0.1:22${nl}root /"
assign() { # SECTION OPTION VALUE: a shell assignment for the stand-in
	printf "CONFIG_%s_%s='%s'" "$1" "$2" "$(printf '%s' "$3" | sed "s/'/'\\\\''/g")"
}
refused_whole() { # DESCRIPTION: nothing started, nothing injected, the refusal logged
	check "$1" all_of 'not grep -q ^open_instance "$TMP/rec" && ! grep -rqs "^proxy\|^root /\$" "$TMP/conf" &&
		grep -q "is refused" "$TMP/rec"' || { sed 's/^/     /' "$TMP/rec"; ls "$TMP/conf" 2>/dev/null; }
}
sed -e "/option home/a\\	list httpauth 'prot'" -e "\$a\\config httpauth 'prot'\n	option prefix '/private'" \
	"$TMP/default.uci" >"$TMP/v-auth.uci"
for SH in sh "busybox sh"; do
	for ov in "home=$TMP/www" index_page=main.html error_page=/404.html max_requests=3 \
		"cert=$TMP/uhttpd.crt" "key=$TMP/uhttpd.key" "listen_http=127.0.0.1:$P1" \
		"listen_https=127.0.0.1:$P2" cgi_prefix=/cgi-bin ubus_prefix=/ubus ubus_socket=/var/run/ubus/ubus.sock \
		script_timeout=60 network_timeout=30 max_connections=100 http_keepalive=20 \
		interpreter=.php=/usr/bin/php-cgi allowed_hosts=router.lan \
		ucode_prefix=/cgi-bin/luci=/usr/share/ucode/luci/uhttpd.uc; do
		HOSTILE=$(assign main "${ov%%=*}" "${ov#*=}$inject") run "$SH" "$TMP/default.uci"
		refused_whole "[$SH] a newline in ${ov%%=*}: refused"
	done
	UCI_DOMAIN="lan$inject" run "$SH" "$TMP/default.uci"
	refused_whole "[$SH] a newline in the DHCP domain: refused"
	UCI_HOSTNAME="gw$inject" run "$SH" "$TMP/default.uci"
	refused_whole "[$SH] a newline in the host name: refused"
	HOSTILE=$(assign prot prefix "/private$inject") run "$SH" "$TMP/v-auth.uci"
	refused_whole "[$SH] a newline in an httpauth prefix: refused"
done
# Shapes: no control character, but not what the option takes.
for ov in home=www error_page=404.html cert=uhttpd.crt "home=/w w" index_page=../secret "index_page=a *" \
	max_requests=3x "listen_http=127.0.0.1:80;x" "allowed_hosts=a/b" interpreter=php "cgi_prefix=cgi-bin" \
	ucode_prefix=/cgi-bin/luci "ucode_prefix=/l=handler.uc" "ucode_prefix=/l=/a/../b.uc"; do
	HOSTILE=$(assign main "${ov%%=*}" "${ov#*=}") run sh "$TMP/default.uci"
	refused_whole "${ov%%=*} '${ov#*=}': refused"
done

# The cert section's values reach px5g or openssl as single arguments,
# and only in their shape: a stand-in for each records its arguments.
printf '#!/bin/sh\nprintf "%%s\\n" "$@" >"%s/tool.args"\nexit 1\n' "$TMP" >"$TMP/tool"
chmod 755 "$TMP/tool"
sed "s|$TMP/uhttpd|$TMP/new|" "$TMP/default.uci" >"$TMP/c.uci"
args() { tr '\n' ' ' <"$TMP/tool.args" 2>/dev/null; }
cert_with() { # TOOL-VAR SHELL-ASSIGNMENTS
	rm -f "$TMP/tool.args" "$TMP/new.crt" "$TMP/new.key"
	case $1 in
	openssl) OPENSSL=$TMP/tool HOSTILE=$2 run sh "$TMP/c.uci" ;;
	px5g) PX5G=$TMP/tool HOSTILE=$2 run sh "$TMP/c.uci" ;;
	esac
}
for tool in openssl px5g; do
	cert_with $tool ""
	check "$tool: an ECDSA P-256 key (-newkey ec -pkeyopt ec_paramgen_curve:P-256)" \
		has_all "$(args)" " -newkey ec -pkeyopt ec_paramgen_curve:P-256 " ||
		echo "     $(args)"
	cert_with $tool "unset CONFIG_defaults_key_type CONFIG_defaults_ec_curve"
	check "$tool: key_type and ec_curve unset: still ECDSA P-256 (px5g's own default is RSA)" \
		has_all "$(args)" " -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
	cert_with $tool "CONFIG_defaults_ec_curve=P-384"
	check "$tool: ec_curve 'P-384'" has_all "$(args)" " -pkeyopt ec_paramgen_curve:P-384 "
	cert_with $tool "CONFIG_defaults_key_type=rsa"
	check "$tool: key_type 'rsa': -newkey rsa:2048" has_all "$(args)" " -newkey rsa:2048 "
	for hostile in "bits='2048 -config /tmp/evil'" "key_type=rsa; CONFIG_defaults_bits='2048 -config /tmp/evil'" \
		"ec_curve='P-256 -engine evil'" "days='1 -config /tmp/evil'" "organization='x/CN=evil'" \
		"commonname='OpenWrt -config'" "country='ZZ$inject'" "key_type=dsa"; do
		cert_with $tool "CONFIG_defaults_$hostile"
		check "$tool: cert section $(printf '%s' "$hostile" | tr '\n' ' '): refused, $tool not run, tls-self-signed instead" \
			all_of '[ ! -e "$TMP/tool.args" ] && logged "cert section '"'defaults'"' is not used" && has "tls-self-signed on"' ||
			echo "     $(args)"
	done
done
{
	cat "$TMP/default.uci"
	printf "\nconfig uhttpd second\n\tlist listen_http '127.0.0.1:%s'\n\toption home '%s'\n" "$(free_port)" "$TMP/www"
} >"$TMP/v.uci"
run sh "$TMP/v.uci"
check "two uhttpd sections: two instances, two configs" \
	all_of '[ "$(grep -c ^open_instance "$TMP/rec")" = 2 ] && [ -s "$TMP/conf/uhttpd-second.conf" ]'

# The certificate: missing files are made from the cert section (openssl
# here, as uhttpd's script falls back to it without px5g), or, with
# neither tool, by marmoset's tls-self-signed.
sed "s|$TMP/uhttpd|$TMP/new|; s/key_type\t\tec/key_type rsa/; s/bits\t\t2048/bits 2048/; s/days\t\t397/days 30/" "$TMP/default.uci" >"$TMP/v.uci"
OPENSSL=$(command -v openssl) run sh "$TMP/v.uci"
check "no certificate, openssl present: made from the cert section (RSA 2048, 30 days, the subject)" \
	sh -c "openssl x509 -in '$TMP/new.crt' -noout -text | grep -q 'Public-Key: (2048 bit)' &&
		openssl x509 -in '$TMP/new.crt' -noout -subject | grep -q 'C = ZZ, ST = Somewhere, L = Unknown, O = OpenWrt.*, CN = OpenWrt' &&
		[ \$(( \$(date -d \"\$(openssl x509 -in '$TMP/new.crt' -noout -enddate | cut -d= -f2)\" +%s) - \$(date +%s) )) -le $((30 * 86400 + 60)) ]"
check "... and tls-self-signed is not needed" not has "tls-self-signed on"
rm -f "$TMP/new.crt" "$TMP/new.key"
run sh "$TMP/v.uci"
check "no certificate, no px5g or openssl: tls-self-signed on, logged" \
	all_of 'has "tls-self-signed on" && logged "marmoset makes an ECDSA P-256 certificate"'

# The real server from the default file's config, and from variants.
wait_up() { # URL CURL-ARGS...: answers within 10 s
	_u=$1
	shift
	_i=0
	while [ $_i -lt 50 ]; do
		curl -s -o /dev/null "$@" "$_u" && return 0
		sleep 0.2
		_i=$((_i + 1))
	done
	return 1
}
serve() { # UCI-FILE: starts the server from what the script made
	run sh "$1"
	"$BIN" --config "$TMP/conf/uhttpd-main.conf" 2>>"$TMP/server.log" &
	pid=$!
	pids="$pids $pid"
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
serve "$TMP/default.uci"
wait_up "http://127.0.0.1:$P1/" || bad "the server did not come up" || cat "$TMP/server.log"
check "HTTP on listen_http: 200 hello" [ "$(curl -s "http://127.0.0.1:$P1/")" = hello ]
check "HTTPS on listen_https with uhttpd's DER certificate: 200 hello" \
	[ "$(curl -sk "https://127.0.0.1:$P2/")" = hello ]
check "HTTPS over IPv6 [::1]" [ "$(curl -sk -g "https://[::1]:$P2/")" = hello ]
check "the certificate served is uhttpd's" sh -c \
	"echo | openssl s_client -connect 127.0.0.1:$P2 2>/dev/null | openssl x509 -noout -fingerprint -sha256 | grep -qF \"\$(openssl x509 -inform der -in $TMP/uhttpd.crt -noout -fingerprint -sha256)\""
check "CGI under cgi_prefix, as root's PATH has it" sh -c \
	"curl -s http://127.0.0.1:$P1/cgi-bin/env | grep -qx '127.0.0.1 127.0.0.1  .*/usr/sbin:/usr/bin:/sbin:/bin'"
check "rfc1918_filter: a foreign Host gets 421" [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: evil.example' "http://127.0.0.1:$P1/")" = 421 ]
check "rfc1918_filter: OpenWrt.lan is served" [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: OpenWrt.lan' "http://127.0.0.1:$P1/")" = 200 ]
stop
P1=$(free_port) P2=$(free_port)
default_uci "$TMP/r.uci" "$P1" "$P2"
sed -i "s/redirect_https\t0/redirect_https 1/" "$TMP/r.uci"
serve "$TMP/r.uci"
wait_up "https://127.0.0.1:$P2/" -k || bad "the server did not come up" || cat "$TMP/server.log"
check "redirect_https '1': 308 to https with the TLS port" \
	[ "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "http://127.0.0.1:$P1/x?y=1")" = "308 https://127.0.0.1:$P2/x?y=1" ]
check "redirect_https '1': HTTPS serves" [ "$(curl -sk "https://127.0.0.1:$P2/")" = hello ]
stop

# The warm handler for real, with OPENWRT_STACK_DIR (board/openwrt/stack.sh's
# output for this machine: root/bin/ucode and uhttpd, their libraries and
# ucode's modules in root/usr/lib): a stand-in for LuCI's handler, through
# luci-scgi.uc as the mapping starts it, and the server started from the
# config the script made.
ST=${OPENWRT_STACK_DIR:-}
SR=${ST:+$ST/root}
if [ -z "$SR" ] || [ ! -x "$SR/bin/ucode" ]; then
	skip "no ucode (set OPENWRT_STACK_DIR; board/openwrt/stack.sh builds one): luci-scgi.uc not run"
else
	cat >"$TMP/handler.uc" <<'EOF_UC'
{%
import { open, stat } from 'fs';
let loads = open(ARGV[1] + '.loads', 'a');
loads.write('loaded\n');
loads.close();
let served = 0;
global.handle_request = function(env) {
	let body = '', chunk;
	while ((chunk = uhttpd.recv(4)) != null)
		body += chunk;
	served++;
	// The head in pieces, the way LuCI writes it.
	for (let piece in ['Status: ', 200, ' ', 'OK', '\r\n', 'Content-Type', ': ', 'text/plain', '\r\n', '\r\n'])
		uhttpd.send(piece);
	// A body that streams: its second piece waits for a file the test
	// makes once the first has reached the client (at most 10 s).
	if (env.PATH_INFO == '/stream') {
		uhttpd.send('first\n');
		for (let i = 0; i < 1000 && !stat(env.QUERY_STRING); i++)
			sleep(10);
		uhttpd.send('second\n');
		return;
	}
	uhttpd.send(`${env.REQUEST_METHOD} ${env.SCRIPT_NAME} ${env.PATH_INFO} ${env.QUERY_STRING} ${env.HTTP_VERSION}\n`);
	uhttpd.sendc(`cookie=${env.headers.cookie} body=${body} served=${served}\n`);
	uhttpd.send(`${uhttpd.urlencode('a b/~')} ${uhttpd.urldecode('a%20b')}\n`);
};
%}
EOF_UC
	# The stack's ucode looks for its modules in /usr/lib/ucode, where the
	# router has them: here they are in the stack's root.
	printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/usr/lib" exec "%s/bin/ucode" -L "%s/usr/lib/ucode" "$@"\n' "$SR" "$SR" "$SR" >"$TMP/ucode"
	chmod 755 "$TMP/ucode"
	P1=$(free_port) P2=$(free_port)
	default_uci "$TMP/u.uci" "$P1" "$P2"
	# Room for three requests at once from one client (one runs at most
	# half of them).
	sed -i -e "s|/cgi-bin/luci=/usr/share/ucode/luci/uhttpd.uc|/cgi-bin/luci=$TMP/handler.uc|" \
		-e 's|option max_requests 3|option max_requests 6|' "$TMP/u.uci"
	UCODE=$TMP/ucode UCODE_LIB=$SR/usr/lib/ucode run sh "$TMP/u.uci"
	# The instance as procd would start it. The handler counts its loads in
	# a file beside it (ARGV[1] is its path while it loads).
	set --
	while IFS= read -r a; do set -- "$@" "$a"; done <"$TMP/rec.cmd.main-ucode1"
	"$@" 2>>"$TMP/ucode.log" &
	handler=$!
	pids="$pids $handler"
	"$BIN" --config "$TMP/conf/uhttpd-main.conf" 2>>"$TMP/server.log" &
	pid=$!
	pids="$pids $pid"
	wait_up "http://127.0.0.1:$P1/cgi-bin/luci/x" || bad "the server or the handler did not come up" ||
		cat "$TMP/server.log" "$TMP/ucode.log"
	out=$(curl -s -H 'Cookie: sysauth=1' "http://127.0.0.1:$P1/cgi-bin/luci/admin/status?x=1")
	check "ucode_prefix through luci-scgi.uc: env, headers and the uhttpd object as uhttpd gives them" \
		[ "$out" = "GET /cgi-bin/luci /admin/status x=1 1.1
cookie=sysauth=1 body= served=1
a%20b%2f~ a b" ]
	out=$(curl -s -d 'luci_username=root&luci_password=x' "http://127.0.0.1:$P1/cgi-bin/luci")
	check "a POST body read through uhttpd.recv; no PATH_INFO for the prefix itself" \
		has_all "$out" "POST /cgi-bin/luci null" "body=luci_username=root&luci_password=x served=1"
	out=$(curl -s -H 'Transfer-Encoding: chunked' -d 'abc' "http://127.0.0.1:$P1/cgi-bin/luci/c")
	check "a chunked POST body, with its length" has_all "$out" "body=abc served=1"
	# Three at once: one more than luci-scgi.uc keeps spare.
	streamers=
	for i in 1 2 3; do
		curl -sN "http://127.0.0.1:$P1/cgi-bin/luci/stream?$TMP/streamed" >"$TMP/stream$i.out" &
		streamers="$streamers $!"
	done
	streamed() { for i in 1 2 3; do [ "$(cat "$TMP/stream$i.out")" = "$1" ] || return 1; done; }
	check "a body's first piece reaches the client while the handler is still running (three at once)" \
		eventually 10 streamed first || head "$TMP"/stream?.out | sed 's/^/     /'
	touch "$TMP/streamed"
	# shellcheck disable=SC2086
	wait $streamers
	check "and the rest after it" streamed "$(printf 'first\nsecond')"
	check "the handler compiled and run once, each request in a fork of it" \
		[ "$(cat "$TMP/handler.uc.loads" 2>/dev/null)" = loaded ]
	fd_count() { set -- "/proc/$1/fd/"*; echo $#; }
	# A new pids cgroup (v1 or v2) this test may move a process into, or nothing.
	pids_cgroup() {
		for _d in /sys/fs/cgroup/pids /sys/fs/cgroup; do
			mkdir "$_d/marmoset-test-$$" 2>/dev/null || continue
			if [ -e "$_d/marmoset-test-$$/pids.max" ]; then
				echo "$_d/marmoset-test-$$"
				return
			fi
			rmdir "$_d/marmoset-test-$$"
		done
	}
	# children [PID]: a process's children, luci-scgi.uc's by default.
	children() { set -- "${1:-$handler}"; cat "/proc/$1/task/$1/children" 2>/dev/null; }
	# A process's state letter (Z for a zombie), nothing when it is gone.
	state() { cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null; }
	# Every luci-scgi.uc process, with its parent and what it waits in.
	show_spares() { ps -o pid,ppid,stat,wchan:20,args -p "$(pgrep -d, -f luci-scgi)" | sed 's/^/     /'; }
	count() { echo $#; }
	# spares [PID...]: luci-scgi.uc has exactly two children (its spares),
	# none of them one of PIDs.
	spares() {
		_kids=" $(children) "
		for _p in "$@"; do case $_kids in *" $_p "*) return 1 ;; esac; done
		# shellcheck disable=SC2086
		[ "$(count $_kids)" = 2 ]
	}
	# changed PID...: two spares, not all of them PIDs; kept: how many are.
	changed() {
		_kids=" $(children) " kept=0
		for _p in "$@"; do case $_kids in *" $_p "*) kept=$((kept + 1)) ;; esac; done
		# shellcheck disable=SC2086
		[ "$(count $_kids)" = 2 ] && [ "$kept" -lt $# ]
	}
	check "two spares wait for requests before any comes" eventually 5 spares
	fds=$(fd_count "$handler")
	before=$(children)
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P1/cgi-bin/luci/x")
	# shellcheck disable=SC2086
	eventually 5 changed $before || kept=none
	check "a request is taken by one of them, and one new spare replaces it" [ "$kept" = 1 ] ||
		{
			echo "     before: $before, now: $(children), the request answered $code"
			show_spares
		}
	for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$P1/cgi-bin/luci/x"; done
	eventually 5 spares
	check "50 requests later, luci-scgi.uc holds as many descriptors ($fds)" \
		[ "$(fd_count "$handler")" -le "$fds" ]
	victim=$(children | { read -r a _; echo "$a"; })
	kill -KILL "$victim"
	check "a spare killed while it waits is replaced" eventually 5 spares "$victim"
	out=$(curl -s "http://127.0.0.1:$P1/cgi-bin/luci/x" | head -n 1)
	check "and the next request is answered" [ "$out" = "GET /cgi-bin/luci /x  1.1" ] || echo "     got: $out"
	# Two spares that end at once, read by luci-scgi.uc in one epoll_wait
	# (it is stopped meanwhile): the spare it forks on reading the first
	# inherits the second, and must leave it to its parent. Then two spares
	# wait, both its own: none has a child.
	taken=$(children) streamers=
	for i in 1 2; do
		curl -sN -m 30 "http://127.0.0.1:$P1/cgi-bin/luci/stream?$TMP/released" >"$TMP/pair$i.out" &
		streamers="$streamers $!"
	done
	paired() { [ "$(cat "$TMP/pair1.out" "$TMP/pair2.out")" = "$(printf 'first\nfirst')" ]; }
	# shellcheck disable=SC2046
	three() { [ "$(count $(children))" = 3 ]; } # the two taken, and one made at once
	if ! eventually 10 paired || ! eventually 5 three; then bad "two streams did not start"; fi
	kill -STOP "$handler"
	touch "$TMP/released"
	# shellcheck disable=SC2086
	wait $streamers
	zombies() { for _p in "$@"; do [ "$(state "$_p")" = Z ] || return 1; done; }
	# shellcheck disable=SC2086
	eventually 5 zombies $taken || bad "the two spares that answered did not end"
	kill -CONT "$handler"
	# Two children, each waiting for a connection, with no child.
	waiting() {
		# shellcheck disable=SC2046
		set -- $(children)
		[ $# = 2 ] || return 1
		for _p in "$@"; do
			[ "$(cat "/proc/$_p/wchan")" = do_epoll_wait ] && [ -z "$(children "$_p")" ] || return 1
		done
	}
	check "two spares ending at once: two new ones wait, none with a child of its own" eventually 5 waiting || show_spares
	# Out of descriptors (its limit lowered below those it holds), a spare
	# that answered is not replaced, and luci-scgi.uc stays; once it can
	# have descriptors again, the spare comes.
	nofile=$(prlimit --pid "$handler" --nofile --output SOFT --noheadings | tr -d ' ')
	prlimit --pid "$handler" --nofile=3:
	out=$(curl -s "http://127.0.0.1:$P1/cgi-bin/luci/x" | head -n 1)
	check "out of descriptors, a request is answered by a waiting spare" [ "$out" = "GET /cgi-bin/luci /x  1.1" ] ||
		echo "     got: $out"
	warned_alive() { grep -q "no spare made" "$TMP/ucode.log" && kill -0 "$handler"; }
	check "no spare made in its place: said, and luci-scgi.uc keeps running" eventually 5 warned_alive
	prlimit --pid "$handler" --nofile="$nofile":
	check "descriptors back, two spares wait again" eventually 5 spares
	out=$(curl -s "http://127.0.0.1:$P1/cgi-bin/luci/x" | head -n 1)
	check "and answer" [ "$out" = "GET /cgi-bin/luci /x  1.1" ] || echo "     got: $out"
	spares=$(children)
	# none_left PID...: none of them is running.
	none_left() {
		for _p in "$@"; do ! kill -0 "$_p" 2>/dev/null || return 1; done
	}
	kill -KILL "$handler"
	wait "$handler" 2>/dev/null
	# shellcheck disable=SC2086
	check "luci-scgi.uc killed: its spares end with it" eventually 5 none_left $spares ||
		ps -o pid,ppid,stat,args $spares | sed 's/^/     /'
	# A fork that fails (the handler alone in a pids cgroup that allows it
	# no child): ucode's uloop.task keeps four descriptors then, so
	# luci-scgi.uc ends for procd to start it again, rather than retry.
	cg=$(pids_cgroup)
	if [ -z "$cg" ]; then
		skip "no pids cgroup to write: luci-scgi.uc's failed fork not tried"
	else
		"$@" 2>>"$TMP/ucode.log" &
		handler=$!
		pids="$pids $handler"
		check "luci-scgi.uc started again: two spares wait" eventually 5 spares
		echo "$handler" >"$cg/cgroup.procs"
		echo 1 >"$cg/pids.max"
		out=$(curl -s "http://127.0.0.1:$P1/cgi-bin/luci/x" | head -n 1)
		check "a fork failing, a request is answered by a waiting spare" [ "$out" = "GET /cgi-bin/luci /x  1.1" ] ||
			echo "     got: $out"
		# Ended: gone, or a zombie this shell has not reaped.
		ended() {
			grep -q "ending for a fresh start" "$TMP/ucode.log" &&
				case $(state "$handler") in '' | Z) ;; *) false ;; esac
		}
		check "then no spare made: said, and luci-scgi.uc ends for a fresh start" eventually 5 ended
		kill -KILL "$handler" 2>/dev/null
		wait "$handler" 2>/dev/null
		rmdir "$cg"
	fi
	stop
	# Against uhttpd's own ucode_prefix, when it was built there too: one
	# handler printing what it is given, through both. Marmoset's own CGI
	# variables (those uhttpd does not set) and the ports differ.
	if [ -x "$SR/bin/uhttpd" ]; then
		cat >"$TMP/dump.uc" <<'EOF_UC'
{%
global.handle_request = function(env) {
	let body = '', chunk;
	while ((chunk = uhttpd.recv()) != null)
		body += chunk;
	uhttpd.send('Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n');
	for (let k in sort(keys(env)))
		if (k != 'headers')
			uhttpd.send(`${k}=${env[k]} (${type(env[k])})\n`);
	for (let k in sort(keys(env.headers)))
		uhttpd.send(`H_${k}=${env.headers[k]}\n`);
	uhttpd.send(`body=${body}\n${uhttpd.urlencode('a b/~\u00e9')} ${uhttpd.urldecode('a%20b%C3%A9')}\n`);
	uhttpd.send(`docroot=${uhttpd.docroot}\n`);
};
%}
EOF_UC
		P3=$(free_port) P4=$(free_port)
		LD_LIBRARY_PATH=$SR/usr/lib "$SR/bin/uhttpd" -f -h "$TMP/www" -p "127.0.0.1:$P3" \
			-o /cgi-bin/luci -O "$TMP/dump.uc" 2>>"$TMP/uhttpd.log" &
		pids="$pids $!"
		"$TMP/ucode" "$scgi_prog" "$TMP/dump.sock" "$TMP/dump.uc" 2>>"$TMP/ucode.log" &
		pids="$pids $!"
		"$BIN" --listen "127.0.0.1:$P4" --root "$TMP/www" --scgi "/cgi-bin/luci unix:$TMP/dump.sock" \
			2>>"$TMP/server.log" &
		pid=$!
		pids="$pids $pid"
		if ! wait_up "http://127.0.0.1:$P3/cgi-bin/luci" || ! wait_up "http://127.0.0.1:$P4/cgi-bin/luci"; then
			bad "uhttpd, or marmoset and luci-scgi.uc, did not come up"
		fi
		for p in $P3 $P4; do
			{
				curl -s -H 'Cookie: sysauth=x' -d 'a=1&b=2' "http://127.0.0.1:$p/cgi-bin/luci/admin/status?x=1&y=%20"
				curl -s "http://127.0.0.1:$p/cgi-bin/luci"
				curl -s -0 "http://127.0.0.1:$p/cgi-bin/luci/x/"
				curl -s -X POST "http://127.0.0.1:$p/cgi-bin/luci/x"
			} | grep -v '^\(HTTP_HOST\|H_host\|SERVER_PORT\|REMOTE_PORT\|SERVER_SOFTWARE\)=' >"$TMP/dump.$p"
		done
		# Only the variables uhttpd gives.
		awk -F= 'NR == FNR { k[$1] = 1; next } $1 in k' "$TMP/dump.$P3" "$TMP/dump.$P4" >"$TMP/dump.mine"
		check "the handler's env, headers, body and uhttpd object as through uhttpd's ucode_prefix" \
			cmp -s "$TMP/dump.$P3" "$TMP/dump.mine" ||
			diff "$TMP/dump.$P3" "$TMP/dump.mine" | sed 's/^/     /'
		stop
	else
		skip "no uhttpd in OPENWRT_STACK_DIR: luci-scgi.uc not compared with uhttpd's ucode_prefix"
	fi
fi

# 3. `/etc/init.d/uhttpd start` under OpenWrt's own scripts, in a chroot
# holding only them, busybox, the real uci and jshn, and marmoset.
OW=${OPENWRT_DIR:-}
if [ -z "$OW" ] || [ ! -f "$OW/package/base-files/files/etc/rc.common" ]; then
	skip "no OpenWrt tree (set OPENWRT_DIR): the script not run under OpenWrt's rc.common, functions.sh and procd.sh"
elif [ -z "$SR" ] || [ ! -x "$SR/bin/uci" ] || [ ! -x "$SR/bin/jshn" ] || [ ! -f "$SR/usr/share/libubox/jshn.sh" ]; then
	skip "no uci and jshn built from OpenWrt's sources (set OPENWRT_STACK_DIR; board/openwrt/stack.sh builds them): the script not run under OpenWrt's rc.common"
elif [ "$(id -u)" != 0 ] || ! command -v busybox >/dev/null; then
	skip "the chroot needs root and busybox: the script not run under OpenWrt's rc.common"
else
	R=$TMP/root
	mkdir -p "$R/bin" "$R/sbin" "$R/usr/bin" "$R/lib/functions" "$R/lib/config" "$R/usr/share/libubox" \
		"$R/etc/init.d" "$R/etc/config" "$R/var/lock" "$R/tmp" "$R/www" "$R/dev"
	# put FILE DEST: a binary and the libraries it loads, at their paths.
	put() {
		cp "$1" "$R$2"
		LD_LIBRARY_PATH=$SR/usr/lib ldd "$1" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p' |
			while read -r l; do
				case $l in
				"$SR"/*) cp -L "$l" "$R/lib/" ;;
				*) mkdir -p "$R$(dirname "$l")" && cp -L "$l" "$R$l" ;;
				esac
			done
	}
	put "$(command -v busybox)" /bin/busybox
	# Every applet but logger (no syslog in the chroot).
	for a in $(busybox --list); do
		[ "$a" = logger ] || [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"
	done
	put "$SR/bin/uci" /sbin/uci
	put "$SR/bin/jshn" /usr/bin/jshn
	put "$BIN" /usr/bin/marmoset
	cp "$OW/package/base-files/files/etc/rc.common" "$R/etc/"
	cp "$OW/package/base-files/files/lib/functions.sh" "$R/lib/"
	cp "$OW/package/base-files/files/lib/functions/service.sh" "$R/lib/functions/"
	cp "$OW/package/system/procd/files/procd.sh" "$R/lib/functions/"
	cp "$OW/package/system/uci/files/lib/config/uci.sh" "$R/lib/config/"
	cp "$SR/usr/share/libubox/jshn.sh" "$R/usr/share/libubox/"
	cp init/uhttpd.init "$R/etc/init.d/uhttpd"
	P1=$(free_port) P2=$(free_port)
	default_uci "$R/etc/config/uhttpd" "$P1" "$P2"
	sed -i "s|$TMP/www|/www|; s|$TMP/uhttpd|/etc/uhttpd|" "$R/etc/config/uhttpd"
	cp "$TMP/uhttpd.crt" "$TMP/uhttpd.key" "$R/etc/"
	cp "$TMP/www/index.html" "$R/www/"
	printf "config system\n\toption hostname 'gw'\n" >"$R/etc/config/system"
	printf "config dnsmasq\n\toption domain 'home.arpa'\n" >"$R/etc/config/dhcp"
	: >"$R/dev/null"
	chmod 666 "$R/dev/null"
	# ubusd names a client's user from its uid; the marmoset package runs as nobody.
	printf 'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/var:/bin/false\n' >"$R/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
	# procd's end. The call the script makes is recorded; with procd in the
	# stack, procd itself (beside ubusd, not as PID 1) then takes it.
	if [ -x "$SR/sbin/procd" ] && [ -x "$SR/sbin/ubusd" ] && [ -x "$SR/bin/ubus" ]; then
		procd=1
		put "$SR/bin/ubus" /bin/ubus.real
		put "$SR/sbin/ubusd" /sbin/ubusd
		put "$SR/sbin/procd" /sbin/procd
		mkdir -p "$R/var/run/ubus"
		mknod -m 444 "$R/dev/urandom" c 1 9 # ubusd's
		printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>/tmp/ubus.calls\nexec /bin/ubus.real "$@"\n' >"$R/bin/ubus"
		chroot "$R" /sbin/ubusd 2>>"$TMP/ubusd.log" &
		pids="$pids $!"
		eventually 10 test -S "$R/var/run/ubus/ubus.sock" || bad "ubusd did not come up" || cat "$TMP/ubusd.log"
		chroot "$R" /sbin/procd -S >>"$TMP/procd.log" 2>&1 &
		pids="$pids $!"
		eventually 10 chroot "$R" /bin/ubus.real -t 1 list service >/dev/null 2>&1 ||
			bad "procd did not register its service object" || cat "$TMP/procd.log"
	else
		procd=0
		skip "no procd in OPENWRT_STACK_DIR (board/openwrt/stack.sh builds it from SRC/procd and SRC/udebug): a stand-in takes its calls"
		printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>/tmp/ubus.calls\n' >"$R/bin/ubus"
	fi
	chmod 755 "$R/bin/ubus" "$R/etc/init.d/uhttpd"
	# An instance's pid as procd reports it (nothing when it runs none).
	instance_pid() { # SERVICE INSTANCE
		chroot "$R" /bin/ubus.real call service list "{\"name\":\"$1\"}" 2>/dev/null |
			python3 -c 'import json, sys
i = json.load(sys.stdin).get(sys.argv[1], {}).get("instances", {}).get(sys.argv[2], {})
print(i["pid"] if i.get("running") else "")' "$1" "$2" 2>/dev/null
	}
	answers() { [ "$(curl -s "$@")" = hello ]; }
	refused() { curl -s -o /dev/null "$1"; [ $? = 7 ]; }
	# What LuCI's Save & Apply does: uci commit, then the config.change
	# event (reload_config), on which procd runs the package's `reload`.
	relisten() { # PACKAGE OPTION ADDRESS
		chroot "$R" uci delete "$1.main.$2"
		chroot "$R" uci add_list "$1.main.$2=$3"
		chroot "$R" uci commit "$1"
		chroot "$R" /bin/ubus.real call service event "{\"type\":\"config.change\",\"data\":{\"package\":\"$1\"}}"
	}
	# As OpenWrt runs it: the shebang makes it `/bin/sh /etc/rc.common /etc/init.d/uhttpd start`.
	chroot "$R" /etc/init.d/uhttpd start >"$TMP/rc.out" 2>&1
	check "rc.common start: ubus call service set, once" [ "$(grep -c '^call service set ' "$R/tmp/ubus.calls" 2>/dev/null)" = 1 ] ||
		sed 's/^/     /' "$TMP/rc.out" "$R/tmp/ubus.calls"
	json=$(sed -n 's/^call service set //p' "$R/tmp/ubus.calls" | sed 's|\\/|/|g')
	check "procd gets service 'uhttpd', instance 'main' running marmoset --config /var/etc/marmoset/uhttpd-main.conf" \
		has_all "$json" '"name": "uhttpd"' '"main": {' '"command": [ "/usr/bin/marmoset", "--config", "/var/etc/marmoset/uhttpd-main.conf" ]' ||
		echo "     $json"
	check "procd: respawn (procd's 3600 5 5), stderr; the config, certificate and key watched; triggers on config 'uhttpd' and acme.renew" \
		has_all "$json" '"respawn": [ "3600", "5", "5" ]' '"stderr": true' \
			'"file": [ "/var/etc/marmoset/uhttpd-main.conf", "/etc/uhttpd.crt", "/etc/uhttpd.key" ]' \
			'"config.change"' '"uhttpd"' '"acme.renew"'
	check "real uci: hostname and domain read (allowed-hosts gw gw.home.arpa)" \
		grep -qx 'allowed-hosts gw gw.home.arpa' "$R/var/etc/marmoset/uhttpd-main.conf"
	check "real uci: list options read (two listen_https)" \
		[ "$(grep -c " tls\$" "$R/var/etc/marmoset/uhttpd-main.conf")" = 2 ]
	check "the written config passes marmoset --check-config in the chroot" \
		chroot "$R" /usr/bin/marmoset --check-config --config /var/etc/marmoset/uhttpd-main.conf
	if [ $procd = 0 ]; then
		chroot "$R" /usr/bin/marmoset --config /var/etc/marmoset/uhttpd-main.conf 2>>"$TMP/server.log" &
		pid=$!
		pids="$pids $pid"
		wait_up "https://127.0.0.1:$P2/" -k || bad "the chrooted server did not come up" || cat "$TMP/server.log"
		check "the server started as procd would: HTTP and HTTPS answer" \
			[ "$(curl -s "http://127.0.0.1:$P1/")$(curl -sk "https://127.0.0.1:$P2/")" = hellohello ]
		stop
	else
		wait_up "https://127.0.0.1:$P2/" -k || bad "procd did not start the server" || cat "$TMP/procd.log"
		check "procd started the server: HTTP and HTTPS answer" \
			[ "$(curl -s "http://127.0.0.1:$P1/")$(curl -sk "https://127.0.0.1:$P2/")" = hellohello ]
		first=$(instance_pid uhttpd main)
		respawned() {
			_p=$(instance_pid uhttpd main)
			[ -n "$first" ] && [ -n "$_p" ] && [ "$_p" != "$first" ] && answers "http://127.0.0.1:$P1/"
		}
		[ -z "$first" ] || kill -9 "$first"
		check "killed, procd starts it again (after respawn's 5 s): another process answers" eventually 20 respawned
		P4=$(free_port)
		relisten uhttpd listen_http "127.0.0.1:$P4"
		check "a changed listen_http and the config.change event: procd restarts it on the new port" \
			eventually 20 answers "http://127.0.0.1:$P4/" ||
			sed 's/^/     /' "$TMP/procd.log" "$R/var/etc/marmoset/uhttpd-main.conf"
		check "and the old port is closed" refused "http://127.0.0.1:$P1/"
		stopped() { [ -z "$(instance_pid "$1" "$2")" ] && refused "$3"; }
		chroot "$R" /etc/init.d/uhttpd stop >>"$TMP/rc.out" 2>&1
		check "rc.common stop: procd stops it, its port closed" eventually 20 stopped uhttpd main "https://127.0.0.1:$P2/"
	fi

	# The marmoset and marmoset-tls packages' own script, in the same chroot.
	cp init/marmoset.init "$R/etc/init.d/marmoset"
	chmod 755 "$R/etc/init.d/marmoset"
	mkdir -p "$R/etc/marmoset"
	cp rootfs-overlay/etc/marmoset/marmoset.conf "$R/etc/marmoset/"
	P3=$(free_port)
	sed "s|'0.0.0.0:8080'|'127.0.0.1:$P3'|; /\[::\]:8080/d; s|/www-marmoset|/www|; s|option syslog '1'|option syslog '0'|" \
		init/marmoset.uci >"$R/etc/config/marmoset"
	: >"$R/tmp/ubus.calls"
	chroot "$R" /etc/init.d/marmoset start >"$TMP/rc-marmoset.out" 2>&1
	json=$(sed -n 's/^call service set //p' "$R/tmp/ubus.calls" | sed 's|\\/|/|g')
	check "marmoset.init under rc.common: procd gets service 'marmoset' running /usr/bin/marmoset as nobody" \
		has_all "$json" '"name": "marmoset"' '"command": [ "/usr/bin/marmoset", "--listen", "127.0.0.1:'"$P3"'"' \
			'"--user", "nobody", "--group", "nogroup"' '"respawn": [ "3600", "5", "5" ]' ||
		sed 's/^/     /' "$TMP/rc-marmoset.out" "$R/tmp/ubus.calls"
	if [ $procd = 0 ]; then
		# That command, run in the chroot as procd would (its arguments hold no spaces).
		# shellcheck disable=SC2046
		set -- $(printf '%s' "$json" | python3 -c 'import json, sys
print(" ".join(json.load(sys.stdin)["instances"]["instance1"]["command"]))' 2>/dev/null)
		if [ $# -gt 0 ]; then
			chroot "$R" "$@" 2>>"$TMP/server.log" &
			pid=$!
			pids="$pids $pid"
			wait_up "http://127.0.0.1:$P3/" || cat "$TMP/server.log"
		fi
		check "that command serves the page" [ "$(curl -s "http://127.0.0.1:$P3/")" = hello ]
	else
		wait_up "http://127.0.0.1:$P3/" || cat "$TMP/procd.log"
		check "procd started it: it serves the page" [ "$(curl -s "http://127.0.0.1:$P3/")" = hello ]
		pid=$(instance_pid marmoset instance1)
	fi
	check "started as root, it runs as nobody (uid 65534)" [ "$(ps -o uid= -p "${pid:-0}" 2>/dev/null | tr -d ' ')" = 65534 ]
	if [ $procd = 0 ]; then
		stop
	else
		P5=$(free_port)
		relisten marmoset listen "127.0.0.1:$P5"
		check "marmoset.init: a changed listen and the config.change event: procd restarts it on the new port" \
			eventually 20 answers "http://127.0.0.1:$P5/" || sed 's/^/     /' "$TMP/procd.log"
		check "and the old port is closed" refused "http://127.0.0.1:$P3/"
		chroot "$R" /etc/init.d/marmoset stop >>"$TMP/rc-marmoset.out" 2>&1
		check "rc.common stop: procd stops it, its port closed" eventually 20 stopped marmoset instance1 "http://127.0.0.1:$P5/"
	fi
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
