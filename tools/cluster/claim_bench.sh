#!/usr/bin/env bash
# PostgreSQL claims/s from two namespace hosts (issue 31's figure): the
# cluster's PostgreSQL in host "db"; `kestrel_bench_claim_throughput --claim`
# runs as one process of WORKERS threads in h1 and one in h2, both starting
# at the same wall-clock instant, and claims every queued job of a fresh
# schema; then, in the same run, one process of 2 x WORKERS threads in h1
# alone over as many jobs (the one-host figure to compare with). Every job
# must be claimed exactly once (`--check`: all running at attempt 1).
#
#   tools/cluster/claim_bench.sh [JOBS=4000] [WORKERS=2] [FINISHED=0]   (as root; "SKIP: ..." when it cannot run)
#
# FINISHED > 0: each run's schema first gets that many finished jobs
# (`--setup ... --finished N`: bulk-loaded and analyzed), and a third run
# claims from two hosts on an empty schema, for the p99 comparison.
#
# Claims/s of a run = all its claims / (last process's end - the common start).
# A benchmark, not a test: not in ctest (docs/jobs.md "Scheduler speed").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BENCH=${BENCH:-$repo/build/bench/claim_throughput/kestrel_bench_claim_throughput}
if [[ -z ${CLUSTER_STATE:-} ]]; then
  [[ -x $BENCH ]] || { echo "SKIP: no bench binary at $BENCH (build kestrel_bench_claim_throughput)"; exit 0; }
  exec "$here/cluster.sh" run 2 "$0" "$@"
fi
C="$here/cluster.sh"
S=$CLUSTER_STATE
JOBS=${1:-4000}
WORKERS=${2:-2}
FINISHED=${3:-0}
[[ $JOBS =~ ^[0-9]+$ && $WORKERS =~ ^[0-9]+$ && $FINISHED =~ ^[0-9]+$ && $JOBS -ge 1 && $WORKERS -ge 1 ]] ||
  { echo "usage: claim_bench.sh [JOBS>=1] [WORKERS>=1] [FINISHED>=0]" >&2; exit 2; }
db=$(sed -n 's/^KESTREL_DB=//p' "$S/env")

# One run: setup from the root namespace (over the bridge), then a claim
# process per "host:workers" argument, all starting at the same instant.
run() {
  local label=$1 finished=$2 url start hw i=0 pids=() more=()
  shift 2
  [[ $finished -gt 0 ]] && more=(--finished "$finished")
  url=$("$BENCH" --setup "$db" "$JOBS" "${more[@]}" | sed -n 's/^url=//p')
  [[ -n $url ]] || { echo "FAIL: setup" >&2; exit 1; }
  # Every process connects and warms its connections before this instant.
  start=$(($(date +%s%3N) + 3000))
  for hw in "$@"; do
    "$C" exec "$S" "${hw%%:*}" "$BENCH" --claim "$url" "${hw#*:}" "$start" >"$S/claim.$label.$i" 2>&1 &
    pids+=($!)
    i=$((i + 1))
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$S"/claim."$label".* >&2; echo "FAIL: a claim process failed" >&2; exit 1; }; done
  "$BENCH" --check "$url" "$JOBS" >"$S/check.$label" || { cat "$S/check.$label" >&2; exit 1; }
  python3 - "$label" "$start" "$S"/claim."$label".* <<'PY'
import sys
label, start, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = []
for f in files:
    line = [l for l in open(f) if l.startswith("claims=")][-1]
    rows.append(dict(kv.split("=") for kv in line.split()))
claims = sum(int(r["claims"]) for r in rows)
secs = (max(int(r["end_ms"]) for r in rows) - start) / 1000
per = ", ".join(f"{r['claims']} claims p50 {float(r['p50_ms']):.2f} ms p99 {float(r['p99_ms']):.2f} ms" for r in rows)
print(f"{label}: {len(rows)} process(es), {claims} claims in {secs:.2f} s = {claims / secs:.0f} claims/s ({per})")
PY
  rm -f "$S"/claim."$label".*
}

echo "claim only, $JOBS queued jobs per run ($FINISHED finished jobs in the table), PostgreSQL in namespace db"
run two-hosts "$FINISHED" "h1:$WORKERS" "h2:$WORKERS"
run one-host "$FINISHED" "h1:$((2 * WORKERS))"
[[ $FINISHED -eq 0 ]] || run two-hosts-empty-table 0 "h1:$WORKERS" "h2:$WORKERS"
echo "checks: every job claimed exactly once (running at attempt 1) in every run"
