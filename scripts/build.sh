#!/usr/bin/env bash
# Configures and builds Kestrel into ./build (override with BUILD_DIR).
# KESTREL_WERROR=ON makes warnings in Kestrel's own code errors (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
  -DKESTREL_WERROR="${KESTREL_WERROR:-OFF}" >/dev/null
# Torch translation units need ~1 GB each to compile; 2 jobs fit everywhere.
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
