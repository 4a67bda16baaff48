#!/usr/bin/env bash
# Builds the web UI (web/: Vue 3 + Element Plus + ECharts, Vite) into
# $BUILD_DIR/web/dist, where `kestrel serve` looks for it by default
# (docs/server.md "Web UI"). Needs Node 20 and npm; CMake never does.
#   ./scripts/build-web.sh          # npm ci when web/node_modules is missing or stale, then vite build
# npm ci runs when the installed tree was not made from the current
# web/package-lock.json; the vite build is skipped when dist is newer than
# every source file.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
if ! command -v npm >/dev/null 2>&1; then
  echo "build-web: npm not found (Node 20 + npm are needed to build the web UI)" >&2
  exit 1
fi
stamp=web/node_modules/.kestrel-package-lock.json
if [[ ! -f "$stamp" ]] || ! cmp -s web/package-lock.json "$stamp"; then
  echo "build-web: npm ci (web/node_modules is missing or older than web/package-lock.json)"
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
  cp web/package-lock.json "$stamp"
fi
mkdir -p "$BUILD_DIR/web"
out="$(cd "$BUILD_DIR/web" && pwd)/dist"
if [[ -f "$out/index.html" ]] &&
  [[ -z "$(find web/src web/public web/index.html web/vite.config.js web/package.json web/package-lock.json \
    -newer "$out/index.html" -print -quit)" ]]; then
  echo "build-web: $out is up to date"
  exit 0
fi
(cd web && npx --no-install vite build --outDir "$out" --emptyOutDir --logLevel warn)
echo "build-web: built $out ($(du -sk "$out" | cut -f1) KiB)"
