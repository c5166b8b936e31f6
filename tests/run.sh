#!/usr/bin/env bash
# The whole test suite, from a fresh clone (as root): installs every package,
# rustup target and component it uses, then runs each stage and ends with
# one line, "N passed, M failed", over the stages. A failed stage does not
# stop the others; the exit status is non-zero if any failed.
#
#   tests/run.sh                 everything (what .ci/run calls)
#   tests/run.sh unit cgi        only the named stages (see `stages` below)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export CARGO_TERM_COLOR=never DEBIAN_FRONTEND=noninteractive
mkdir -p tests/out

say() { printf '\n=== %s\n' "$*"; }

install_everything() {
	local pkgs=(
		curl gzip brotli openssl apache2-utils wrk procps util-linux binutils python3 file
		gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static qemu-system-arm qemu-system-mips cpio
		chromium busybox systemd slowhttptest shellcheck python3-websockets
		gcc-aarch64-linux-gnu libc6-dev-arm64-cross
	)
	# Node may come from elsewhere than Debian (its npm then conflicts with Debian's).
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		pkgs+=(nodejs npm)
	fi
	local missing=() p
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "apt-get install ${missing[*]}"
		apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null 2>&1 || true
		apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >tests/out/apt.log 2>&1 ||
			{ echo "apt-get install failed (tests/out/apt.log)"; return 1; }
	fi
	rustup component add rustfmt clippy >/dev/null 2>&1 || return 1
	rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf >/dev/null 2>&1 || return 1
}

# Formatting, clippy, and the project's files speaking to users only (no
# mention of the project's own issues or notes).
stage_lint() {
	local internal
	internal=$(git grep -nIE '\bissues? #?[0-9]+\b|the brief\b|work in progress' -- \
		README.md ARCHITECTURE.md CONFIGURATION.md board tests src fuzz bench init rootfs-overlay .cargo Cross.toml Cargo.toml ':!tests/run.sh')
	if [ -n "$internal" ]; then
		echo "internal references in the project's files:"
		echo "$internal"
		return 1
	fi
	cargo fmt --all -- --check &&
		cargo clippy --all-targets --locked -- -D warnings &&
		cargo clippy --all-targets --locked --features tls -- -D warnings
}

# No import cycle among the modules of src/, nor among its folders (the layers).
stage_layers() {
	python3 tests/layers.py --self-test && python3 tests/layers.py
}

# Unit tests and every integration test against the native debug binary,
# built without and with TLS (the TLS build runs tests/tls.rs too); then the
# patched polling crate's own tests (ARCHITECTURE.md, "Patched crates").
stage_unit() {
	cargo test --locked && cargo test --locked --features tls &&
		CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}/patched cargo test --locked \
			--manifest-path board/patched/polling/Cargo.toml
}

stage_ui() {
	board/build-ui.sh --check
}

# The release build, and the TLS tests against the optimised TLS build, as
# it ships: a panic on a garbage handshake record showed only there.
stage_release() {
	local tls=${CARGO_TARGET_DIR:-target}/release-tls
	cargo build --release --locked &&
		CARGO_TARGET_DIR=$tls cargo build --release --locked --features tls &&
		MARMOSET_BIN=$tls/release/marmoset cargo test --locked --features tls --test tls
}

stage_init() {
	local rc=0
	tests/init/sysv.sh || rc=1
	tests/init/procd.sh || rc=1
	tests/init/packaging.sh || rc=1
	return $rc
}

# The image-builder packages under the builders' own tools (board/README.md):
# Buildroot's check-package, defconfigs and a pkg-cargo.mk build of both,
# run under qemu-user; bitbake's parse and task graph of meta-marmoset under
# both init managers and a cargo.bbclass build. The trees come from
# ../shared/upstream (or BUILDROOT_DIR, OE_CORE_DIR, BITBAKE_DIR).
stage_packaging() {
	local rc=0
	tests/packaging/buildroot.sh || rc=1
	tests/packaging/yocto.sh || rc=1
	return $rc
}

stage_browser() {
	MARMOSET_BIN=${CARGO_TARGET_DIR:-target}/release/marmoset tests/browser/run.sh
}

# The integration tests again, against cross-built binaries under qemu-user.
stage_cross() {
	local rc=0
	tests/cross.sh aarch64-unknown-linux-musl || rc=1
	tests/cross.sh armv7-unknown-linux-gnueabihf || rc=1
	return $rc
}

# The flash budgets, aarch64 builds stripped: the default one at most
# 600 KiB, the TLS one (ring's C and assembly built by Debian's aarch64 gcc)
# at most 1,100 KiB.
stage_size() {
	local bin=${CARGO_TARGET_DIR:-target}/aarch64-unknown-linux-musl/release/marmoset size rc=0
	cargo build --release --locked --target aarch64-unknown-linux-musl || return 1
	size=$(stat -c %s "$bin")
	echo "aarch64-unknown-linux-musl: $size bytes (budget 614400)"
	[ "$size" -le 614400 ] || rc=1
	CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc \
		cargo build --release --locked --features tls --target aarch64-unknown-linux-musl || return 1
	size=$(stat -c %s "$bin")
	echo "aarch64-unknown-linux-musl --features tls: $size bytes (budget 1126400)"
	[ "$size" -le 1126400 ] || rc=1
	return $rc
}

# The aarch64 firmware holds no build-host path and is the same bytes from a
# second checkout at another path with another CARGO_HOME (ARCHITECTURE.md, "Reproducible builds").
stage_reproducible() {
	tests/reproducible.sh
}

# build-std + zig, only when Cargo.lock or the build files changed (board/README.md).
stage_armv7_musl() {
	board/build-armv7-musl.sh --if-changed
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

# A 2-second benchmark so the script does not rot; it asserts no speed.
stage_bench() {
	BENCH_SMOKE=1 bench/run.sh
}

stages=(lint layers unit ui release init packaging browser cross size reproducible armv7_musl qemu fuzz robust bench)
[ $# -gt 0 ] && stages=("$@")

started=$(date +%s)
passed=0 failed=0 failures=()
say "install"
if ! install_everything; then
	echo "installing the test dependencies failed"
	echo "0 passed, 1 failed"
	exit 1
fi
for s in "${stages[@]}"; do
	say "stage $s"
	t0=$(date +%s)
	if "stage_$s"; then
		passed=$((passed + 1))
		result=ok
	else
		failed=$((failed + 1))
		failures+=("$s")
		result=FAILED
	fi
	echo "=== stage $s: $result in $(($(date +%s) - t0)) s"
done
say "done in $(($(date +%s) - started)) s; failed stages: ${failures[*]:-none}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
