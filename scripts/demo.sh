#!/usr/bin/env bash
# The main job: install, build, then the workflow end to end on a generated
# sample: synth -> validate -> import -> show -> train -> val.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
K="./${BUILD_DIR:-build}/src/cli/kestrel"
export KESTREL_HOME="${KESTREL_HOME:-$PWD/.kestrel}"
OUT="${DEMO_DIR:-$PWD/out/demo}"
rm -rf "$OUT"
mkdir -p "$OUT"

echo "== 1. generate a sample dataset"
$K dataset synth "$OUT/shapes" --images 96 --classes 3 --imgsz 160 --seed 7
echo "== 2. validate it (dry run)"
$K dataset validate "$OUT/shapes"
echo "== 3. import it as a versioned dataset"
$K dataset import "$OUT/shapes" --name shapes
echo "== 4. show the stored version"
$K dataset show shapes
echo "== 5. train a small YOLOv8n for a few epochs (a few minutes on 2 cores)"
$K train data=shapes model=n imgsz=160 batch=16 epochs=${DEMO_EPOCHS:-5} project="$OUT/runs" name=train
echo "== 6. validate the best weights on the frozen val split"
$K val model="$OUT/runs/train/weights/best.safetensors" data=shapes imgsz=160 project="$OUT/runs" name=val
echo
echo "Kestrel home: $KESTREL_HOME   (kestrel dataset list | show | diff | export)"
echo "Run directory: $OUT/runs/train  (results.csv, args.yaml, weights/, plots)"
echo "Validation:    $OUT/runs/val    (PR/F1 curves, confusion matrix, result.json)"
