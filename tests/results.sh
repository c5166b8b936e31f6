# Result counting shared by the shell tests: `ok DESC`, `bad DESC`,
# `check DESC COMMAND...` (ok when the command succeeds, else bad and
# status 1), `not COMMAND...`, `eventually SECONDS COMMAND...`. Each test
# ends with "N passed, M failed".
# `skip REASON` says what was not checked for want of an input: a line
# "skip - REASON", also appended to $MARMOSET_SKIP_LOG when tests/run.sh
# sets it (its summary names them); a test that could check nothing of what
# it is for exits $SKIPPED after it, which tests/run.sh counts as skipped.
# Source it after `cd` to the repository root.
# shellcheck shell=sh

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() {
	d=$1
	shift
	if "$@"; then ok "$d"; else bad "$d"; return 1; fi
}
not() { ! "$@"; }
# eventually SECONDS COMMAND...: COMMAND succeeds within SECONDS (tried
# every 0.1 s): a wait for a condition with a deadline.
eventually() {
	_tries=$(($1 * 10))
	shift
	until "$@"; do
		_tries=$((_tries - 1))
		[ "$_tries" -gt 0 ] || return 1
		sleep 0.1
	done
}
# shellcheck disable=SC2034 # read by the scripts that source this file
SKIPPED=77
skip() {
	echo "skip - $*"
	[ -z "${MARMOSET_SKIP_LOG:-}" ] || printf '%s\n' "$*" >>"$MARMOSET_SKIP_LOG"
}
# A TCP port free on 127.0.0.1 and ::1 now, chosen by the kernel (from its
# ephemeral range, which it hands out in turn), for a server started next.
free_port() {
	python3 -c 'import socket
for _ in range(50):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket(socket.AF_INET6)
    try:
        b.bind(("::1", p))
    except OSError:
        continue
    print(p); break'
}
