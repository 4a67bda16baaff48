#!/usr/bin/env bash
# Configures and builds Kestrel into ./build (override with BUILD_DIR).
#   ./scripts/build.sh            # everything: the CLI, every test and benchmark (~25 min cold on 2 cores)
#   ./scripts/build.sh kestrel    # only the named targets (the CLI alone: what scripts/demo.sh needs)
# Without targets it also builds the web UI (scripts/build-web.sh, needs npm)
# into $BUILD_DIR/web/dist; without npm it says so and its browser test skips.
# KESTREL_WERROR=ON makes warnings in Kestrel's own code errors (CI does).
# CMAKE_BUILD_TYPE: Release (default, -O2) or RelWithDebInfo (-O2 -g, for a debugger).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
  -DKESTREL_WERROR="${KESTREL_WERROR:-OFF}" >/dev/null
TARGETS=()
for t in "$@"; do TARGETS+=(--target "$t"); done
# Torch translation units need ~1 GB each to compile; 2 jobs fit everywhere.
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${TARGETS[@]}"
if [[ $# -eq 0 ]]; then
  if command -v npm >/dev/null 2>&1; then
    BUILD_DIR="$BUILD_DIR" ./scripts/build-web.sh
  else
    echo "build: npm not found: the web UI is not built (kestrel serve runs without it; tests/web skips)" >&2
  fi
fi
