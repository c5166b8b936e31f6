#!/bin/sh
# run.sh: load the demo UI (rootfs-overlay/www) from a real marmoset in Debian's headless Chromium.
#
#   tests/browser/run.sh            (from anywhere; MARMOSET_BIN overrides target/release/marmoset)
#
# The status CGI is replaced by a stub printing fixed JSON (hostname "testbox"), so the test sees
# known values. Screenshots go to tests/out/browser/. Installs chromium and the node packages
# (npm ci) when they are missing; never downloads a browser of its own.
# Ends with one line: "PASS: browser ..." (exit 0) or "FAIL: browser ..." (exit 1).
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo" || exit 1
out="$repo/tests/out/browser"
bin=${MARMOSET_BIN:-target/release/marmoset}
START_DEADLINE=20 # seconds for the server to report its port

tmp=''
pid=''
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$pid" 2>/dev/null
  fi
  [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
  if [ -n "$tmp" ] && [ -s "$tmp/server.log" ]; then
    echo "--- server log (last lines) ---" >&2
    tail -n 20 "$tmp/server.log" >&2
  fi
  echo "FAIL: browser UI test: $*"
  exit 1
}

apt_install() {
  [ "$(id -u)" = 0 ] || fail "$* missing (apt-get install $*, as root)"
  echo "installing $* with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1; } ||
    fail "could not install $*"
}

# 1. Tools: Debian's chromium, node, the pinned playwright-core.
[ -x /usr/bin/chromium ] || apt_install chromium
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then apt_install nodejs npm; fi
if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2) || fail "npm ci failed"
fi

# 2. The server binary.
if [ ! -x "$bin" ]; then
  [ -z "${MARMOSET_BIN:-}" ] || fail "MARMOSET_BIN=$bin is not an executable"
  echo "building $bin" >&2
  cargo build --release >&2 || fail "cargo build --release failed"
  [ -x "$bin" ] || fail "$bin missing after cargo build"
fi

# 3. A document root: the committed UI, with a status stub of known values.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/marmoset-browser.XXXXXX") || fail "mktemp failed"
cp -R rootfs-overlay/www "$tmp/root" || fail "cannot copy rootfs-overlay/www"
mkdir -p "$tmp/root/cgi-bin"
cat > "$tmp/root/cgi-bin/status" <<'EOF'
#!/bin/sh
printf 'Content-Type: application/json\nCache-Control: no-store\n\n'
printf '{"hostname":"testbox","kernel":"6.1.0-test","uptime":93784.2,"load":[0.1,0.2,0.3],'
printf '"mem_total_kb":65536,"mem_free_kb":30000,"mem_available_kb":40000,"firmware":"Buildroot 2024.02"}\n'
EOF
chmod 755 "$tmp/root/cgi-bin/status"

# 4. Start marmoset on a free port and read the port from its log, with a deadline.
"$bin" --root "$tmp/root" --listen 127.0.0.1:0 --workers 1 2> "$tmp/server.log" &
pid=$!
end=$(($(date +%s) + START_DEADLINE))
port=''
while [ -z "$port" ]; do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$tmp/server.log" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { wait "$pid"; fail "marmoset exited (status $?) before listening"; }
  [ "$(date +%s)" -lt "$end" ] || fail "no 'listening on 127.0.0.1:PORT' from marmoset within ${START_DEADLINE}s"
  sleep 0.05
done
echo "marmoset listening on 127.0.0.1:$port" >&2

# 5. The browser part.
rm -rf "$out" && mkdir -p "$out"
if ! MARMOSET_URL="http://127.0.0.1:$port" OUT_DIR="$out" PROFILE_DIR="$tmp/profile" \
  node "$here/ui.test.mjs" 2> "$tmp/browser.log"; then
  cat "$tmp/browser.log" >&2
  fail "$(tail -n 1 "$tmp/browser.log")"
fi
cat "$tmp/browser.log" >&2

# 6. Again with the shipped cgi-bin/status: live values from this machine.
cp rootfs-overlay/www/cgi-bin/status "$tmp/root/cgi-bin/status" || fail "cannot copy the shipped status script"
live=$(cat /proc/sys/kernel/hostname)
if ! MARMOSET_URL="http://127.0.0.1:$port" OUT_DIR="$out" PROFILE_DIR="$tmp/profile-live" LIVE_HOSTNAME="$live" \
  node "$here/ui.test.mjs" 2> "$tmp/browser-live.log"; then
  cat "$tmp/browser-live.log" >&2
  fail "with the shipped status script: $(tail -n 1 "$tmp/browser-live.log")"
fi
cat "$tmp/browser-live.log" >&2
echo "PASS: browser UI test (stub and live status rendered, no console/page/request errors, outage shown and recovered; screenshots in tests/out/browser/)"
exit 0
