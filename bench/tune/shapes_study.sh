#!/usr/bin/env bash
# The end-to-end benchmark of issue 32 (docs/tune.md "Benchmark: a study on
# shapes"): a 12-trial ASHA study on the synthetic shapes dataset with 2
# workers, its coordinator SIGKILLed once midway and resumed by the job
# system; then the defaults' run with the same epoch budget, and the same
# study without pruning (pruner=none) to count the epochs pruning saved.
# Not a CI test (minutes). Prints one summary; the machine it ran on is
# part of any figure quoted from it.
#
#   bench/tune/shapes_study.sh [BUILD_DIR] [EPOCHS] [IMAGES] [SPACE]
set -euo pipefail
BUILD=${1:-build}
EPOCHS=${2:-20}
IMAGES=${3:-160}
SPACE=$(realpath "${4:-$(dirname "$0")/shapes_space.yaml}")
K=$(realpath "$BUILD/src/cli/kestrel")
WORK=$(mktemp -d /tmp/kestrel-tune-bench.XXXX)
export KESTREL_HOME=$WORK/home
cd "$WORK"
# A size that learns in ~30-60 s per trial on a shared 2-core machine: few,
# large objects of 2 classes at 64 px, batch 4 (more steps per epoch). The
# defaults reach a non-zero mAP50-95 at 10-20 epochs (docs/tune.md).
TRAIN="model=n imgsz=64 batch=4 workers=1 threads=1 plots=false"

"$K" dataset synth shapes --images "$IMAGES" --imgsz 64 --classes 2 --max-objects 2 --min-object 0.25 \
  --max-object 0.6 --seed 1 >/dev/null
"$K" dataset import shapes --name shapes >/dev/null

# Two worker processes (one holds the coordinator beside a trial). Not
# --exit-when-idle: the second would find nothing to claim while the first
# holds the coordinator and exit before the first trial is queued.
workers() {
  "$K" worker --id w1 --slots 2 --poll-s 0.2 --heartbeat-s 1 >>w1.log 2>&1 &
  W1=$!
  "$K" worker --id w2 --slots 1 --poll-s 0.2 --heartbeat-s 1 >>w2.log 2>&1 &
  W2=$!
}
stop_workers() { kill -TERM "$W1" "$W2"; wait "$W1" "$W2" || true; }
state() { "$K" --json tune show "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["study"]["state"])'; }

study() {  # name pruner [kill]
  local job
  job=$("$K" --json tune data=shapes $TRAIN trials=12 parallel=2 epochs="$EPOCHS" pruner="$2" seed=0 \
    space="$SPACE" min_epochs=2 name="$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
  workers
  if [[ "${3:-}" == kill ]]; then
    # Midway: half the trials spent, then SIGKILL the coordinator's process.
    while :; do
      spent=$("$K" --json tune show "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["study"]["spent"])')
      [[ "$spent" -ge 6 ]] && break
      sleep 1
    done
    pid=$("$K" --json jobs show "$job" | python3 -c 'import json,sys; print(json.load(sys.stdin)["attempts"][-1]["pid"])')
    kill -9 "$pid" && echo "killed the coordinator (pid $pid) with $spent trials spent"
  fi
  until [[ "$(state "$1")" == finished ]]; do sleep 2; done
  stop_workers
}

t0=$(date +%s)
study shapes-asha asha kill
t1=$(date +%s)
study shapes-full none
t2=$(date +%s)
"$K" submit data=shapes $TRAIN epochs="$EPOCHS" >/dev/null
"$K" worker --slots 1 --exit-when-idle --poll-s 0.2 >>w3.log 2>&1

python3 - "$K" <<'PY'
import json, subprocess, sys
k = sys.argv[1]
def run(*a):
    return json.loads(subprocess.run([k, "--json", *a], check=True, capture_output=True, text=True).stdout)
a, f = run("tune", "show", "shapes-asha"), run("tune", "show", "shapes-full")
jobs = run("jobs", "list", "--kind", "train", "--limit", "1")["jobs"]
default = jobs[0]["result"] or {}
for name, s in (("asha", a), ("none", f)):
    st = s["study"]
    print(f"{name}: state {st['state']}, counts {st['counts']}, epochs run {st['epochs_run']}, "
          f"best fitness {st['best']['value'] if st['best'] else None}")
for name, s in (("asha", a), ("none", f)):
    best = s["study"]["best"]
    if best:
        r = run("jobs", "show", str(best["job_id"]))["job"].get("result") or {}
        print(f"{name} best trial {best['number']}: mAP50 {r.get('map50')}, mAP50-95 {r.get('map50_95')}")
m50, m5095 = default.get("map50"), default.get("map50_95")
print(f"defaults: mAP50 {m50}, mAP50-95 {m5095}, fitness {0.1 * m50 + 0.9 * m5095 if m50 is not None else None}")
print(f"epochs saved by pruning: {f['study']['epochs_run'] - a['study']['epochs_run']} "
      f"of {f['study']['epochs_run']}")
PY
echo "wall: asha study $((t1 - t0)) s, unpruned study $((t2 - t1)) s; work dir $WORK"
