#!/usr/bin/env bash
# audit-torch-only.sh [--travel] BUILD_DIR BINARY...: fails when a
# KESTREL_TORCH_ONLY build (docs/gpu.md) used a header of a package it leaves
# out, or when a BINARY needs one of their shared libraries. The header list
# is what the compiler itself recorded (ninja's deps log), so an include
# through any path counts. --travel: the KESTREL_TRAVEL_TRAINER build, which
# has the trainer's packages (OpenCV core/imgproc, libjpeg, libpng, SQLite,
# libpq, CURL, pugixml) and leaves out OpenCV's imgcodecs (GDAL), dnn,
# videoio and freetype, Boost, ONNX/protobuf, CLI11, libarchive and GTest.
set -euo pipefail
travel=0
if [[ "${1:-}" == --travel ]]; then
  travel=1
  shift
fi
build=${1:?usage: audit-torch-only.sh [--travel] BUILD_DIR BINARY...}
shift
(($# > 0)) || { echo "usage: audit-torch-only.sh [--travel] BUILD_DIR BINARY..." >&2; exit 2; }
if ((travel)); then
  excluded_headers='/opencv2/(imgcodecs|dnn|videoio|freetype|highgui)|/boost/|/onnx/|/google/protobuf/|/include/archive(_entry)?\.h|/CLI/|/gtest/'
  excluded_libs='libopencv_(imgcodecs|dnn|videoio|freetype|highgui)|libgdal|libboost|libonnx|libprotobuf|libarchive|libgtest'
else
  excluded_headers='/opencv4/|/sqlite3\.h|/libpq-fe\.h|/postgresql/|/boost/|/onnx/|/google/protobuf/|/curl/|/pugixml|/CLI/|/gtest/'
  excluded_libs='libopencv|libsqlite3|libpq\.|libcurl|libboost|libonnx|libprotobuf|libpugixml|libgtest'
fi
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
summary=""
for bin in "$@"; do
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  badlib=$(grep -E "$excluded_libs" <<<"$needed" || true)
  if [[ -n "$badlib" ]]; then
    echo "audit-torch-only: $bin needs excluded libraries: $badlib" >&2
    exit 1
  fi
  # The whole runtime closure counts too (a carried library must not pull
  # GDAL back in), less what LibTorch loads itself (Debian's libtorch links
  # OpenCV for Caffe2; the wheel's does not).
  if ((travel)) && command -v ldd >/dev/null; then
    closure=$(ldd "$bin" 2>/dev/null | awk '{print $1}')
    torchlib=$(ldd "$bin" 2>/dev/null | awk '$1 ~ /^libtorch_cpu/ {print $3}')
    if [[ -f "$torchlib" ]]; then
      closure=$(grep -vxF -f <(ldd "$torchlib" | awk '{print $1}') <<<"$closure" || true)
    fi
    badlib=$(grep -E "$excluded_libs" <<<"$closure" || true)
    if [[ -n "$badlib" ]]; then
      echo "audit-torch-only: $bin loads excluded libraries through its dependencies: $(echo $badlib)" >&2
      exit 1
    fi
    summary+="; $(basename "$bin") loads $(wc -l <<<"$closure") libraries besides LibTorch's"
  fi
  summary+="; $(basename "$bin") needs: $(echo $needed)"
done
echo "audit-torch-only$( ((travel)) && echo ' --travel'): $objects objects, none compiled an excluded header$summary"
