#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs the whole suite.
#   ./scripts/test.sh            # everything fast (the default suite)
#   ./scripts/test.sh -L slow    # extra ctest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
BUILD_DIR="${BUILD_DIR:-build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" -LE slow "$@"
