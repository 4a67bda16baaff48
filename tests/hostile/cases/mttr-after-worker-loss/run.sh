# A worker is SIGKILLed mid-job; a second worker finishes the job. `stats`
# must report the recovery from recorded times (docs/jobs.md): time to
# recovery (failure -> job succeeded) between the true kill -> success
# interval and that plus up to one lease (the lost attempt ends at its last
# renewal); time to restart (failure detected -> next attempt started) no
# longer than that; and the lost attempt's detection after its lease ran out.
source "$SOURCE/tests/hostile/lib.sh" "$KESTREL"
# No usage sampling (docs/jobs.md "System usage"): at load ~4 the lost
# attempt's last renewal came 2.5 s before the kill with it on (1.3-1.9 s
# off); the case measures recovery, not the renewal cadence.
export KESTREL_USAGE_S=0
"$K" dataset synth ds --images 12 --imgsz 64 --seed 3 >/dev/null
"$K" dataset import ds --name tiny >/dev/null
id=$("$K" --json submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW \
  lr0=0.01 warmup_epochs=0 epochs=30 | json_get 'd["job_id"]')
start_worker w1
w1=$LAST_WORKER
wait_attempt_pid "$id" 1 60 >/dev/null
sleep 1
# 30 epochs take several seconds even on a fast idle machine (4 once finished
# inside the second above and the case measured nothing): the kill must land
# while the first attempt still trains.
state=$("$K" --json jobs show "$id" | json_get 'd["job"]["state"]')
[ "$state" = running ] || fail "job $id is '$state' before the kill; the case needs a longer job"
kill -9 "$w1"
killed_ms=$(date +%s%3N)
start_worker w2  # not --exit-when-idle: the job is still running (w1's lease) when w2 starts
w2=$LAST_WORKER
end=$((SECONDS + 120))
state=""
while [ $SECONDS -lt $end ]; do
  state=$("$K" --json jobs show "$id" | json_get 'd["job"]["state"]')
  [ "$state" = succeeded ] && break
  sleep 0.3
done
[ "$state" = succeeded ] || fail "job $id is '$state', not succeeded, 120 s after the worker loss"
show=$("$K" --json jobs show "$id")
finished_ms=$(echo "$show" | json_get 'd["job"]["finished_ms"]')
stats=$("$K" --json stats)
echo "$stats" | json_get 'd' >stats.txt
mttr=$(echo "$stats" | json_get 'd["mean_time_to_recovery_ms"]')
restart=$(echo "$stats" | json_get 'd["mean_time_to_restart_ms"]')
recovered=$(echo "$stats" | json_get 'd["recovered_jobs"]')
true_ms=$((finished_ms - killed_ms))
echo "killed at $killed_ms, succeeded at $finished_ms: true recovery $true_ms ms; stats: recovery $mttr ms, restart $restart ms, recovered $recovered"
[ "$recovered" = 1 ] || fail "recovered_jobs is $recovered, want 1"
lost_ended=$(echo "$show" | json_get 'd["attempts"][0]["ended_ms"]')
lost_detected=$(echo "$show" | json_get 'd["attempts"][0]["detected_ms"]')
echo "lost attempt: ended $lost_ended, detected $lost_detected"
python3 - "$mttr" "$true_ms" "$restart" "$lost_ended" "$lost_detected" "$killed_ms" <<'PY' || fail "stats disagree with the recorded times"
import sys
mttr, true_ms, restart, ended, detected, killed = (float(x) for x in sys.argv[1:])
# The lost attempt ends at its last lease renewal: up to one heartbeat (1 s)
# before the kill, plus the renewal's own time under load (ctest -j 2 beside
# the demo's training: -1.47 s here when it passed, failing twice past the old
# 1.5 s bound in session 42's full run; 2.5 s with usage sampling at load ~4).
# The lease (3 s) bounds it: an older "last renewal" would have expired.
ok = true_ms - 500 <= mttr <= true_ms + 3000
ok = ok and killed - 3000 <= ended <= killed + 200
ok = ok and detected - ended >= 2000  # the 3 s lease had to run out (less one renewal)
ok = ok and 0 <= restart <= mttr
print("mttr", mttr, "true", true_ms, "restart", restart, "ended-killed", ended - killed, "detected-ended", detected - ended)
sys.exit(0 if ok else 1)
PY
