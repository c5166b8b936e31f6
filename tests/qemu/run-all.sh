#!/usr/bin/env bash
# Boot-test Marmoset on every ARM QEMU board (what CI runs): tests/qemu/boot.sh for each board in
# turn, then one closing line `N passed, M failed` summed over the boards; exits non-zero if any
# check failed or a board's run ended without its summary line.
# MARMOSET_QEMU_BOARDS overrides the list (default: qemu-aarch64 qemu-armv7).
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BOARDS=${MARMOSET_QEMU_BOARDS:-qemu-aarch64 qemu-armv7}
OUTPUT=$(mktemp "${TMPDIR:-/tmp}/marmoset-qemu-all.XXXXXX")
trap 'rm -f "$OUTPUT"' EXIT

passed=0
failed=0
report=()
for board in $BOARDS; do
  start=$(date +%s)
  bash "$HERE/boot.sh" "$board" 2>&1 | tee "$OUTPUT"
  last=$(tail -n 1 "$OUTPUT")
  if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
  else
    failed=$((failed + 1))
    last="ended without a summary line"
  fi
  report+=("$board: $last ($(($(date +%s) - start)) s)")
  grep -E '^    (qemu start|binary size|VmRSS)' "$OUTPUT" | sed "s/^    /    $board: /" >>"$OUTPUT.sum"
done

echo "==> all boards"
printf '    %s\n' "${report[@]}"
[ -f "$OUTPUT.sum" ] && cat "$OUTPUT.sum" && rm -f "$OUTPUT.sum"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
