#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang + ASan/UBSan and runs
# each one. Crashes land in $BUILD/fuzz-artifacts/ and make the script exit
# non-zero.
#
#   tools/fuzz.sh              # 30 s per target
#   tools/fuzz.sh 600          # 600 s per target
#   tools/fuzz.sh --runs 20000 # a fixed number of inputs per target (CI: repeatable)
#   FUZZ_TARGETS=yolo_label_fuzz tools/fuzz.sh 60
set -euo pipefail

limit=(-max_total_time=30)
if [[ "${1:-}" == "--runs" ]]; then
  limit=(-runs="${2:?--runs N}" -seed=1)
elif [[ -n "${1:-}" ]]; then
  limit=(-max_total_time="$1")
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KESTREL_FUZZ_BUILD:-$root/build-fuzz}"
targets=(${FUZZ_TARGETS:-yolo_label_fuzz coco_reader_fuzz image_decode_fuzz data_yaml_fuzz voc_reader_fuzz version_ref_fuzz pt_reader_fuzz json_body_fuzz http_request_fuzz})

CXX="${CXX:-clang++}" cmake -S "$root" -B "$build" -G Ninja -DKESTREL_FUZZ=ON \
  -DKESTREL_WITH_TORCH=OFF -DKESTREL_BUILD_TESTS=OFF -DKESTREL_BUILD_BENCH=OFF >/dev/null
ninja -C "$build" "${targets[@]}"

mkdir -p "$build/fuzz-artifacts"
status=0
for t in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$t"   # grows across runs; the seeds stay read-only
  mkdir -p "$corpus"
  echo "== $t: ${limit[*]}"
  if ! "$build/tests/fuzz/$t" "$corpus" "$root/tests/fuzz/corpus/$t" \
      "${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" 2>"$build/fuzz-$t.log"; then
    status=1
    echo "!! $t failed; see $build/fuzz-$t.log and $build/fuzz-artifacts/"
    tail -40 "$build/fuzz-$t.log"
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$build/fuzz-$t.log" || true
    tail -1 "$build/fuzz-$t.log"
  fi
done
rm -rf /tmp/kestrel-fuzz-*
exit $status
