#!/usr/bin/env bash
# p50/p95 latency of the Label Studio ML backend's POST /ls/predict, one
# 640-px image per request (docs/server.md "Label Studio ML backend"):
# registers WEIGHTS in a scratch Kestrel home, exports them (verified ONNX,
# imgsz 640), starts `kestrel serve --ls-model` with the image folder as the
# local-files root and sends N predict requests, one task each, in turn.
#
#   tools/ls-bench.sh [WEIGHTS] [IMAGE_DIR] [N]
#   (defaults: the shared yolov8n nc3 reference weights; 20 synthetic 640x640
#   JPEGs from `kestrel dataset synth`; 50)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
kestrel=${KESTREL:-$here/build/src/cli/kestrel}
weights=${1:-$here/../shared/reference/yolov8n_nc3_weights.safetensors}
images=${2:-}
n=${3:-50}
work=$(mktemp -d)
server=
cleanup() {
  if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
k() { "$kestrel" --home "$work/home" "$@"; }

if [[ -z $images ]]; then
  k dataset synth "$work/synth" images=20 imgsz=640 val_fraction=0 >/dev/null
  images=$(dirname "$(find "$work/synth" -name '*.jpg' -print -quit)")
fi
k models register "$weights" --name lsbench >/dev/null
k export model=lsbench@v1 imgsz=640 format=onnx output="$work/lsbench.onnx" >/dev/null
token=$(k --json token create --name lsbench | sed -n 's/.*"token": *"\([^"]*\)".*/\1/p')
k serve --port 0 --ls-model lsbench@v1 --ls-local-files-root "$images" >"$work/serve.out" 2>"$work/serve.err" &
server=$!
for _ in $(seq 1 300); do
  grep -q "listening on" "$work/serve.out" 2>/dev/null && break
  sleep 0.1
done
url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$work/serve.out")
[[ -n $url ]] || { cat "$work/serve.err" >&2; exit 1; }

mapfile -t files < <(cd "$images" && ls | grep -iE '\.(jpg|jpeg|png)$' | sort)
: >"$work/times"
for ((i = 0; i <= n; i++)); do
  f=${files[$((i % ${#files[@]}))]}
  body="{\"tasks\": [{\"id\": $i, \"data\": {\"image\": \"/data/local-files/?d=$f\"}}]}"
  t=$(curl -s -o "$work/reply" -w '%{http_code} %{time_total}' -H "Authorization: Token $token" \
    -H 'Content-Type: application/json' --data "$body" "$url/ls/predict")
  [[ ${t%% *} == 200 ]] || { echo "request $i: $t $(head -c 300 "$work/reply")" >&2; exit 1; }
  ((i == 0)) || echo "${t#* }" >>"$work/times"  # the first one warms the network up
done
sort -n "$work/times" | awk -v n="$n" '{ t[NR] = $1 * 1000 } END {
  p50 = t[int((NR + 1) * 0.50)]; p95 = t[int(NR * 0.95 + 0.5)];
  printf "POST /ls/predict, one image per request, %d requests: p50 %.0f ms, p95 %.0f ms, max %.0f ms\n", NR, p50, p95, t[NR] }'
