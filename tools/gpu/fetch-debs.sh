#!/usr/bin/env bash
# tools/gpu/fetch-debs.sh [DIR]: downloads (apt-get download, no install) the
# Debian packages the GPU machine needs beside LibTorch, which has no apt and
# no network, into DIR (default .gpu/debs, ignored by git): tools/gpu-check.sh
# unpacks them with dpkg -x into a prefix there (never into /).
#   - the torch-only build (cmake/torch_only.cmake): kestrel_core's OpenSSL,
#     nlohmann_json, spdlog + fmt and yaml-cpp;
#   - the travelling trainer (KESTREL_TRAVEL_TRAINER=ON, docs/gpu.md): the
#     headers of OpenCV core + imgproc, libjpeg-turbo, libpng + zlib, SQLite,
#     libpq, CURL and pugixml, and the runtime closure of their libraries as
#     this machine's ldd resolves it (so it stays true when Debian updates).
# Prints each file's size, their total and the size of the working tree that
# travels with them (the device tool's limit is 64 MiB for both together).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu/debs}
# Not libc6, libstdc++6, libgcc-s1: the machine's own must win (they need
# glibc >= 2.34 and GLIBCXX_3.4.30, docs/gpu.md).
dev=(libssl-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  libopencv-core-dev libopencv-imgproc-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev libsqlite3-dev libpq-dev
  libcurl4-openssl-dev libpugixml-dev)
# The runtime libraries: every package holding a library that these load,
# directly or not, as resolved here.
sonames=(libssl.so.3 libcrypto.so.3 libspdlog.so.1.10 libfmt.so.9 libyaml-cpp.so.0.7 libopencv_core.so.406
  libopencv_imgproc.so.406 libjpeg.so.62 libpng16.so.16 libz.so.1 libsqlite3.so.0 libpq.so.5 libcurl.so.4
  libpugixml.so.1)
files=()
for so in "${sonames[@]}"; do
  f=$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64/ && !f {print $NF; f = 1}')
  [[ -n "$f" ]] || { echo "fetch-debs: $so is not installed here (scripts/install-deps.sh)" >&2; exit 1; }
  files+=("$f")
  while read -r dep; do files+=("$dep"); done < <(ldd "$f" | awk '/=>/ && $3 ~ /^\// {print $3}')
done
runtime=$(for f in "${files[@]}"; do
  real=$(readlink -f "$f")
  # Debian 12 merges /lib into /usr/lib; dpkg knows each file by one of the two.
  dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null ||
    { echo "fetch-debs: no package owns $real" >&2; exit 1; }
done | cut -d: -f1 | sort -u)
packages=("${dev[@]}")
for p in $runtime; do
  case $p in
    libc6 | libstdc++6 | libgcc-s1) ;;
    *) packages+=("$p") ;;
  esac
done
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
