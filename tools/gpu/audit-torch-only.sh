#!/usr/bin/env bash
# audit-torch-only.sh BUILD_DIR BINARY: fails when a KESTREL_TORCH_ONLY build
# (docs/gpu.md) used a header of a package it leaves out, or when BINARY
# needs one of their shared libraries. The header list is what the compiler
# itself recorded (ninja's deps log), so an include through any path counts.
set -euo pipefail
build=${1:?usage: audit-torch-only.sh BUILD_DIR BINARY}
bin=${2:?usage: audit-torch-only.sh BUILD_DIR BINARY}
excluded_headers='/opencv4/|/sqlite3\.h|/libpq-fe\.h|/postgresql/|/boost/|/onnx/|/google/protobuf/|/curl/|/pugixml|/CLI/|/gtest/'
excluded_libs='libopencv|libsqlite3|libpq\.|libcurl|libboost|libonnx|libprotobuf|libpugixml|libgtest'
deps=$(ninja -C "$build" -t deps)
objects=$(grep -c '^[^ ].*: #deps' <<<"$deps" || true)
if [[ "$objects" -eq 0 ]]; then
  echo "audit-torch-only: no header dependencies recorded in $build (not a Ninja build, or nothing built)" >&2
  exit 1
fi
bad=$(grep -E "$excluded_headers" <<<"$deps" | sort -u || true)
if [[ -n "$bad" ]]; then
  echo "audit-torch-only: excluded packages' headers were compiled in $build:" >&2
  echo "$bad" | head -20 >&2
  exit 1
fi
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
badlib=$(grep -E "$excluded_libs" <<<"$needed" || true)
if [[ -n "$badlib" ]]; then
  echo "audit-torch-only: $bin needs excluded libraries: $badlib" >&2
  exit 1
fi
echo "audit-torch-only: $objects objects, none compiled an excluded header; $(basename "$bin") needs: $(echo $needed)"
