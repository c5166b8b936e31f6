#!/usr/bin/env bash
# The whole test suite, from a fresh clone (as root): installs every package,
# rustup target and component it uses, then runs each stage and ends with
# one line, "N passed, M failed, K skipped", over the stages. A failed stage
# does not stop the others; the exit status is non-zero if any failed. A
# stage is skipped, not passed, when its inputs are missing (upstream trees
# that are never fetched): it exits 77 ($SKIPPED of tests/results.sh). Its
# tests say why with a "skip - REASON" line, and the line before the count
# names each skipped stage, and each passed one that skipped a part, with
# those reasons.
#
#   tests/run.sh                 everything (what .ci/run calls)
#   tests/run.sh unit cgi        only the named stages (see `stages` below)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export CARGO_TERM_COLOR=never DEBIAN_FRONTEND=noninteractive
mkdir -p tests/out

say() { printf '\n=== %s\n' "$*"; }

# shellcheck source=tests/apt.sh
. tests/apt.sh
install_everything() {
	local pkgs=(
		curl gzip brotli openssl apache2-utils wrk procps util-linux binutils python3 python3-pip file xz-utils
		gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static qemu-system-arm qemu-system-mips cpio
		chromium busybox systemd slowhttptest shellcheck python3-websockets strace
		gcc-aarch64-linux-gnu libc6-dev-arm64-cross
	)
	# Node may come from elsewhere than Debian (its npm then conflicts with Debian's).
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		pkgs+=(nodejs npm)
	fi
	apt_install tests/out/apt.log "${pkgs[@]}" || { echo "apt-get install failed (tests/out/apt.log)"; return 1; }
	rustup component add rustfmt clippy rust-src >/dev/null 2>&1 || return 1
	# zig compiles and links the build-std targets (board/build-std.sh).
	if ! command -v cargo-zigbuild >/dev/null || ! python3 -c 'import ziglang' 2>/dev/null; then
		python3 -m pip install --quiet ziglang cargo-zigbuild >tests/out/pip.log 2>&1 ||
			python3 -m pip install --quiet --break-system-packages ziglang cargo-zigbuild >tests/out/pip.log 2>&1 ||
			{ echo "pip install ziglang cargo-zigbuild failed (tests/out/pip.log)"; return 1; }
	fi
	rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf >/dev/null 2>&1 || return 1
}

# Formatting, clippy, and the project's files speaking to users only (no
# mention of the project's own issues or notes).
stage_lint() {
	local internal
	internal=$(git grep -nIE '\bissues? #?[0-9]+\b|the brief\b|work in progress' -- \
		README.md ARCHITECTURE.md CONFIGURATION.md SECURITY.md board tests src fuzz bench init rootfs-overlay .cargo Cross.toml Cargo.toml ':!tests/run.sh')
	if [ -n "$internal" ]; then
		echo "internal references in the project's files:"
		echo "$internal"
		return 1
	fi
	cargo fmt --all -- --check &&
		cargo clippy --all-targets --locked -- -D warnings &&
		cargo clippy --all-targets --locked --features tls,ubus -- -D warnings
}

# No import cycle among the modules of src/, nor among its folders (the layers);
# ARCHITECTURE.md's layer and tests tables name every source and test file.
stage_layers() {
	python3 tests/layers.py --self-test && python3 tests/layers.py &&
		python3 tests/doc_tables.py --self-test && python3 tests/doc_tables.py
}

# Unit tests and every integration test against the native debug binary,
# built with the default features, then with TLS and the ubus endpoint (that
# build runs tests/tls.rs and tests/ubus.rs too); then the
# patched crates' own tests (ARCHITECTURE.md, "Patched crates").
stage_unit() {
	local patched=${CARGO_TARGET_DIR:-target}/patched
	cargo test --locked && cargo test --locked --features tls,ubus &&
		CARGO_TARGET_DIR=$patched cargo test --locked --manifest-path board/patched/polling/Cargo.toml &&
		CARGO_TARGET_DIR=$patched cargo test --locked --manifest-path board/patched/async-io/Cargo.toml
}

stage_ui() {
	board/build-ui.sh --check
}

# The release build, and the TLS tests against the optimised TLS build, as
# it ships: a panic on a garbage handshake record showed only there. The
# floods check SECURITY.md's memory ceiling on the build it is stated for.
stage_release() {
	local tls=${CARGO_TARGET_DIR:-target}/release-tls
	cargo build --release --locked &&
		python3 tests/syscalls.py --bin "${CARGO_TARGET_DIR:-target}/release/marmoset" &&
		CARGO_TARGET_DIR=$tls cargo build --release --locked --features tls &&
		MARMOSET_BIN=$tls/release/marmoset cargo test --locked --features tls --test tls --test floods
}

# part CMD [ARG...]: one part of a stage; then parts_status: 1 if a part
# failed, 77 if every part was skipped (exit 77), else 0.
part_failed=0 part_ran=0
part() {
	"$@"
	case $? in
	0) part_ran=1 ;;
	77) ;;
	*) part_ran=1 part_failed=1 ;;
	esac
}
parts_status() {
	local failed=$part_failed ran=$part_ran
	part_failed=0 part_ran=0
	[ "$failed" = 0 ] || return 1
	[ "$ran" = 1 ] || return 77
}

stage_init() {
	part tests/init/sysv.sh
	part tests/init/procd.sh
	part tests/init/uhttpd.sh
	part tests/init/packaging.sh
	parts_status
}

# The image-builder packages under the builders' own tools (board/README.md):
# Buildroot's check-package, defconfigs and a pkg-cargo.mk build of both,
# run under qemu-user; bitbake's parse and task graph of meta-marmoset under
# both init managers and a cargo.bbclass build; the OpenWrt package under
# scripts/feeds, make defconfig and its check (OPENWRT_DIR,
# OPENWRT_PACKAGES_DIR; OPENWRT_LUCI_DIR for LuCI without uhttpd). The
# init stage runs the uhttpd init script under OpenWrt's rc.common when
# OPENWRT_DIR and OPENWRT_STACK_DIR are set. The Buildroot and Yocto trees come from
# ../shared/upstream (or BUILDROOT_DIR, OE_CORE_DIR, BITBAKE_DIR).
stage_packaging() {
	part tests/packaging/buildroot.sh
	part tests/packaging/yocto.sh
	part tests/packaging/openwrt.sh
	parts_status
}

# The ubus endpoint answer for answer against uhttpd's, on a real ubusd and rpcd with LuCI's plugins
# (tests/luci/compare.sh; skips unless OPENWRT_STACK_DIR names a stack built for this machine).
stage_luci() {
	tests/luci/compare.sh
}

stage_browser() {
	MARMOSET_BIN=${CARGO_TARGET_DIR:-target}/release/marmoset tests/browser/run.sh
}

# The targets rustup has no standard library for, default and `tls` builds,
# through -Zbuild-std and zig (board/build-std.sh): each is skipped when its
# inputs (toolchain, Cargo files, src/, build scripts) are those of the
# binary already built (board/README.md, "CI and the build-std targets").
# The cross and size stages use these binaries.
build_std_targets=(armv7-unknown-linux-musleabihf mipsel-unknown-linux-musl mips-unknown-linux-musl)
stage_build_std() {
	local t rc=0
	for t in "${build_std_targets[@]}"; do
		board/build-std.sh "$t" --if-changed || rc=1
		board/build-std.sh "$t" --features tls --if-changed || rc=1
	done
	board/build-std.sh mips-unknown-linux-musl --features tls,ubus --if-changed || rc=1
	return $rc
}

# The integration tests again, against cross-built binaries under qemu-user;
# for mipsel the `tls` build against tests/tls.rs too, for big-endian mips
# the `tls,ubus` build (OpenWrt's marmoset-uhttpd) against tests/tls.rs and
# tests/ubus.rs: ubus's wire format is big-endian.
stage_cross() {
	local rc=0
	tests/cross.sh aarch64-unknown-linux-musl || rc=1
	tests/cross.sh armv7-unknown-linux-gnueabihf || rc=1
	tests/cross.sh armv7-unknown-linux-musleabihf || rc=1
	tests/cross.sh mipsel-unknown-linux-musl --tls || rc=1
	tests/cross.sh mips-unknown-linux-musl --ubus || rc=1
	return $rc
}

# The flash budgets, builds stripped. aarch64: the default build at most
# 640 KiB, the TLS one (ring's C and assembly built by Debian's aarch64 gcc)
# at most 1,200 KiB (ARCHITECTURE.md, "Size": what the fair shares cost). The build-std targets: at most 1.5 times the
# aarch64 budgets that stood before the defences against hostile clients
# (900 KiB and 1,650 KiB), and compressed with `xz -9` (as a router's
# squashfs holds them) at most 40% of that (360 KiB, 660 KiB)
# (board/README.md, "Sizes of the build-std targets").
budget() { # NAME FILE BUDGET [XZ_BUDGET]
	local size xz
	size=$(stat -c %s "$2") || return 1
	if [ $# = 3 ]; then
		echo "$1: $size bytes (budget $3)"
		[ "$size" -le "$3" ]
		return
	fi
	xz=$(xz -9 -c "$2" | wc -c) || return 1
	echo "$1: $size bytes (budget $3), xz -9 $xz bytes (budget $4)"
	[ "$size" -le "$3" ] && [ "$xz" -le "$4" ]
}
stage_size() {
	local bin=${CARGO_TARGET_DIR:-target}/aarch64-unknown-linux-musl/release/marmoset t b rc=0
	cargo build --release --locked --target aarch64-unknown-linux-musl || return 1
	budget aarch64-unknown-linux-musl "$bin" 655360 || rc=1
	CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc \
		cargo build --release --locked --features tls --target aarch64-unknown-linux-musl || return 1
	budget "aarch64-unknown-linux-musl --features tls" "$bin" 1228800 || rc=1
	for t in "${build_std_targets[@]}"; do
		b=$(board/build-std.sh "$t" --if-changed) && budget "$t" "$b" 921600 368640 || rc=1
		b=$(board/build-std.sh "$t" --features tls --if-changed) &&
			budget "$t --features tls" "$b" 1689600 675840 || rc=1
	done
	# OpenWrt's marmoset-uhttpd build (HTTPS and the ubus endpoint) holds the tls budget.
	b=$(board/build-std.sh mips-unknown-linux-musl --features tls,ubus --if-changed) &&
		budget "mips-unknown-linux-musl --features tls,ubus" "$b" 1689600 675840 || rc=1
	return $rc
}

# The aarch64 firmware holds no build-host path and is the same bytes from a
# second checkout at another path with another CARGO_HOME (ARCHITECTURE.md, "Reproducible builds").
stage_reproducible() {
	tests/reproducible.sh
}

stage_qemu() {
	tests/qemu/run-all.sh
}

stage_fuzz() {
	fuzz/run.sh "${FUZZ_SECONDS:-20}"
}

stage_robust() {
	local rc=0
	MARMOSET_BIN=target/release/marmoset tests/slow.sh || rc=1
	MARMOSET_BIN=target/release/marmoset tests/soak.sh || rc=1
	return $rc
}

# A 1-second pass of the MIPS guest benchmark and a 2-second benchmark
# (about 2 minutes), so the scripts do not rot; they assert no speed. The
# second rewrites a report that holds the first's section, which it must keep.
stage_bench() {
	local rc=0 out=bench/out
	BENCH_SMOKE=1 bench/mips-guest.sh || rc=1
	cp "$out/mips-guest-smoke.md" "$out/results-smoke.md" || rc=1
	BENCH_SMOKE=1 bench/run.sh || rc=1
	if ! grep -q '^## MIPS guest' "$out/results-smoke.md"; then
		echo "FAIL: bench/run.sh dropped the MIPS guest section of the report it rewrote"
		rc=1
	fi
	return $rc
}

stages=(lint layers unit ui release init packaging browser luci build_std cross size reproducible qemu fuzz robust bench)
[ $# -gt 0 ] && stages=("$@")

started=$(date +%s)
passed=0 failed=0 skipped=0 failures=() skips=() partly=()
say "install"
if ! install_everything; then
	echo "installing the test dependencies failed"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
# reasons FILE: the skip reasons a stage's tests wrote, on one line.
reasons() {
	[ -s "$1" ] && awk 'NR > 1 { printf "; " } { printf "%s", $0 }' "$1"
}
export MARMOSET_SKIP_LOG
for s in "${stages[@]}"; do
	say "stage $s"
	t0=$(date +%s)
	MARMOSET_SKIP_LOG=$PWD/tests/out/skipped-$s.txt
	: >"$MARMOSET_SKIP_LOG"
	"stage_$s"
	rc=$?
	why=$(reasons "$MARMOSET_SKIP_LOG")
	case $rc in
	0)
		passed=$((passed + 1))
		result=ok
		[ -z "$why" ] || { partly+=("$s ($why)"); result="ok (parts skipped)"; }
		;;
	77)
		skipped=$((skipped + 1))
		skips+=("$s (${why:-no reason given})")
		result=skipped
		;;
	*)
		failed=$((failed + 1))
		failures+=("$s")
		result=FAILED
		;;
	esac
	echo "=== stage $s: $result in $(($(date +%s) - t0)) s"
done
say "done in $(($(date +%s) - started)) s; failed stages: ${failures[*]:-none}"
join() { # ITEM...: the items joined by ", "
	local out="" x
	for x in "$@"; do out+="${out:+, }$x"; done
	echo "$out"
}
if [ ${#skips[@]} -gt 0 ] || [ ${#partly[@]} -gt 0 ]; then
	line="skipped stages: $(join "${skips[@]}")"
	[ ${#skips[@]} -gt 0 ] || line+="none"
	[ ${#partly[@]} -eq 0 ] || line+="; passed with parts skipped: $(join "${partly[@]}")"
	echo "$line"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
