# Shared helpers for the hostile cases that drive workers from shell steps.
# Sourced as: source "{source}/tests/hostile/lib.sh" "{kestrel}"
# (cwd is the case's scratch folder; KESTREL_HOME is set by run_case.py).
K="$1"
BG_PIDS=()

# Kills whatever a case started in the background, even when it fails early.
kill_background() {
  local p
  for p in "${BG_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap kill_background EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

json_get() {  # json_get EXPR: evaluates EXPR on the JSON document on stdin (as `d`)
  /usr/bin/env python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}

# A running job on a tiny dataset that trains for minutes unless stopped.
make_long_job() {
  "$K" dataset synth ds --images 12 --imgsz 64 --seed 3 >/dev/null
  "$K" dataset import ds --name tiny >/dev/null
  "$K" --json submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW \
    lr0=0.01 warmup_epochs=0 epochs="${1:-300}" | json_get 'd["job_id"]'
}

start_worker() {  # start_worker ID [extra flags...]: a worker with a short lease, in the background
  local id="$1"
  shift
  "$K" worker --poll-s 0.1 --heartbeat-s 1 --lease-s 3 --id "$id" --no-webhooks "$@" >"$id.log" 2>&1 &
  BG_PIDS+=($!)
  LAST_WORKER=$!
}

# pid of attempt N of job ID (0 while it has not started its child)
attempt_pid() {
  "$K" --json jobs show "$1" | json_get "d['attempts'][$2-1].get('pid', 0) if len(d['attempts']) >= $2 else 0"
}

wait_attempt_pid() {  # wait_attempt_pid JOB N TIMEOUT_S -> prints the pid
  local end=$((SECONDS + $3)) p=0
  while [ $SECONDS -lt $end ]; do
    p=$(attempt_pid "$1" "$2")
    if [ "$p" != 0 ]; then
      echo "$p"
      return 0
    fi
    sleep 0.1
  done
  fail "attempt $2 of job $1 never named its pid within $3 s"
}

# Number of live `kestrel train --job` processes that belong to this case's home.
trainer_count() {
  local n=0 d
  for d in /proc/[0-9]*; do
    tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -q -- ' train --job ' || continue
    tr '\0' '\n' <"$d/environ" 2>/dev/null | grep -qx "KESTREL_HOME=$KESTREL_HOME" || continue
    n=$((n + 1))
  done
  echo "$n"
}

alive() { kill -0 "$1" 2>/dev/null && [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != Z ]; }
