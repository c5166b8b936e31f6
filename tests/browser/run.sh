#!/bin/sh
# run.sh: load the demo UI (rootfs-overlay/www) from a real marmoset in Debian's headless Chromium.
#
#   tests/browser/run.sh            (from anywhere; MARMOSET_BIN overrides
#                                    ${CARGO_TARGET_DIR:-target}/release/marmoset)
#
# Four runs of ui.test.mjs:
#  1. the status CGI replaced by a stub printing fixed JSON (hostname "testbox"): known values;
#  2. the same server with the shipped cgi-bin/status: live values, every one must be real;
#  3. the server started exactly as README.md's first command does ("Two commands": cargo run
#     --release -- --config board/demo/marmoset.conf, from the repository root, read out of
#     README.md; its address from the config's `listen` line unless the command has --listen),
#     the page at that address with live values, as a new user sees it, without the device
#     backend: the pages say so, the status comes from the CGI, the only failed requests are the
#     backend's 502s (ui.test.mjs); the settings and firmware pages with the README's demo user.
#     Then the README's backend command (python3 board/demo/backend.py) beside it, on the
#     socket of the config's `proxy` line: status pushed by Server-Sent Events, settings saved
#     through Basic auth, a 5 MiB upload whose size and SHA-256 the page shows; no failure at all
#     until the test stops the backend under the open page, which must then fall back to the CGI.
#     Before that, curl checks the backend's errors on its socket and through the proxy.
#     Fails at once if something already listens on that port or socket.
#  4. HTTPS: the TLS build (cargo build --release --locked --features tls; MARMOSET_TLS_BIN
#     overrides) on the bundled UI (--root rootfs-overlay/www) with a config file holding a plain
#     and a TLS listener, `tls-self-signed on` (the pair made in a temp dir at start) and
#     `redirect-https on`: curl --cacert with the made certificate gets the page from
#     https://127.0.0.1:PORT/, the plain port answers 308 to the https URL, and Chromium, trusting
#     that certificate's key and no other, loads the page over TLS with live values as in run 2.
#     The default build is put back at its path afterwards (cargo build --release --locked).
# Screenshots go to tests/out/browser/. Installs chromium and the node packages (npm ci) when
# they are missing; never downloads a browser of its own.
# Ends with one line: "PASS: browser ..." (exit 0) or "FAIL: browser ..." (exit 1).
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo" || exit 1
out="$repo/tests/out/browser"
bin=${MARMOSET_BIN:-${CARGO_TARGET_DIR:-target}/release/marmoset}
START_DEADLINE=20  # seconds for the server to report its port
README_DEADLINE=60 # seconds for the README's `cargo run` to answer (the build is done before)

tmp=''
pid=''    # process group of the server on a free port (runs 1 and 2)
rpid=''   # process group of the README's command (run 3)
bpid=''   # process group of the README's backend command (run 3)
log=''    # the log of the server being tested, shown by fail()

# Every server runs in a session and process group of its own (setsid: the shell has no job
# control, so the background child is no group leader and setsid needs no fork: $! is the
# group's id). Stopping the group stops all it started: cargo run's child, marmoset's workers.
start_server() { # LOG CMD [ARG...]: CMD in the background, its output to LOG; then $! is its group
  log=$1
  shift
  setsid "$@" > "$log" 2>&1 < /dev/null &
}
# Is a process of group $1 still running (zombies, which hold no port, do not count)?
group_alive() {
  ps -A -o pgid= -o stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}
# shellcheck disable=SC2317 # also called from the EXIT trap
stop_group() { # PGID: TERM, KILL what is left after 5 s, reap
  kill -TERM "-$1" 2>/dev/null
  i=0
  while group_alive "$1" && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "-$1" 2>/dev/null
  wait "$1" 2>/dev/null
  ! group_alive "$1"
}
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
  [ -n "$pid" ] && stop_group "$pid"
  [ -n "$rpid" ] && stop_group "$rpid"
  [ -n "$bpid" ] && stop_group "$bpid"
  [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
  if [ -n "$log" ] && [ -s "$log" ]; then
    echo "--- server log (last lines) ---" >&2
    tail -n 20 "$log" >&2
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

# 0. README.md's first command, as a new user runs it (started in step 7): from the repository root, the demo
#    tree by its relative path, on the README's address. The command is read out of the
#    "## Two commands" section (its first indented `cargo run` line) so that the test follows
#    the README; it may hold only plain words (no quotes, no shell syntax), so splitting it on
#    blanks runs exactly what a shell would.
readme=$(awk '/^## / { s = ($0 == "## Two commands") } s && /^    cargo run / { sub(/^    /, ""); print; exit }' README.md)
[ -n "$readme" ] || fail "no indented 'cargo run ...' line in README.md's '## Two commands' section"
case "$readme" in
  *[!A-Za-z0-9\ ./:_=-]*) fail "README.md's first command has characters beyond plain words: $readme" ;;
esac
set -f
# shellcheck disable=SC2086 # split into words on purpose (checked above: plain words only)
set -- $readme
set +f
# The address and the backend's socket: the flag, else the config file the command names.
listen=''
conf=''
prev=''
for a in "$@"; do
  case $prev in
    --listen) listen=$a ;;
    --config) conf=$a ;;
  esac
  prev=$a
done
if [ -z "$listen" ] && [ -n "$conf" ]; then
  [ -r "$conf" ] || fail "README.md's first command names $conf, which is not readable"
  listen=$(awk '$1 == "listen" && NF == 2 { print $2; exit }' "$conf")
fi
case "$listen" in
  *:[0-9]*) ;;
  *) fail "README.md's first command has no '--listen HOST:PORT' and its config no 'listen HOST:PORT': $readme" ;;
esac
backend_sock=''
[ -n "$conf" ] && backend_sock=$(awk '$1 == "proxy" && $3 ~ /^unix:/ { sub(/^unix:/, "", $3); print $3; exit }' "$conf")
[ -n "$backend_sock" ] || fail "README.md's first command's config ($conf) has no 'proxy PREFIX unix:SOCKET' line"
# The README's backend command, read like the first one.
backend_cmd=$(awk '/^## / { s = ($0 == "## Two commands") } s && /^    python3 board\/demo\/backend\.py/ { sub(/^    /, ""); print; exit }' README.md)
[ -n "$backend_cmd" ] || fail "no indented 'python3 board/demo/backend.py' line in README.md's '## Two commands' section"
case "$backend_cmd" in
  *[!A-Za-z0-9\ ./:_=-]*) fail "README.md's backend command has characters beyond plain words: $backend_cmd" ;;
esac
url="http://$listen"
readme_port=${listen##*:}
echo "README.md's first command: $readme" >&2

# Nothing may listen there already: the test would load another server's page. The usual
# cause is the demo of README.md's first command still running.
port_free_or_fail() {
  busy=$(ss -Hltn "sport = :$readme_port" 2>/dev/null)
  curl -s -o /dev/null --max-time 2 "$url/"
  rc=$?
  if [ -n "$busy" ] || [ "$rc" != 7 ]; then
    [ -n "$busy" ] || busy="curl $url/ got an answer (exit $rc)"
    fail "port $readme_port is busy, so README.md's first command cannot be checked there: stop what listens on it (the demo of README.md's first command, if it still runs) and run again: $busy"
  fi
}
port_free_or_fail

# 1. Tools: Debian's chromium, node, the pinned playwright-core.
[ -x /usr/bin/chromium ] || apt_install chromium
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then apt_install nodejs npm; fi
command -v htpasswd >/dev/null 2>&1 || apt_install apache2-utils # checks the demo's password
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
start_server "$tmp/server.log" "$bin" --root "$tmp/root" --listen 127.0.0.1:0 --workers 1
pid=$!
end=$(($(date +%s) + START_DEADLINE))
port=''
while [ -z "$port" ]; do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
  [ -n "$port" ] && break
  group_alive "$pid" || { wait "$pid"; fail "marmoset exited (status $?) before listening"; }
  [ "$(date +%s)" -lt "$end" ] || fail "no 'listening on 127.0.0.1:PORT' from marmoset within ${START_DEADLINE}s"
  sleep 0.05
done
echo "marmoset listening on 127.0.0.1:$port" >&2

# ui URL TAG WHAT [VAR=VALUE...]: ui.test.mjs against URL (screenshots ui$TAG*.png), with the
# variables given; on a problem, fail naming WHAT.
ui() {
  url=$1 tag=$2 what=$3
  shift 3
  if ! env MARMOSET_URL="$url" OUT_DIR="$out" PROFILE_DIR="$tmp/profile$tag" SHOT_TAG="$tag" "$@" \
    node "$here/ui.test.mjs" 2> "$tmp/browser$tag.log"; then
    cat "$tmp/browser$tag.log" >&2
    fail "$what: $(tail -n 1 "$tmp/browser$tag.log")"
  fi
  cat "$tmp/browser$tag.log" >&2
}

# 5. The browser part, with the stub's known values.
rm -rf "$out" && mkdir -p "$out"
ui "http://127.0.0.1:$port" '' 'with the stub status script'

# 6. Again with the shipped cgi-bin/status: live values from this machine, all of them real.
#    What the page must show exactly: the hostname, `uname -r`, os-release's PRETTY_NAME
#    (where cgi-bin/status reads them).
cp rootfs-overlay/www/cgi-bin/status "$tmp/root/cgi-bin/status" || fail "cannot copy the shipped status script"
live_hostname=$(cat /proc/sys/kernel/hostname)
live_kernel=$(uname -r)
live_firmware=''
for f in /etc/os-release /usr/lib/os-release; do
  [ -r "$f" ] || continue
  # shellcheck disable=SC1090 # the machine's own os-release, in a subshell
  live_firmware=$(. "$f" && printf '%s' "${PRETTY_NAME:-}")
  break
done
ui "http://127.0.0.1:$port" -live 'with the shipped status script' \
  LIVE_HOSTNAME="$live_hostname" LIVE_KERNEL="$live_kernel" LIVE_FIRMWARE="$live_firmware"
stop_group "$pid" || fail "marmoset (process group $pid) did not stop"
pid='' log=''

# The demo user the README names, checked against the config's htpasswd file.
demo_user=admin demo_pass=marmoset
grep -qF "user \`$demo_user\`, password \`$demo_pass\`" README.md ||
  fail "README.md does not name the demo user (user \`$demo_user\`, password \`$demo_pass\`)"
htfile=$(awk '$1 == "auth" { print $NF; exit }' "$conf")
htpasswd -vb "$htfile" "$demo_user" "$demo_pass" > /dev/null 2>&1 ||
  fail "$htfile does not hold $demo_user with the README's password"

# 7. README.md's first command, as read in step 0 (ui() has used $url since); its port checked
#    again, as runs 1 and 2 took time.
url="http://$listen"
port_free_or_fail
set -f
# shellcheck disable=SC2086 # split into words on purpose (checked in step 0: plain words only)
set -- $readme
set +f
# The build first (as cargo run would), so that the deadline below is for starting only.
cargo build --release >&2 || fail "cargo build --release failed"
start_server "$tmp/readme.log" "$@"
rpid=$!
end=$(($(date +%s) + README_DEADLINE))
until grep -qF "listening on $listen" "$log" &&
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/")" != 000 ]; do
  group_alive "$rpid" || { wait "$rpid"; fail "'$readme' exited (status $?) before answering on $url/"; }
  [ "$(date +%s)" -lt "$end" ] || fail "'$readme' did not answer on $url/ within ${README_DEADLINE}s"
  sleep 0.1
done
echo "'$readme' answering on $url/" >&2
# Nothing may answer on the backend's socket yet: the pages would talk to another program.
if curl -s -o /dev/null --max-time 2 --unix-socket "$backend_sock" http://backend/api/health; then
  fail "$backend_sock answers already: the test needs the demo without its backend first"
fi
ui "$url" -readme "started as README.md's first command ($readme), no backend" \
  LIVE_HOSTNAME="$live_hostname" LIVE_KERNEL="$live_kernel" LIVE_FIRMWARE="$live_firmware" \
  AUTH_USER="$demo_user" AUTH_PASS="$demo_pass"
set -f
# shellcheck disable=SC2086 # split into words on purpose (checked above: plain words only)
set -- $backend_cmd
set +f
rlog=$log
start_server "$tmp/backend.log" "$@"
bpid=$!
end=$(($(date +%s) + START_DEADLINE))
until curl -s -o /dev/null --max-time 2 --unix-socket "$backend_sock" http://backend/api/health; do
  group_alive "$bpid" || { wait "$bpid"; fail "'$backend_cmd' exited (status $?) before answering on $backend_sock"; }
  [ "$(date +%s)" -lt "$end" ] || fail "'$backend_cmd' did not answer on $backend_sock within ${START_DEADLINE}s"
  sleep 0.1
done
# What the backend answers to curl, on its socket and through the proxy: refused settings,
# bodies past the limits, a chunked upload hashed as sha256sum hashes it.
expect_code() { # WANT WHAT CURL-ARGS...: curl's status code must be WANT
  want=$1 what=$2
  shift 2
  got=$(curl -s -o "$tmp/answer" -w '%{http_code}' --max-time 20 "$@")
  [ "$got" = "$want" ] || fail "$what answered $got, expected $want: $(head -c 200 "$tmp/answer")"
}
direct="--unix-socket $backend_sock"
# shellcheck disable=SC2086 # $direct is two words
expect_code 400 "POST /api/settings with bad JSON (on the socket)" $direct -H 'Content-Type: application/json' \
  --data-binary '{"hostname":' http://backend/api/settings
grep -q '"error":"bad JSON' "$tmp/answer" || fail "bad JSON answered without its reason: $(cat "$tmp/answer")"
# shellcheck disable=SC2086
expect_code 400 "POST /api/settings with a bad host name (on the socket)" $direct -H 'Content-Type: application/json' \
  --data-binary '{"hostname":"-x-"}' http://backend/api/settings
# shellcheck disable=SC2086
expect_code 415 "POST /api/settings as a form (on the socket)" $direct -d 'hostname=x' http://backend/api/settings
# shellcheck disable=SC2086
expect_code 415 "POST /api/settings as text/plain (on the socket)" $direct -H 'Content-Type: text/plain' -d x http://backend/api/settings
# shellcheck disable=SC2086
expect_code 413 "POST /api/firmware of 300000000 bytes (on the socket)" $direct -H 'Content-Length: 300000000' \
  -H 'Content-Type: application/octet-stream' -X POST http://backend/api/firmware
expect_code 413 "POST /api/firmware of 300000000 bytes (through the proxy)" -u "$demo_user:$demo_pass" \
  -H 'Content-Length: 300000000' -X POST "$url/api/firmware"
head -c 3000000 /dev/urandom > "$tmp/image.bin" || fail "cannot make a test image"
want_sha=$(sha256sum < "$tmp/image.bin" | cut -d' ' -f1)
expect_code 200 "a chunked POST /api/firmware (through the proxy)" -u "$demo_user:$demo_pass" \
  -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/octet-stream' -T "$tmp/image.bin" -X POST "$url/api/firmware"
grep -qF "{\"size\":3000000,\"sha256\":\"$want_sha\"}" "$tmp/answer" ||
  fail "a chunked upload of 3000000 bytes (SHA-256 $want_sha) was answered $(cat "$tmp/answer")"
echo "backend: 400 for bad settings, 415 for a form or text, 413 past 256 MiB (on its socket and through the proxy), a chunked upload hashed right" >&2
# The host name the backend's status starts with (its settings).
backend_host=$(curl -s --max-time 5 -u "$demo_user:$demo_pass" "$url/api/settings" |
  sed -n 's/.*"hostname":"\([^"]*\)".*/\1/p')
[ -n "$backend_host" ] || fail "GET $url/api/settings through the proxy gave no host name"
echo "'$backend_cmd' answering on $backend_sock; through $url/api/ its host name is $backend_host" >&2
ui "$url" -backend "README.md's first command with its backend ($backend_cmd)" \
  BACKEND=present LIVE_HOSTNAME="$backend_host" LIVE_KERNEL="$live_kernel" LIVE_FIRMWARE="$live_firmware" \
  AUTH_USER="$demo_user" AUTH_PASS="$demo_pass" BACKEND_PID="$bpid" CGI_HOSTNAME="$live_hostname"
stop_group "$bpid" || fail "'$backend_cmd' (process group $bpid) did not stop"
bpid=''
[ ! -e "$backend_sock" ] || fail "'$backend_cmd' left $backend_sock behind"
log=$rlog
stop_group "$rpid" || fail "'$readme' (process group $rpid) did not stop"
rpid=''
busy=$(ss -Hltn "sport = :$readme_port" 2>/dev/null)
[ -z "$busy" ] || fail "port $readme_port still in use after stopping '$readme': $busy"

# 8. HTTPS, with the TLS build. Built here (the stages before build the default one), copied
#    aside, and the default build put back at its path for whatever runs after this test.
tls_bin=${MARMOSET_TLS_BIN:-}
if [ -z "$tls_bin" ]; then
  echo "building the TLS build (cargo build --release --locked --features tls)" >&2
  cargo build --release --locked --features tls >&2 || fail "cargo build --release --locked --features tls failed"
  cp "${CARGO_TARGET_DIR:-target}/release/marmoset" "$tmp/marmoset-tls" || fail "the TLS build is missing"
  cargo build --release --locked >&2 || fail "cargo build --release --locked (the default build back) failed"
  tls_bin=$tmp/marmoset-tls
fi
[ -x "$tls_bin" ] || fail "$tls_bin is not an executable"
# The pair's files are absent: tls-self-signed makes them at start.
mkdir -p "$tmp/tls"
cat > "$tmp/https.conf" <<EOF
listen 127.0.0.1:0
listen 127.0.0.1:0 tls
tls-cert $tmp/tls/cert.pem
tls-key $tmp/tls/key.pem
tls-self-signed on
tls-names 127.0.0.1
redirect-https on
workers 1
EOF
start_server "$tmp/https.log" "$tls_bin" --config "$tmp/https.conf" --root rootfs-overlay/www
pid=$!
end=$(($(date +%s) + START_DEADLINE))
plain_port='' tls_port=''
while :; do
  plain_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$log" | head -n 1)
  tls_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\) (TLS)$/\1/p' "$log" | head -n 1)
  [ -n "$plain_port" ] && [ -n "$tls_port" ] && break
  group_alive "$pid" || { wait "$pid"; fail "the TLS build exited (status $?) before listening"; }
  [ "$(date +%s)" -lt "$end" ] || fail "no plain and TLS 'listening on' lines from the TLS build within ${START_DEADLINE}s"
  sleep 0.05
done
https_url="https://127.0.0.1:$tls_port"
echo "TLS build listening on 127.0.0.1:$plain_port (plain) and 127.0.0.1:$tls_port (TLS)" >&2
for f in cert key; do
  [ "$(stat -c %a "$tmp/tls/$f.pem" 2>/dev/null)" = 600 ] || fail "tls-self-signed made no $f.pem of mode 0600 in $tmp/tls"
done
# The made certificate verifies for the address: curl checks the chain and the name.
code=$(curl -s -o "$tmp/https-index.html" -w '%{http_code}' --max-time 10 --cacert "$tmp/tls/cert.pem" "$https_url/")
[ "$code" = 200 ] || fail "curl --cacert (the made certificate) $https_url/ answered '$code'"
grep -q 'id="hostname"' "$tmp/https-index.html" || fail "$https_url/ is not the demo UI's index.html"
# The plain port redirects with the path and query; following it ends on the page.
got=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' --max-time 10 "http://127.0.0.1:$plain_port/cgi-bin/status?x=1")
[ "$got" = "308 $https_url/cgi-bin/status?x=1" ] ||
  fail "http://127.0.0.1:$plain_port/cgi-bin/status?x=1 answered '$got', expected '308 $https_url/cgi-bin/status?x=1'"
got=$(curl -s -L -o /dev/null -w '%{http_code} %{url_effective}' --max-time 10 --cacert "$tmp/tls/cert.pem" "http://127.0.0.1:$plain_port/")
[ "$got" = "200 $https_url/" ] || fail "curl -L from the plain port ended with '$got', expected '200 $https_url/'"
echo "plain port: 308 to $https_url/...; curl --cacert verifies the made certificate" >&2
# Chromium trusts the made certificate's key and no other (the SHA-256 of its SubjectPublicKeyInfo).
spki=$(openssl x509 -in "$tmp/tls/cert.pem" -noout -pubkey | openssl pkey -pubin -outform der |
  openssl dgst -sha256 -binary | base64) || fail "cannot hash the made certificate's public key"
ui "$https_url" -https "over HTTPS with the TLS build ($https_url, the made certificate trusted)" \
  TRUST_SPKI="$spki" LIVE_HOSTNAME="$live_hostname" LIVE_KERNEL="$live_kernel" LIVE_FIRMWARE="$live_firmware"
stop_group "$pid" || fail "the TLS build (process group $pid) did not stop"
pid='' log=''

echo "PASS: browser UI test (stub and live status rendered, also from README.md's first command on http://$listen/ without and with the device backend (events, settings, upload), and over HTTPS from the TLS build with its made certificate, the plain port redirecting with 308; no console/page/request errors, outage shown and recovered; screenshots in tests/out/browser/)"
exit 0
