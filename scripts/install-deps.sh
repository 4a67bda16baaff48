#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages.
# Idempotent: does nothing when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev                       # LibTorch 1.13 (CPU): model and trainer
  libopencv-dev                      # drawing, resizing; BMP/WebP/TIFF decode (imgcodecs)
  libjpeg62-turbo-dev libpng-dev     # JPEG and PNG decode/encode (src/data/codec.cc)
  libopencv-contrib-dev              # cv::freetype: anti-aliased plot text (FreeType + HarfBuzz)
  libonnx-dev libprotobuf-dev        # ONNX 1.12 protobuf classes + checker: kestrel export (src/export)
  fonts-dejavu-core                  # DejaVu Sans, the plot font (read at run time, never downloaded)
  libsqlite3-dev libpq-dev           # metadata store
  libssl-dev                         # SHA-256, HMAC
  nlohmann-json3-dev libspdlog-dev libcli11-dev libyaml-cpp-dev libpugixml-dev
  libcurl4-openssl-dev               # webhooks
  libboost-dev                       # Boost.Beast/Asio (header-only): the HTTP server (src/server)
  libarchive-dev                     # zip uploads unpacked under limits (src/server/upload_archive.cc)
  python3                            # test tooling only (tools/soak), never the product
  swift swift-proxy swift-object swift-container swift-account  # test only: OpenStack Swift + s3api, a real S3 API for tests/s3 (~30 s)
  python3-torch                      # test tooling only: tools/gpu's PyTorch reference (ctest gpu_reference_matches_kestrel)
  chromium                           # the web UI's browser test (tests/web, playwright-core drives it)
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev           # libFuzzer + sanitizers for tools/fuzz.sh (run by test.sh); lint.sh threads
  clang-format clang-tidy            # scripts/lint.sh (CI): formatting and static analysis
  valgrind                           # ctest memcheck.predict_video: the video frames' buffers under memcheck
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
