#!/usr/bin/env bash
# tools/gpu/fetch-debs.sh [DIR]: downloads (apt-get download, no install) the
# Debian packages the torch-only build (cmake/torch_only.cmake) needs beside
# LibTorch — kestrel_core's OpenSSL, nlohmann_json, spdlog + fmt and yaml-cpp,
# headers and shared libraries — into DIR (default .gpu/debs, ignored by git),
# for the GPU machine, which has no apt and no network: tools/gpu-check.sh
# unpacks them with dpkg -x into a prefix there (never into /). Prints each
# file's size, their total and the size of the working tree that travels with
# them (the device tool's limit is 64 MiB for both together; docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu/debs}
# -dev packages and the runtime libraries their .so links point to; not libc6,
# libstdc++6, libgcc-s1 (the machine's own are newer and must win).
packages=(libssl-dev libssl3 nlohmann-json3-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libyaml-cpp-dev
  libyaml-cpp0.7)
mkdir -p "$dir"
rm -f "$dir"/*.deb
(cd "$dir" && apt-get download "${packages[@]}")
# "1%3a1.10" (an epoch in the name): plain names for the device tool's transfer.
for f in "$dir"/*%3a*.deb; do [[ -e "$f" ]] && mv "$f" "${f//%3a/_}"; done
total=0
for f in "$dir"/*.deb; do
  s=$(stat -c %s "$f")
  total=$((total + s))
  printf '%10d  %s\n' "$s" "$(basename "$f")"
done
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null |
  awk '{t += $1} END {print t + 0}')
printf '%10d  total of %d packages in %s (%.1f MiB)\n' "$total" "${#packages[@]}" "$dir" "$(echo "$total / 1048576" | bc -l)"
printf '%10d  working tree that travels (tracked + untracked not ignored: %.1f MiB)\n' "$tree" \
  "$(echo "$tree / 1048576" | bc -l)"
printf '%10d  together, of the 64 MiB limit (%.1f MiB)\n' "$((total + tree))" "$(echo "($total + $tree) / 1048576" | bc -l)"
