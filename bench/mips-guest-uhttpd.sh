# Sourced by bench/mips-guest.sh when UHTTPD_DIR is set: builds OpenWrt's uhttpd and the libubox it
# needs for mipsel from the upstream trees the user gives (UHTTPD_DIR, LIBUBOX_DIR; read, never
# changed: the build directories are under bench/out), with Debian's gcc-mipsel-linux-gnu against
# glibc, dynamically, and puts them into the guest image: /usr/sbin/uhttpd and libubox's libraries
# in /usr/lib, json-c from Debian's mipsel package. HTTP only (no TLS plugin, no Lua, ubus or ucode:
# none of them serves a static file). Sets UHTTPD_DESC for the report.
# shellcheck shell=bash

build_uhttpd() {
  local src=$UHTTPD_DIR ubox=${LIBUBOX_DIR:-} work="$OUT/uhttpd-build" sysroot stage
  { [ -f "$src/CMakeLists.txt" ] && [ -f "$src/main.c" ]; } || { fail "UHTTPD_DIR=$src is not a uhttpd tree"; return 1; }
  { [ -n "$ubox" ] && [ -f "$ubox/uloop.c" ]; } || { fail "LIBUBOX_DIR (a libubox tree) is needed with UHTTPD_DIR"; return 1; }
  local missing=()
  command -v mipsel-linux-gnu-gcc >/dev/null || missing+=(gcc-mipsel-linux-gnu libc6-dev-mipsel-cross)
  command -v cmake >/dev/null || missing+=(cmake)
  command -v pkg-config >/dev/null || missing+=(pkg-config)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    apt_install "${missing[@]}" || { fail "could not install ${missing[*]} (see $OUT/apt.log)"; return 1; }
  fi
  # json-c (libubox's blobmsg_json, uhttpd) and crypt (uhttpd's Basic auth) for mipsel: headers and
  # libraries from Debian's packages, unpacked into a sysroot beside the cross compiler's glibc.
  fetch_guest_debs libjson-c5 libjson-c-dev libcrypt-dev
  rm -rf "$work"
  sysroot="$work/sysroot" stage="$work/stage"
  mkdir -p "$sysroot" "$stage"
  local p deb
  for p in libjson-c5 libjson-c-dev libcrypt1 libcrypt-dev; do
    deb=$(newest_deb "$CACHE/debs/$DEB_ARCH" "^$p\$")
    dpkg-deb -x "$deb" "$sysroot" || { fail "dpkg-deb -x $deb failed"; return 1; }
  done
  unpack_into_overlay libjson-c5
  local triple=mipsel-linux-gnu libdir="$sysroot/usr/lib/mipsel-linux-gnu"
  local common=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=mips -DCMAKE_C_COMPILER="$triple-gcc"
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib
    "-DCMAKE_C_FLAGS=-Wno-error -Wno-stringop-overread -I$sysroot/usr/include -I$stage/usr/include"
    "-DCMAKE_SHARED_LINKER_FLAGS=-L$libdir" "-DCMAKE_EXE_LINKER_FLAGS=-L$libdir -Wl,-rpath-link,$libdir")
  say "building libubox ($(git -C "$ubox" describe --always --dirty 2>/dev/null || echo 'no git')) for mipsel"
  if ! PKG_CONFIG_LIBDIR="$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$sysroot" \
    cmake -S "$ubox" -B "$work/libubox" "${common[@]}" -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF "-Djson=$libdir/libjson-c.so" >"$work/libubox.log" 2>&1 ||
    ! make -C "$work/libubox" -j2 >>"$work/libubox.log" 2>&1 ||
    ! make -C "$work/libubox" install DESTDIR="$stage" >>"$work/libubox.log" 2>&1; then
    tail -n 20 "$work/libubox.log"
    fail "libubox did not build for mipsel (see $work/libubox.log)"
    return 1
  fi
  say "building uhttpd ($(git -C "$src" describe --always --dirty 2>/dev/null || echo 'no git')) for mipsel"
  if ! cmake -S "$src" -B "$work/uhttpd" "${common[@]}" -DTLS_SUPPORT=OFF -DLUA_SUPPORT=OFF -DUBUS_SUPPORT=OFF \
    -DUCODE_SUPPORT=OFF "-Dubox_include_dir=$stage/usr/include" "-Dubox=$stage/usr/lib/libubox.so" \
    "-Djson_script=$stage/usr/lib/libjson_script.so" "-Dblobmsg_json=$stage/usr/lib/libblobmsg_json.so" \
    "-Dlibjson=$libdir/libjson-c.so" "-DLIBS=$sysroot/lib/$triple/libcrypt.so.1" >"$work/uhttpd.log" 2>&1 ||
    ! make -C "$work/uhttpd" -j2 uhttpd >>"$work/uhttpd.log" 2>&1; then
    tail -n 20 "$work/uhttpd.log"
    fail "uhttpd did not build for mipsel (see $work/uhttpd.log)"
    return 1
  fi
  mkdir -p "$OVERLAY/usr/sbin" "$OVERLAY/usr/lib"
  install -m 0755 "$work/uhttpd/uhttpd" "$OVERLAY/usr/sbin/uhttpd"
  "$triple-strip" "$OVERLAY/usr/sbin/uhttpd"
  local lib
  for lib in libubox.so libblobmsg_json.so libjson_script.so; do
    cp -L "$stage/usr/lib/$lib" "$OVERLAY/usr/lib/$lib"
    "$triple-strip" "$OVERLAY/usr/lib/$lib"
  done
  UHTTPD_DESC="uhttpd $(git -C "$src" log -1 --format='%h (%cs)' 2>/dev/null || echo '(no git)') with libubox $(git -C "$ubox" log -1 --format='%h (%cs)' 2>/dev/null || echo '(no git)'), \`$triple-gcc\` $("$triple-gcc" -dumpversion), glibc, dynamic, stripped; HTTP only"
  mkdir -p "$OVERLAY/usr/share"
  echo "$UHTTPD_DESC" >"$OVERLAY/usr/share/uhttpd.version"
  say "uhttpd built: $(stat -c %s "$OVERLAY/usr/sbin/uhttpd") bytes"
}
