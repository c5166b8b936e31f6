# shellcheck shell=bash
# apt_install LOG PACKAGE...: installs the Debian packages of the list that
# are not installed yet, saying which, with apt-get's output in LOG.
# Returns apt-get's failure.
apt_install() {
	local log=$1 p missing=()
	shift
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	echo "apt-get install ${missing[*]}"
	apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null 2>&1 || true
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1
}
