#!/bin/sh
# Generates the Yocto include listing every crates.io dependency of Cargo.lock
# (what `bitbake -c update_crates marmoset` would write): one
# crate://crates.io/NAME/VERSION SRC_URI entry per crate and its
# SRC_URI[NAME-VERSION.sha256sum] from Cargo.lock's checksum field (the
# sha256 of the .crate file).
#
# Usage: board/crates-inc.sh           rewrite the include
#        board/crates-inc.sh --check   exit 1 if it is out of date
#        board/crates-inc.sh --stdout  print it
set -eu
cd "$(dirname "$0")/.."
INC=board/yocto/meta-marmoset/recipes-httpd/marmoset/marmoset-crates.inc

generate() {
	awk '
	function flush() {
		if (name != "" && src ~ /^registry\+https:\/\/github\.com\/rust-lang\/crates\.io-index$/ && sum != "") {
			n++; names[n] = name; vers[n] = ver; sums[n] = sum
		}
		name = ver = src = sum = ""
	}
	/^\[\[package\]\]$/ { flush(); next }
	/^name = /     { name = $3; gsub(/"/, "", name) }
	/^version = /  { ver = $3; gsub(/"/, "", ver) }
	/^source = /   { src = $3; gsub(/"/, "", src) }
	/^checksum = / { sum = $3; gsub(/"/, "", sum) }
	END {
		flush()
		print "# Generated from Cargo.lock by board/crates-inc.sh: do not edit."
		print "# (Equivalent to `bitbake -c update_crates marmoset`.)"
		print ""
		print "SRC_URI += \" \\"
		for (i = 1; i <= n; i++)
			print "    crate://crates.io/" names[i] "/" vers[i] " \\"
		print "\""
		print ""
		for (i = 1; i <= n; i++)
			print "SRC_URI[" names[i] "-" vers[i] ".sha256sum] = \"" sums[i] "\""
	}' Cargo.lock
}

case ${1:-} in
"") generate >"$INC.tmp" && mv "$INC.tmp" "$INC" && echo "wrote $INC" ;;
--stdout) generate ;;
--check)
	if generate | cmp -s - "$INC"; then
		echo "$INC is in sync with Cargo.lock"
	else
		echo "$INC is out of date: run board/crates-inc.sh" >&2
		exit 1
	fi
	;;
*) echo "usage: $0 [--check|--stdout]" >&2; exit 2 ;;
esac
