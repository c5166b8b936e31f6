#!/usr/bin/env bash
# Boot-test Marmoset on the QEMU boards CI runs (ARM and MIPS): tests/qemu/boot.sh for each board in
# turn, then the HTTPS image (boot.sh BOARD tls) on each board, then one closing line
# `N passed, M failed` summed over the runs; exits non-zero if any check failed or a run ended
# without its summary line.
# MARMOSET_QEMU_BOARDS overrides the list (default: qemu-aarch64 qemu-armv7 qemu-armv7-musl
# qemu-mipsel), and MARMOSET_QEMU_TLS_BOARDS the boards booted with the TLS build (default: the
# same four; empty for none).
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEFAULT_BOARDS="qemu-aarch64 qemu-armv7 qemu-armv7-musl qemu-mipsel"
BOARDS=${MARMOSET_QEMU_BOARDS:-$DEFAULT_BOARDS}
TLS_BOARDS=${MARMOSET_QEMU_TLS_BOARDS-$DEFAULT_BOARDS}
runs=()
for board in $BOARDS; do runs+=("$board"); done
for board in $TLS_BOARDS; do runs+=("$board tls"); done
OUTPUT=$(mktemp "${TMPDIR:-/tmp}/marmoset-qemu-all.XXXXXX")
trap 'rm -f "$OUTPUT"' EXIT

passed=0
failed=0
report=()
for run in "${runs[@]}"; do
  start=$(date +%s)
  # shellcheck disable=SC2086 # "BOARD" or "BOARD tls": two words on purpose
  bash "$HERE/boot.sh" $run 2>&1 | tee "$OUTPUT"
  last=$(tail -n 1 "$OUTPUT")
  if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
  else
    failed=$((failed + 1))
    last="ended without a summary line"
  fi
  report+=("$run: $last ($(($(date +%s) - start)) s)")
  grep -E '^    (qemu start|binary size|VmRSS)' "$OUTPUT" | sed "s/^    /    $run: /" >>"$OUTPUT.sum"
done

echo "==> all boards"
printf '    %s\n' "${report[@]}"
[ -f "$OUTPUT.sum" ] && cat "$OUTPUT.sum" && rm -f "$OUTPUT.sum"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
