# Shared by the shell tests (tests/slow.sh, tests/soak.sh): result counting,
# installs, the binary, a scratch dir, and starting marmoset on a free port.
# Source it after `cd` to the repository root.
# shellcheck shell=sh

TGT=${CARGO_TARGET_DIR:-target}
BIN=${MARMOSET_BIN:-$TGT/release/marmoset}

# shellcheck source=tests/results.sh
. tests/results.sh
finish() {
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
}

# need COMMAND PACKAGE: installs the Debian package when the command is missing.
need() {
	command -v "$1" >/dev/null 2>&1 && return 0
	echo "installing $2"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1; } ||
		{ bad "$2 could not be installed"; finish; }
}

if [ ! -x "$BIN" ]; then
	echo "building $BIN"
	cargo build --release --quiet || { bad "cargo build --release"; finish; }
fi

work=$(mktemp -d)
server=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ -n "$server" ]; then
		kill "$server" 2>/dev/null
		wait "$server" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# start_marmoset ARGS...: runs the binary on 127.0.0.1:0 over $work/root,
# sets $server and $port (read from its log, with a 10 s deadline).
start_marmoset() {
	"$BIN" --config /dev/null --root "$work/root" --listen 127.0.0.1:0 "$@" 2>"$work/log" &
	server=$!
	port=""
	i=0
	while [ -z "$port" ] && [ $i -lt 100 ]; do
		port=$(sed -n 's/.*listening on .*:\([0-9][0-9]*\)$/\1/p' "$work/log" | head -n 1)
		[ -n "$port" ] || sleep 0.1
		i=$((i + 1))
	done
	[ -n "$port" ] || { bad "server did not start: $(cat "$work/log")"; finish; }
	ok "server on port $port (pid $server)"
}
