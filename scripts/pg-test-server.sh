#!/usr/bin/env bash
# A throwaway PostgreSQL server for the store tests (loopback only, trust auth,
# fsync off: never for real data).
#
#   scripts/pg-test-server.sh start   # prints two lines:
#       KESTREL_TEST_PG=postgresql://kestrel@127.0.0.1:PORT/kestrel_test
#       KESTREL_PG_TEST_DIR=/tmp/kestrel-pg.XXXX
#   scripts/pg-test-server.sh stop [DIR]   # DIR defaults to $KESTREL_PG_TEST_DIR
#
# Installs postgresql with apt when missing. As root, the cluster runs as the
# `postgres` user (initdb refuses root); the data, socket and log live in DIR.
set -euo pipefail

find_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -n "$d" && -x "$d/initdb" ]]; then echo "$d"; return; fi
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
  echo ""
}

as_owner() {  # run a command as the cluster owner
  if [[ $(id -u) -eq 0 ]]; then runuser -u "$OWNER" -- "$@"; else "$@"; fi
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  BIN=$(find_bin)
  if [[ -z "$BIN" ]]; then
    echo "pg-test-server: installing postgresql" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2
    BIN=$(find_bin)
  fi
  [[ -n "$BIN" ]] || { echo "pg-test-server: no initdb found" >&2; exit 1; }
  OWNER=$(id -un)
  if [[ $(id -u) -eq 0 ]]; then
    OWNER=postgres
    id -u "$OWNER" >/dev/null 2>&1 || useradd --system --no-create-home "$OWNER"
  fi
  DIR=$(mktemp -d /tmp/kestrel-pg.XXXXXX)
  chmod 755 "$DIR"
  [[ $(id -u) -eq 0 ]] && chown "$OWNER" "$DIR"
  as_owner "$BIN/initdb" -D "$DIR/data" -U kestrel --auth=trust -E UTF8 --no-sync >"$DIR/initdb.log" 2>&1 ||
    { cat "$DIR/initdb.log" >&2; exit 1; }
  local port
  for port in $(seq 25432 25532); do
    port_free "$port" || continue
    if as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
        start >/dev/null 2>&1; then
      echo "$port" >"$DIR/port"
      echo "$BIN" >"$DIR/bin"
      echo "$OWNER" >"$DIR/owner"
      as_owner "$BIN/createdb" -h 127.0.0.1 -p "$port" -U kestrel kestrel_test
      echo "KESTREL_TEST_PG=postgresql://kestrel@127.0.0.1:$port/kestrel_test"
      echo "KESTREL_PG_TEST_DIR=$DIR"
      return
    fi
  done
  cat "$DIR/server.log" >&2 || true
  echo "pg-test-server: could not start a server" >&2
  exit 1
}

stop() {
  DIR="${1:-${KESTREL_PG_TEST_DIR:-}}"
  [[ -n "$DIR" && -f "$DIR/bin" ]] || { echo "pg-test-server: usage: stop DIR" >&2; exit 2; }
  BIN=$(cat "$DIR/bin")
  OWNER=$(cat "$DIR/owner")
  as_owner "$BIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$DIR"
}

case "${1:-}" in
  start) start ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: $0 start | stop [DIR]" >&2; exit 2 ;;
esac
