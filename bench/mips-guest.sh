#!/usr/bin/env bash
# Marmoset against its peers on a router's CPU: one QEMU Malta guest (`qemu-system-mipsel -M malta
# -cpu 24Kc -smp 1 -m 256`, Debian bookworm's 4kc-malta kernel, a BusyBox initramfs) holding
# marmoset (its default and its tls build for mipsel-unknown-linux-musl; the default build also
# as marmoset-lean, configured to send only the head lines the peers send), BusyBox httpd, lighttpd
# with mod_openssl (Debian's mipsel packages) and, when its tree is given, uhttpd; the load
# generator (ApacheBench, openssl s_time) runs in the same guest over loopback, so the host's
# network path is not measured. The guest is booted twice: under `-icount shift=3 -rtc clock=vm`
# (a 125 MIPS CPU whose clock counts instructions: the figures of record, untouched by the host's
# load) and on plain TCG (the host's clock) beside it. Run as root from a clone:
#
#   bench/mips-guest.sh                  full run: 3 rounds of 5-second tests in each mode, about
#                                        17 minutes; writes the "MIPS guest" section of bench/results.md
#   BENCH_SMOKE=1 bench/mips-guest.sh    1 round of 1-second tests, instruction count only, about
#                                        2 minutes after the builds; writes bench/out/mips-guest-smoke.md
#
# Per server and round (the servers rotated each round, one at a time): `ab -k -c 10` and `ab -c 10`
# on the 1364-byte page, `ab -k -c 10` on the 200 KB image, over HTTPS `openssl s_time -new` with an
# ECDSA P-256 and with an RSA-2048 certificate and `ab -k -c 10` on the page; the server's RSS idle
# and at its peak, its CPU, the TCP segments and retransmissions (both ends) per request (/proc in the
# guest), the length of the 200 KB answer's head, the bytes on disk of every file it maps
# (/proc/PID/maps). Then, for marmoset alone, context switches of each of its threads and
# system calls (strace -f -c) per request over `ab -k -c 1`. Medians over rounds; a test with
# failed requests is reported as such.
#
# Environment: ROUNDS (3; smoke 1), MIPS_SECONDS (seconds per test, 5; smoke 1), MIPS_MODES
# ("icount wall"; smoke "icount"), MIPS_COUNT_N (requests of the per-request counts, 500; smoke 100),
# MARMOSET_BIN and MARMOSET_TLS_BIN (mipsel builds to run instead of building them with
# board/build-std.sh), MIPS_SERVERS ("marmoset marmoset-lean busybox lighttpd", and uhttpd when built),
# MIPS_TLS_SERVERS ("marmoset-tls lighttpd"), UHTTPD_DIR and LIBUBOX_DIR (upstream trees of uhttpd
# and libubox: uhttpd is then built for mipsel with Debian's gcc-mipsel-linux-gnu against the
# mipsel packages' glibc and run over HTTP), MIPS_RESULTS (the file the section goes into),
# and tests/qemu/boot.sh's MARMOSET_QEMU_CACHE, MARMOSET_QEMU_REFRESH, CARGO_TARGET_DIR.
set -u -o pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$BENCH")
# The command as given, with the settings that were set (before the defaults fill them in).
COMMAND="bench/mips-guest.sh"
for v in LIBUBOX_DIR UHTTPD_DIR MARMOSET_TLS_BIN MARMOSET_BIN MIPS_TLS_SERVERS MIPS_SERVERS MIPS_COUNT_N MIPS_MODES \
  MIPS_SECONDS ROUNDS BENCH_SMOKE; do
  [ -n "${!v:-}" ] && COMMAND="$v=${!v} $COMMAND"
done
SMOKE=${BENCH_SMOKE:-}
if [ "$SMOKE" = 1 ]; then
  ROUNDS=${ROUNDS:-1} SECS=${MIPS_SECONDS:-1} MODES=${MIPS_MODES:-icount} COUNT_N=${MIPS_COUNT_N:-100}
  RESULTS=${MIPS_RESULTS:-$BENCH/out/mips-guest-smoke.md}
else
  ROUNDS=${ROUNDS:-3} SECS=${MIPS_SECONDS:-5} MODES=${MIPS_MODES:-icount wall} COUNT_N=${MIPS_COUNT_N:-500}
  RESULTS=${MIPS_RESULTS:-$BENCH/results.md}
fi
export MARMOSET_QEMU_OUT=${MARMOSET_QEMU_OUT:-$BENCH/out/mips-guest}
# The Debian mipsel packages unpacked into the image besides the kernel and BusyBox: the peers, the
# load generators, strace, and every library they need (their Depends, without the scripts').
GUEST_DEBS="lighttpd lighttpd-mod-openssl libnettle8 libpcre2-8-0 libxxhash0 libcrypt1 libc6 libgcc-s1
  libssl3 libatomic1 apache2-utils libapr1 libaprutil1 libuuid1 libdb5.3 libexpat1 libgdbm6 openssl strace"

# tests/qemu/boot.sh's steps for the Malta board: its packages, its cached Debian kernel and
# BusyBox, its initramfs and boot, and `guest` to run a command on the serial console.
# shellcheck source=tests/qemu/boot.sh
MARMOSET_QEMU_LIBRARY=1 . "$REPO_ROOT/tests/qemu/boot.sh" qemu-mipsel
TAG=mips-guest
OVERLAY=$(mktemp -d "${TMPDIR:-/tmp}/marmoset-mips-guest.XXXXXX")
chmod 0755 "$OVERLAY"   # copied over the image's root with cp -a
# Run by boot.sh's cleanup, which its finish and abort run too.
own_cleanup() { rm -rf "$OVERLAY"; }
ROWS="$OUT/rows.txt"
: >"$ROWS"
: >"$OUT/versions.txt"

[ "$(id -u)" = 0 ] || abort "run as root (installs packages, fetches the Debian mipsel packages)"
host_prereqs
for cmd in openssl:openssl python3:python3 xz:xz-utils; do
  command -v "${cmd%%:*}" >/dev/null || apt_install "${cmd#*:}" || abort "could not install ${cmd#*:}"
done
/usr/bin/python3 -c 'import PIL' 2>/dev/null || apt_install python3-pil || abort "could not install python3-pil"

# ---- marmoset: both builds for mipsel ------------------------------------------------------------
mipsel_build() { # mipsel_build [--features tls]: prints the binary's path
  local out log="$OUT/build${1:+-tls}.log"
  say "board/build-std.sh $RUST_TARGET $*" >&2
  out=$(cd "$REPO_ROOT" && board/build-std.sh "$RUST_TARGET" "$@" 2>"$log" | tail -n 1) || { tail -n 20 "$log" >&2; return 1; }
  case "$out" in /*) ;; *) out="$REPO_ROOT/$out" ;; esac
  printf '%s' "$out"
}
if [ -n "${MARMOSET_BIN:-}" ]; then MARMOSET=$MARMOSET_BIN
else MARMOSET=$(mipsel_build) || abort "board/build-std.sh $RUST_TARGET failed (see $OUT/build.log)"; fi
if [ -n "${MARMOSET_TLS_BIN:-}" ]; then MARMOSET_TLS=$MARMOSET_TLS_BIN
else MARMOSET_TLS=$(mipsel_build --features tls) || abort "board/build-std.sh $RUST_TARGET --features tls failed (see $OUT/build-tls.log)"; fi
for b in "$MARMOSET" "$MARMOSET_TLS"; do
  [ -f "$b" ] || abort "$b does not exist"
  readelf -h "$b" 2>/dev/null | grep -q 'Machine:.*MIPS' || abort "$b is not a MIPS binary"
  readelf -l "$b" | grep -q 'program interpreter' && abort "$b is dynamically linked (the image has no musl)"
done
BINARY=$MARMOSET   # boot.sh's image puts it at /usr/bin/marmoset
say "marmoset: $MARMOSET ($(stat -c %s "$MARMOSET") bytes); tls: $MARMOSET_TLS ($(stat -c %s "$MARMOSET_TLS") bytes)"

# ---- the Debian mipsel packages --------------------------------------------------------------------
fetch_debs   # the kernel and busybox-static, boot.sh's cache
fetch_guest_debs() { # fetch_guest_debs PACKAGE... : into the same cache, those not there yet
  local dir="$CACHE/debs/$DEB_ARCH" missing=() p
  for p in "$@"; do
    [ -n "$(newest_deb "$dir" "^${p//./\\.}\$")" ] && [ "${MARMOSET_QEMU_REFRESH:-}" != 1 ] || missing+=("$p:$DEB_ARCH")
  done
  [ ${#missing[@]} = 0 ] && return 0
  if ! dpkg --print-foreign-architectures | grep -qx "$DEB_ARCH"; then
    dpkg --add-architecture "$DEB_ARCH" || abort "dpkg --add-architecture $DEB_ARCH failed"
    ADDED_ARCH=$DEB_ARCH
  fi
  say "apt-get update, then apt-get download ${missing[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -q >"$OUT/apt-update.log" 2>&1 ||
    say "apt-get update exited $? (continuing; see $OUT/apt-update.log)"
  (cd "$dir" && apt-get download -q "${missing[@]}") >"$OUT/apt-download.log" 2>&1
  local rc=$?
  if [ -n "$ADDED_ARCH" ]; then
    dpkg --remove-architecture "$ADDED_ARCH" || say "warning: dpkg --remove-architecture $ADDED_ARCH failed"
    ADDED_ARCH=""
  fi
  [ $rc = 0 ] || { tail -n 5 "$OUT/apt-download.log"; abort "apt-get download failed"; }
}
# shellcheck disable=SC2086 # package names, one word each
fetch_guest_debs $GUEST_DEBS

# Unpacked into the overlay: programs and libraries, not the documentation, the locales' gconv
# modules or the packages' init scripts.
unpack_into_overlay() { # unpack_into_overlay PACKAGE
  local deb d
  deb=$(newest_deb "$CACHE/debs/$DEB_ARCH" "^${1//./\\.}\$")
  [ -n "$deb" ] || abort "no .deb for $1 in $CACHE/debs/$DEB_ARCH"
  d=$(unpack "$deb") || abort "dpkg-deb -x $deb failed"
  tar -C "$d" --exclude=./.unpacked --exclude=./usr/share --exclude='./usr/lib/*/gconv' \
    --exclude=./etc/init.d --exclude=./var --exclude=./lib/systemd --exclude=./usr/lib/systemd --exclude=./etc/logrotate.d \
    -cf - . | tar -C "$OVERLAY" --no-same-owner -xf - || abort "copying $1 into the image failed"
}
for p in $GUEST_DEBS; do unpack_into_overlay "$p"; done

# ---- uhttpd, from its upstream tree when given ------------------------------------------------------
UHTTPD=""
if [ -n "${UHTTPD_DIR:-}" ]; then
  # shellcheck source=bench/mips-guest-uhttpd.sh
  . "$BENCH/mips-guest-uhttpd.sh"
  build_uhttpd && UHTTPD=1
else
  echo "skip: uhttpd (UHTTPD_DIR not set)"
fi

# Every dynamic program and module in the image finds each library it needs.
missing_libs=$(find "$OVERLAY/usr/bin" "$OVERLAY/usr/sbin" "$OVERLAY/usr/lib" "$OVERLAY/lib" -type f 2>/dev/null |
  while read -r f; do
    readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | while read -r lib; do
      [ -e "$OVERLAY/lib/$DEB_ARCH-linux-gnu/$lib" ] || [ -e "$OVERLAY/usr/lib/$DEB_ARCH-linux-gnu/$lib" ] || [ -e "$OVERLAY/usr/lib/$lib" ] ||
        [ -e "$OVERLAY/lib/$lib" ] || echo "${f#"$OVERLAY"} needs $lib"
    done
  done)
[ -z "$missing_libs" ] || abort "libraries missing from the image: $missing_libs"

# ---- the files, the pairs, the configs, the driver --------------------------------------------------
mkdir -p "$OVERLAY/www/bench" "$OVERLAY/bench" "$OVERLAY/usr/bin"
/usr/bin/python3 "$BENCH/mkdocroot.py" "$OVERLAY/www/bench" >/dev/null || abort "bench/mkdocroot.py failed"
# One modification time for every run (2023-01-01 00:00 UTC): the peers' ETags follow it, and with
# them the length of each head and where the 200 KB body starts in the stream (see the report). At
# this time lighttpd's 200 KB head is 220 bytes, a multiple of 4, its faster case.
find "$OVERLAY/www/bench" -exec touch -h -d @1672531200 {} + || abort "touch of the docroot failed"
chmod -R a+rX "$OVERLAY/www"
pair() { # pair NAME OPENSSL-NEWKEY-ARGS...
  local name=$1
  shift
  openssl req -x509 "$@" -nodes -keyout "$OVERLAY/bench/$name-key.pem" -out "$OVERLAY/bench/$name-cert.pem" \
    -days 30 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >"$OUT/openssl-$name.log" 2>&1 ||
    abort "openssl req ($name) failed"
}
pair ec -newkey ec -pkeyopt ec_paramgen_curve:prime256v1
pair rsa -newkey rsa:2048
install -m 0755 "$BENCH/mips-guest-driver.sh" "$OVERLAY/bench/driver.sh"
install -m 0755 "$MARMOSET_TLS" "$OVERLAY/usr/bin/marmoset-tls"
: >"$OVERLAY/bench/empty.conf"
# marmoset-lean: the defaults' Cache-Control and security lines off, the head lines the peers send.
printf '%s\n' 'cache * off' 'header * -X-Content-Type-Options' 'header * -X-Frame-Options' \
  'header * -Referrer-Policy' >"$OVERLAY/bench/lean.conf"
# lighttpd: what Debian's lighttpd.conf sets that matters here (its modules, the files' user, no
# access log), with the MIME types written out (Debian's come from a Perl script); its ETag without
# the inode, which moves from image to image, so that its heads are as long in every run.
cat >"$OVERLAY/bench/lighttpd.conf" <<'EOF'
server.modules = ( "mod_indexfile", "mod_access", "mod_alias", "mod_redirect" )
server.document-root = "/www/bench"
server.bind = "127.0.0.1"
server.username = "www-data"
server.groupname = "www-data"
server.errorlog = "/tmp/lighttpd.error.log"
server.http-parseopts = ( "header-strict" => "enable", "host-strict" => "enable", "host-normalize" => "enable",
  "url-normalize-unreserved" => "enable", "url-normalize-required" => "enable", "url-ctrls-reject" => "enable",
  "url-path-2f-decode" => "enable", "url-path-dotseg-remove" => "enable" )
index-file.names = ( "index.html" )
url.access-deny = ( "~", ".inc" )
static-file.exclude-extensions = ( ".php", ".pl", ".fcgi" )
mimetype.assign = ( ".html" => "text/html", ".jpg" => "image/jpeg" )
etag.use-inode = "disable"
EOF
export MARMOSET_QEMU_EXTRA_OVERLAY=$OVERLAY
say "packing the initramfs"
build_initramfs
say "kernel $KVER; initramfs $(stat -c %s "$INITRAMFS") bytes"

HTTP_SERVERS=${MIPS_SERVERS:-marmoset marmoset-lean busybox lighttpd${UHTTPD:+ uhttpd}}
TLS_SERVERS=${MIPS_TLS_SERVERS:-marmoset-tls lighttpd}

rotate() { # rotate N WORD... : the words, starting at the N-th (0-based, modulo their count)
  local n=$1
  shift
  local a=("$@") i
  for ((i = 0; i < ${#a[@]}; i++)); do printf '%s ' "${a[$(((i + n) % ${#a[@]}))]}"; done
}

# One command of the driver in the guest; its @@R lines go to ROWS with the mode and round.
drive() { # drive MODE ROUND TIMEOUT ARGS...
  local mode=$1 round=$2 timeout=$3
  shift 3
  guest "$timeout" "sh /bench/driver.sh $*"
  if [ "$GRC" = 255 ]; then
    abort "the guest gave no answer to 'driver.sh $*' within ${timeout}s"
  fi
  printf '%s\n' "$GOUT" | grep '^driver:' | sed "s/^/    [$mode round $round] /"
  printf '%s\n' "$GOUT" | sed -n 's/^@@R //p' | sed "s/^/$mode $round /" >>"$ROWS"
  printf '%s\n' "$GOUT" | sed -n 's/^@@R //p' | grep -E ' (rps|idle_kb|peak_kb|bytes|per_req)=' |
    sed "s/^/    [$mode round $round] /" >&2
}

# The guest's serial console to one log per mode; QEMU gone and the console pipes closed after.
power_off() {
  printf 'poweroff -f\n' >&7
  local deadline=$(($(date +%s) + POWEROFF_DEADLINE))
  while kill -0 "$QEMU_PID" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
  kill "$QEMU_PID" 2>/dev/null
  wait "$QEMU_PID" 2>/dev/null
  QEMU_PID=""
  kill "$READER_PID" 2>/dev/null
  wait "$READER_PID" 2>/dev/null
  READER_PID=""
  exec 7>&-
  rm -f "$RUN/con.in" "$RUN/con.out"
}

# A test's deadline: its seconds of guest time can take several times as long on a loaded host.
PASS_TIMEOUT=$((SECS * 30 + 180))
QEMU_VERSION=$("$QEMU" --version | head -n 1)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
for mode in $MODES; do
  case $mode in
  icount) export MARMOSET_QEMU_ARGS="-smp 1 -icount shift=3 -rtc clock=vm" ;;
  wall) export MARMOSET_QEMU_ARGS="-smp 1" ;;
  *) abort "unknown mode '$mode' in MIPS_MODES (icount, wall)" ;;
  esac
  CONSOLE_LOG="$OUT/console-$mode.log"
  boot
  echo "$mode: $(cat "$OUT/qemu.cmd")" >>"$OUT/versions.txt"
  guest 60 "/etc/init.d/S50marmoset stop >/dev/null; pidof marmoset || echo stopped"
  printf '%s\n' "$GOUT" | grep -qx stopped || abort "the image's marmoset did not stop: $GOUT"
  guest 60 "sh /bench/driver.sh versions"
  printf '%s\n' "$GOUT" | sed -n 's/^@@V //p' | sed "s/^/$mode /" >>"$OUT/versions.txt"
  for round in $(seq 1 "$ROUNDS"); do
    say "$mode, round $round of $ROUNDS"
    # shellcheck disable=SC2086 # server names, one word each
    for s in $(rotate $((round - 1)) $HTTP_SERVERS); do
      drive "$mode" "$round" "$PASS_TIMEOUT" http "$s" "$SECS"
    done
    # shellcheck disable=SC2086
    for s in $(rotate $((round - 1)) $TLS_SERVERS); do
      drive "$mode" "$round" "$PASS_TIMEOUT" https "$s" "$SECS"
    done
  done
  say "$mode: marmoset's context switches and system calls per request (ab -k -c 1 -n $COUNT_N)"
  drive "$mode" 0 "$PASS_TIMEOUT" counts marmoset "$COUNT_N"
  power_off
done
ELAPSED=$(($(date +%s) - T0))

say "writing $RESULTS"
mkdir -p "$(dirname "$RESULTS")"
python3 "$BENCH/mips-guest-report.py" --rows "$ROWS" --versions "$OUT/versions.txt" --results "$RESULTS" \
  --date "$START" --command "$COMMAND" --rounds "$ROUNDS" --seconds "$SECS" --count-n "$COUNT_N" \
  --qemu "$QEMU_VERSION" --host "$(nproc) cores, load average $LOAD at the start" --elapsed "$ELAPSED" \
  --marmoset "$(basename "$MARMOSET") $(stat -c %s "$MARMOSET") bytes" \
  --marmoset-tls "$(basename "$MARMOSET_TLS") $(stat -c %s "$MARMOSET_TLS") bytes" \
  ${UHTTPD:+--uhttpd "$UHTTPD_DESC"} ${SMOKE:+--smoke} ||
  abort "bench/mips-guest-report.py failed"
pass "report written to $RESULTS (${ELAPSED}s of guest runs)"
# The run itself failed when a test did (no result, a server that did not start); failed requests
# are results, in the report.
if grep -q 'failed=error' "$ROWS"; then
  fail "some tests gave no result: $(grep 'failed=error' "$ROWS" | tr '\n' ';')"
fi
finish
