#!/usr/bin/env bash
# The 200 KiB HTTPS test with the kernel making the TLS records (kTLS, sendfile) and without
# (rustls in the worker), on the QEMU aarch64 guest: the one kernel here with a TLS module. One boot
# of tests/qemu/boot.sh's HTTPS image (the tls build, the shipped config plus HTTPS, one worker);
# marmoset is restarted with tls.ko loaded and with it unloaded, alternating (the order reversed
# every other round); the same client each time: wrk on the host, through QEMU's user networking.
# For each run: requests/s, the server's CPU from /proc/PID/stat in the guest (user and system, per
# request), the guest's idle share (/proc/stat: whether the guest or the path to it is what limits),
# QEMU's own CPU on the host. The guest runs with `-icount shift=0`: its clock counts instructions
# (1 ns each), so the server's CPU is guest instructions, the same whatever else the host runs; the
# requests/s are by the host's clock. Run as root; not part of tests/run.sh.
#
#   bench/ktls-qemu.sh        writes bench/ktls-qemu.md (logs in bench/out/ktls-qemu/) and prints it
#
# Environment: ROUNDS (default 3), DURATION (seconds per wrk run, default 20), CONNECTIONS (wrk -c,
# default 4), ICOUNT (default shift=0; empty: TCG on the host's clock, CPU then in host-clock ms),
# KTLS_REPORT (where the report goes),
# and boot.sh's (MARMOSET_QEMU_BINARY, MARMOSET_QEMU_CACHE, CARGO_TARGET_DIR).
set -u -o pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${ROUNDS:-3}
ICOUNT=${ICOUNT-shift=0}
export MARMOSET_QEMU_ARGS="${MARMOSET_QEMU_ARGS:-}${ICOUNT:+ -icount $ICOUNT}"
DURATION=${DURATION:-20}
CONNECTIONS=${CONNECTIONS:-4}
FILE_BYTES=204800
export MARMOSET_QEMU_OUT=${MARMOSET_QEMU_OUT:-$BENCH/out/ktls-qemu}
REPORT=${KTLS_REPORT:-$BENCH/ktls-qemu.md}

OVERLAY=$(mktemp -d "${TMPDIR:-/tmp}/marmoset-ktls.XXXXXX")
# Copied over the image root with cp -a: its mode becomes the root directory's.
chmod 0755 "$OVERLAY"
mkdir -p "$OVERLAY/www/bench"
head -c "$FILE_BYTES" /dev/urandom >"$OVERLAY/www/bench/200k.bin"
export MARMOSET_QEMU_EXTRA_OVERLAY=$OVERLAY

# boot.sh's steps and helpers (guest, check, cleanup), for the HTTPS image of qemu-aarch64.
# shellcheck source=tests/qemu/boot.sh
MARMOSET_QEMU_LIBRARY=1 . "$BENCH/../tests/qemu/boot.sh" qemu-aarch64 tls
# Run by boot.sh's cleanup, which its finish and abort run too.
own_cleanup() { rm -rf "$OVERLAY"; }

host_prereqs
command -v wrk >/dev/null || apt_install wrk || abort "could not install wrk"
build_binary
fetch_debs
build_initramfs
boot

# Restarts marmoset with tls.ko loaded (kernel) or unloaded (user); checks the line it logs.
switch_to() { # switch_to kernel|user
  local cmd code deadline
  if [ "$1" = kernel ]; then
    cmd="lsmod | grep -q '^tls ' || insmod /lib/modules/tls.ko"
  else
    # The module goes once no socket holds it (the closed connections' are freed at once).
    cmd="i=0; while lsmod | grep -q '^tls ' && ! rmmod tls 2>/dev/null && [ \$i -lt 100 ]; do usleep 100000; i=\$((i+1)); done"
  fi
  guest 90 "/etc/init.d/S50marmoset stop >/dev/null; $cmd; /etc/init.d/S50marmoset start >/dev/null; lsmod | grep -c '^tls '"
  deadline=$(($(date +%s) + 60))
  while :; do
    code=$(curl -sk -o /dev/null -w '%{http_code}' --max-time 5 "https://127.0.0.1:$PORT/bench/200k.bin")
    [ "$code" = 200 ] && break
    [ "$(date +%s)" -lt "$deadline" ] || abort "marmoset did not answer after the restart ($1)"
    sleep 0.2
  done
  guest 20 "cat $GUEST_PIDFILE"
  SERVER_PID=$(printf '%s\n' "$GOUT" | tr -dc 0-9)
  guest 20 "grep 'marmoset\\[$SERVER_PID\\]: TLS: records' /var/log/messages"
  local want="records in user space"
  [ "$1" = kernel ] && want="records in the kernel"
  printf '%s\n' "$GOUT" | grep -q "$want" || abort "pid $SERVER_PID did not log '$want': $GOUT"
}

sample() { # sets SAMPLE="server_utime server_stime guest_total guest_idle qemu_ticks" (clock ticks)
  guest 20 "cat /proc/$SERVER_PID/stat; head -n 1 /proc/stat"
  local guest_part qemu
  guest_part=$(printf '%s\n' "$GOUT" | awk '
    /^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; idle = $5 + $6 }
    /^[0-9]+ \(/ { sub(/^.*\) /, ""); ut = $12; st = $13 }
    END { print ut, st, t, idle }')
  qemu=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$QEMU_PID/stat")
  SAMPLE="$guest_part $qemu"
}

ROWS=()
run_once() { # run_once MODE ROUND
  switch_to "$1"
  sample
  local before=$SAMPLE out
  out=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 30s "https://127.0.0.1:$PORT/bench/200k.bin" 2>&1)
  sample
  local after=$SAMPLE
  local requests seconds errors tx
  requests=$(printf '%s\n' "$out" | awk '/requests in/ { print $1 }')
  seconds=$(printf '%s\n' "$out" | awk '/requests in/ { sub(/s,$/, "", $4); print $4 }')
  errors=$(printf '%s\n' "$out" | awk '/Socket errors|Non-2xx/ { e = e $0 "; " } END { print e }')
  if [ -z "$requests" ] || [ "$requests" -le 0 ]; then
    abort "wrk ($1): $out"
  fi
  if [ "$1" = kernel ]; then
    # Every connection of the run went through the kernel's TLS (TlsTxSw counts them).
    guest 20 "awk '\$1 == \"TlsTxSw\" { print \$2 }' /proc/net/tls_stat"
    tx=$(printf '%s\n' "$GOUT" | tr -dc 0-9)
    [ "${tx:-0}" -ge "$CONNECTIONS" ] || abort "kernel run: TlsTxSw is '$tx', fewer than $CONNECTIONS"
  fi
  ROWS+=("$1 $2 $requests $seconds $before $after")
  say "$1, round $2: $(printf '%s\n' "$out" | grep -E 'requests in|Requests/sec' | tr -s ' ' | tr '\n' ' ')${errors:+ errors: $errors}"
}

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then order="kernel user"; else order="user kernel"; fi
  for mode in $order; do
    run_once "$mode" "$round"
  done
done

# A row: mode round requests seconds, then before and after: server utime stime, guest total idle
# (USER_HZ ticks, 100 a second), QEMU's utime+stime (host ticks).
HOST_HZ=$(getconf CLK_TCK)
UNIT="ms"
[ -n "$ICOUNT" ] && UNIT="M instructions"
mkdir -p "$(dirname "$REPORT")"
{
  echo "# Kernel TLS on the QEMU aarch64 guest: the 200 KiB test both ways"
  echo
  echo "- made by: \`ROUNDS=$ROUNDS DURATION=$DURATION CONNECTIONS=$CONNECTIONS ICOUNT=$ICOUNT bench/ktls-qemu.sh\`"
  # shellcheck disable=SC2153 # QEMU and QEMU_CPU come from board.conf
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(uname -r), load average $LOAD at the start; guest: Debian $KVER under $QEMU (TCG, -cpu $QEMU_CPU, one vCPU)"
  echo "- server: $(basename "$BINARY") $(stat -c %s "$BINARY") bytes ($RUST_TARGET, --features tls), the image's config plus HTTPS, one worker"
  echo "- client: \`wrk -t1 -c$CONNECTIONS -d${DURATION}s https://127.0.0.1:PORT/bench/200k.bin\` ($FILE_BYTES bytes, TLS 1.3) on the host, through QEMU's user networking (hostfwd)"
  echo "- kernel: tls.ko loaded, the records in the kernel (kTLS), bodies with sendfile; user: tls.ko unloaded, rustls in the worker; marmoset restarted for each run, $ROUNDS rounds, alternating"
  if [ -n "$ICOUNT" ]; then
    echo "- guest clock: \`-icount $ICOUNT\` (an instruction is a nanosecond of guest time): CPU in millions of guest instructions, whatever else the host runs; requests/s by the host's clock"
  else
    echo "- guest clock: the host's (TCG without -icount): CPU in milliseconds, inflated by whatever else the host runs"
  fi
  echo "- server CPU: utime + stime of the marmoset process (/proc/PID/stat); guest CPU: all of the guest's busy time (/proc/stat, not idle or iowait); QEMU: the emulator's CPU time on the host; each per request"
  echo
  echo "| mode | round | requests | requests/s | server CPU, $UNIT per request (user + system) | guest CPU, $UNIT per request | guest idle | QEMU host CPU, ms per request |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${ROWS[@]}" | awk -v hz="$HOST_HZ" '{
    n = $3; user = ($10 - $5) * 10 / n; sys = ($11 - $6) * 10 / n
    total = $12 - $7; idle = $13 - $8
    printf "| %s | %d | %d | %.1f | %.2f (%.2f + %.2f) | %.2f | %.0f %% | %.2f |\n", $1, $2, n, n / $4,
      user + sys, user, sys, (total - idle) * 10 / n, 100 * idle / total, ($14 - $9) * 1000 / hz / n }'
  echo
  # Medians over rounds (the mean of the middle two for an even count), and kernel / user.
  printf '%s\n' "${ROWS[@]}" | awk -v unit="$UNIT" -v hz="$HOST_HZ" '
    function median(list,   a, k, i, j, t) {
      k = split(list, a, " ")
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    { n = $3; m = $1
      rate[m] = rate[m] " " n / $4
      server[m] = server[m] " " (($10 - $5) + ($11 - $6)) * 10 / n
      guest[m] = guest[m] " " (($12 - $7) - ($13 - $8)) * 10 / n
      qemu[m] = qemu[m] " " ($14 - $9) * 1000 / hz / n }
    END {
      for (m in rate) { R[m] = median(rate[m]); S[m] = median(server[m]); G[m] = median(guest[m]); Q[m] = median(qemu[m]) }
      printf "Medians, kernel and user: %.1f and %.1f requests/s; server CPU %.2f and %.2f %s per request; ", R["kernel"], R["user"], S["kernel"], S["user"], unit
      printf "the whole guest %.2f and %.2f; QEMU on the host %.2f and %.2f ms.\n\n", G["kernel"], G["user"], Q["kernel"], Q["user"]
      printf "Kernel / user: %.2f× the requests/s, %.2f× the server CPU, %.2f× the guest CPU, %.2f× the host CPU per request.\n", \
        R["kernel"] / R["user"], S["kernel"] / S["user"], G["kernel"] / G["user"], Q["kernel"] / Q["user"]
    }'
} >"$REPORT"
cat "$REPORT"
printf 'poweroff -f\n' >&7
