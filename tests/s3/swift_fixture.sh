#!/usr/bin/env bash
# A one-node OpenStack Swift with the in-tree s3api middleware and a tempauth
# user, on 127.0.0.1, for the S3 store's E2E test (tests/s3/s3_swift_test.cc).
# Signatures are really checked (s3api + tempauth), so this tests the SigV4
# signer against a real S3 API.
#
#   swift_fixture.sh start DIR   -> exit 0 and DIR/env (AWS_* lines, PROXY_PID)
#                                   exit 77 when Swift is not installed
#   swift_fixture.sh stop DIR    -> kills the servers started for DIR
#   swift_fixture.sh proxy DIR   -> (re)starts only the proxy (fault tests)
#
# KESTREL_SWIFT_PROXY_IP (default 127.0.0.1): the address the S3 endpoint
# (the proxy) listens on; tools/cluster gives it the namespace's address so
# other namespaces reach it. The storage servers stay on 127.0.0.1.
#
# Install (Debian 12, ~30 s): apt-get install -y swift swift-proxy swift-object
#   swift-container swift-account
# Storage lives in DIR/srv (xattrs needed: ext4/xfs/tmpfs >= 6.6 have them).
set -euo pipefail
cmd=${1:?usage: swift_fixture.sh start|stop|proxy DIR}
dir=${2:?usage: swift_fixture.sh start|stop|proxy DIR}
proxy_ip=${KESTREL_SWIFT_PROXY_IP:-127.0.0.1}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_proxy() {
  swift-proxy-server "$dir/proxy.conf" >"$dir/proxy.log" 2>&1 &
  echo $! >"$dir/proxy.pid"
  for _ in $(seq 1 100); do
    if curl -s -o /dev/null "http://$proxy_ip:$(cat "$dir/proxy.port")/healthcheck"; then return 0; fi
    sleep 0.1
  done
  echo "swift proxy did not come up; see $dir/proxy.log" >&2
  return 1
}

case "$cmd" in
stop)
  for f in "$dir"/*.pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
  done
  exit 0 ;;
proxy)
  if [ -f "$dir/proxy.pid" ]; then kill "$(cat "$dir/proxy.pid")" 2>/dev/null || true; fi
  for _ in $(seq 1 50); do kill -0 "$(cat "$dir/proxy.pid")" 2>/dev/null || break; sleep 0.1; done
  start_proxy
  exit 0 ;;
start) ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac

for b in swift-proxy-server swift-object-server swift-container-server swift-account-server swift-ring-builder; do
  if ! command -v "$b" >/dev/null; then echo "SKIP: $b not installed (apt-get install swift swift-proxy swift-object swift-container swift-account)"; exit 77; fi
done
if [ ! -f /etc/swift/swift.conf ]; then echo "SKIP: /etc/swift/swift.conf missing (the swift package installs it)"; exit 77; fi

mkdir -p "$dir/srv/d1" "$dir/rings" "$dir/run"
user=$(id -un)
a_port=$(free_port); c_port=$(free_port); o_port=$(free_port); p_port=$(free_port)
echo "$p_port" >"$dir/proxy.port"

build_ring() {  # name port: one device, one replica (rebalance exits 1 on a warning)
  swift-ring-builder "$dir/rings/$1.builder" create 4 1 1 >/dev/null
  swift-ring-builder "$dir/rings/$1.builder" add "r1z1-127.0.0.1:$2/d1" 1 >/dev/null
  swift-ring-builder "$dir/rings/$1.builder" rebalance >/dev/null || true
}
build_ring account "$a_port" & build_ring container "$c_port" & build_ring object "$o_port" &
wait
for ring in account container object; do
  [ -f "$dir/rings/$ring.ring.gz" ] || { echo "swift-ring-builder made no $ring ring" >&2; exit 1; }
done

common="[DEFAULT]
swift_dir = $dir/rings
devices = $dir/srv
mount_check = false
workers = 0
user = $user
log_name = kestrel-swift
log_facility = LOG_LOCAL0
log_level = WARNING
"
for ring in account container object; do
  case $ring in account) port=$a_port ;; container) port=$c_port ;; object) port=$o_port ;; esac
  cat >"$dir/$ring.conf" <<CONF
$common
bind_ip = 127.0.0.1
bind_port = $port

[pipeline:main]
pipeline = $ring-server

[app:$ring-server]
use = egg:swift#$ring
CONF
done

cat >"$dir/proxy.conf" <<CONF
$common
bind_ip = $proxy_ip
bind_port = $p_port

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:copy]
use = egg:swift#copy
# tempauth needs a cache object; without a memcached its writes are dropped,
# so every S3 request is authenticated from its signature alone.
[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:1
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo

[filter:s3api]
use = egg:swift#s3api
location = us-east-1
s3_acl = false
# Small parts for fast tests (AWS's minimum is 5 MiB).
min_segment_size = 1024

[filter:tempauth]
use = egg:swift#tempauth
user_kestrel_tester = testing .admin
CONF

for ring in account container object; do
  "swift-$ring-server" "$dir/$ring.conf" >"$dir/$ring.log" 2>&1 &
  echo $! >"$dir/$ring.pid"
done
start_proxy
cat >"$dir/env" <<ENV
AWS_ENDPOINT_URL=http://$proxy_ip:$p_port
AWS_REGION=us-east-1
AWS_ACCESS_KEY_ID=kestrel:tester
AWS_SECRET_ACCESS_KEY=testing
ENV
echo "swift s3api on http://$proxy_ip:$p_port"
