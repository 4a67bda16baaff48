#!/usr/bin/env bash
# Loss-curve parity benchmark: runs the reference recipe of
# ../shared/reference/training_coco128/results_sgd.csv (YOLOv8n from scratch on
# coco128, imgsz 320, batch 16, SGD lr0=0.01 nbs=16 warmup_epochs=1, seed 0)
# through tools/bench-coco128.sh and prints Kestrel's and the reference's
# train box / cls / dfl losses side by side per epoch, with the differences.
# Exits 0 with a message when the dataset or the reference csv is absent.
#
#   tools/compare-coco128-sgd.sh              # 30 epochs (20-40 min on 2 cores)
#   EPOCHS=3 tools/compare-coco128-sgd.sh     # first epochs only (the schedule is that of a 3-epoch run)
#
# Environment: EPOCHS (30), OUT (temp folder), plus everything
# tools/bench-coco128.sh reads (KESTREL, DATASET, WORKERS, THREADS, DEVICE).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
ref="${REF:-$root/../shared/reference/training_coco128/results_sgd.csv}"
if [[ ! -f "$ref" ]]; then
  echo "compare-coco128-sgd: skipped: no reference csv at $ref"
  exit 0
fi
out="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/kestrel-compare-coco128.XXXXXX")}"
OUT="$out" EPOCHS="${EPOCHS:-30}" MODEL=n IMGSZ=320 BATCH=16 SEED=0 \
  EXTRA="optimizer=SGD lr0=0.01 nbs=16 warmup_epochs=1 ${EXTRA:-}" "$root/tools/bench-coco128.sh"
ours="$out/run/results.csv"
[[ -f "$ours" ]] || exit 0
awk -F, '
  FNR == 1 { for (i = 1; i <= NF; i++) { h = $i; gsub(/ /, "", h); col[FILENAME, h] = i } next }
  {
    f = FILENAME; e = $col[f, "epoch"] + 0
    box[f, e] = $col[f, "train/box_loss"]; cls[f, e] = $col[f, "train/cls_loss"]; dfl[f, e] = $col[f, "train/dfl_loss"]
    if (f == ARGV[1] && e > n) n = e
  }
  END {
    a = ARGV[1]; b = ARGV[2]
    printf "%5s | %8s %8s %7s | %8s %8s %7s | %8s %8s %7s\n", "epoch", "box", "ref", "diff", "cls", "ref", "diff", "dfl", "ref", "diff"
    for (e = 1; e <= n; e++)
      printf "%5d | %8.4f %8.4f %+7.3f | %8.4f %8.4f %+7.3f | %8.4f %8.4f %+7.3f\n", e,
        box[a, e], box[b, e], box[a, e] - box[b, e], cls[a, e], cls[b, e], cls[a, e] - cls[b, e],
        dfl[a, e], dfl[b, e], dfl[a, e] - dfl[b, e]
  }' "$ours" "$ref"
