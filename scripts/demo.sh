#!/usr/bin/env bash
# The main job: install, build, then the dataset workflow end to end on a
# generated sample: synth -> validate -> import -> show.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
K=./build/src/cli/kestrel
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
echo
echo "Kestrel home: $KESTREL_HOME   (kestrel dataset list | show | diff | export)"
