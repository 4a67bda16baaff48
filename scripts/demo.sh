#!/usr/bin/env bash
# The main job: install, build the `kestrel` binary (only that target) and
# the web UI, then the workflow end to end on a generated sample:
#   synth -> validate -> import -> show -> train -> val
# print the time from the first step to the first validated result, queue a
# fine-tuning run, and end in `kestrel serve` (foreground, Ctrl-C stops it)
# with one local worker training that run live.
#
#   ./scripts/demo.sh              # install dependencies, build kestrel, run the steps
#   ./scripts/demo.sh --no-build   # the steps only, with an already-built binary
#
# Environment: KESTREL (the binary; default $BUILD_DIR/src/cli/kestrel),
# KESTREL_HOME (default ./.kestrel), DEMO_DIR (default ./out/demo, replaced),
# DEMO_SEED (synthetic data and training seed, default 1), DEMO_EPOCHS,
# DEMO_IMAGES, DEMO_IMGSZ (see below; the defaults are what was measured),
# DEMO_PORT (the web workspace's port, default 8080), KESTREL_DEMO_SERVE=0
# (non-interactive use: queue, then exit instead of serving).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" != "--no-build" ]]; then
  ./scripts/install-deps.sh
  ./scripts/build.sh kestrel
  if [[ "${KESTREL_DEMO_SERVE:-1}" != 0 ]]; then
    if command -v npm >/dev/null 2>&1; then
      BUILD_DIR="${BUILD_DIR:-build}" ./scripts/build-web.sh
    else
      echo "demo: npm not found: the web UI is not built; kestrel serve will serve the API only" >&2
    fi
  fi
fi
K="${KESTREL:-./${BUILD_DIR:-build}/src/cli/kestrel}"
export KESTREL_HOME="${KESTREL_HOME:-$PWD/.kestrel}"
OUT="${DEMO_DIR:-$PWD/out/demo}"
SEED="${DEMO_SEED:-1}"
IMAGES="${DEMO_IMAGES:-400}"
IMGSZ="${DEMO_IMGSZ:-128}"
EPOCHS="${DEMO_EPOCHS:-25}"
rm -rf "$OUT"
mkdir -p "$OUT"
START=$(date +%s)

echo "== 1. generate a sample dataset ($IMAGES images of 3 shape classes, ${IMGSZ} px)"
"$K" dataset synth "$OUT/shapes" --images "$IMAGES" --classes 3 --imgsz "$IMGSZ" --seed "$SEED"
echo "== 2. validate it (dry run)"
"$K" dataset validate "$OUT/shapes"
echo "== 3. import it as a versioned dataset"
"$K" dataset import "$OUT/shapes" --name shapes
echo "== 4. show the stored version"
"$K" dataset show shapes
# Explicit settings for a short CPU run (the library defaults follow the
# reference trainer, made for 100+ epochs): one optimizer step per batch
# (nbs=batch), a one-epoch warm-up instead of max(3 epochs, 100 iterations),
# no per-epoch plots. `data=` also takes a path: data="$OUT/shapes/data.yaml".
echo "== 5. train a YOLOv8n from scratch ($EPOCHS epochs at ${IMGSZ} px)"
"$K" train data=shapes model=n imgsz="$IMGSZ" batch=16 nbs=16 epochs="$EPOCHS" warmup_epochs=1 \
  close_mosaic=3 plots=false seed="$SEED" project="$OUT/runs" name=train
echo "== 6. validate the best weights on the frozen val split (data= as a path: the stored version is reused)"
"$K" val model="$OUT/runs/train/weights/best.safetensors" data="$OUT/shapes/data.yaml" imgsz="$IMGSZ" \
  project="$OUT/runs" name=val | tee "$OUT/val.txt"
END=$(date +%s)
MAP50=$(sed -n 's/^ *all  *[0-9][0-9]*  *[0-9][0-9]*  *[0-9.]*  *[0-9.]*  *\([0-9.]*\).*/\1/p' "$OUT/val.txt" | head -1)
ELAPSED=$((END - START))
echo
echo "first result in $((ELAPSED / 60))m$(printf %02d $((ELAPSED % 60)))s: mAP50 ${MAP50:-?} on the val split (load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo "Kestrel home: $KESTREL_HOME   (kestrel dataset list | show | diff | export)"
echo "Run directory: $OUT/runs/train  (results.csv, args.yaml, weights/, plots)"
echo "Validation:    $OUT/runs/val    (PR/F1 curves, confusion matrix, result.json)"

# The web workspace on the demo's store: the dataset and a second run (a
# 10-epoch fine-tune from the best weights) that one local worker trains
# while the page is open, so its charts move live; when it succeeds the job
# registers its model (metrics, plots, lineage back to these weights). A
# hand registration (`kestrel models register`) would carry no evaluation.
BEST="$OUT/runs/train/weights/best.safetensors"
echo
echo "== 7. queue a fine-tuning run for the worker (its loss and mAP charts update live in the browser)"
"$K" submit data=shapes model=n pretrained="$BEST" imgsz="$IMGSZ" batch=16 nbs=16 epochs=10 warmup_epochs=1 \
  close_mosaic=3 seed="$SEED"
if [[ "${KESTREL_DEMO_SERVE:-1}" == 0 ]]; then
  echo "KESTREL_DEMO_SERVE=0: not serving; 'kestrel serve --workers 1' shows it all in a browser"
  exit 0
fi
PORT="${DEMO_PORT:-8080}"
echo "== 8. the web workspace (Ctrl-C stops the server and its worker; the queued run resumes next time)"
echo "Open http://127.0.0.1:$PORT/ : Datasets > shapes, Jobs > the running job's live charts, Models > shapes (once it succeeds)"
exec "$K" serve --port "$PORT" --workers 1 --public-read
