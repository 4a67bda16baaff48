#!/usr/bin/env bash
# Issue 31 on the namespace cluster (tools/cluster/README.md): PostgreSQL is
# restarted (`cluster.sh restart-pg`: fast stop, every connection cut, then
# start) while workers on two hosts run a small queue of tiny train jobs.
# The workers reconnect and go on claiming; every job succeeds exactly once:
# one attempt per job ran a trainer (an attempt whose claim was lost with
# the connection never starts one), one succeeded attempt, one registered
# model, one `succeeded` state event; no job is lost or stuck.
#
#   tools/cluster/pg_restart_test.sh            (as root; exit 0 "SKIP: ..." when it cannot run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ -z ${CLUSTER_STATE:-} ]]; then exec "$here/cluster.sh" run 2 "$0" "$@"; fi
C="$here/cluster.sh"
S=$CLUSTER_STATE
JOBS=6
fail() { echo "FAIL: $*" >&2; for h in h1 h2; do echo "--- $h worker.log" >&2; tail -n 30 "$S/$h/worker.log" >&2 || true; done; exit 1; }
psql_db() {
  local bin; bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -x $bin/psql ]] || bin=$(dirname "$(command -v psql)")
  "$C" exec "$S" db "$bin/psql" -h "$(grep -o '@[0-9.]*' "$S/env" | tr -d @)" -U kestrel -d kestrel -tAc "$1"
}
k() { local h=$1; shift; (cd "$S/$h" && "$C" exec "$S" "$h" "${KESTREL:-$(cd "$here/../.." && pwd)/build/src/cli/kestrel}" "$@"); }
# Lease 10 s: longer than the restart, so no lease runs out while it lasts.
wargs=(--poll-s 0.2 --heartbeat-s 1 --lease-s 10 --min-free-gb 0.1)

k h1 dataset synth data --images 12 --imgsz 64 --seed 3 >/dev/null
k h1 dataset import data --name tiny >/dev/null
for i in $(seq 1 "$JOBS"); do
  k h1 submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW \
    lr0=0.01 warmup_epochs=0 epochs=2 seed="$i" >/dev/null
done
"$C" worker "$S" h1 --host h1 "${wargs[@]}" >/dev/null
"$C" worker "$S" h2 --host h2 "${wargs[@]}" >/dev/null

# Restart while both hosts work: one job done, two running (<= 120 s).
ready=""
for _ in $(seq 1 600); do
  counts=$(psql_db "SELECT COUNT(*) FILTER (WHERE state = 'succeeded'), COUNT(*) FILTER (WHERE state = 'running') FROM jobs")
  if [[ ${counts%|*} -ge 1 && ${counts#*|} -ge 2 ]]; then ready=1; break; fi
  sleep 0.2
done
[[ -n $ready ]] || fail "the workers never had a job done and two running ($counts)"
restart_ms=$(date +%s%3N)
"$C" restart-pg "$S"
echo "PostgreSQL restarted with $counts (succeeded|running) jobs"

# Every job ends (<= 300 s); the workers reconnected to finish them.
done_n=0
for _ in $(seq 1 1500); do
  done_n=$(psql_db "SELECT COUNT(*) FROM jobs WHERE state = 'succeeded'")
  [[ $done_n -eq $JOBS ]] && break
  [[ $(psql_db "SELECT COUNT(*) FROM jobs WHERE state IN ('failed_permanent', 'cancelled')") -eq 0 ]] ||
    fail "a job failed: $(psql_db "SELECT id, state, last_reason FROM jobs WHERE state <> 'succeeded'")"
  sleep 0.2
done
[[ $done_n -eq $JOBS ]] || fail "$done_n of $JOBS jobs succeeded: $(psql_db "SELECT id, state, attempt FROM jobs")"
after=$(psql_db "SELECT COUNT(*) FROM attempts WHERE started_at > $restart_ms")
[[ $after -ge 1 ]] || fail "no attempt was claimed after the restart"
for h in h1 h2; do
  [[ $(psql_db "SELECT COUNT(*) FROM workers WHERE id = 'w$h' AND heartbeat_at > $restart_ms") -eq 1 ]] ||
    fail "worker w$h never came back after the restart"
done
# Exactly once, per job: one attempt ran a trainer, one succeeded, one model, one succeeded event.
bad=$(psql_db "SELECT j.id FROM jobs j WHERE
  (SELECT COUNT(*) FROM attempts a WHERE a.job_id = j.id AND a.pid > 0) <> 1 OR
  (SELECT COUNT(*) FROM attempts a WHERE a.job_id = j.id AND a.succeeded = 1) <> 1 OR
  (SELECT COUNT(*) FROM models m WHERE m.job_id = j.id) <> 1 OR
  (SELECT COUNT(*) FROM events e WHERE e.job_id = j.id AND e.kind = 'state'
     AND e.payload_json::json->>'state' = 'succeeded') <> 1")
[[ -z $bad ]] || fail "jobs not run exactly once: $bad ($(psql_db "SELECT job_id, attempt, worker, pid, succeeded, reason FROM attempts ORDER BY 1, 2"))"
attempts=$(psql_db "SELECT COUNT(*) FROM attempts")
by_host=$(psql_db "SELECT host || ':' || COUNT(*) FROM attempts WHERE succeeded = 1 GROUP BY host ORDER BY host" | tr '\n' ' ')
echo "PostgreSQL restart: $JOBS jobs succeeded once each ($attempts attempts; succeeded per host: $by_host); $after claimed after the restart"
echo "PASS"
