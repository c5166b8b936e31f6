#!/usr/bin/env bash
# Fuzzes every parser target for SECONDS each (default 30), after one build,
# as many at once as there are cores.
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     e.g. fuzz/run.sh 600 (the long run)
# Stable Rust is enough: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags,
# and rustup's stable rust-std ships the AddressSanitizer runtime. Set
# FUZZ_SANITIZER=none to build without it. The seeds (fuzz/seeds/<target>/)
# are copied into fuzz/corpus/<target>/, which keeps growing from run to run;
# crashes land in fuzz/artifacts/<target>/, logs in fuzz/logs/. Prints one
# line per target and then `N passed, M failed`; exits 1 if any target failed.
set -u
secs="${1:-30}"
case "$secs" in '' | *[!0-9]*)
    echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]" >&2
    exit 2
    ;;
esac
shift $(($# > 0 ? 1 : 0))
cd "$(dirname "$0")" || exit 2
export RUSTC_BOOTSTRAP=1
sanitizer="${FUZZ_SANITIZER:-address}"
start=$(date +%s)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz from crates.io"
    cargo install cargo-fuzz --locked || exit 2
fi
# libfuzzer-sys compiles libFuzzer itself; any C++ compiler will do.
if ! command -v c++ >/dev/null 2>&1; then
    echo "installing g++ (libFuzzer is C++)"
    { apt-get update && apt-get install -y g++; } >/dev/null || exit 2
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list)
fi
mkdir -p logs
# -a: debug assertions and overflow checks on, as in `cargo test`.
if ! cargo fuzz build -a --sanitizer "$sanitizer" >logs/build.log 2>&1; then
    tail -n 20 logs/build.log
    echo "build failed (fuzz/logs/build.log)"
    echo "0 passed, ${#targets[@]} failed"
    exit 1
fi
echo "build: ok, sanitizer $sanitizer, $(($(date +%s) - start)) s"
bin="target/$(rustc -vV | sed -n 's/^host: //p')/release"

fuzz_one() {
    local t=$1 rc runs cov crash
    mkdir -p "corpus/$t" "artifacts/$t"
    cp -n "seeds/$t"/* "corpus/$t/" 2>/dev/null
    # -max_total_time bounds the run; timeout only catches a stuck fuzzer.
    timeout $((secs + 60)) "$bin/$t" "corpus/$t" -max_total_time="$secs" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="artifacts/$t/" \
        >"logs/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log")
    cov=$(grep -o 'cov: [0-9]*' "logs/$t.log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        echo "$t: ok, ${runs:-?} runs, ${cov:-cov: ?}, $(ls "corpus/$t" | wc -l) corpus files"
    else
        crash=$(grep -o 'artifacts/[^ ]*' "logs/$t.log" | tail -n 1)
        echo "$t: FAILED (exit $rc) ${crash:-no artifact}; log fuzz/logs/$t.log"
        grep -m 3 -E 'panicked at|ERROR: ' "logs/$t.log" | sed 's/^/    /'
    fi
}
# One fuzzer per core: each is a single process.
cores=$(nproc)
for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do
        wait -n
    done
    fuzz_one "$t" >"logs/$t.result" &
done
wait
passed=0
failed=0
for t in "${targets[@]}"; do
    cat "logs/$t.result"
    if grep -q "^$t: ok," "logs/$t.result"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
echo "total: $(($(date +%s) - start)) s"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
