#!/usr/bin/env bash
# Boot Marmoset on an emulated board and test it end to end.
#
#   tests/qemu/boot.sh BOARD        BOARD = qemu-aarch64 | qemu-armv7 | qemu-armv7-musl | qemu-mipsel (under board/)
#   tests/qemu/boot.sh BOARD tls    the same with the HTTPS build (--features tls) and a TLS config
#
# For the board it builds the release binary for the board's Rust target, fetches the Debian kernel
# and busybox-static .deb files for the board's architecture (unpacked with dpkg-deb -x, never
# installed; cached), lays out a BusyBox initramfs the way Buildroot lays out an image (SysV
# /etc/init.d/S??* scripts, syslogd, networking, then the repo's rootfs-overlay/ on top), boots it
# under qemu-system-* with user networking, and checks the UI from the host and the service from the
# guest's serial console. Ends with the line `N passed, M failed`; exits non-zero if any check failed.
# With `tls` the image's config gets the HTTPS lines of board/README.md (listen 0.0.0.0:443 tls,
# tls-cert/tls-key in /etc/marmoset, tls-self-signed on, redirect-https on): the guest makes its
# certificate at first boot, the host checks it (names, the served one is the guest's file), uses the
# UI over HTTPS with curl --cacert on it, sees port 80 answer 308, and a restart through the init
# script keeps the same certificate.
#
# Environment:
#   MARMOSET_QEMU_CACHE   cache for .deb files and their unpacked trees (default ~/.cache/marmoset-qemu)
#   MARMOSET_QEMU_OUT     where logs, the initramfs and the console log go (default tests/out/BOARD)
#   MARMOSET_QEMU_REFRESH=1   fetch the .deb files again even if cached
#   MARMOSET_QEMU_BINARY  use this binary instead of building one (must be for the board's target,
#                         and a --features tls build with `tls`)
#   MARMOSET_QEMU_EXTRA_OVERLAY  a directory copied over the image after rootfs-overlay/ (test-only files)
#   MARMOSET_QEMU_BOOT_DEADLINE  seconds from qemu start to the first UI response (default: board.conf)
#   MARMOSET_QEMU_PLACEHOLDER=1  harness development only: BusyBox httpd stands in for marmoset
#   MARMOSET_QEMU_ARGS    more qemu arguments (bench/ktls-qemu.sh: -icount)
#   MARMOSET_QEMU_HOSTFWD more port forwards, qemu's hostfwd= values separated by spaces
#                         (bench/luci-guest.sh: tcp:127.0.0.1:HOSTPORT-:GUESTPORT ...)
#   CARGO_TARGET_DIR      honoured (default target/)
#   AB_REQUESTS, AB_CONCURRENCY  the load step (default 2000 and 10)
#   MARMOSET_QEMU_LIBRARY=1  when sourced (bench/ktls-qemu.sh): define the steps, run none of them
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# cargo runs in the repo: a relative CARGO_TARGET_DIR means relative to where we were started.
case "${CARGO_TARGET_DIR:-/}" in /*) ;; *) export CARGO_TARGET_DIR="$PWD/$CARGO_TARGET_DIR" ;; esac

BOARD=${1:-}
case "$BOARD" in
  "" | -h | --help)
    sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit 2 ;;
esac
TLS=""
case "${2:-}" in
  "") ;;
  tls) TLS=1 ;;
  *) echo "boot.sh: unknown mode '$2' (only 'tls')" >&2; echo "0 passed, 1 failed"; exit 2 ;;
esac
BOARD=${BOARD%/}; BOARD=${BOARD##*/}
[ -f "$REPO/board/$BOARD/board.conf" ] || BOARD="qemu-$BOARD"
CONF="$REPO/board/$BOARD/board.conf"
if [ ! -f "$CONF" ]; then
  echo "boot.sh: no board '$1' (looked for $CONF)" >&2
  echo "0 passed, 1 failed"
  exit 2
fi
# shellcheck source=/dev/null
. "$CONF"

BOOT_DEADLINE=${MARMOSET_QEMU_BOOT_DEADLINE:-$BOOT_DEADLINE}
CACHE=${MARMOSET_QEMU_CACHE:-$HOME/.cache/marmoset-qemu}
OUT=${MARMOSET_QEMU_OUT:-$REPO/tests/out/$BOARD${TLS:+-tls}}
# The TLS image: where the config puts the pair (board/README.md, HTTPS builds).
GUEST_CERT=/etc/marmoset/cert.pem
GUEST_KEY=/etc/marmoset/key.pem
SCHEME=http GUEST_PORT=80
[ -n "$TLS" ] && SCHEME=https GUEST_PORT=443
GUEST_PIDFILE=/var/run/marmoset.pid   # S50marmoset's PIDFILE
AB_REQUESTS=${AB_REQUESTS:-2000}
AB_CONCURRENCY=${AB_CONCURRENCY:-10}
GUEST_HOSTNAME="$BOARD"   # not containing "marmoset": the log checks grep for it
mkdir -p "$CACHE" "$OUT"
CONSOLE_LOG="$OUT/console.log"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/marmoset-qemu.XXXXXX")

PASSED=0
FAILED=0
QEMU_PID=""
READER_PID=""
ADDED_ARCH=""
SUMMARY=()

TAG=$BOARD${TLS:+ tls}
say()  { printf '==> [%s] %s\n' "$TAG" "$*"; }
pass() { PASSED=$((PASSED + 1)); printf 'PASS  [%s] %s\n' "$TAG" "$*"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL  [%s] %s\n' "$TAG" "$*"; }
check() { # check CONDITION-RESULT(0/1) DESCRIPTION [DETAIL-ON-FAILURE]
  if [ "$1" = 0 ]; then pass "$2"; else fail "$2${3:+: $3}"; fi
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

cleanup() {
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID" 2>/dev/null
    wait "$QEMU_PID" 2>/dev/null
  fi
  QEMU_PID=""
  if [ -n "$READER_PID" ]; then
    kill "$READER_PID" 2>/dev/null
    wait "$READER_PID" 2>/dev/null
  fi
  READER_PID=""
  exec 7>&-
  if [ -n "$ADDED_ARCH" ]; then
    dpkg --remove-architecture "$ADDED_ARCH" 2>/dev/null ||
      echo "warning: could not remove the foreign architecture $ADDED_ARCH" >&2
    ADDED_ARCH=""
  fi
  rm -rf "$RUN"
  # What a script that sources this file as a library made for itself.
  if declare -F own_cleanup >/dev/null; then own_cleanup; fi
}

finish() {
  cleanup
  trap - EXIT INT TERM
  if [ ${#SUMMARY[@]} -gt 0 ]; then
    say "summary"
    printf '    %s\n' "${SUMMARY[@]}"
  fi
  if [ "$FAILED" -gt 0 ] && [ -s "$CONSOLE_LOG" ]; then
    echo "---- last 60 lines of the guest console ($CONSOLE_LOG) ----"
    tail -n 60 "$CONSOLE_LOG" | tr -d '\r' | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g'
    echo "---- end of console ----"
  fi
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
  exit
}
abort() { fail "$*"; finish; }
trap 'abort "interrupted"' INT TERM
trap 'cleanup' EXIT

# ---------------------------------------------------------------------------------------------------
# Host prerequisites (Debian packages), installed only if missing.
apt_install() {
  local opts=(-o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
  if [ "$(id -u)" != 0 ]; then
    echo "need root to install: $*" >&2
    return 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install "${opts[@]}" "$@" >>"$OUT/apt.log" 2>&1 && return 0
  apt-get -o DPkg::Lock::Timeout=600 update -q >>"$OUT/apt.log" 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get install "${opts[@]}" "$@" >>"$OUT/apt.log" 2>&1
}

host_prereqs() {
  local missing=() cmd
  for cmd in "$QEMU:$QEMU_DEB" cpio:cpio gzip:gzip curl:curl ab:apache2-utils python3:python3 \
             dpkg-deb:dpkg readelf:binutils ${TLS:+openssl:openssl}; do
    command -v "${cmd%%:*}" >/dev/null 2>&1 || missing+=("${cmd#*:}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing host packages: ${missing[*]}"
    apt_install "${missing[@]}" || abort "could not install ${missing[*]} (see $OUT/apt.log)"
  fi
}

# ---------------------------------------------------------------------------------------------------
# 1. The release binary for the board's target.
target_dir() {
  printf '%s' "${CARGO_TARGET_DIR:-$REPO/target}"
}

# Does .cargo/config.toml have KEY inside the [target.TRIPLE] table?
cargo_config_has() { # cargo_config_has KEY-REGEX
  local f="$REPO/.cargo/config.toml"
  [ -f "$f" ] || return 1
  awk -v sec="[target.$RUST_TARGET]" -v key="$1" '
    /^[[:space:]]*\[/ { gsub(/[[:space:]]/, ""); on = ($0 == sec); next }
    on && $0 ~ key { found = 1 }
    END { exit !found }' "$f"
}

build_binary() {
  if [ -n "${MARMOSET_QEMU_BINARY:-}" ]; then
    BINARY=$MARMOSET_QEMU_BINARY
    [ -f "$BINARY" ] || abort "MARMOSET_QEMU_BINARY=$BINARY does not exist"
    return
  fi
  if [ "${MARMOSET_QEMU_PLACEHOLDER:-}" = 1 ]; then
    BINARY=""
    return
  fi
  command -v cargo >/dev/null || abort "cargo not found"
  if [ "${BUILD_STD:-}" = 1 ]; then
    build_std_binary
    return
  fi
  if ! rustup target list --installed 2>/dev/null | grep -qx "$RUST_TARGET"; then
    say "rustup target add $RUST_TARGET"
    rustup target add "$RUST_TARGET" >"$OUT/rustup.log" 2>&1 || abort "rustup target add $RUST_TARGET failed"
  fi
  local cargo_args=(build --release --target "$RUST_TARGET")
  if [ -n "$TLS" ]; then
    cargo_args+=(--features tls)
    # ring's C and assembly: the board's C compiler for the target (board.conf TLS_CC), unless the
    # environment names one.
    local cc_var
    cc_var="CC_$(printf '%s' "$RUST_TARGET" | tr '-' '_')"
    if [ -n "${TLS_CC:-}" ] && [ -z "${!cc_var:-}" ]; then
      export "$cc_var=$TLS_CC"
    fi
    if [ -n "${!cc_var:-}" ] && ! command -v "${!cc_var}" >/dev/null 2>&1; then
      say "installing the C cross compiler for ring: $TLS_DEBS"
      # shellcheck disable=SC2086
      apt_install $TLS_DEBS || abort "could not install $TLS_DEBS (see $OUT/apt.log)"
    fi
  fi
  local upper
  upper=$(printf '%s' "$RUST_TARGET" | tr 'a-z-' 'A-Z_')
  local linker_var="CARGO_TARGET_${upper}_LINKER"
  if [ -n "${!linker_var:-}" ]; then
    :
  elif cargo_config_has '^[[:space:]]*linker[[:space:]]*='; then
    : # .cargo/config.toml names the linker
  elif [ -n "${CROSS_LINKER:-}" ]; then
    export "$linker_var=$CROSS_LINKER"
  fi
  local linker=${!linker_var:-$(awk -v sec="[target.$RUST_TARGET]" '
      /^[[:space:]]*\[/ { gsub(/[[:space:]]/, ""); on = ($0 == sec); next }
      on && /^[[:space:]]*linker[[:space:]]*=/ { sub(/^[^=]*=[[:space:]]*"/, ""); sub(/".*/, ""); print; exit }' \
      "$REPO/.cargo/config.toml" 2>/dev/null)}
  if [ -n "$linker" ] && [ "$linker" != rust-lld ] && ! command -v "$linker" >/dev/null 2>&1; then
    say "installing cross linker packages: $CROSS_DEBS"
    # shellcheck disable=SC2086
    apt_install $CROSS_DEBS || abort "could not install $CROSS_DEBS (see $OUT/apt.log)"
  fi
  # Extra target rustflags (e.g. +crt-static): added with --config, which merges with
  # .cargo/config.toml, unless that file already has them.
  if [ -n "${RUST_TARGET_RUSTFLAGS:-}" ]; then
    local flag have=1 list=""
    for flag in $RUST_TARGET_RUSTFLAGS; do
      list="$list${list:+,}\"$flag\""
      case "$flag" in -*) ;; *) grep -qF -- "$flag" "$REPO/.cargo/config.toml" 2>/dev/null || have=0 ;; esac
    done
    [ "$have" = 1 ] || cargo_args+=(--config "target.$RUST_TARGET.rustflags=[$list]")
  fi
  # Static glibc for armv7 links Debian's libcrypt.a (Basic auth's crypt(3)).
  if [ "$RUST_TARGET" = armv7-unknown-linux-gnueabihf ]; then
    "$REPO/board/armhf-libcrypt.sh" >>"$OUT/build.log" 2>&1 || abort "board/armhf-libcrypt.sh failed (see $OUT/build.log)"
  fi
  say "${cc_var:+${cc_var}=${!cc_var} }cargo ${cargo_args[*]}"
  local t0 t1
  t0=$(now)
  if ! (cd "$REPO" && cargo "${cargo_args[@]}" --message-format=json-render-diagnostics) \
      >"$OUT/build.json" 2>"$OUT/build.log"; then
    tail -n 40 "$OUT/build.log"
    abort "cargo build for $RUST_TARGET failed (full log: $OUT/build.log)"
  fi
  t1=$(now)
  # Where cargo put it (whatever target-dir is in force), from its JSON messages.
  BINARY=$(python3 -c '
import json, sys
exe = ""
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "marmoset" \
            and "bin" in m.get("target", {}).get("kind", []) and m.get("executable"):
        exe = m["executable"]
print(exe)' "$OUT/build.json")
  [ -n "$BINARY" ] || BINARY="$(target_dir)/$RUST_TARGET/release/marmoset"
  [ -f "$BINARY" ] || abort "cargo succeeded but $BINARY is missing"
  say "built in $(elapsed "$t0" "$t1") s: $BINARY"
}

# A target rustup ships no rust-std for (board.conf BUILD_STD=1): board/build-std.sh builds the
# standard library too and links with zig, which also compiles ring's C for the tls build.
build_std_binary() {
  local args=("$RUST_TARGET") t0 t1
  [ -n "$TLS" ] && args+=(--features tls)
  say "board/build-std.sh ${args[*]}"
  t0=$(now)
  if ! BINARY=$("$REPO/board/build-std.sh" "${args[@]}" 2>"$OUT/build.log" | tail -n 1); then
    tail -n 40 "$OUT/build.log"
    abort "board/build-std.sh ${args[*]} failed (full log: $OUT/build.log)"
  fi
  t1=$(now)
  case "$BINARY" in /*) ;; *) BINARY="$REPO/$BINARY" ;; esac
  [ -f "$BINARY" ] || abort "board/build-std.sh succeeded but $BINARY is missing"
  say "built in $(elapsed "$t0" "$t1") s: $BINARY"
}

# ---------------------------------------------------------------------------------------------------
# 2. Debian kernel and busybox-static for DEB_ARCH, as .deb files, cached.
newest_deb() { # newest_deb DIR PACKAGE-REGEX
  local f best=""
  for f in "$1"/*.deb; do
    [ -f "$f" ] || continue
    dpkg-deb -f "$f" Package 2>/dev/null | grep -qE "$2" || continue
    best=$(printf '%s\n%s\n' "$best" "$f" | sed '/^$/d' | sort -V | tail -n 1)
  done
  printf '%s' "$best"
}

fetch_debs() {
  local dir="$CACHE/debs/$DEB_ARCH"
  mkdir -p "$dir"
  KERNEL_DEB=$(newest_deb "$dir" "$KERNEL_PKG_REGEX")
  BUSYBOX_DEB=$(newest_deb "$dir" '^busybox-static$')
  if [ -n "$KERNEL_DEB" ] && [ -n "$BUSYBOX_DEB" ] && [ "${MARMOSET_QEMU_REFRESH:-}" != 1 ]; then
    return
  fi
  [ "$(id -u)" = 0 ] || abort "fetching the $DEB_ARCH .deb files needs root (apt-get); or fill $dir"
  local native
  native=$(dpkg --print-architecture)
  if [ "$DEB_ARCH" != "$native" ] && ! dpkg --print-foreign-architectures | grep -qx "$DEB_ARCH"; then
    dpkg --add-architecture "$DEB_ARCH" || abort "dpkg --add-architecture $DEB_ARCH failed"
    ADDED_ARCH=$DEB_ARCH
  fi
  say "apt-get update${ADDED_ARCH:+ (architecture $ADDED_ARCH added for the download only)}"
  # A foreign index that is mid-sync on the mirror makes apt-get update exit 100 although the
  # indexes we need arrived: go on and let the download say whether it worked.
  apt-get -o DPkg::Lock::Timeout=600 update -q >"$OUT/apt-update.log" 2>&1 ||
    say "apt-get update exited $? (continuing; see $OUT/apt-update.log)"
  local kpkg
  kpkg=$(apt-cache search --names-only "$KERNEL_PKG_REGEX" | awk '{ print $1 }' | sort -V | tail -n 1)
  if [ -z "$kpkg" ]; then
    abort "no Debian package matches $KERNEL_PKG_REGEX for $DEB_ARCH"
  fi
  say "apt-get download $kpkg:$DEB_ARCH busybox-static:$DEB_ARCH"
  if ! (cd "$dir" && apt-get download -q "$kpkg:$DEB_ARCH" "busybox-static:$DEB_ARCH") >"$OUT/apt-download.log" 2>&1; then
    tail -n 5 "$OUT/apt-download.log"
    abort "apt-get download failed"
  fi
  if [ -n "$ADDED_ARCH" ]; then
    dpkg --remove-architecture "$ADDED_ARCH" || say "warning: dpkg --remove-architecture $ADDED_ARCH failed"
    ADDED_ARCH=""
  fi
  KERNEL_DEB=$(newest_deb "$dir" "$KERNEL_PKG_REGEX")
  BUSYBOX_DEB=$(newest_deb "$dir" '^busybox-static$')
  if [ -z "$KERNEL_DEB" ] || [ -z "$BUSYBOX_DEB" ]; then
    abort "downloaded .deb files not found in $dir"
  fi
}

unpack() { # unpack DEB -> prints the directory it is unpacked in (cached)
  local d
  d="$CACHE/unpacked/$(basename "$1" .deb)"
  if [ ! -f "$d/.unpacked" ]; then
    rm -rf "$d"
    mkdir -p "$d"
    dpkg-deb -x "$1" "$d" || return 1
    touch "$d/.unpacked"
  fi
  printf '%s' "$d"
}

# ---------------------------------------------------------------------------------------------------
# 3. The initramfs.
module_file() { # module_file MODDIR NAME -> path of NAME.ko(.xz|.zst) (names: '-' and '_' are one)
  local n=${2//-/_}
  find "$1" \( -name "$n.ko" -o -name "$n.ko.*" -o -name "${n//_/-}.ko" -o -name "${n//_/-}.ko.*" \) \
    -print -quit
}

module_bytes() { # the module's ELF, whatever its compression
  case "$1" in
    *.ko.xz) xz -dc "$1" ;;
    *.ko.zst) zstd -dcq "$1" ;;
    *.ko.gz) gzip -dc "$1" ;;
    *) cat "$1" ;;
  esac
}

MOD_ORDER=()
add_module() { # depth-first over .modinfo depends=; modules built into the kernel have no .ko
  local name=${1//-/_} f deps d seen
  for seen in "${MOD_ORDER[@]}" "${MOD_VISITING[@]}"; do
    [ "${seen##*/}" = "$name" ] && return 0
  done
  f=$(module_file "$MODDIR" "$name")
  [ -n "$f" ] || return 0
  MOD_VISITING+=("$name")
  deps=$(module_bytes "$f" | tr '\0' '\n' | grep -a '^depends=' | head -n 1 | cut -d= -f2)
  for d in ${deps//,/ }; do
    add_module "$d"
  done
  MOD_ORDER+=("$f")
}

write_file() { # write_file PATH MODE  (content on stdin)
  mkdir -p "$(dirname "$1")"
  cat >"$1"
  chmod "$2" "$1"
}

build_initramfs() {
  local kdir bdir root
  kdir=$(unpack "$KERNEL_DEB") || abort "dpkg-deb -x $KERNEL_DEB failed"
  bdir=$(unpack "$BUSYBOX_DEB") || abort "dpkg-deb -x $BUSYBOX_DEB failed"
  KERNEL=$(find "$kdir/boot" -name 'vmlinuz-*' | sort -V | tail -n 1)
  [ -n "$KERNEL" ] || abort "no boot/vmlinuz-* in $KERNEL_DEB"
  KVER=${KERNEL##*/vmlinuz-}
  MODDIR="$kdir/lib/modules/$KVER"
  root="$RUN/root"
  rm -rf "$root"
  mkdir -p "$root"
  (cd "$root" && mkdir -p bin sbin usr/bin usr/sbin lib dev proc sys tmp run root \
    etc/init.d etc/marmoset var www lib/modules)
  ln -s ../tmp "$root/var/log"
  ln -s ../run "$root/var/run"
  ln -s ../tmp "$root/var/tmp"
  ln -s ../run/lock "$root/var/lock"
  chmod 1777 "$root/tmp"
  chmod 0700 "$root/root"
  if [ "$(id -u)" = 0 ]; then
    mknod -m 600 "$root/dev/console" c 5 1
    mknod -m 666 "$root/dev/null" c 1 3
  fi
  install -m 0755 "$bdir/bin/busybox" "$root/bin/busybox"

  # PID 1: put the applet links in place (busybox --install -s), then BusyBox init.
  write_file "$root/init" 0755 <<'EOF'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s
/bin/busybox umount /proc
exec /sbin/init
EOF

  write_file "$root/etc/inittab" 0644 <<'EOF'
# BusyBox init, as in a Buildroot SysV image.
# <id>::<action>:<process>
::sysinit:/bin/mount -t devtmpfs devtmpfs /dev
::sysinit:/bin/mkdir -p /dev/pts /dev/shm
::sysinit:/bin/mount -a
::sysinit:/bin/mkdir -p /run/lock/subsys
::sysinit:/bin/hostname -F /etc/hostname
::sysinit:/etc/init.d/rcS

# A root shell on the serial console (the test drives the guest through it).
console::respawn:-/bin/sh

::shutdown:/etc/init.d/rcK
::shutdown:/bin/umount -a -r
EOF

  write_file "$root/etc/fstab" 0644 <<'EOF'
# <file system> <mount pt> <type> <options> <dump> <pass>
proc      /proc     proc    defaults                              0 0
devpts    /dev/pts  devpts  defaults,gid=5,mode=620,ptmxmode=0666 0 0
tmpfs     /dev/shm  tmpfs   mode=0777                             0 0
tmpfs     /tmp      tmpfs   mode=1777                             0 0
tmpfs     /run      tmpfs   mode=0755,nosuid,nodev                0 0
sysfs     /sys      sysfs   defaults                              0 0
EOF

  write_file "$root/etc/init.d/rcS" 0755 <<'EOF'
#!/bin/sh
# Start every /etc/init.d/S??* script, in the order of their names.
for script in /etc/init.d/S??*; do
	[ -x "$script" ] || continue
	"$script" start
done
EOF

  write_file "$root/etc/init.d/rcK" 0755 <<'EOF'
#!/bin/sh
# Stop every /etc/init.d/S??* script, in the reverse order of their names.
for script in $(ls -r /etc/init.d/S??*); do
	[ -x "$script" ] || continue
	"$script" stop
done
EOF

  write_file "$root/etc/init.d/S01syslogd" 0755 <<'EOF'
#!/bin/sh
# System log: BusyBox syslogd writing /var/log/messages.
DAEMON=syslogd
PIDFILE=/var/run/$DAEMON.pid
SYSLOGD_ARGS="-O /var/log/messages"
[ -r /etc/default/$DAEMON ] && . /etc/default/$DAEMON

start() {
	printf 'Starting %s: ' "$DAEMON"
	# shellcheck disable=SC2086
	if start-stop-daemon --start --background --make-pidfile --pidfile "$PIDFILE" \
		--exec /sbin/$DAEMON -- -n $SYSLOGD_ARGS; then
		echo OK
	else
		echo FAIL
	fi
}

stop() {
	printf 'Stopping %s: ' "$DAEMON"
	if start-stop-daemon --stop --quiet --pidfile "$PIDFILE" --exec /sbin/$DAEMON; then
		while start-stop-daemon --stop --test --quiet --pidfile "$PIDFILE" --exec /sbin/$DAEMON; do
			sleep 0.1
		done
		rm -f "$PIDFILE"
		echo OK
	else
		echo FAIL
	fi
}

case "$1" in
	start | stop) "$1" ;;
	restart | reload) stop; start ;;
	*) echo "Usage: $0 {start|stop|restart|reload}"; exit 1 ;;
esac
EOF

  MOD_ORDER=()
  MOD_VISITING=()
  local m f insmods=""
  for m in $NET_MODULES ${TLS:+${KTLS_MODULES:-}}; do
    add_module "$m"
  done
  for f in "${MOD_ORDER[@]}"; do
    m=$(basename "$f"); m=${m%%.ko*}
    module_bytes "$f" >"$root/lib/modules/$m.ko"
    insmods="$insmods	insmod /lib/modules/$m.ko || true
"
  done
  MODULE_NAMES=$(for f in "${MOD_ORDER[@]}"; do m=$(basename "$f"); printf '%s ' "${m%%.ko*}"; done)

  write_file "$root/etc/init.d/S40network" 0755 <<EOF
#!/bin/sh
# Network: the virtio-net driver (modules in dependency order; in the HTTPS image kernel TLS and
# its AES-GCM too), then QEMU user networking's addresses: 10.0.2.15/24, gateway 10.0.2.2.
start() {
	printf 'Starting network: '
$insmods	ip link set lo up
	i=0
	while [ ! -e /sys/class/net/eth0 ] && [ \$i -lt 100 ]; do
		sleep 0.1
		i=\$((i + 1))
	done
	if ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 &&
		ip route add default via 10.0.2.2; then
		echo OK
	else
		echo FAIL
	fi
}

stop() {
	printf 'Stopping network: '
	ip addr flush dev eth0 2>/dev/null
	ip link set eth0 down 2>/dev/null
	echo OK
}

case "\$1" in
	start | stop) "\$1" ;;
	restart | reload) stop; start ;;
	*) echo "Usage: \$0 {start|stop|restart|reload}"; exit 1 ;;
esac
EOF

  write_file "$root/etc/passwd" 0644 <<'EOF'
root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
EOF
  write_file "$root/etc/shadow" 0600 <<'EOF'
root::10933:0:99999:7:::
daemon:*:10933:0:99999:7:::
www-data:*:10933:0:99999:7:::
nobody:*:10933:0:99999:7:::
EOF
  write_file "$root/etc/group" 0644 <<'EOF'
root:x:0:
daemon:x:1:
tty:x:5:
www-data:x:33:
nogroup:x:65534:
EOF
  echo "$GUEST_HOSTNAME" | write_file "$root/etc/hostname" 0644
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$GUEST_HOSTNAME" | write_file "$root/etc/hosts" 0644
  echo "/bin/sh" | write_file "$root/etc/shells" 0644

  # The repo's overlay, as an image builder copies it over the root.
  if [ -d "$REPO/rootfs-overlay" ]; then
    cp -a "$REPO/rootfs-overlay/." "$root/"
  else
    say "warning: $REPO/rootfs-overlay is missing"
  fi
  if [ -n "${MARMOSET_QEMU_EXTRA_OVERLAY:-}" ]; then
    cp -a "$MARMOSET_QEMU_EXTRA_OVERLAY/." "$root/"
  fi
  if [ -n "$TLS" ]; then
    # The shipped config plus the HTTPS lines board/README.md gives for a certificate made at
    # first boot. The image holds no pair: the guest makes it.
    [ -f "$root/etc/marmoset/marmoset.conf" ] || abort "the image has no /etc/marmoset/marmoset.conf"
    cat >>"$root/etc/marmoset/marmoset.conf" <<EOF

# HTTPS (the tls build): a certificate made at first boot, port 80 sent there.
listen 0.0.0.0:443 tls
tls-cert $GUEST_CERT
tls-key $GUEST_KEY
tls-self-signed on
redirect-https on
EOF
    if [ -e "$root$GUEST_CERT" ] || [ -e "$root$GUEST_KEY" ]; then
      abort "the image already holds $GUEST_CERT or $GUEST_KEY"
    fi
    # Bodies for the kernel TLS checks: one of many records and sendfile calls, one small.
    mkdir -p "$root/www/ktls"
    head -c 300000 /dev/urandom >"$RUN/big.bin"
    head -c 5000 /dev/urandom >"$RUN/small.bin"
    cp "$RUN/big.bin" "$RUN/small.bin" "$root/www/ktls/"
  fi

  if [ -n "$BINARY" ]; then
    install -m 0755 "$BINARY" "$root/usr/bin/marmoset"
  else
    write_file "$root/usr/bin/marmoset" 0755 <<'EOF'
#!/bin/sh
# Placeholder (harness development only): BusyBox httpd standing in for marmoset.
case " $* " in *" --check-config "* | *" --version "*) exit 0 ;; esac
logger -t marmoset -p daemon.info "marmoset placeholder started"
exec httpd -f -p 80 -h /www -u www-data:www-data
EOF
  fi

  INITRAMFS="$OUT/initramfs.cpio.gz"
  (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -9 >"$INITRAMFS" ||
    abort "packing the initramfs failed"
}

# ---------------------------------------------------------------------------------------------------
# 4. Boot.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

boot() {
  PORT=$(free_port)
  PORT80=""
  if [ -n "$TLS" ]; then
    PORT80=$(free_port)
    while [ "$PORT80" = "$PORT" ]; do PORT80=$(free_port); done
  fi
  : >"$CONSOLE_LOG"
  mkfifo "$RUN/con.in" "$RUN/con.out"
  cat "$RUN/con.out" >>"$CONSOLE_LOG" &
  READER_PID=$!
  local fwd="" f
  for f in ${MARMOSET_QEMU_HOSTFWD:-}; do fwd="$fwd,hostfwd=$f"; done
  local qemu_args=(
    -M "$QEMU_MACHINE" -cpu "$QEMU_CPU" -m 256 -nographic -no-reboot -monitor none
    -kernel "$KERNEL" -initrd "$INITRAMFS"
    -append "console=$CONSOLE rdinit=/init panic=-1 quiet"
    -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$PORT-:$GUEST_PORT${PORT80:+,hostfwd=tcp:127.0.0.1:$PORT80-:80}$fwd"
    -device "$QEMU_NET_DEVICE,netdev=n0"
    -chardev "pipe,id=con,path=$RUN/con"
    -serial chardev:con
  )
  # shellcheck disable=SC2206 # words on purpose
  [ -n "${QEMU_BOARD_ARGS:-}" ] && qemu_args+=($QEMU_BOARD_ARGS)
  # shellcheck disable=SC2206 # words on purpose
  [ -n "${MARMOSET_QEMU_ARGS:-}" ] && qemu_args+=($MARMOSET_QEMU_ARGS)
  echo "$QEMU ${qemu_args[*]}" >"$OUT/qemu.cmd"
  if [ -n "$TLS" ]; then
    say "booting $KVER on $QEMU (-M $QEMU_MACHINE -cpu $QEMU_CPU), guest 443 forwarded to 127.0.0.1:$PORT, 80 to 127.0.0.1:$PORT80"
  else
    say "booting $KVER on $QEMU (-M $QEMU_MACHINE -cpu $QEMU_CPU), UI forwarded to 127.0.0.1:$PORT"
  fi
  T_QEMU=$(now)
  "$QEMU" "${qemu_args[@]}" </dev/null >"$OUT/qemu.out" 2>&1 &
  QEMU_PID=$!
  exec 7<>"$RUN/con.in"

  local deadline code=""
  deadline=$(($(date +%s) + BOOT_DEADLINE))
  while :; do
    if ! kill -0 "$QEMU_PID" 2>/dev/null; then
      wait "$QEMU_PID"
      local rc=$?
      QEMU_PID=""
      cat "$OUT/qemu.out"
      abort "qemu exited (status $rc) before the UI answered"
    fi
    # Over HTTPS the certificate is not known yet: -k for this wait only, checked right after.
    code=$(curl -s ${TLS:+-k} -o /dev/null -w '%{http_code}' --max-time 3 "$SCHEME://127.0.0.1:$PORT/" 2>/dev/null)
    [ "$code" = 200 ] && break
    [ "$(date +%s)" -lt "$deadline" ] || abort "no HTTP 200 on / within ${BOOT_DEADLINE}s (last status '$code')"
    if tr -d '\r' <"$CONSOLE_LOG" | grep -a -A 3 '^Starting marmoset:' | grep -aq 'FAIL$'; then
      abort "S50marmoset start failed in the guest (console: 'Starting marmoset: FAIL')"
    fi
    if grep -aq 'Kernel panic' "$CONSOLE_LOG"; then
      abort "the guest kernel panicked"
    fi
    sleep 0.1
  done
  T_UI=$(now)
  BOOT_TIME=$(elapsed "$T_QEMU" "$T_UI")
  pass "UI answers 200 on /${TLS:+ over HTTPS} (${BOOT_TIME} s after qemu started)"
}

# Run a command in the guest through the serial console; GOUT gets its output, GRC its status.
GSEQ=0
guest() { # guest TIMEOUT COMMAND
  local timeout=$1 cmd=$2 id deadline
  GSEQ=$((GSEQ + 1))
  id="$$x$GSEQ"
  # The echoed command line shows @@B""id, the output @@Bid: only the output matches.
  printf '%s\n' "echo \"@@B\"\"$id@@\"; { $cmd; } 2>&1; echo \"@@E\"\"$id@@ rc=\$?\"" >&7
  deadline=$(($(date +%s) + timeout))
  until tr -d '\r' <"$CONSOLE_LOG" | grep -aqF "@@E$id@@ rc="; do
    if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "$QEMU_PID" 2>/dev/null; then
      GOUT=""
      GRC=255
      return 255
    fi
    sleep 0.1
  done
  GOUT=$(tr -d '\r' <"$CONSOLE_LOG" | awk -v b="@@B$id@@" -v e="@@E$id@@ rc=" '
    index($0, e) { exit } on { print } index($0, b) { on = 1 }')
  GRC=$(tr -d '\r' <"$CONSOLE_LOG" | sed -n "s/.*@@E$id@@ rc=\([0-9]*\).*/\1/p" | tail -n 1)
  return "${GRC:-255}"
}

# ---------------------------------------------------------------------------------------------------
# 5. From the host.
header_of() { # header_of FILE NAME -> the (last) value of header NAME
  tr -d '\r' <"$1" | awk -v n="$(printf '%s' "$2" | tr '[:upper:]' '[:lower:]')" '
    { line = $0; i = index(line, ":"); if (!i) next
      if (tolower(substr(line, 1, i - 1)) == n) { v = substr(line, i + 1); sub(/^[ \t]+/, "", v); val = v } }
    END { print val }'
}

host_checks() {
  local base=$BASE html="$RUN/index.html" hdr="$RUN/hdr" code
  code=$("${HCURL[@]}" -s -D "$hdr" -o "$html" -w '%{http_code}' -H 'Accept-Encoding: identity' --max-time 20 "$base/")
  check "$([ "$code" = 200 ]; echo $?)" "GET / -> 200" "got $code"
  local cc
  cc=$(header_of "$hdr" Cache-Control)
  check "$(case "$cc" in *no-cache*) echo 0 ;; *) echo 1 ;; esac)" "/ has Cache-Control no-cache" "Cache-Control: '$cc'"

  # Every local asset the page references.
  local assets
  assets=$(tr -d '\r' <"$html" | grep -oiE "(src|href)[[:space:]]*=[[:space:]]*(\"[^\"]*\"|'[^']*')" |
    sed -E "s/^[^=]*=[[:space:]]*[\"']//; s/[\"']\$//; s/#.*//" |
    grep -viE '^(https?:|//|mailto:|data:|javascript:|tel:)' | sed '/^$/d' |
    awk '{ if (substr($0, 1, 1) != "/") { sub(/^\.\//, ""); $0 = "/" $0 } print }' | sort -u)
  if [ -z "$assets" ]; then
    fail "/ references no local assets (src=/href=)"
  fi
  local a n_ok=0 n=0 bad="" n_hashed=0 ctype enc
  for a in $assets; do
    n=$((n + 1))
    code=$("${HCURL[@]}" -s -D "$hdr" -o "$RUN/body" -w '%{http_code}' -H 'Accept-Encoding: br, gzip' --max-time 20 "$base$a")
    if [ "$code" = 200 ]; then n_ok=$((n_ok + 1)); else bad="$bad $a($code)"; fi
    cc=$(header_of "$hdr" Cache-Control)
    enc=$(header_of "$hdr" Content-Encoding)
    ctype=$(header_of "$hdr" Content-Type)
    local name=${a##*/}
    name=${name%%\?*}
    case "$name" in
      *.css | *.js | *.mjs)
        check "$(case "$enc" in br | gzip) echo 0 ;; *) echo 1 ;; esac)" \
          "$a is sent compressed when asked (Content-Encoding: ${enc:-none})" "Content-Type '$ctype'" ;;
    esac
    if printf '%s' "$name" | grep -qE '[.-][0-9a-fA-F]{8,}\.[A-Za-z0-9]+$'; then
      n_hashed=$((n_hashed + 1))
      check "$(case "$cc" in *immutable*) echo 0 ;; *) echo 1 ;; esac)" \
        "hashed asset $a has Cache-Control immutable" "Cache-Control: '$cc'"
    fi
    case "$name" in
      *.html)
        check "$(case "$cc" in *no-cache*) echo 0 ;; *) echo 1 ;; esac)" \
          "$a has Cache-Control no-cache" "Cache-Control: '$cc'" ;;
    esac
  done
  [ "$n" -gt 0 ] && check "$([ "$n_ok" = "$n" ]; echo $?)" "all $n assets referenced by / -> 200" "failed:$bad"
  [ "$n_hashed" -gt 0 ] || fail "/ references no content-hashed asset (name.HASH.ext), so the immutable rule is untested"

  # The CGI status script: JSON whose kernel and hostname are the guest's.
  code=$("${HCURL[@]}" -s -D "$hdr" -o "$RUN/status.json" -w '%{http_code}' --max-time 30 "$base/cgi-bin/status")
  if [ "$code" != 200 ]; then
    fail "GET /cgi-bin/status -> 200 (got $code: $(head -c 200 "$RUN/status.json" | tr '\n' ' '))"
  else
    local verdict
    verdict=$(python3 - "$RUN/status.json" "$GUEST_KERNEL" "$GUEST_HOST" <<'EOF'
import json, sys
path, kernel, host = sys.argv[1:4]
try:
    doc = json.load(open(path, encoding="utf-8"))
except Exception as e:
    print("not JSON: %s" % e); sys.exit(0)
if not isinstance(doc, dict):
    print("not a JSON object"); sys.exit(0)
def find(d, names):
    for k, v in d.items():
        if k.lower() in names:
            return v
    for v in d.values():
        if isinstance(v, dict):
            r = find(v, names)
            if r is not None:
                return r
    return None
k = find(doc, {"kernel", "kernel_release", "kernelrelease", "release", "uname"})
h = find(doc, {"hostname", "host", "host_name"})
problems = []
if not isinstance(k, str) or kernel not in k:
    problems.append("kernel %r is not the guest's %r" % (k, kernel))
if not isinstance(h, str) or h.strip() != host:
    problems.append("hostname %r is not the guest's %r" % (h, host))
print("; ".join(problems) if problems else "ok")
EOF
)
    check "$([ "$verdict" = ok ]; echo $?)" "/cgi-bin/status is JSON with the guest's kernel and hostname" \
      "$verdict (Content-Type '$(header_of "$hdr" Content-Type)', body '$(head -c 120 "$RUN/status.json" | tr '\n' ' ')')"
  fi

  # Load.
  # ab checks no certificate: over TLS it goes to the address (Host 127.0.0.1, which is allowed).
  local ab_url="$SCHEME://127.0.0.1:$PORT/"
  say "ab -k -c $AB_CONCURRENCY -n $AB_REQUESTS $ab_url"
  local t0 t1
  t0=$(now)
  timeout 300 ab -k -s 30 -c "$AB_CONCURRENCY" -n "$AB_REQUESTS" "$ab_url" >"$OUT/ab.txt" 2>&1
  local abrc=$?
  t1=$(now)
  local complete failed non2xx rps
  complete=$(awk '/^Complete requests:/ { print $3 }' "$OUT/ab.txt")
  failed=$(awk '/^Failed requests:/ { print $3 }' "$OUT/ab.txt")
  non2xx=$(awk '/^Non-2xx responses:/ { print $3 }' "$OUT/ab.txt")
  rps=$(awk '/^Requests per second:/ { print $4 }' "$OUT/ab.txt")
  if [ "$abrc" = 0 ] && [ "$complete" = "$AB_REQUESTS" ] && [ "$failed" = 0 ] && [ -z "$non2xx" ]; then
    pass "ab -k -c $AB_CONCURRENCY -n $AB_REQUESTS: 0 failed, $rps req/s ($(elapsed "$t0" "$t1") s)"
    AB_RPS=$rps
  else
    fail "ab -k -c $AB_CONCURRENCY -n $AB_REQUESTS: exit $abrc, complete '${complete}', failed '${failed}', non-2xx '${non2xx}' ($(tail -n 3 "$OUT/ab.txt" | tr '\n' ' '))"
  fi
}

# ---------------------------------------------------------------------------------------------------
# 5b. HTTPS (boot.sh BOARD tls): the certificate the guest made at first boot, from the host.
first_cert() { # first_cert < TEXT > PEM: the first PEM certificate in TEXT
  sed -n '/-----BEGIN CERTIFICATE-----/,/-----END CERTIFICATE-----/{p;/-----END CERTIFICATE-----/q;}'
}

fingerprint() { # fingerprint PEM-FILE -> the SHA-256 fingerprint of the certificate, or nothing
  openssl x509 -in "$1" -noout -fingerprint -sha256 2>/dev/null | sed 's/^[^=]*=//'
}

served_cert() { # served_cert FILE: the certificate the guest's port 443 sends (openssl s_client)
  timeout 60 openssl s_client -connect "127.0.0.1:$PORT" -servername localhost -showcerts \
    </dev/null 2>"$1.err" | first_cert >"$1"
  [ -s "$1" ]
}

tls_checks() {
  local wu bad out
  # Made at first boot (the image holds no pair): both files, mode 0600, the certificate given
  # to www-data, the key kept by root (out of the scripts' reach).
  guest 30 "ls -ln $GUEST_CERT $GUEST_KEY; echo wwwuid=\$(id -u www-data)"
  out=$GOUT
  wu=$(printf '%s\n' "$out" | sed -n 's/^wwwuid=//p')
  bad=$(printf '%s\n' "$out" | awk -v u="$wu" -v key="$GUEST_KEY" '
    /^-/ { n++; owner = ($NF == key) ? 0 : u; if ($1 != "-rw-------" || $3 != owner) printf "%s; ", $0 }
    END { if (n != 2) printf "%d of the 2 files", n }')
  check "$([ -n "$wu" ] && [ -z "$bad" ]; echo $?)" \
    "the guest made $GUEST_CERT (owned by www-data) and $GUEST_KEY (owned by root) at first boot, mode 0600" \
    "${bad}ls: $(printf '%s' "$out" | tr '\n' ' ')"
  guest 20 "$(wait_guest_log 'made a key .* and a self-signed certificate')"
  check "$GRC" "/var/log/messages has marmoset's 'made a key ... and a self-signed certificate' line"
  [ "$GRC" = 0 ] && say "  $(printf '%s\n' "$GOUT" | grep -m1 'self-signed' | sed 's/.*TLS: /TLS: /')"

  # The certificate, copied out through the console, and the one port 443 sends: the same.
  guest 20 "cat $GUEST_CERT"
  printf '%s\n' "$GOUT" | first_cert >"$RUN/cert.pem"
  CERT_FP=$(fingerprint "$RUN/cert.pem")
  check "$([ -n "$CERT_FP" ]; echo $?)" "$GUEST_CERT copied out of the guest (SHA-256 ${CERT_FP:-none})" \
    "console output: $(printf '%s' "$GOUT" | head -c 200 | tr '\n' ' ')"
  local served_fp=""
  served_cert "$RUN/served.pem" && served_fp=$(fingerprint "$RUN/served.pem")
  check "$([ -n "$CERT_FP" ] && [ "$served_fp" = "$CERT_FP" ]; echo $?)" \
    "port 443 sends that certificate (openssl s_client -showcerts)" \
    "served '${served_fp}', file '$CERT_FP' $(tail -n 3 "$RUN/served.pem.err" 2>/dev/null | tr '\n' ' ')"

  # Its names: the guest's host name and localhost (openssl x509 -text), each one valid
  # (openssl verify with the certificate as its own trust anchor), and a P-256 key.
  local text n absent=""
  text=$(openssl x509 -in "$RUN/cert.pem" -noout -text 2>&1)
  for n in "DNS:$GUEST_HOSTNAME" "DNS:localhost" "ASN1 OID: prime256v1"; do
    printf '%s\n' "$text" | grep -qF "$n" || absent="$absent '$n'"
  done
  check "$([ -z "$absent" ]; echo $?)" \
    "the certificate's names are the host name $GUEST_HOSTNAME and localhost, its key P-256 (openssl x509 -text)" \
    "missing:$absent; $(printf '%s\n' "$text" | grep -A1 'Subject Alternative Name' | tr '\n' ' ')"
  for n in "$GUEST_HOSTNAME" localhost; do
    openssl verify -CAfile "$RUN/cert.pem" -verify_hostname "$n" "$RUN/cert.pem" >"$RUN/verify.out" 2>&1
    check $? "openssl verify -verify_hostname $n: OK" "$(tr '\n' ' ' <"$RUN/verify.out")"
  done

  local code got
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$RUN/cert.pem" \
    --resolve "localhost:$PORT:127.0.0.1" "https://localhost:$PORT/")
  check "$([ "$code" = 200 ]; echo $?)" "curl --cacert (the guest's certificate) https://localhost/ -> 200" "got '$code'"
  # The shipped config's allowed-hosts lists localhost only: the host name on the certificate is
  # answered too, a name that is not the device's gets 421.
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$RUN/cert.pem" \
    --resolve "$GUEST_HOSTNAME:$PORT:127.0.0.1" "https://$GUEST_HOSTNAME:$PORT/")
  check "$([ "$code" = 200 ]; echo $?)" "https://$GUEST_HOSTNAME/ (the host name) -> 200" "got '$code'"
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$RUN/cert.pem" \
    -H 'Host: rebound.example' --resolve "localhost:$PORT:127.0.0.1" "https://localhost:$PORT/")
  check "$([ "$code" = 421 ]; echo $?)" "Host: rebound.example -> 421" "got '$code'"

  # Port 80 with redirect-https: 308 to https://, path and query kept, port 443 left out.
  got=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' --max-time 20 "http://127.0.0.1:$PORT80/cgi-bin/status?x=1")
  check "$([ "$got" = "308 https://127.0.0.1/cgi-bin/status?x=1" ]; echo $?)" \
    "port 80 answers 308 to https://127.0.0.1/cgi-bin/status?x=1" "got '$got'"
}

# 5c. Kernel TLS (boot.sh BOARD tls): with tls.ko loaded the kernel takes each connection's records
# after the handshake, and file bodies go out with sendfile as over plain HTTP.
tls_stat() { # TLS_STAT="TX RX ERRORS": sockets given to the kernel's TLS so far, decrypt errors
  # Not in $(...): guest counts its commands in this shell.
  guest 20 "cat /proc/net/tls_stat"
  TLS_STAT=$(printf '%s\n' "$GOUT" | awk '$1 == "TlsTxSw" { tx = $2 } $1 == "TlsRxSw" { rx = $2 }
    $1 == "TlsDecryptError" { e = $2 } END { print tx + 0, rx + 0, e + 0 }')
}

ktls_checks() {
  local before after out url="https://localhost:$PORT/ktls" mode="kernel TLS"
  if [ -n "${KTLS_MODULES:-}" ]; then
    guest 20 "$(wait_guest_log 'records in the kernel \(kTLS\) for TLS 1.2 and 1.3')"
    check "$GRC" "marmoset logged that the kernel takes the TLS records (kTLS) for TLS 1.2 and 1.3" \
      "$(printf '%s' "$GOUT" | tail -n 2 | tr '\n' ' ')"
    tls_stat
    before=$TLS_STAT
  else
    # A board that loads no kernel TLS (board.conf without KTLS_MODULES): rustls keeps the records.
    mode="TLS in user space"
    guest 20 "$(wait_guest_log 'records in user space: no kernel TLS')"
    check "$GRC" "marmoset logged that the TLS records stay in user space (no KTLS_MODULES)" \
      "$(printf '%s' "$GOUT" | tail -n 2 | tr '\n' ' ')"
  fi

  # Two requests on one connection (TLS 1.3): 300,000 bytes (records and sendfile calls), then
  # 5,000 (one write).
  rm -f "$RUN/got-big" "$RUN/got-small"
  out=$("${HCURL[@]}" -sv --max-time 60 -w '%{http_code} %{num_connects} %{size_download}\n' \
    -o "$RUN/got-big" "$url/big.bin" -o "$RUN/got-small" "$url/small.bin" 2>"$RUN/curl-ka.err" | tr '\n' ' ')
  check "$([ "$out" = "200 1 300000 200 0 5000 " ] && cmp -s "$RUN/got-big" "$RUN/big.bin" &&
    cmp -s "$RUN/got-small" "$RUN/small.bin" && grep -q 'SSL connection using TLSv1.3' "$RUN/curl-ka.err"; echo $?)" \
    "$mode 1.3: 300,000 and 5,000 bytes on one keep-alive connection, the same bytes" \
    "got '$out'; $(grep -m1 'SSL connection' "$RUN/curl-ka.err")"

  rm -f "$RUN/got-big"
  out=$("${HCURL[@]}" -sv --tls-max 1.2 --max-time 60 -w '%{http_code} %{size_download}' \
    -o "$RUN/got-big" "$url/big.bin" 2>"$RUN/curl-12.err")
  check "$([ "$out" = "200 300000" ] && cmp -s "$RUN/got-big" "$RUN/big.bin" &&
    grep -q 'SSL connection using TLSv1.2' "$RUN/curl-12.err"; echo $?)" \
    "$mode 1.2 (curl --tls-max 1.2): 300,000 bytes, the same bytes" \
    "got '$out'; $(grep -m1 'SSL connection' "$RUN/curl-12.err")"

  # Five pipelined requests (15 KB, one record) sent with the client's Finished: the server's
  # rustls decrypts them before the handover (the first head fills the 8 KiB head buffer), and the
  # server reads the rest after it.
  out=$(python3 - "$RUN/cert.pem" "$PORT" "$RUN/small.bin" <<'EOF'
import socket, ssl, sys
cafile, port, body = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "rb").read()
incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ssl.create_default_context(cafile=cafile).wrap_bio(incoming, outgoing, server_hostname="localhost")
s = socket.create_connection(("127.0.0.1", port), timeout=60)
def receive():
    more = s.recv(65536)
    if more:
        incoming.write(more)
    return bool(more)
while True:
    try:
        tls.do_handshake()
        break
    except ssl.SSLWantReadError:
        s.sendall(outgoing.read())
        if not receive():
            sys.exit("closed during the handshake")
request = b"GET /ktls/small.bin HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + b"x" * 3000 + b"\r\n\r\n"
tls.write(request * 5)
s.sendall(outgoing.read())
data, good = b"", 0
while good < 5:
    end = data.find(b"\r\n\r\n")
    if end >= 0:
        head = data[:end].decode("latin-1").lower()
        length = int(head.split("content-length:")[1].split("\r\n")[0])
        if len(data) >= end + 4 + length:
            if not head.startswith("http/1.1 200") or data[end + 4:end + 4 + length] != body:
                break
            good, data = good + 1, data[end + 4 + length:]
            continue
    try:
        data += tls.read(65536)
    except ssl.SSLWantReadError:
        if not receive():
            break
    except ssl.SSLError:
        break
print(good)
EOF
)
  check "$([ "$out" = 5 ]; echo $?)" \
    "$mode: 5 pipelined requests sent with the Finished (read partly before any handover), 5 answers" \
    "got '$out'"

  [ -n "${KTLS_MODULES:-}" ] || return 0
  tls_stat
  after=$TLS_STAT
  check "$(awk -v b="$before" -v a="$after" 'BEGIN { split(b, x, " "); split(a, y, " ")
      exit !(y[1] - x[1] >= 3 && y[2] - x[2] >= 3 && y[3] == 0) }'; echo $?)" \
    "/proc/net/tls_stat: the kernel took both directions of those 3 connections, no decrypt error" \
    "TlsTxSw TlsRxSw TlsDecryptError before '$before', after '$after'"
}

# After the reload checks: a restart through the init script keeps the certificate.
tls_restart_check() { # tls_restart_check PID-BEFORE
  local out pid2 code deadline fp2=""
  guest 90 "/etc/init.d/S50marmoset restart; echo restart-rc=\$?; cat $GUEST_PIDFILE"
  out=$GOUT
  pid2=$(printf '%s\n' "$out" | tail -n 1 | tr -dc 0-9)
  check "$(printf '%s\n' "$out" | grep -qx 'restart-rc=0' && [ -n "$pid2" ] && [ "$pid2" != "$1" ]; echo $?)" \
    "S50marmoset restart: a new process (pid $1 -> ${pid2:-none})" "$(printf '%s' "$out" | tr '\n' ' ')"
  RESTARTED_PID=$pid2
  # start-stop-daemon --background returns before the server listens: wait for it, verifying
  # with the certificate from first boot.
  deadline=$(($(date +%s) + 60))
  while :; do
    code=$("${HCURL[@]}" -s -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/")
    [ "$code" = 200 ] && break
    [ "$(date +%s)" -lt "$deadline" ] || break
    sleep 0.2
  done
  check "$([ "$code" = 200 ]; echo $?)" "after the restart the UI answers, verified with the first certificate" "got '$code'"
  served_cert "$RUN/served2.pem" && fp2=$(fingerprint "$RUN/served2.pem")
  check "$([ -n "$fp2" ] && [ "$fp2" = "$CERT_FP" ]; echo $?)" \
    "after the restart port 443 sends the same certificate (SHA-256 fingerprint)" "before '$CERT_FP', after '$fp2'"
  guest 20 "grep -c 'self-signed certificate' /var/log/messages"
  check "$([ "$(printf '%s\n' "$GOUT" | tail -n 1)" = 1 ]; echo $?)" \
    "the pair was made once: one 'self-signed certificate' line in /var/log/messages" "count: $GOUT"
}

# ---------------------------------------------------------------------------------------------------
# 6. In the guest, through the serial console.
wait_guest_log() { # a guest-side loop: wait up to ~10 s for REGEX in /var/log/messages
  printf "i=0; while ! grep -qE '%s' /var/log/messages && [ \$i -lt 100 ]; do usleep 100000; i=\$((i+1)); done; grep -E '%s' /var/log/messages" "$1" "$1"
}

# A script that outlives a short cgi-timeout gets its 504 and is killed: a second instance on
# 127.0.0.1:8081 in the guest (the image's config keeps the 30 s default). This needs the reactor's
# timers to fire on the guest's real kernel, which no other check here does.
cgi_timeout_check() {
  local d=/tmp/cgi-timeout status secs left
  guest 90 "mkdir -p $d/cgi-bin && printf '#!/bin/sh\\nexec sleep 300\\n' >$d/cgi-bin/hang && chmod 755 $d/cgi-bin/hang; marmoset --config /dev/null --root $d --listen 127.0.0.1:8081 --cgi-timeout 2 --user www-data >$d.log 2>&1 & p=\$!; i=0; until grep -q started $d.log || [ \$i -ge 100 ]; do usleep 100000; i=\$((i+1)); done; t0=\$(date +%s); echo status=\$(printf 'GET /cgi-bin/hang HTTP/1.0\\r\\nHost: t\\r\\n\\r\\n' | timeout 60 nc 127.0.0.1 8081 | head -n 1 | tr -d '\\r'); echo secs=\$((\$(date +%s) - t0)); i=0; while ps | grep -q '[s]leep 300' && [ \$i -lt 50 ]; do usleep 100000; i=\$((i+1)); done; echo left=\$(ps | grep -c '[s]leep 300'); kill \$p; wait \$p; cat $d.log"
  status=$(printf '%s\n' "$GOUT" | sed -n 's/^status=//p')
  secs=$(printf '%s\n' "$GOUT" | sed -n 's/^secs=//p')
  left=$(printf '%s\n' "$GOUT" | sed -n 's/^left=//p')
  check "$([ "$status" = "HTTP/1.1 504 Gateway Timeout" ] && [ "$left" = 0 ]; echo $?)" \
    "a CGI script sleeping past --cgi-timeout 2 gets 504 (after ${secs:-?} s) and is killed" \
    "status '$status', scripts left '$left'; $(printf '%s' "$GOUT" | tr '\n' ' ')"
}

guest_checks() {
  local pid rss code
  FAILED_BEFORE_GUEST=$FAILED
  # The main process is the one in S50marmoset's pidfile; with workers there are more processes.
  guest 30 "cat $GUEST_PIDFILE 2>/dev/null; echo; echo pids=\$(pidof marmoset)"
  pid=$(printf '%s\n' "$GOUT" | sed -n '1{s/[^0-9]//g;p;}')
  local pids
  pids=$(printf '%s\n' "$GOUT" | sed -n 's/^pids=//p')
  [ -n "$pid" ] || pid=$(printf '%s\n' "$pids" | awk '{ print $NF }')
  if [ -z "$pid" ] || [ -z "$pids" ]; then
    fail "marmoset is running in the guest (pidfile/pidof: '$(printf '%s' "$GOUT" | tr '\n' ' ')')"
  else
    pass "marmoset is running in the guest (pid $pid; all: $pids)"
    guest 20 "for p in $pids; do echo \"proc \$p \$(grep -E '^(Uid|Gid|VmRSS):' /proc/\$p/status | tr -s '\\t ' ' ' | tr '\\n' ' ') SmapsRss: \$(awk '/^Rss:/ { print \$2 }' /proc/\$p/smaps_rollup 2>/dev/null)\"; done; echo wwwuid=\$(id -u www-data) wwwgid=\$(id -g www-data)"
    local wu wg bad
    wu=$(printf '%s\n' "$GOUT" | sed -n 's/.*wwwuid=\([0-9]*\).*/\1/p')
    wg=$(printf '%s\n' "$GOUT" | sed -n 's/.*wwwgid=\([0-9]*\).*/\1/p')
    # "proc PID Uid: r e s f Gid: r e s f VmRSS: N kB"
    bad=$(printf '%s\n' "$GOUT" | awk -v u="$wu" -v g="$wg" '
      /^proc / { ok = 1
        for (i = 1; i <= NF; i++) {
          if ($i == "Uid:") for (j = 1; j <= 4; j++) if ($(i + j) != u) ok = 0
          if ($i == "Gid:") for (j = 1; j <= 4; j++) if ($(i + j) != g) ok = 0
        }
        if (!ok || u == "") printf "%s ", $0 }')
    check "$([ -n "$wu" ] && [ -z "$bad" ]; echo $?)" \
      "every marmoset process runs as www-data (uid $wu, gid $wg)" "$bad"
    # VmRSS, and Rss from smaps_rollup (a page-table walk: exact, where VmRSS of a small process can
    # lag behind on kernels that batch the RSS counters per thread, as the armmp one does).
    rss=$(printf '%s\n' "$GOUT" | awk -v main="$pid" '
      /^proc / { n++
        for (i = 1; i <= NF; i++) {
          if ($i == "VmRSS:") { v[$2] = $(i + 1); tv += $(i + 1) }
          if ($i == "SmapsRss:" && $(i + 1) ~ /^[0-9]+$/) { r[$2] = $(i + 1); tr += $(i + 1) }
        } }
      END { if (!n) { print "unknown"; exit }
            out = "VmRSS " ((main in v) ? v[main] : "?") " kB"
            if (main in r) out = out ", smaps Rss " r[main] " kB"
            out = out " (main pid " main ")"
            if (n > 1) out = out "; all " n " processes: VmRSS " tv " kB" (tr ? ", smaps Rss " tr " kB" : "")
            print out }')
    GUEST_RSS=${rss:-unknown}
    say "marmoset VmRSS after the load: $GUEST_RSS"
  fi

  guest 20 "$(wait_guest_log 'marmoset[^ ]* [^ ]+ started')"
  check "$GRC" "/var/log/messages has marmoset's 'marmoset VERSION started' line"
  [ "$GRC" = 0 ] && say "  $(printf '%s\n' "$GOUT" | grep -m1 started)"

  cgi_timeout_check

  guest 60 "/etc/init.d/S50marmoset reload; echo reload-rc=\$?"
  local reload_out=$GOUT
  guest 20 "$(wait_guest_log 'marmoset.*reloading')"
  check "$GRC" "S50marmoset reload: 'reloading' logged" "$(printf '%s' "$reload_out" | tr '\n' ' ')"
  guest 20 "cat $GUEST_PIDFILE 2>/dev/null; echo; echo pids=\$(pidof marmoset)"
  local pid2
  pid2=$(printf '%s\n' "$GOUT" | sed -n '1{s/[^0-9]//g;p;}')
  case " $(printf '%s\n' "$GOUT" | sed -n 's/^pids=//p') " in *" $pid2 "*) ;; *) pid2="$pid2(not running)" ;; esac
  check "$([ -n "$pid" ] && [ "$pid2" = "$pid" ]; echo $?)" "S50marmoset reload: still running with the same pid" \
    "pid before '$pid', after '$pid2'"
  code=$("${HCURL[@]}" -s -o /dev/null -w '%{http_code}' --max-time 10 "$BASE/")
  check "$([ "$code" = 200 ]; echo $?)" "UI still answers after reload" "got '$code'"
  [ -n "$TLS" ] && tls_restart_check "$pid"

  # The script waits until start-stop-daemon no longer finds the process by its executable, which
  # an exiting process loses before init has reaped it: pidof may list it for a moment longer, so
  # the guest waits up to 3 s for it to be gone from the process table.
  guest 60 "/etc/init.d/S50marmoset stop; echo stop-rc=\$?; i=0; while pidof marmoset >/dev/null && [ \$i -lt 30 ]; do usleep 100000; i=\$((i+1)); done; pidof marmoset || echo no-marmoset-process"
  local stop_out=$GOUT
  check "$(printf '%s\n' "$stop_out" | grep -qx 'no-marmoset-process'; echo $?)" \
    "S50marmoset stop: the process is gone" "$(printf '%s' "$stop_out" | tr '\n' ' ')"
  # After a restart an earlier process has logged its stop too: the line must be the running one's.
  if [ -n "${RESTARTED_PID:-}" ]; then
    guest 20 "$(wait_guest_log "marmoset\\[$RESTARTED_PID\\]: marmoset stopped")"
  else
    guest 20 "$(wait_guest_log 'marmoset stopped')"
  fi
  check "$GRC" "S50marmoset stop: 'marmoset stopped' logged${RESTARTED_PID:+ by pid $RESTARTED_PID}"

  if [ "$FAILED" -gt "$FAILED_BEFORE_GUEST" ]; then
    guest 20 'grep -i marmoset /var/log/messages | tail -n 20'
    echo "---- marmoset's lines in the guest's /var/log/messages ----"
    printf '%s\n' "$GOUT"
    echo "----"
  fi

  # Power off: QEMU must exit by itself, with status 0.
  printf 'poweroff -f\n' >&7
  local deadline rc
  deadline=$(($(date +%s) + POWEROFF_DEADLINE))
  while kill -0 "$QEMU_PID" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
    sleep 0.1
  done
  if kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID"
    wait "$QEMU_PID" 2>/dev/null
    QEMU_PID=""
    fail "poweroff -f: qemu still running after ${POWEROFF_DEADLINE}s (killed)"
  else
    wait "$QEMU_PID"
    rc=$?
    QEMU_PID=""
    check "$([ "$rc" = 0 ]; echo $?)" "poweroff -f: qemu exited by itself with status 0" "status $rc"
  fi
}

# ---------------------------------------------------------------------------------------------------
[ -n "${MARMOSET_QEMU_LIBRARY:-}" ] && return 0
say "$BOARD_DESC ($RUST_TARGET, Debian $DEB_ARCH)"
host_prereqs
build_binary
BIN_SIZE="n/a (placeholder)"
if [ -n "${BINARY:-}" ]; then
  BIN_SIZE="$(stat -c %s "$BINARY") bytes"
  if readelf -l "$BINARY" 2>/dev/null | grep -q 'program interpreter'; then
    fail "$BINARY is dynamically linked (the image has no shared libraries)"
  fi
  say "binary: $BINARY, $BIN_SIZE"
fi
fetch_debs
build_initramfs
say "kernel $KVER; modules: ${MODULE_NAMES:-none}; initramfs $(stat -c %s "$INITRAMFS") bytes"
boot
guest 30 'uname -r; hostname'
GUEST_KERNEL=$(printf '%s\n' "$GOUT" | sed -n 1p)
GUEST_HOST=$(printf '%s\n' "$GOUT" | sed -n 2p)
check "$([ "$GUEST_KERNEL" = "$KVER" ] && [ "$GUEST_HOST" = "$GUEST_HOSTNAME" ]; echo $?)" \
  "serial console answers (kernel $GUEST_KERNEL, hostname $GUEST_HOST)" "output '$GOUT'"
AB_RPS=n/a
GUEST_RSS=unknown
BASE="http://127.0.0.1:$PORT"
HCURL=(curl)
if [ -n "$TLS" ]; then
  tls_checks
  # From here on every request to the UI verifies the guest's certificate and its name.
  BASE="https://localhost:$PORT"
  HCURL=(curl --cacert "$RUN/cert.pem" --resolve "localhost:$PORT:127.0.0.1")
  ktls_checks
fi
host_checks
guest_checks
SUMMARY=(
  "board:               $BOARD ($RUST_TARGET${TLS:+ --features tls}, kernel $KVER)"
  "qemu start -> UI:    ${BOOT_TIME} s"
  "binary size:         $BIN_SIZE"
  "VmRSS after load:    $GUEST_RSS"
  "ab req/s:            $AB_RPS"
)
finish
