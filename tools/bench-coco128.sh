#!/usr/bin/env bash
# Training benchmark on real data: imports ../shared/datasets/coco128 (102
# train / 26 val images, 80 classes) into a fresh Kestrel home, trains YOLOv8
# from scratch with `kestrel train`, and prints the per-epoch mAP curve from
# results.csv, so accuracy or speed regressions show up as a different curve.
# Exits 0 with a message when the dataset is absent.
#
#   tools/bench-coco128.sh                       # CPU defaults below
#   EPOCHS=1 tools/bench-coco128.sh              # smoke check (~1-2 min on 2 cores)
#   MODEL=s IMGSZ=640 EPOCHS=100 DEVICE=0 tools/bench-coco128.sh
#
# Environment (defaults): KESTREL (build/src/cli/kestrel), DATASET
# (../shared/datasets/coco128 next to the repository), MODEL (n), IMGSZ (320),
# EPOCHS (30), BATCH (16), WORKERS (2), THREADS (0 = all cores), DEVICE (cpu),
# SEED (0), OUT (a new temp folder; the home is OUT/home, the run OUT/run),
# EXTRA (more key=value options for `kestrel train`).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
kestrel="${KESTREL:-$root/build/src/cli/kestrel}"
dataset="${DATASET:-$root/../shared/datasets/coco128}"
model="${MODEL:-n}"
imgsz="${IMGSZ:-320}"
epochs="${EPOCHS:-30}"
batch="${BATCH:-16}"
workers="${WORKERS:-2}"
threads="${THREADS:-0}"
device="${DEVICE:-cpu}"
seed="${SEED:-0}"

if [[ ! -d "$dataset/images" ]]; then
  echo "bench-coco128: skipped: no dataset at $dataset"
  exit 0
fi
if [[ ! -x "$kestrel" ]]; then
  echo "bench-coco128: no kestrel binary at $kestrel (build it, or set KESTREL=)" >&2
  exit 1
fi
out="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/kestrel-bench-coco128.XXXXXX")}"
mkdir -p "$out"
export KESTREL_HOME="$out/home"

"$kestrel" dataset import "$dataset" --name coco128 imgsz="$imgsz" >"$out/import.log" 2>&1 ||
  { cat "$out/import.log" >&2; exit 1; }

echo "== coco128: model=$model imgsz=$imgsz epochs=$epochs batch=$batch workers=$workers threads=$threads device=$device seed=$seed"
start=$(date +%s)
# shellcheck disable=SC2086  # EXTRA is a list of key=value words
"$kestrel" train data=coco128 model="$model" imgsz="$imgsz" epochs="$epochs" batch="$batch" \
  workers="$workers" threads="$threads" device="$device" seed="$seed" plots=false \
  run_dir="$out/run" ${EXTRA:-} >"$out/train.log" 2>&1 ||
  { tail -n 20 "$out/train.log" >&2; echo "bench-coco128: train failed; log: $out/train.log" >&2; exit 1; }
secs=$(( $(date +%s) - start ))

csv="$out/run/results.csv"
awk -F, '
  NR == 1 {
    for (i = 1; i <= NF; i++) { gsub(/ /, "", $i); col[$i] = i }
    if (!("metrics/mAP50(B)" in col) || !("metrics/mAP50-95(B)" in col)) { print "unexpected header: " $0; exit 1 }
    printf "%5s %9s %9s %9s %8s\n", "epoch", "mAP50", "mAP50-95", "loss", "time(s)"
    next
  }
  {
    loss = $col["train/box_loss"] + $col["train/cls_loss"] + $col["train/dfl_loss"]
    # time: the run's cumulative seconds (the reference's meaning); this epoch = the difference
    secs = $col["time"] - prev; prev = $col["time"]
    printf "%5d %9.4f %9.4f %9.4f %8.1f\n", $col["epoch"], $col["metrics/mAP50(B)"], $col["metrics/mAP50-95(B)"], loss, secs
  }' "$csv"
echo "== ${secs}s total; results: $csv; log: $out/train.log"
