#!/usr/bin/env bash
# travel_trainer_test.sh TRAVEL_TRAINER WORKDIR: the travelling trainer
# (bench/train_throughput/travel_trainer.cc, docs/gpu.md) end to end on the
# CPU, as tools/gpu-check.sh runs it on the GPU machine: synth, import into a
# fresh home, train stopped by SIGTERM after epoch 1 (exit 8, last.ckpt
# written), resume= to the end (exit 0, 3 rows in results.csv), and its
# usage errors (exit 2, naming the key).
set -uo pipefail
bin=${1:?usage: travel_trainer_test.sh TRAVEL_TRAINER WORKDIR}
work=${2:?usage: travel_trainer_test.sh TRAVEL_TRAINER WORKDIR}
rm -rf "$work"
mkdir -p "$work"
export KESTREL_HOME=$work/home
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
"$bin" synth "$work/shapes" images=24 classes=2 imgsz=64 seed=3 >"$work/synth.log" 2>&1 || fail "synth: $(cat "$work/synth.log")"
"$bin" import "$work/shapes" shapes >"$work/import.log" 2>&1 || fail "import: $(cat "$work/import.log")"
grep -q "import: shapes@v1, 24 images" "$work/import.log" || fail "import output: $(cat "$work/import.log")"

run=$work/runs/train
"$bin" train data=shapes model=n imgsz=64 batch=4 epochs=3 workers=0 plots=false seed=1 device=cpu \
  project="$work/runs" name=train >"$work/train1.log" 2>&1 &
pid=$!
rows=0
for _ in $(seq 1 1200); do
  kill -0 "$pid" 2>/dev/null || break
  [[ -f "$run/results.csv" ]] && rows=$(($(wc -l <"$run/results.csv") - 1))
  if ((rows >= 1)); then
    kill -TERM "$pid"
    break
  fi
  sleep 0.1
done
wait "$pid"
rc=$?
[[ $rc == 8 ]] || fail "the stopped run exited $rc, not 8: $(tail -5 "$work/train1.log")"
grep -q "run stopped" "$work/train1.log" || fail "no 'run stopped' line: $(tail -5 "$work/train1.log")"
[[ -f "$run/weights/last.ckpt" ]] || fail "no weights/last.ckpt after the stop"
"$bin" train resume="$run/weights/last.ckpt" >"$work/train2.log" 2>&1 || fail "resume: $(tail -5 "$work/train2.log")"
grep -q "run completed" "$work/train2.log" || fail "no 'run completed' line: $(tail -5 "$work/train2.log")"
[[ $(($(wc -l <"$run/results.csv") - 1)) == 3 ]] || fail "results.csv: $(cat "$run/results.csv")"
[[ -f "$run/weights/best.safetensors" ]] || fail "no weights/best.safetensors"

"$bin" train data=shapes epochz=3 >"$work/usage.log" 2>&1
rc=$?
[[ $rc == 2 ]] || fail "an unknown key exited $rc, not 2"
grep -q "epochz" "$work/usage.log" && grep -q "epochs" "$work/usage.log" || fail "usage error: $(cat "$work/usage.log")"
"$bin" train data=no_such_dataset epochs=1 imgsz=64 >"$work/nodata.log" 2>&1
rc=$?
[[ $rc == 1 ]] || fail "an unknown dataset exited $rc, not 1"
grep -q "no_such_dataset" "$work/nodata.log" || fail "unknown dataset: $(cat "$work/nodata.log")"
"$bin" bogus >/dev/null 2>&1
[[ $? == 2 ]] || fail "an unknown command did not exit 2"
echo "travel_trainer: synth, import, stop (8), resume (0), usage errors: ok"
rm -rf "$work"
