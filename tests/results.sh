# Result counting shared by the shell tests: `ok DESC`, `bad DESC`,
# `check DESC COMMAND...` (ok when the command succeeds, else bad and
# status 1), `not COMMAND...`. Each test ends with "N passed, M failed".
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
