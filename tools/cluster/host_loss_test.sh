#!/usr/bin/env bash
# The issue 31 host-loss check on the namespace cluster (tools/cluster/README.md):
# two worker hosts share PostgreSQL and the Swift S3 store; the host running
# a job has its link cut and is frozen (unreachable, its processes stopped:
# to the cluster a lost host) -> its lease expires, the other host resumes
# the job from its S3 checkpoint (not from scratch); then the first host
# comes back (link restored, thawed): its late writes are refused by
# fencing (its renewal, its checkpoint record, its result), and it is
# powered off. Prints the time from host loss to resumed training.
#
#   tools/cluster/host_loss_test.sh            (as root; exit 0 "SKIP: ..." when it cannot run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ -z ${CLUSTER_STATE:-} ]]; then exec "$here/cluster.sh" run 2 "$0" "$@"; fi
C="$here/cluster.sh"
S=$CLUSTER_STATE
fail() { echo "FAIL: $*" >&2; for h in h1 h2; do echo "--- $h worker.log" >&2; tail -n 30 "$S/$h/worker.log" >&2 || true; done; exit 1; }
psql_db() {
  local bin; bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -x $bin/psql ]] || bin=$(dirname "$(command -v psql)")
  "$C" exec "$S" db "$bin/psql" -h "$(grep -o '@[0-9.]*' "$S/env" | tr -d @)" -U kestrel -d kestrel -tAc "$1"
}
now() { date +%s.%N; }
k() { local h=$1; shift; (cd "$S/$h" && "$C" exec "$S" "$h" "${KESTREL:-$(cd "$here/../.." && pwd)/build/src/cli/kestrel}" "$@"); }
wargs=(--poll-s 0.2 --heartbeat-s 1 --lease-s 3 --min-free-gb 0.1)

k h1 dataset synth data --images 12 --imgsz 64 --seed 3 >/dev/null
k h1 dataset import data --name tiny >/dev/null
job=$(k h1 --json submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW \
  lr0=0.01 warmup_epochs=0 epochs=6 | python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
"$C" worker "$S" h1 "${wargs[@]}" >/dev/null

# Host h1 trains until its second epoch's checkpoint is recorded (<= 120 s).
epoch=0
for _ in $(seq 1 600); do
  epoch=$(psql_db "SELECT checkpoint FROM attempts WHERE job_id = $job AND attempt = 1" |
    python3 -c 'import json,sys; t=sys.stdin.read().strip(); print(json.loads(t)["epoch"] if t else 0)')
  [[ $epoch -ge 2 ]] && break
  sleep 0.2
done
[[ $epoch -ge 2 ]] || fail "h1 recorded no second epoch"

# Host loss: link cut, every process stopped.
"$C" cut "$S" h1
"$C" freeze "$S" h1
lost=$(now)
before=$(psql_db "SELECT checkpoint FROM attempts WHERE job_id = $job AND attempt = 1")
resume_epoch=$(echo "$before" | python3 -c 'import json,sys; print(json.load(sys.stdin)["epoch"])')
"$C" worker "$S" h2 "${wargs[@]}" >/dev/null

# h2 claims after the lease, fetches the checkpoint and resumes (<= 120 s).
log2=$S/h2/home/jobs/$job/attempt-2.log
resumed=""
for _ in $(seq 1 600); do
  if [[ -f $log2 ]] && grep -q "resumed from" "$log2"; then resumed=$(now); break; fi
  sleep 0.2
done
[[ -n $resumed ]] || fail "h2 never resumed job $job"
grep -q "fetched attempt 1's checkpoint" "$log2" || fail "h2 did not fetch h1's checkpoint from S3"

# h1 comes back: its worker learns it lost the job; nothing it writes counts.
"$C" restore "$S" h1
"$C" thaw "$S" h1
for _ in $(seq 1 300); do
  state=$(psql_db "SELECT state FROM jobs WHERE id = $job")
  [[ $state == succeeded ]] && break
  sleep 0.2
done
[[ $state == succeeded ]] || fail "job $job ended $state"
after=$(psql_db "SELECT checkpoint FROM attempts WHERE job_id = $job AND attempt = 1")
[[ $after == "$before" ]] || fail "h1's late checkpoint replaced its recorded one"
[[ $(psql_db "SELECT attempt FROM jobs WHERE id = $job") == 2 ]] || fail "more than two attempts"
[[ $(psql_db "SELECT reason FROM attempts WHERE job_id = $job AND attempt = 1") == lease_expired ]] ||
  fail "attempt 1 did not end lease_expired"
first=$(psql_db "SELECT MIN((payload_json::json->>'epoch')::int) FROM events WHERE job_id = $job AND attempt = 2
  AND kind = 'metric' AND payload_json::json->>'type' = 'epoch'")
[[ $first == $((resume_epoch + 1)) ]] || fail "h2 trained from epoch $first, not $((resume_epoch + 1))"
for _ in $(seq 1 50); do grep -q "lost its lease\|no longer current\|stopping the child" "$S/h1/worker.log" && break; sleep 0.2; done
grep -q "lost its lease\|no longer current\|stopping the child" "$S/h1/worker.log" || fail "h1's worker was not fenced"
"$C" poweroff "$S" h1
python3 -c "print('host loss: h1 lost after epoch $resume_epoch; h2 resumed at epoch $first %.2f s after the loss (lease 3 s)' % ($resumed - $lost))"
echo "PASS"
