#!/bin/sh
# Slow clients against the real binary: slowhttptest in slow-headers
# (slowloris, -H) and slow-body (R-U-Dead-Yet, -B) modes, while a second
# client (curl) keeps asking for a page and must get it every time, each
# request within 2 s. Afterwards slowhttptest's output and CSV must show
# that the server closed the slow connections (none left open at the end)
# and that its probe found the service available throughout.
#
# Usage: tests/slow.sh
# MARMOSET_BIN: the binary (default $CARGO_TARGET_DIR/release/marmoset,
# built if missing). Installs slowhttptest (Debian) if missing.
# About 30 s. Last line: "N passed, M failed"; non-zero exit on failure.
set -u
cd "$(dirname "$0")/.." || exit 1

# The slow clients: connections and the pause between their drips.
CONNS_HEADERS=200
CONNS_BODY=50
DRIP=2
# slowhttptest gives up after this long; the server must close everything first.
LENGTH=30
# Every curl request must finish within this.
BOUND=2

. tests/lib.sh
need slowhttptest slowhttptest
need curl curl

mkdir -p "$work/root/cgi-bin"
echo "slow.sh page" >"$work/root/index.html"
printf '#!/bin/sh\nprintf "Content-Type: text/plain\\n\\n"; cat\n' >"$work/root/cgi-bin/echo"
chmod 755 "$work/root/cgi-bin/echo"

# --cgi-timeout bounds a slow body: the script waiting for it is killed.
start_marmoset --header-timeout 5 --cgi-timeout 10

# The well-behaved client: one request every 0.2 s until told to stop
# (at most 1000), one line per request: "CODE SECONDS".
well_behaved() {
	n=0
	while [ ! -e "$work/stop" ] && [ $n -lt 1000 ]; do
		curl -s -o /dev/null --max-time "$BOUND" -w '%{http_code} %{time_total}\n' \
			"http://127.0.0.1:$port/" >>"$work/curl-$1" 2>/dev/null || echo "000 $BOUND" >>"$work/curl-$1"
		n=$((n + 1))
		sleep 0.2 # pacing between requests, not a wait for anything
	done
}

# Runs one slowhttptest mode while the well-behaved client runs.
# $1: name, then slowhttptest's mode flags.
attack() {
	name=$1
	shift
	rm -f "$work/stop"
	: >"$work/curl-$name"
	well_behaved "$name" &
	client=$!
	started=$(date +%s)
	timeout $((LENGTH + 30)) slowhttptest "$@" -i "$DRIP" -l "$LENGTH" -p "$BOUND" \
		-g -o "$work/$name" >"$work/$name.out" 2>&1
	rc=$?
	took=$(($(date +%s) - started))
	touch "$work/stop"
	wait "$client"
	# Without terminal colours, for grep.
	sed 's/\x1b\[[0-9;]*m//g' "$work/$name.out" >"$work/$name.txt"

	if [ $rc != 0 ] || [ ! -s "$work/$name.csv" ]; then
		bad "$name: slowhttptest failed (rc $rc): $(tail -n 5 "$work/$name.txt")"
		return
	fi
	ok "$name: slowhttptest ran ${took}s"
	if grep -q 'Exit status: No open connections left' "$work/$name.txt"; then
		ok "$name: the server closed every slow connection before the ${LENGTH}s limit"
	else
		bad "$name: slow connections still open at the end: $(grep -A1 'Exit status' "$work/$name.txt")"
	fi
	# CSV: Seconds,Closed,Pending,Connected,Service Available (0 when the probe failed).
	closed=$(awk -F, 'NR > 1 && $2 > m { m = $2 } END { print m + 0 }' "$work/$name.csv")
	down=$(awk -F, 'NR > 1 && $5 == 0 { n++ } END { print n + 0 }' "$work/$name.csv")
	echo "     $name CSV: up to $closed closed by the server; last row: $(tail -n 1 "$work/$name.csv")"
	if [ "$closed" -gt 0 ]; then
		ok "$name: the CSV shows closed connections"
	else
		bad "$name: the CSV shows no closed connection"
	fi
	if [ "$down" = 0 ]; then
		ok "$name: slowhttptest's probe found the service available throughout"
	else
		bad "$name: service unavailable in $down samples"
	fi
	total=$(wc -l <"$work/curl-$name")
	good=$(awk -v b="$BOUND" '$1 == 200 && $2 < b { n++ } END { print n + 0 }' "$work/curl-$name")
	if [ "$total" -ge 5 ] && [ "$good" = "$total" ]; then
		ok "$name: the other client got all $total pages, each within ${BOUND}s"
	else
		bad "$name: the other client got $good of $total pages within ${BOUND}s: $(sort "$work/curl-$name" | uniq -c | sort -rn | head -n 5 | tr '\n' ' ')"
	fi
}

attack headers -H -c "$CONNS_HEADERS" -r 100 -u "http://127.0.0.1:$port/"
# Only CGI reads request bodies; a script slot is held per slow body
# (beyond cgi-max the server answers 503 at once).
attack body -B -c "$CONNS_BODY" -r 50 -s 8192 -u "http://127.0.0.1:$port/cgi-bin/echo"

if kill -0 "$server" 2>/dev/null && curl -s --max-time "$BOUND" "http://127.0.0.1:$port/" | grep -q 'slow.sh page'; then
	ok "the server is up and serving afterwards"
else
	bad "the server is gone or not serving: $(tail -n 5 "$work/log")"
fi
if grep -q 'restarting it' "$work/log"; then
	bad "a worker died: $(grep 'restarting it' "$work/log" | head -n 3)"
else
	ok "no worker died"
fi
finish
