#!/usr/bin/env bash
# The label-audit benchmark (docs/label-audit.md): a YOLOv8n
# trained on one synthetic shapes set (the demo's recipe), a second set of
# the same kind it never saw with RATE of its boxes of each kind corrupted,
# `kestrel dataset audit` over that set, and the recall of the planted errors
# in the top 5/10/20 % of the ranked items.
#   bench/label_audit/run.sh [BUILD_DIR] [RATE] [WORK_DIR]
# RATE: share of the boxes per kind (default 0.05: 5 % removed, 5 %
# relabelled, 5 % shifted and as many added). About 16 min of training on a
# quiet 2-core machine (once per WORK_DIR: a second run with another RATE
# reuses the detector). AUDIT_IMGSZ (320) and AUDIT_EPOCHS (40) size the
# detector and the sets: the shapes quality recipe (mAP50 ~0.97);
# AUDIT_IMGSZ=128 AUDIT_EPOCHS=25 is the demo's recipe (mAP50 ~0.79, ~4 min).
set -euo pipefail
BUILD="${1:-build}"
RATE="${2:-0.05}"
W="${3:-$(mktemp -d)}"
IMGSZ="${AUDIT_IMGSZ:-320}"
EPOCHS="${AUDIT_EPOCHS:-40}"
K="$BUILD/src/cli/kestrel"
B="$BUILD/bench/label_audit/label_audit_bench"
export KESTREL_HOME="$W/home"
if [[ ! -f "$W/runs/train/weights/best.safetensors" ]]; then
  "$K" dataset synth "$W/train" --images 400 --classes 3 --imgsz "$IMGSZ" --seed 1
  "$K" dataset import "$W/train" --name shapes
  "$K" train data=shapes model=n imgsz="$IMGSZ" batch=16 nbs=16 epochs="$EPOCHS" warmup_epochs=1 close_mosaic=3 \
    plots=false seed=1 project="$W/runs" name=train exist_ok=true
fi
rm -rf "$W/unseen" "$W/planted" "$W/planted.planted.json" "$W/audit"
"$K" dataset synth "$W/unseen" --images 200 --classes 3 --imgsz "$IMGSZ" --seed 2
"$B" plant "$W/unseen" "$W/planted" "$IMGSZ" 3 "$RATE" 7
"$K" dataset import "$W/planted" --name planted
"$K" dataset audit planted model="$W/runs/train/weights/best.safetensors" out="$W/audit" top=10
"$B" score "$W/planted.planted.json" "$W/audit/audit.json"
echo "work folder: $W"
