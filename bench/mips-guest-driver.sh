#!/bin/sh
# The load side of bench/mips-guest.sh, run inside the MIPS guest (BusyBox ash): starts one server,
# waits until it listens (with a deadline), runs ApacheBench or openssl s_time against it over
# loopback, reads the server's memory and CPU and the TCP segments of the run from /proc, stops it. Every figure is printed as one
# line `@@R SERVER TEST key=value ...` for the host to collect from the serial console.
#
#   driver.sh http SERVER SECONDS    1.4 KB keep-alive, 1.4 KB new connection each, 200 KB keep-alive
#   driver.sh https SERVER SECONDS   ECDSA P-256 and RSA-2048 handshakes, HTTPS keep-alive on 1.4 KB
#   driver.sh counts SERVER N        context switches per request of each thread (and, with strace,
#                                    system calls per request) over `ab -k -c 1 -n N`
#   driver.sh versions               one `@@V name: version` line per program
#
# SERVER: marmoset, marmoset-lean (the same binary sending only the head lines the peers send),
# marmoset-tls, busybox, lighttpd, uhttpd.
# shellcheck disable=SC3043 # BusyBox ash has local
HTTP_PORT=8080
HTTPS_PORT=8443
DOC=/www/bench
HERE=/bench
HTML_SIZE=1364
# ab stops at the time limit; -n only has to be out of reach.
AB_MAX=1000000
START_DEADLINE=30   # seconds for a server to listen
STOP_DEADLINE=30    # seconds for it to exit after SIGTERM

say() { echo "driver: $*" >&2; }
emit() { echo "@@R $*"; }

# Its pid and every descendant's (BusyBox httpd forks one process per connection).
tree() {
	local t c
	echo "$1"
	for t in /proc/"$1"/task/*; do
		# shellcheck disable=SC2013 # pids, one word each
		for c in $(cat "$t/children" 2>/dev/null); do
			tree "$c"
		done
	done
}

# Sum of a /proc/PID/status field (kB) over the server's processes.
tree_status_kb() { # tree_status_kb PID FIELD
	s=0
	for p in $(tree "$1"); do
		while read -r k v _; do
			[ "$k" = "$2:" ] && s=$((s + v))
		done <"/proc/$p/status" 2>/dev/null
	done
	echo "$s"
}

# utime + stime of the server's processes and of their reaped children, in clock ticks.
tree_ticks() {
	s=0
	for p in $(tree "$1"); do
		read -r stat <"/proc/$p/stat" 2>/dev/null || continue
		# shellcheck disable=SC2086 # the fields after "(comm) " on purpose
		set -- ${stat##*) }
		s=$((s + ${12} + ${13} + ${14} + ${15}))
	done
	echo "$s"
}

# Bytes on disk of every file the server's processes map: its binary, the libraries, the modules.
mapped_bytes() {
	for p in $(tree "$1"); do
		awk '$6 ~ /^\// && $6 !~ /^\/(dev|proc|sys)\// { print $6 }' "/proc/$p/maps" 2>/dev/null
	done | sort -u >/tmp/mapped.txt
	total=0 n=0
	while read -r f; do
		[ -f "$f" ] || continue
		total=$((total + $(stat -c %s "$f")))
		n=$((n + 1))
	done </tmp/mapped.txt
	echo "bytes=$total files=$n"
}

listening() { # listening PORT: a socket in LISTEN on it
	grep -q ":$(printf '%04X' "$1") 00000000:0000 0A" /proc/net/tcp
}

# start SERVER PROTO KEYTYPE: sets SPID, PORT and SCHEME.
start() {
	name=$1 proto=$2 kt=$3
	if [ "$proto" = https ]; then PORT=$HTTPS_PORT SCHEME=https; else PORT=$HTTP_PORT SCHEME=http; fi
	if listening "$PORT"; then
		say "port $PORT is already taken"
		return 1
	fi
	case $name in
	marmoset | marmoset-lean)
		conf=empty
		[ "$name" = marmoset-lean ] && conf=lean
		/usr/bin/marmoset --config "$HERE/$conf.conf" --root "$DOC" --listen "127.0.0.1:$PORT" \
			--workers 1 >/tmp/server.log 2>&1 &
		;;
	marmoset-tls)
		/usr/bin/marmoset-tls --config "$HERE/empty.conf" --root "$DOC" --listen "127.0.0.1:$PORT tls" \
			--tls-cert "$HERE/$kt-cert.pem" --tls-key "$HERE/$kt-key.pem" --workers 1 >/tmp/server.log 2>&1 &
		;;
	busybox)
		busybox httpd -f -p "127.0.0.1:$PORT" -h "$DOC" >/tmp/server.log 2>&1 &
		;;
	lighttpd)
		{
			cat "$HERE/lighttpd.conf"
			echo "server.port = $PORT"
			if [ "$proto" = https ]; then
				echo 'server.modules += ( "mod_openssl" )'
				echo 'ssl.engine = "enable"'
				echo "ssl.pemfile = \"$HERE/$kt-cert.pem\""
				echo "ssl.privkey = \"$HERE/$kt-key.pem\""
			fi
		} >/tmp/lighttpd.conf
		lighttpd -D -f /tmp/lighttpd.conf >/tmp/server.log 2>&1 &
		;;
	uhttpd)
		/usr/sbin/uhttpd -f -p "127.0.0.1:$PORT" -h "$DOC" >/tmp/server.log 2>&1 &
		;;
	*)
		say "unknown server $name"
		return 1
		;;
	esac
	SPID=$!
	i=0
	while ! listening "$PORT"; do
		if ! kill -0 "$SPID" 2>/dev/null; then
			say "$name exited before listening: $(tail -n 5 /tmp/server.log | tr '\n' ' ')"
			return 1
		fi
		i=$((i + 1))
		if [ $i -gt $((START_DEADLINE * 20)) ]; then
			say "$name not listening on $PORT after ${START_DEADLINE}s"
			stop
			return 1
		fi
		usleep 50000
	done
}

gone() { # gone PID: exited (a zombie until the shell's wait, or reaped)
	[ ! -e "/proc/$1/stat" ] || [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

stop() {
	pids=$(tree "$SPID")
	# shellcheck disable=SC2086
	kill $pids 2>/dev/null
	i=0
	until gone "$SPID"; do
		i=$((i + 1))
		if [ $i -gt $((STOP_DEADLINE * 20)) ]; then
			say "pid $SPID still there ${STOP_DEADLINE}s after SIGTERM: killed"
			# shellcheck disable=SC2086
			kill -9 $pids 2>/dev/null
			break
		fi
		usleep 50000
	done
	wait "$SPID" 2>/dev/null
	i=0
	while listening "$PORT" && [ $i -lt $((STOP_DEADLINE * 20)) ]; do
		usleep 50000
		i=$((i + 1))
	done
}

# RSS of the server sampled once a second while a test runs; the largest sum is its peak.
PEAK=0
sampler_start() {
	rm -f /tmp/peak
	(
		peak=0
		while :; do
			r=$(tree_status_kb "$SPID" VmRSS)
			if [ "$r" -gt "$peak" ]; then peak=$r; echo "$peak" >/tmp/peak; fi
			sleep 1
		done
	) &
	SAMPLER=$!
}
sampler_stop() {
	kill "$SAMPLER" 2>/dev/null
	wait "$SAMPLER" 2>/dev/null
	p=$(cat /tmp/peak 2>/dev/null || echo 0)
	[ "$p" -gt "$PEAK" ] && PEAK=$p
	# The processes still there may have been larger between samples.
	h=$(tree_status_kb "$SPID" VmHWM)
	[ "$h" -gt "$PEAK" ] && PEAK=$h
}

# TCP's segments sent and retransmitted so far, both ends of every
# loopback connection: "OUTSEGS RETRANSSEGS".
tcp_counts() {
	awk '$1 == "Tcp:" && !o { for (i = 2; i <= NF; i++) { if ($i == "OutSegs") o = i; if ($i == "RetransSegs") r = i }; next }
		$1 == "Tcp:" && o { print $o, $r }' /proc/net/snmp
}

# One ab run: TEST ARGS PATH SECONDS -> @@R SERVER TEST rps= complete= failed= cpu_ms=
run_ab() { # run_ab SERVER TEST "AB-ARGS" PATH SECONDS
	t0=$(tree_ticks "$SPID")
	c0=$(tcp_counts)
	sampler_start
	# shellcheck disable=SC2086 # the ab arguments
	ab $3 -t "$5" -n "$AB_MAX" "$SCHEME://127.0.0.1:$PORT$4" >/tmp/ab.out 2>&1
	rc=$?
	sampler_stop
	t1=$(tree_ticks "$SPID")
	c1=$(tcp_counts)
	# Failed: ab's failed requests, non-2xx answers, and a run that ended in an error.
	awk -v s="$1" -v t="$2" -v rc="$rc" -v ticks=$((t1 - t0)) -v segs=$((${c1% *} - ${c0% *})) -v rt=$((${c1#* } - ${c0#* })) '
		/^Complete requests:/ { n = $3 }
		/^Failed requests:/ { f += $3 }
		/^Non-2xx responses:/ { f += $3 }
		/^Requests per second:/ { rps = $4 }
		/^Keep-Alive requests:/ { ka = $3 }
		END {
			if (n == "") { n = 0; f = "error" } else if (rc != 0) f = f "+exit" rc
			printf "@@R %s %s rps=%s complete=%d failed=%s keepalive=%d cpu_ms=%.3f segs=%.2f retrans=%.3f\n", s, t, rps + 0,
				n, f + 0 == f ? f + 0 : f, ka, n ? ticks * 10 / n : 0, n ? segs / n : 0, n ? rt / n : 0
		}' /tmp/ab.out
	if ! grep -q '^Complete requests:' /tmp/ab.out; then
		say "ab gave no result: $(tail -n 3 /tmp/ab.out | tr '\n' ' ')"
	elif ! grep -q '^Failed requests: *0$' /tmp/ab.out; then
		# Which kind (connect, receive, length, exceptions): the line after the count.
		say "$1 $2: $(grep -A 1 '^Failed requests:' /tmp/ab.out | tr -s ' \n' ' ')"
	fi
}

# One openssl s_time run: full handshakes (-new), each with a GET of the small page.
run_s_time() { # run_s_time SERVER TEST SECONDS
	t0=$(tree_ticks "$SPID")
	read -r u0 _ </proc/uptime
	openssl s_time -connect "127.0.0.1:$PORT" -new -time "$3" -www /index.html >/tmp/s_time.out 2>&1
	read -r u1 _ </proc/uptime
	t1=$(tree_ticks "$SPID")
	awk -v s="$1" -v t="$2" -v wall="$(awk -v a="$u0" -v b="$u1" 'BEGIN { print b - a }')" -v ticks=$((t1 - t0)) \
		-v html="$HTML_SIZE" '
		/connections in .*; .*bytes read/ && !done {
			n = $1; b = $NF; done = 1
		}
		/ERROR|error/ { err++ }
		END {
			n += 0
			# Every connection must have had its page (head and body).
			f = (n == 0 || b / n < html) ? (n ? n : "error") : 0
			printf "@@R %s %s rps=%.3f complete=%d failed=%s errors=%d cpu_ms=%.3f\n", s, t, (wall > 0 ? n / wall : 0), n, f,
				err, n ? ticks * 10 / n : 0
		}' /tmp/s_time.out
}

idle_rss() { # idle_rss SERVER SUFFIX: after one request, at rest
	ab -n 1 "$SCHEME://127.0.0.1:$PORT/index.html" >/tmp/ab1.out 2>&1
	grep -q '^Complete requests: *1$' /tmp/ab1.out || say "$1: the first request failed"
	emit "$1 rss$2 idle_kb=$(tree_status_kb "$SPID" VmRSS)"
}

http_pass() { # http_pass SERVER SECONDS
	start "$1" http ec || { emit "$1 start failed=error"; return 1; }
	idle_rss "$1" ""
	# The head's length is where the image's body starts in the stream: ab's copy of it is fastest on
	# this CPU when both ends of the copy are 4-byte aligned.
	ab -v 4 -k -n 1 "http://127.0.0.1:$PORT/linux.jpg" 2>/dev/null | awk -v s="$1" '
		/^HTTP\// { on = 1 } on { n += length($0) + 1 } on && ($0 == "" || $0 == "\r") { printf "@@R %s head bytes=%d\n", s, n; exit }'
	PEAK=0
	run_ab "$1" small_ka "-k -c 10" /index.html "$2"
	run_ab "$1" small_close "-c 10" /index.html "$2"
	run_ab "$1" big_ka "-k -c 10" /linux.jpg "$2"
	emit "$1 rss peak_kb=$PEAK"
	emit "$1 disk $(mapped_bytes "$SPID")"
	stop
}

# A handshake costs a tenth of a second to a second of guest CPU here: those tests run three times
# as long, for enough of them.
https_pass() { # https_pass SERVER SECONDS
	start "$1" https ec || { emit "$1 start_tls failed=error"; return 1; }
	idle_rss "$1" _tls
	PEAK=0
	run_s_time "$1" handshake_ec $(($2 * 3))
	# The suite each server picks from what OpenSSL offers (the load generators are OpenSSL too).
	emit "$1 suite name=$(openssl s_client -connect "127.0.0.1:$PORT" </dev/null 2>/dev/null |
		sed -n 's/.*Cipher is \([^ ]*\).*/\1/p' | head -n 1)"
	run_ab "$1" tls_small_ka "-k -c 1" /index.html "$2"
	stop
	start "$1" https rsa || { emit "$1 start_rsa failed=error"; return 1; }
	run_s_time "$1" handshake_rsa $(($2 * 3))
	emit "$1 rss_tls peak_kb=$PEAK"
	emit "$1 disk_tls $(mapped_bytes "$SPID")"
	stop
}

# Per-thread context switches (and system calls, when strace is in the image) per keep-alive
# request with one client.
thread_switches() { # -> lines "pid tid comm voluntary nonvoluntary"
	for p in $(tree "$SPID"); do
		for t in /proc/"$p"/task/*; do
			awk -v p="$p" -v t="${t##*/}" -v c="$(cat "$t/comm")" '
				/^voluntary_ctxt_switches/ { v = $2 } /^nonvoluntary_ctxt_switches/ { n = $2 }
				END { print p, t, c, v, n }' "$t/status"
		done
	done
}

counts() { # counts SERVER N
	start "$1" http ec || { emit "$1 counts failed=error"; return 1; }
	ab -n 1 "http://127.0.0.1:$PORT/index.html" >/dev/null 2>&1
	thread_switches >/tmp/sw0
	ab -k -c 1 -n "$2" "http://127.0.0.1:$PORT/index.html" >/tmp/ab.out 2>&1
	thread_switches >/tmp/sw1
	f=$(awk '/^Failed requests:/ { f += $3 } /^Non-2xx responses:/ { f += $3 } END { print f + 0 }' /tmp/ab.out)
	c=$(awk '/^Complete requests:/ { print $3 }' /tmp/ab.out)
	emit "$1 switches_run complete=${c:-0} failed=$f"
	awk -v s="$1" -v n="$2" 'NR == FNR { v[$2] = $4; nv[$2] = $5; next }
		{ printf "@@R %s switches pid=%s tid=%s comm=%s voluntary=%.3f nonvoluntary=%.3f\n", s, $1, $2, $3,
			($4 - v[$2]) / n, ($5 - nv[$2]) / n }' /tmp/sw0 /tmp/sw1
	if command -v strace >/dev/null; then
		args=""
		for p in $(tree "$SPID"); do args="$args -p $p"; done
		# shellcheck disable=SC2086
		strace -f -c -o /tmp/strace.txt $args 2>/tmp/strace.err &
		st=$!
		i=0
		# Attached once it says so for every process (threads are attached with them).
		until [ "$(grep -c 'attached' /tmp/strace.err 2>/dev/null)" -ge "$(tree "$SPID" | wc -l)" ]; do
			i=$((i + 1))
			if [ $i -gt 400 ] || ! kill -0 $st 2>/dev/null; then
				say "strace did not attach: $(cat /tmp/strace.err)"
				break
			fi
			usleep 50000
		done
		ab -k -c 1 -n "$2" "http://127.0.0.1:$PORT/index.html" >/tmp/ab.out 2>&1
		kill -INT $st
		wait $st
		c=$(awk '/^Complete requests:/ { print $3 }' /tmp/ab.out)
		awk -v s="$1" -v n="${c:-0}" '
			$1 ~ /^-+$/ { sep++; next }
			# A row: % time, seconds, usecs/call, calls, [errors], name.
			sep == 1 && NF >= 5 { total += $4; printf "@@R %s syscalls call=%s per_req=%.3f\n", s, $NF, n ? $4 / n : 0 }
			END { printf "@@R %s syscalls call=total per_req=%.3f requests=%d\n", s, n ? total / n : 0, n }
		' /tmp/strace.txt
	else
		emit "$1 syscalls call=none note=no-strace"
	fi
	stop
}

versions() {
	echo "@@V kernel: $(uname -r) $(uname -v)"
	echo "@@V cpu: $(awk -F': ' '/^cpu model/ { print $2; exit }' /proc/cpuinfo)"
	echo "@@V marmoset: $(/usr/bin/marmoset --version 2>&1 | head -n 1)"
	echo "@@V marmoset-tls: $(/usr/bin/marmoset-tls --version 2>&1 | head -n 1)"
	echo "@@V busybox: $(busybox 2>&1 | head -n 1)"
	echo "@@V lighttpd: $(lighttpd -v 2>&1 | head -n 1)"
	[ -x /usr/sbin/uhttpd ] && echo "@@V uhttpd: $(cat /usr/share/uhttpd.version 2>/dev/null || echo built from source)"
	echo "@@V ab: $(ab -V 2>&1 | head -n 1)"
	echo "@@V openssl: $(openssl version 2>&1)"
	command -v strace >/dev/null && echo "@@V strace: $(strace -V 2>&1 | head -n 1)"
	echo "@@V tree: $([ -e /proc/self/task/$$/children ] && echo children || echo none)"
}

case ${1:-} in
http) http_pass "$2" "$3" ;;
https) https_pass "$2" "$3" ;;
counts) counts "$2" "$3" ;;
versions) versions ;;
*) echo "usage: $0 http|https SERVER SECONDS | counts SERVER N | versions" >&2; exit 2 ;;
esac
