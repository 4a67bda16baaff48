#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs the whole suite.
#   ./scripts/test.sh            # the default suite: tiers unit + e2e, then the fuzzers (CI)
#   ./scripts/test.sh --quick    # the unit tier only (in-process, no binary spawned), no fuzzers
#   ./scripts/test.sh -L slow    # extra ctest arguments pass through (here: the slow tier)
# Tiers are ctest labels (docs/testing.md): unit, e2e, slow.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
if [[ "${1:-}" == "--quick" ]]; then
  QUICK=1
  shift
fi
./scripts/install-deps.sh
./scripts/install-node-deps.sh   # ONNX Runtime for the export tests, the Label Studio frontend for web.label_studio (tools/)
./scripts/build.sh
BUILD_DIR="${BUILD_DIR:-build}"
# Throwaway PostgreSQL on loopback so the job-store suite runs on both
# backends (those cases skip themselves when KESTREL_TEST_PG is unset).
if [[ -z "${KESTREL_TEST_PG:-}" ]]; then
  PG_ENV=$(./scripts/pg-test-server.sh start)
  export KESTREL_TEST_PG=$(sed -n 's/^KESTREL_TEST_PG=//p' <<<"$PG_ENV")
  PG_DIR=$(sed -n 's/^KESTREL_PG_TEST_DIR=//p' <<<"$PG_ENV")
  trap './scripts/pg-test-server.sh stop "$PG_DIR"' EXIT
fi
if [[ $QUICK == 1 ]]; then
  start=$(date +%s)
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" -L unit "$@"
  echo "test: unit tier took $(( $(date +%s) - start )) s"
  exit 0
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" -LE slow "$@"
# The parsers that read untrusted bytes, under libFuzzer + ASan/UBSan, for a
# fixed number of inputs each (seeded, so a run is repeatable): 20,000 per
# target, ~3 min with the clang build on 2 cores. KESTREL_FUZZ_RUNS=0 skips.
if [[ "${KESTREL_FUZZ_RUNS:-20000}" != 0 && $# -eq 0 ]]; then
  ./tools/fuzz.sh --runs "${KESTREL_FUZZ_RUNS:-20000}"
fi
