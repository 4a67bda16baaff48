#!/usr/bin/env bash
# Installs tools/onnxruntime's npm dependencies from its committed
# package-lock.json: onnxruntime-node, the CPU ONNX Runtime that
# `kestrel export` checks every export in next to OpenCV DNN (docs/export.md).
# The package ships the CPU runtime; ONNXRUNTIME_NODE_INSTALL=skip stops its
# install script from fetching the optional GPU files.
# Idempotent: does nothing when node_modules was installed from this lock.
# Without node or npm it says so and exits 0: exports then report that the
# ONNX Runtime check did not run, and its tests skip.
set -euo pipefail
cd "$(dirname "$0")/../tools/onnxruntime"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-node-deps: node/npm not found; the ONNX Runtime export check will not run"
  exit 0
fi
stamp=node_modules/.kestrel-lock.json
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp" &&
  [ -f node_modules/onnxruntime-node/package.json ]; then
  echo "install-node-deps: onnxruntime-node already installed"
  exit 0
fi
ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
cp package-lock.json "$stamp"
node run.js --version
