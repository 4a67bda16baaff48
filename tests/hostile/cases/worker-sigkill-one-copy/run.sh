# SIGKILL of `kestrel worker` while its trainer runs: the trainer is gone
# within 2 s, the attempt names the real pid, and once a second worker
# re-claims the job there is never more than one trainer for it.
source "$SOURCE/tests/hostile/lib.sh" "$KESTREL"
id=$(make_long_job 300)
start_worker w1
w1=$LAST_WORKER
t1=$(wait_attempt_pid "$id" 1 60)
sleep 0.5
alive "$t1" || fail "trainer $t1 ended by itself"
grep -qa -- "train" "/proc/$t1/cmdline" || fail "attempt pid $t1 is not the trainer"
kill -9 "$w1"
for _ in $(seq 20); do alive "$t1" || break; sleep 0.1; done
alive "$t1" && fail "trainer $t1 still running 2 s after its worker was SIGKILLed"
[ "$(trainer_count)" = 0 ] || fail "a trainer survived its worker"
start_worker w2
end=$((SECONDS + 60))
t2=0
while [ $SECONDS -lt $end ]; do
  n=$(trainer_count)
  [ "$n" -le 1 ] || fail "$n trainers of job $id at once"
  t2=$(attempt_pid "$id" 2)
  [ "$t2" != 0 ] && break
  sleep 0.2
done
[ "$t2" != 0 ] || fail "the job was not re-claimed after its lease expired"
for _ in $(seq 10); do
  n=$(trainer_count)
  [ "$n" -le 1 ] || fail "$n trainers of job $id at once after the re-claim"
  sleep 0.2
done
"$K" jobs cancel "$id" >/dev/null
echo "ok: trainer $t1 died with its worker; attempt 2 runs as $t2, alone"
