#!/usr/bin/env bash
# Installs the npm dependencies of the tools under tools/ from their
# committed package-lock.json files:
# - tools/onnxruntime: onnxruntime-node, the CPU ONNX Runtime that
#   `kestrel export` checks every export in next to OpenCV DNN
#   (docs/export.md). The package ships the CPU runtime;
#   ONNXRUNTIME_NODE_INSTALL=skip stops its install script from fetching the
#   optional GPU files.
# - tools/label-studio-frontend: the Label Studio frontend's prebuilt bundle
#   (@heartexlabs/label-studio 1.4.0, one package, ~16 MB) that
#   tests/web/label_studio.test.mjs renders Kestrel's pre-annotations in
#   (docs/testing.md). It runs no install script.
# Idempotent: does nothing for a tool whose node_modules was installed from
# its current lock (a stamp: node_modules/.kestrel-lock.json).
# Without node or npm it says so and exits 0: exports then report that the
# ONNX Runtime check did not run, and the tests that need these skip.
set -euo pipefail
tools="$(cd "$(dirname "$0")/../tools" && pwd)"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-node-deps: node/npm not found; the ONNX Runtime export check will not run and the Label Studio browser test will skip"
  exit 0
fi
# installed DIR PACKAGE: node_modules of DIR came from its current lock.
installed() {
  local stamp="$1/node_modules/.kestrel-lock.json"
  [ -f "$stamp" ] && cmp -s "$1/package-lock.json" "$stamp" && [ -f "$1/node_modules/$2/package.json" ]
}

cd "$tools/onnxruntime"
if installed . onnxruntime-node; then
  echo "install-node-deps: onnxruntime-node already installed"
else
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
  cp package-lock.json node_modules/.kestrel-lock.json
  node run.js --version
fi

cd "$tools/label-studio-frontend"
if installed . @heartexlabs/label-studio; then
  echo "install-node-deps: @heartexlabs/label-studio already installed"
else
  npm ci --no-audit --no-fund --ignore-scripts
  cp package-lock.json node_modules/.kestrel-lock.json
  echo "install-node-deps: @heartexlabs/label-studio $(node -p 'require("@heartexlabs/label-studio/package.json").version') installed"
fi
