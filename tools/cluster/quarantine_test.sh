#!/usr/bin/env bash
# Issue 31 on the namespace cluster (tools/cluster/README.md): host h2's
# environment is broken — its `kestrel-torch` cannot load a library (a
# wrapper beside a copy of `kestrel` that answers `fingerprint` through the
# real one and fails every attempt as the dynamic loader does: its message,
# exit 127). Its worker fails each job it claims once (`environment`: no
# retry spent, the job kept off h2) and the host is quarantined at the third
# failure (`--quarantine-after 3`) and claims nothing more, while h1's healthy
# worker finishes every job. `kestrel workers` and `kestrel stats` name the
# quarantine and the loader's words.
#
#   tools/cluster/quarantine_test.sh            (as root; exit 0 "SKIP: ..." when it cannot run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ -z ${CLUSTER_STATE:-} ]]; then exec "$here/cluster.sh" run 2 "$0" "$@"; fi
C="$here/cluster.sh"
S=$CLUSTER_STATE
KESTREL=${KESTREL:-$(cd "$here/../.." && pwd)/build/src/cli/kestrel}
JOBS=5
fail() { echo "FAIL: $*" >&2; for h in h1 h2; do echo "--- $h worker.log" >&2; tail -n 30 "$S/$h/worker.log" >&2 || true; done; exit 1; }
psql_db() {
  local bin; bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -x $bin/psql ]] || bin=$(dirname "$(command -v psql)")
  "$C" exec "$S" db "$bin/psql" -h "$(grep -o '@[0-9.]*' "$S/env" | tr -d @)" -U kestrel -d kestrel -tAc "$1"
}
k() { local h=$1; shift; (cd "$S/$h" && "$C" exec "$S" "$h" "$KESTREL" "$@"); }
wargs=(--poll-s 0.2 --heartbeat-s 1 --lease-s 10 --min-free-gb 0.1)

# h2's broken install, on its own disk.
mkdir -p "$S/h2/broken"
cp "$KESTREL" "$S/h2/broken/kestrel"
cat >"$S/h2/broken/kestrel-torch" <<EOF
#!/bin/sh
for a in "\$@"; do if [ "\$a" = --job ]; then
  echo "kestrel-torch: error while loading shared libraries: libtorch_cpu.so: cannot open shared object file: No such file or directory" >&2; exit 127; fi; done
exec '$(dirname "$KESTREL")/kestrel-torch' "\$@"
EOF
chmod 755 "$S/h2/broken/kestrel" "$S/h2/broken/kestrel-torch"

k h1 dataset synth data --images 12 --imgsz 64 --seed 3 >/dev/null
k h1 dataset import data --name tiny >/dev/null
for i in $(seq 1 "$JOBS"); do
  k h1 submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW \
    lr0=0.01 warmup_epochs=0 epochs=1 seed="$i" >/dev/null
done
# The broken host first (it fails fast), then the healthy one: both work at once.
KESTREL="$S/h2/broken/kestrel" "$C" worker "$S" h2 --host h2 --quarantine-after 3 "${wargs[@]}" >/dev/null
for _ in $(seq 1 100); do
  [[ $(psql_db "SELECT COUNT(*) FROM attempts WHERE host = 'h2'") -ge 1 ]] && break
  sleep 0.2
done
"$C" worker "$S" h1 --host h1 "${wargs[@]}" >/dev/null

# h2 quarantined (<= 60 s), every job done on h1 (<= 300 s).
q=""
for _ in $(seq 1 300); do
  q=$(psql_db "SELECT env_failures FROM hosts WHERE host = 'h2' AND quarantined_at > 0")
  [[ -n $q ]] && break
  sleep 0.2
done
[[ $q == 3 ]] || fail "h2 not quarantined at its third environment failure (env_failures '$q')"
done_n=0
for _ in $(seq 1 1500); do
  done_n=$(psql_db "SELECT COUNT(*) FROM jobs WHERE state = 'succeeded'")
  [[ $done_n -eq $JOBS ]] && break
  sleep 0.2
done
[[ $done_n -eq $JOBS ]] || fail "$done_n of $JOBS jobs succeeded: $(psql_db "SELECT id, state, last_reason FROM jobs")"

[[ $(psql_db "SELECT COUNT(*) FROM attempts WHERE host = 'h2'") -eq 3 ]] ||
  fail "h2 ran $(psql_db "SELECT COUNT(*) FROM attempts WHERE host = 'h2'") attempts, not 3 (it claimed after its quarantine)"
[[ $(psql_db "SELECT COUNT(*) FROM attempts WHERE host = 'h2' AND reason <> 'environment'") -eq 0 ]] ||
  fail "an h2 attempt failed other than 'environment'"
[[ $(psql_db "SELECT COUNT(*) FROM jobs WHERE retries_used <> 0") -eq 0 ]] || fail "environment failures spent retries"
# Each job: succeeded on h1, never twice on h2 (the failed job was kept off h2).
bad=$(psql_db "SELECT j.id FROM jobs j WHERE
  (SELECT host FROM attempts a WHERE a.job_id = j.id AND a.attempt = j.attempt) <> 'h1' OR
  (SELECT COUNT(*) FROM attempts a WHERE a.job_id = j.id AND a.host = 'h2') > 1 OR
  (SELECT COUNT(*) FROM attempts a WHERE a.job_id = j.id AND a.succeeded = 1) <> 1")
[[ -z $bad ]] || fail "jobs not finished once on h1: $bad"

workers=$(k h1 --json workers)
echo "$workers" | python3 -c '
import json, sys
w = json.load(sys.stdin)
h = {x["host"]: x for x in w["hosts"]}
assert "h2" in h and h["h2"]["quarantined"] is True, w["hosts"]
assert h["h2"]["env_failures"] == 3, h["h2"]
assert "libtorch_cpu.so" in h["h2"]["quarantine_reason"], h["h2"]["quarantine_reason"]
assert not h.get("h1", {}).get("quarantined", False), h.get("h1")
' || fail "kestrel workers does not show h2 quarantined with the loader's words: $workers"
k h1 workers | grep -q "h2.*QUARANTINED" || fail "kestrel workers' text does not say h2 is QUARANTINED"
k h1 stats | grep -q "host h2 is QUARANTINED.*libtorch_cpu.so" || fail "kestrel stats does not name h2's quarantine"
echo "quarantine: h2 quarantined after 3 environment failures; $JOBS jobs succeeded on h1, no retry spent"
echo "PASS"
