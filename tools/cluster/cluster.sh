#!/usr/bin/env bash
# Hosts on one machine (issue 31): network namespaces on a bridge stand for
# machines — PostgreSQL in one ("db"), the Swift S3 store in another ("s3"),
# `kestrel worker`s in the rest ("h1".."hN") — and faults a real cluster
# has: a cut link, a frozen host, a power loss, a restarted database or S3
# server, a full disk. A test tool, not product code (tools/cluster/README.md).
#
#   cluster.sh up STATE N          make the cluster (N worker hosts); prints
#                                  the state folder's env file
#   cluster.sh down STATE          tear it all down (idempotent)
#   cluster.sh run N SCRIPT...     up, run SCRIPT with CLUSTER_STATE and the env
#                                  exported, down on exit/failure/Ctrl-C (trap)
#   cluster.sh exec STATE HOST CMD...    CMD inside HOST's namespace, host env
#   cluster.sh worker STATE HOST ARGS... start `kestrel worker ARGS` on HOST (--host HOST unless ARGS name one)
#                                  (background; log STATE/HOST/worker.log)
#   faults: cut|restore STATE HOST, freeze|thaw STATE HOST,
#           poweroff STATE HOST, restart-pg STATE, restart-s3 STATE,
#           fill-disk STATE HOST
#
# Exit 0 with "SKIP: ..." when it cannot run here (not root, no `ip`, no
# PostgreSQL or Swift): ctest counts that as skipped by its message.
# Addresses: 198.18.<net>.0/24 (RFC 2544 benchmarking block) with the bridge
# at .1 in the root namespace (so the test process reaches the servers);
# namespaces have no default route: nothing leaves them but to the bridge.
# Every wait is bounded (count and time).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
KESTREL=${KESTREL:-$repo/build/src/cli/kestrel}
DISK_MB=${CLUSTER_DISK_MB:-512}

skip() { echo "SKIP: $*"; exit 0; }
die() { echo "cluster: $*" >&2; exit 1; }

preflight() {
  [[ $(id -u) -eq 0 ]] || skip "tools/cluster needs root (network namespaces, tmpfs mounts)"
  command -v ip >/dev/null || skip "tools/cluster needs iproute2's ip"
  ip netns list >/dev/null 2>&1 || skip "ip netns does not work here"
  pg_bin >/dev/null || skip "PostgreSQL not installed (apt-get install postgresql)"
  command -v swift-proxy-server >/dev/null ||
    skip "Swift not installed (apt-get install swift swift-proxy swift-object swift-container swift-account)"
  [[ -x $KESTREL ]] || skip "no kestrel binary at $KESTREL (build it, or set KESTREL=)"
}

pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -n $d && -x $d/initdb ]]; then echo "$d"; return 0; fi
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
  return 1
}

# STATE/cluster: id, net, hosts. Names: namespace "<id>-<host>", host-side
# veth "<id><host>" (<= 15 chars), bridge "<id>br".
load() {
  STATE=$1
  [[ -f $STATE/cluster ]] || die "no cluster at $STATE"
  # shellcheck disable=SC1091
  source "$STATE/cluster"
}
ns() { echo "$ID-$1"; }
addr() {
  case $1 in
  db) echo "198.18.$NET.2" ;;
  s3) echo "198.18.$NET.3" ;;
  h*) echo "198.18.$NET.$((10 + ${1#h}))" ;;
  *) die "unknown host $1" ;;
  esac
}
in_ns() { local h=$1; shift; ip netns exec "$(ns "$h")" "$@"; }

add_host() {  # host
  local h=$1 n veth
  n=$(ns "$h"); veth="$ID$h"
  ip netns add "$n"
  ip link add "$veth" type veth peer name eth0 netns "$n"
  ip link set "$veth" master "${ID}br" up
  ip -n "$n" addr add "$(addr "$h")/24" dev eth0
  ip -n "$n" link set eth0 up
  ip -n "$n" link set lo up
  echo "$h" >>"$STATE/hosts.list"
}

start_pg() {
  local bin owner=postgres
  bin=$(pg_bin)
  id -u "$owner" >/dev/null 2>&1 || useradd --system --no-create-home "$owner"
  if [[ ! -d $STATE/db/data ]]; then
    mkdir -p "$STATE/db"; chown "$owner" "$STATE/db"; chmod 755 "$STATE/db"
    runuser -u "$owner" -- "$bin/initdb" -D "$STATE/db/data" -U kestrel --auth=trust -E UTF8 --no-sync \
      >"$STATE/db/initdb.log" 2>&1 || { cat "$STATE/db/initdb.log" >&2; return 1; }
    # The other namespaces reach it over the bridge (trust: a throwaway test cluster).
    echo "host all all 198.18.0.0/15 trust" >>"$STATE/db/data/pg_hba.conf"
  fi
  in_ns db runuser -u "$owner" -- "$bin/pg_ctl" -D "$STATE/db/data" -l "$STATE/db/server.log" -w -t 30 \
    -o "-c listen_addresses=$(addr db) -p 5432 -k $STATE/db -c fsync=off -c synchronous_commit=off -c max_connections=200" \
    start >/dev/null
  if [[ ! -f $STATE/db/created ]]; then
    in_ns db runuser -u "$owner" -- "$bin/createdb" -h "$(addr db)" -U kestrel kestrel
    touch "$STATE/db/created"
  fi
}

start_s3() {
  mkdir -p "$STATE/s3"
  in_ns s3 env KESTREL_SWIFT_PROXY_IP="$(addr s3)" "$repo/tests/s3/swift_fixture.sh" start "$STATE/s3" \
    >"$STATE/s3/fixture.out" 2>&1 || { cat "$STATE/s3/fixture.out" >&2; return 1; }
}

cmd_up() {
  STATE=$1; local n=$2 i
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 8 ]] || die "N must be 1..8 worker hosts"
  preflight
  mkdir -p "$STATE"
  chmod 755 "$STATE"  # the postgres user reads its data folder under it
  STATE=$(cd "$STATE" && pwd)
  ID="kc$(($$ % 100000))"; NET=$(($$ % 250 + 1))
  printf 'ID=%s\nNET=%s\nSTATE=%s\n' "$ID" "$NET" "$STATE" >"$STATE/cluster"
  : >"$STATE/hosts.list"
  # Any failure (or Ctrl-C) before the cluster is complete tears it down.
  trap 'echo "cluster: setup failed; tearing down" >&2; cmd_down "$STATE"; [[ -z ${RM_STATE:-} ]] || rm -rf "$STATE"' EXIT
  ip link add "${ID}br" type bridge
  ip addr add "198.18.$NET.1/24" dev "${ID}br"
  ip link set "${ID}br" up
  add_host db
  add_host s3
  for i in $(seq 1 "$n"); do
    add_host "h$i"
    mkdir -p "$STATE/h$i"
    # The host's own disk: a small tmpfs, so fill-disk fills it alone.
    mount -t tmpfs -o size="${DISK_MB}m" "kestrel-$ID-h$i" "$STATE/h$i"
    mkdir -p "$STATE/h$i/home"
  done
  start_pg
  start_s3
  local s3env
  s3env=$(cat "$STATE/s3/env")
  {
    echo "KESTREL_DB=postgresql://kestrel@$(addr db):5432/kestrel"
    echo "KESTREL_ARTIFACTS=s3://kestrel/cluster"
    echo "$s3env"
  } >"$STATE/env"
  # The bucket, made from the root namespace over the bridge (a SigV4 PUT;
  # curl's --aws-sigv4 cannot take Swift's "account:user" key id).
  python3 - "$STATE/env" <<'PY' || die "cannot create the bucket"
import datetime, hashlib, hmac, sys, time, urllib.error, urllib.request
env = dict(l.strip().split("=", 1) for l in open(sys.argv[1]) if "=" in l)
host = env["AWS_ENDPOINT_URL"].split("://", 1)[1]
now = datetime.datetime.now(datetime.timezone.utc)
amz, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
empty = hashlib.sha256(b"").hexdigest()
canon = f"PUT\n/kestrel\n\nhost:{host}\nx-amz-content-sha256:{empty}\nx-amz-date:{amz}\n\nhost;x-amz-content-sha256;x-amz-date\n{empty}"
scope = f"{day}/us-east-1/s3/aws4_request"
sts = f"AWS4-HMAC-SHA256\n{amz}\n{scope}\n" + hashlib.sha256(canon.encode()).hexdigest()
k = ("AWS4" + env["AWS_SECRET_ACCESS_KEY"]).encode()
for part in (day, "us-east-1", "s3", "aws4_request"):
    k = hmac.new(k, part.encode(), hashlib.sha256).digest()
sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
auth = (f"AWS4-HMAC-SHA256 Credential={env['AWS_ACCESS_KEY_ID']}/{scope}, "
        f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={sig}")
req = urllib.request.Request(env["AWS_ENDPOINT_URL"] + "/kestrel", method="PUT", data=b"",
                             headers={"x-amz-date": amz, "x-amz-content-sha256": empty, "Authorization": auth})
for i in range(20):  # bounded: Swift answers 503 until its account/container servers are up
    try:
        urllib.request.urlopen(req, timeout=10)
        break
    except urllib.error.HTTPError as e:
        if e.code != 503 or i == 19:
            raise
        time.sleep(0.5)
PY
  trap - EXIT
  cat "$STATE/env"
}

cmd_down() {
  STATE=$1
  [[ -f $STATE/cluster ]] || return 0
  # shellcheck disable=SC1091
  source "$STATE/cluster"
  local h n bin
  if [[ -f $STATE/db/data/postmaster.pid ]] && bin=$(pg_bin); then
    in_ns db runuser -u postgres -- "$bin/pg_ctl" -D "$STATE/db/data" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
  fi
  if [[ -f $STATE/hosts.list ]]; then
    while read -r h; do
      n=$(ns "$h")
      # Thaw first: a SIGKILL to a stopped process is delivered, but be sure.
      for p in $(ip netns pids "$n" 2>/dev/null); do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
    done <"$STATE/hosts.list"
    # Processes started in a namespace but not in its pid list (none expected).
    for f in "$STATE"/*/worker.pid "$STATE"/s3/*.pid; do [[ -f $f ]] && kill -KILL "$(cat "$f")" 2>/dev/null || true; done
    while read -r h; do
      ip link del "$ID$h" 2>/dev/null || true
      ip netns del "$(ns "$h")" 2>/dev/null || true
      if mountpoint -q "$STATE/$h" 2>/dev/null; then umount -l "$STATE/$h" || true; fi
    done <"$STATE/hosts.list"
  fi
  ip link del "${ID}br" 2>/dev/null || true
  rm -f "$STATE/cluster"
}

cmd_worker() {
  load "$1"; local h=$2; shift 2
  [[ $h == h* ]] || die "workers run on h1..hN, not $h"
  # The worker's host name is the cluster's name for the host unless ARGS
  # give one: every namespace shares the machine's hostname, and the
  # environment records, quarantine and `kestrel workers` go by host.
  local host=(--host "$h") a
  for a in "$@"; do [[ $a == --host || $a == --host=* ]] && host=(); done
  (
    cd "$STATE/$h"
    # shellcheck disable=SC2046
    exec ip netns exec "$(ns "$h")" env $(cat "$STATE/env") KESTREL_HOME="$STATE/$h/home" \
      "$KESTREL" worker --id "w$h" --no-webhooks "${host[@]}" "$@" >>"$STATE/$h/worker.log" 2>&1
  ) &
  echo $! >"$STATE/$h/worker.pid"
  echo $!
}

cmd_exec() {
  load "$1"; local h=$2; shift 2
  local home=()
  [[ $h == h* ]] && home=(KESTREL_HOME="$STATE/$h/home")
  # shellcheck disable=SC2046
  ip netns exec "$(ns "$h")" env $(cat "$STATE/env") "${home[@]}" "$@"
}

cmd_fault() {
  local verb=$1; load "$2"; local h=${3:-}
  case $verb in
  cut) ip link set "$ID$h" down ;;
  restore) ip link set "$ID$h" up ;;
  freeze) for p in $(ip netns pids "$(ns "$h")"); do kill -STOP "$p" 2>/dev/null || true; done ;;
  thaw) for p in $(ip netns pids "$(ns "$h")"); do kill -CONT "$p" 2>/dev/null || true; done ;;
  poweroff)
    # Every process of the host at once, no signal it can catch.
    local pids
    pids=$(ip netns pids "$(ns "$h")")
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null || true ;;
  restart-pg)
    local bin; bin=$(pg_bin)
    in_ns db runuser -u postgres -- "$bin/pg_ctl" -D "$STATE/db/data" -m fast -w -t 30 stop >/dev/null
    start_pg ;;
  restart-s3)
    in_ns s3 env KESTREL_SWIFT_PROXY_IP="$(addr s3)" "$repo/tests/s3/swift_fixture.sh" proxy "$STATE/s3" >/dev/null ;;
  fill-disk)
    # Until ENOSPC (the tmpfs is DISK_MB): bounded by the size.
    dd if=/dev/zero of="$STATE/$h/fill" bs=1M count="$DISK_MB" status=none 2>/dev/null || true ;;
  *) die "unknown fault $verb" ;;
  esac
}

cmd_run() {
  local n=$1; shift
  STATE=$(mktemp -d /tmp/kestrel-cluster.XXXXXX)
  # cmd_up tears down what it made when it fails; from then on, this does.
  RM_STATE=1
  cmd_up "$STATE" "$n" >/dev/null
  trap 'cmd_down "$STATE"; rm -rf "$STATE"' EXIT
  CLUSTER_STATE=$STATE "$@"
}

# Ctrl-C / SIGTERM end the script through its EXIT trap (the teardown).
trap 'exit 130' INT TERM
verb=${1:-}
[[ -n $verb ]] || { sed -n '2,26p' "$0"; exit 2; }
shift
case $verb in
up) cmd_up "$@" ;;
down) cmd_down "$@" ;;
run) preflight; cmd_run "$@" ;;
worker) cmd_worker "$@" ;;
exec) cmd_exec "$@" ;;
cut | restore | freeze | thaw | poweroff | restart-pg | restart-s3 | fill-disk) cmd_fault "$verb" "$@" ;;
*) die "unknown command $verb (see the top of $0)" ;;
esac
