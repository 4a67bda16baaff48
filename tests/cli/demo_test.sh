#!/usr/bin/env bash
# CTest demo.first_result_learns: runs the demo's kestrel steps
# (scripts/demo.sh --no-build) with the built binary in a scratch folder and
# requires the printed first result to reach mAP50 >= DEMO_MIN_MAP50 (0.5).
#   demo_test.sh KESTREL_BINARY WORK_DIR
set -euo pipefail
KESTREL="$1"
WORK="$2"
MIN="${DEMO_MIN_MAP50:-0.5}"
rm -rf "$WORK"
mkdir -p "$WORK"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KESTREL_DEMO_SERVE=0 KESTREL="$KESTREL" KESTREL_HOME="$WORK/home" DEMO_DIR="$WORK/demo" \
  "$ROOT/scripts/demo.sh" --no-build 2>&1 | tee "$WORK/demo.log"
LINE=$(grep '^first result in ' "$WORK/demo.log" || true)
MAP50=$(sed -n 's/^first result in [0-9]*m[0-9]*s: mAP50 \([0-9.]*\).*/\1/p' <<<"$LINE")
if [[ -z "$MAP50" ]]; then
  echo "FAIL: no 'first result in ...: mAP50 X' line in the demo output" >&2
  exit 1
fi
if awk -v m="$MAP50" -v min="$MIN" 'BEGIN { exit !(m >= min) }'; then
  echo "PASS: $LINE (>= $MIN)"
  rm -rf "$WORK"
else
  echo "FAIL: $LINE (< $MIN)" >&2
  exit 1
fi
