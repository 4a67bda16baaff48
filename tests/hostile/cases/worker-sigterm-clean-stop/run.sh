# SIGTERM to `kestrel worker` (a polite stop, as systemd or Ctrl-C sends):
# the worker ends its trainer, records the attempt as stopped by the worker,
# leaves no process behind and exits by itself with a status below 128.
source "$SOURCE/tests/hostile/lib.sh" "$KESTREL"
id=$(make_long_job 300)
start_worker w1 --grace-s 2
w1=$LAST_WORKER
t1=$(wait_attempt_pid "$id" 1 60)
sleep 0.5
kill -TERM "$w1"
end=$((SECONDS + 15))
while [ $SECONDS -lt $end ] && alive "$w1"; do sleep 0.1; done
alive "$w1" && fail "worker still running 15 s after SIGTERM"
wait "$w1" && rc=0 || rc=$?
[ "$rc" -lt 128 ] || fail "worker exited with status $rc after SIGTERM"
alive "$t1" && fail "trainer $t1 outlived its worker"
[ "$(trainer_count)" = 0 ] || fail "a trainer was left behind"
state=$("$K" --json jobs show "$id" | json_get 'd["job"]["state"]')
case "$state" in queued|failed_retryable) ;; *) fail "job state after a worker stop is '$state' (want it back in the queue)" ;; esac
ended=$("$K" --json jobs show "$id" | json_get 'd["attempts"][0]["ended_ms"]')
[ "$ended" -gt 0 ] || fail "the stopped attempt has no end time"
echo "ok: worker stopped with $rc, trainer gone, job $state"
