#!/usr/bin/env bash
# Configures and builds Kestrel into ./build (override with BUILD_DIR).
#   ./scripts/build.sh            # everything: the CLI, every test and benchmark (~25 min cold on 2 cores)
#   ./scripts/build.sh kestrel    # only the named targets (the CLI alone: what scripts/demo.sh needs)
# KESTREL_WERROR=ON makes warnings in Kestrel's own code errors (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
  -DKESTREL_WERROR="${KESTREL_WERROR:-OFF}" >/dev/null
TARGETS=()
for t in "$@"; do TARGETS+=(--target "$t"); done
# Torch translation units need ~1 GB each to compile; 2 jobs fit everywhere.
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${TARGETS[@]}"
