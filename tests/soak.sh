#!/bin/sh
# Soak: many keep-alive requests and many connection open/close cycles
# against the real binary must leave its memory and descriptors where they
# were. Measures the RSS summed over the supervisor and its workers
# (/proc/PID/status VmRSS) and the /proc/PID/fd counts after a warm-up,
# runs the load with ab (apache2-utils), and checks that the RSS is within
# 10 % of before and the descriptor counts are equal.
#
# Usage: tests/soak.sh [--long]
#   default: 200000 keep-alive requests, 20000 open/close cycles (about 30 s)
#   --long:  1000000 and 100000
# MARMOSET_BIN: the binary (default $CARGO_TARGET_DIR/release/marmoset,
# built if missing). Last line: "N passed, M failed"; non-zero exit on failure.
set -u
cd "$(dirname "$0")/.." || exit 1

REQUESTS=200000
CYCLES=20000
if [ "${1:-}" = --long ]; then
	REQUESTS=1000000
	CYCLES=100000
fi
# Open/close cycles per ab run: each leaves a TIME_WAIT socket on the
# client side, so a long run is split to stay within the ephemeral ports.
BATCH=20000

. tests/lib.sh
need ab apache2-utils

mkdir -p "$work/root"
echo "soak page" >"$work/root/index.html"
# Above the 16 KiB sendfile threshold, so both send paths are soaked.
head -c 40000 /dev/urandom >"$work/root/big.bin"

start_marmoset --workers 2

pids() { echo "$server $(cat "/proc/$server/task/$server/children" 2>/dev/null)"; }
rss() {
	total=0
	for p in $(pids); do
		kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
		total=$((total + ${kb:-0}))
	done
	echo "$total"
}
# Descriptors of each process, "pid:count ...".
fds() {
	out=""
	for p in $(pids); do
		out="$out $p:$(find "/proc/$p/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
	done
	echo "${out# }"
}
# Waits (up to 20 s) until the descriptor counts are $1: the server closes
# its side of the last connections a moment after ab has finished.
fds_settle() {
	i=0
	now=$(fds)
	while [ "$now" != "$1" ] && [ $i -lt 200 ]; do
		sleep 0.1
		i=$((i + 1))
		now=$(fds)
	done
	echo "$now"
}

# ab must complete everything: "$1" requests, none failed, no non-2xx.
check_ab() {
	what=$1 want=$2 file=$3
	complete=$(awk '/^Complete requests:/ { print $3 }' "$file")
	failed=$(awk '/^Failed requests:/ { print $3 }' "$file")
	non2xx=$(awk '/^Non-2xx responses:/ { print $3 }' "$file")
	rate=$(awk '/^Requests per second:/ { print $4 }' "$file")
	if [ "${complete:-0}" = "$want" ] && [ "${failed:-1}" = 0 ] && [ "${non2xx:-0}" = 0 ]; then
		ok "$what: $complete requests, 0 failed ($rate/s)"
	else
		bad "$what: complete ${complete:-?} of $want, failed ${failed:-?}, non-2xx ${non2xx:-0}: $(tail -n 3 "$file")"
	fi
}

# Warm-up: the allocator and the kernel reach their working sizes, and every
# worker's file cache holds both files (one open descriptor each). The 10
# keep-alive connections may all land on one worker; the open/close runs
# reach them all.
ab -k -q -c 10 -n 20000 "http://127.0.0.1:$port/index.html" >"$work/warm1" 2>&1
ab -q -c 10 -n 2000 "http://127.0.0.1:$port/big.bin" >"$work/warm2" 2>&1
ab -q -c 10 -n 2000 "http://127.0.0.1:$port/index.html" >"$work/warm3" 2>&1
check_ab "warm-up keep-alive" 20000 "$work/warm1"
check_ab "warm-up open/close" 2000 "$work/warm2"
check_ab "warm-up open/close, small file" 2000 "$work/warm3"

# The idle state: wait until two readings agree.
fds_before=$(fds_settle "$(fds)")
fds_before=$(fds_settle "$fds_before")
rss_before=$(rss)
echo "     before: RSS ${rss_before} kB over $(pids | wc -w) processes; fds $fds_before"
started=$(date +%s)

half=$((REQUESTS / 2))
ab -k -q -c 10 -n "$half" "http://127.0.0.1:$port/index.html" >"$work/ka1" 2>&1
check_ab "keep-alive, small file" "$half" "$work/ka1"
ab -k -q -c 10 -n $((REQUESTS - half)) "http://127.0.0.1:$port/big.bin" >"$work/ka2" 2>&1
check_ab "keep-alive, sendfile" $((REQUESTS - half)) "$work/ka2"

left=$CYCLES
n=0
while [ "$left" -gt 0 ] && [ $n -lt 100 ]; do
	this=$BATCH
	[ "$left" -lt "$this" ] && this=$left
	ab -q -c 10 -n "$this" "http://127.0.0.1:$port/index.html" >"$work/cycles$n" 2>&1
	check_ab "open/close cycles, batch $((n + 1))" "$this" "$work/cycles$n"
	left=$((left - this))
	n=$((n + 1))
done
took=$(($(date +%s) - started))

fds_after=$(fds_settle "$fds_before")
rss_after=$(rss)
echo "     after ($REQUESTS keep-alive requests, $CYCLES cycles, ${took}s): RSS ${rss_after} kB; fds $fds_after"

if [ "$fds_after" = "$fds_before" ]; then
	ok "descriptor counts unchanged ($fds_after)"
else
	bad "descriptor counts changed: before $fds_before, after $fds_after"
fi
diff=$((rss_after - rss_before))
[ $diff -lt 0 ] && diff=$((-diff))
if [ $((diff * 10)) -le "$rss_before" ]; then
	ok "RSS within 10 %: ${rss_before} kB -> ${rss_after} kB"
else
	bad "RSS moved more than 10 %: ${rss_before} kB -> ${rss_after} kB"
fi
if grep -q 'restarting it' "$work/log"; then
	bad "a worker died: $(grep 'restarting it' "$work/log" | head -n 3)"
else
	ok "no worker died"
fi
finish
