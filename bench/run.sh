#!/usr/bin/env bash
# Marmoset benchmark: marmoset (its glibc and its musl build) vs nginx,
# lighttpd and h2o (Debian defaults), all on 127.0.0.1, one server at a time:
# rates, CPU and memory, system calls per request (perf) and marmoset's
# instructions per request (callgrind); over HTTPS, marmoset's tls builds vs
# nginx and lighttpd (mod_openssl).  Run as root from a clone:
#
#   bench/run.sh                  full run (ROUNDS=2), writes bench/results.md
#   BENCH_SMOKE=1 bench/run.sh    2-second tests, writes bench/out/results-smoke.md
#   BENCH_PARTS=proxy bench/run.sh  only the reverse-proxy tests (any of "http https proxy")
#
# Environment: ROUNDS, BENCH_SMOKE, BENCH_AGG=median|best, BENCH_SERVERS,
# BENCH_TLS_SERVERS, BENCH_PROXY_SERVERS, BENCH_PARTS ("http https proxy"),
# BENCH_BACKEND_BIN (the proxy tests' backend), CARGO_TARGET_DIR (default
# target/), MARMOSET_BIN (skip the builds, the firmware ones for the size table
# included, and run only this binary; MARMOSET_TLS_BIN for a tls build),
# MARMOSET_ARGS (extra marmoset flags), BENCH_NO_INSTALL=1.
# Details of the tests: bench/bench.py. The same servers' kind on a router's
# CPU, in a QEMU MIPS guest: bench/mips-guest.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
say() { echo "[run.sh] $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    say "must run as root (installs packages, starts servers that drop privileges)"
    exit 1
fi

# ---- packages --------------------------------------------------------------
pkgs=(nginx lighttpd lighttpd-mod-openssl h2o apache2-utils siege wrk openssl procps python3 python3-pil file coreutils valgrind)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
# perf counts the servers' system calls; any perf will do, Debian's only if none.
command -v perf >/dev/null || missing+=(linux-perf)
if [ "${#missing[@]}" -gt 0 ] && [ "${BENCH_NO_INSTALL:-}" != 1 ]; then
    say "installing: ${missing[*]}"
    # Keep the packages' postinst from starting their daemons (Debian's policy-rc.d
    # mechanism); only if no policy is in place already, and removed afterwards.
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >&2
    if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
    # Whatever got started anyway by the packages just installed: stop and disable it.
    for svc in nginx lighttpd h2o; do
        case " ${missing[*]} " in *" $svc "* | *" $svc-mod-openssl "*) ;; *) continue ;; esac
        if [ -d /run/systemd/system ]; then
            systemctl disable --now "$svc" >/dev/null 2>&1 || true
        else
            if [ -s "/run/$svc.pid" ] && kill -0 "$(cat "/run/$svc.pid")" 2>/dev/null; then
                service "$svc" stop >/dev/null 2>&1 || kill "$(cat "/run/$svc.pid")" 2>/dev/null || true
            fi
            update-rc.d "$svc" disable >/dev/null 2>&1 || true
        fi
    done
fi

# ---- marmoset ----------------------------------------------------------------
# Two builds run side by side: the host's (glibc) and the static musl one that
# devices get (no shared libc pages in its RSS, musl's own allocator); and the
# same two with --features tls for the HTTPS tests, copied to marmoset-tls
# beside them before the default builds take their place again.
if [ -z "${MARMOSET_BIN:-}" ]; then
    if command -v cargo >/dev/null; then
        target_dir=${CARGO_TARGET_DIR:-target}
        case "$target_dir" in /*) ;; *) target_dir=$repo/$target_dir ;; esac
        rustup target list --installed | grep -qx x86_64-unknown-linux-musl || rustup target add x86_64-unknown-linux-musl >&2
        # ring's C for the musl target: the host's cc (cc-rs would look for x86_64-linux-musl-gcc).
        export CC_x86_64_unknown_linux_musl=${CC_x86_64_unknown_linux_musl:-cc}
        tls_targets=()   # the tls builds only for a run with the HTTPS tests
        [[ " ${BENCH_PARTS:-http https proxy} " == *" https "* ]] && tls_targets=(host x86_64-unknown-linux-musl)
        [ "${#tls_targets[@]}" = 0 ] ||
            say "cargo build --release --locked --features tls, for the host and for x86_64-unknown-linux-musl"
        for t in "${tls_targets[@]}"; do
            if [ "$t" = host ]; then args=() dir=$target_dir/release name=GLIBC
            else args=(--target "$t") dir=$target_dir/$t/release name=MUSL; fi
            rm -f "$dir/marmoset-tls"
            if (cd "$repo" && cargo build --release --locked --features tls "${args[@]}" >&2); then
                cp "$dir/marmoset" "$dir/marmoset-tls"
            else
                say "marmoset tls build for $t FAILED: not benchmarked"
                export "BENCH_MARMOSET_${name}_TLS_UNAVAILABLE=cargo build --release --locked --features tls ${args[*]} failed"
            fi
        done
        say "cargo build --release, for the host and for x86_64-unknown-linux-musl (CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target})"
        # A build that fails must not leave its stale binary to be benchmarked.
        if ! (cd "$repo" && cargo build --release --locked >&2); then
            say "marmoset glibc build FAILED: not benchmarked"
            export BENCH_MARMOSET_GLIBC_UNAVAILABLE="cargo build --release failed"
        fi
        if ! (cd "$repo" && cargo build --release --locked --target x86_64-unknown-linux-musl >&2); then
            say "marmoset musl build FAILED: not benchmarked"
            export BENCH_MARMOSET_MUSL_UNAVAILABLE="cargo build --release --target x86_64-unknown-linux-musl failed"
        fi
    else
        say "no cargo: benchmarking the peers only"
        export BENCH_MARMOSET_UNAVAILABLE="no cargo to build it"
    fi
fi

# ---- the proxy tests' backend ----------------------------------------------------
# bench/backend/, a crate of its own (no dependencies), built beside marmoset's target dir.
if [ -z "${BENCH_BACKEND_BIN:-}" ] && [[ " ${BENCH_PARTS:-http https proxy} " == *" proxy "* ]]; then
    if command -v cargo >/dev/null; then
        backend_dir=${CARGO_TARGET_DIR:-target}
        case "$backend_dir" in /*) ;; *) backend_dir=$repo/$backend_dir ;; esac
        backend_dir=$backend_dir/bench-backend
        say "cargo build --release --locked --manifest-path bench/backend/Cargo.toml --target-dir $backend_dir"
        rm -f "$backend_dir/release/bench-backend"
        if ! (cd "$repo" && cargo build --release --locked --manifest-path bench/backend/Cargo.toml \
            --target-dir "$backend_dir" >&2); then
            say "bench-backend build FAILED: no proxy tests"
            export BENCH_BACKEND_UNAVAILABLE="cargo build of bench/backend failed"
        fi
    else
        export BENCH_BACKEND_UNAVAILABLE="no cargo to build it"
    fi
fi

# ---- firmware sizes ------------------------------------------------------------
# The report's size table is the firmware build of each target
# (board/release.sh, which installs its own cross tools), made here so a fresh
# clone gets every size from this one command. The smoke run (CI) reports what
# the earlier stages built instead.
if [ -z "${MARMOSET_BIN:-}" ] && [ "${BENCH_SMOKE:-}" != 1 ] && command -v cargo >/dev/null; then
    for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf armv7-unknown-linux-musleabihf \
        mipsel-unknown-linux-musl mips-unknown-linux-musl; do
        say "firmware build: board/release.sh $target"
        if ! (cd "$repo" && board/release.sh "$target" >&2); then
            # A failed build leaves no fresh binary: the table says "not built" or STALE.
            say "firmware build for $target FAILED"
        fi
    done
fi

# ---- limits and run ------------------------------------------------------------
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
say "open-file limit $(ulimit -n)"
cd "$repo"
exec /usr/bin/python3 "$here/bench.py"
