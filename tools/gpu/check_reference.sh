#!/usr/bin/env bash
# check_reference.sh TRAIN_STEP_BENCH: the ctest
# gpu_reference_matches_kestrel (docs/gpu.md). tools/gpu/reference_throughput.py
# must build the same architecture as Kestrel: its parameter count for
# yolov8n/s/m (nc 80) must equal train_step_bench's. Its loss must give the
# reference implementation's loss items, total and head-map gradients on the
# fixture Kestrel's own loss test uses (tests/train/data/
# yolov8n_nc3_forward_loss.safetensors, 1e-5 relative). Then one tiny
# training step of each (n, 64 px, batch 2, CPU) must give a finite loss and
# images/s, and the side-by-side table must pair them. Skipped (77) when
# /usr/bin/python3 has no torch.
set -euo pipefail
bench=${1:?usage: check_reference.sh TRAIN_STEP_BENCH}
py=${GPU_REFERENCE_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
fixture=$here/../../tests/train/data/yolov8n_nc3_forward_loss.safetensors
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $py has no torch (Debian: apt-get install python3-torch)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bench" params_only=true models=n,s,m nc=80 >"$tmp/k.jsonl"
"$py" "$here/reference_throughput.py" --params-only --models n,s,m --nc 80 >"$tmp/r.jsonl"
"$bench" models=n precisions=fp32 device=cpu imgsz=64 batch=2 iterations=1 warmup=1 threads=2 >"$tmp/kb.jsonl"
"$py" "$here/reference_throughput.py" --models n --precisions fp32 --device cpu --imgsz 64 --batch 2 \
  --iterations 1 --warmup 1 --threads 2 >"$tmp/rb.jsonl"
"$py" "$here/compare_throughput.py" --kestrel "$tmp/kb.jsonl" --reference "$tmp/rb.jsonl" --json "$tmp/t.json"
"$py" - "$tmp" "$here" "$fixture" <<'PY'
import json, math, struct, sys
import torch
d, here, fixture = sys.argv[1:4]
sys.path.insert(0, here)
import reference_throughput as ref
load = lambda n: [json.loads(l) for l in open(d + "/" + n)]
k = {j["model"]: j["params"] for j in load("k.jsonl")}
r = {j["model"]: j["params"] for j in load("r.jsonl")}
bad = 0
for m in "nsm":
    same = k.get(m) == r.get(m)
    print("yolov8%s: kestrel %s, pytorch %s parameters%s" % (m, k.get(m), r.get(m), "" if same else "  MISMATCH"))
    bad += not same
for name in ("kb.jsonl", "rb.jsonl"):
    (j,) = load(name)
    ok = "error" not in j and j.get("images_per_s", 0) > 0 and math.isfinite(j.get("loss", float("nan")))
    print("%s: %s images/s %s, loss %s" % (j["impl"], j["model"], j.get("images_per_s"), j.get("loss", j.get("error"))))
    bad += not ok
# The loss on the reference fixture (safetensors: 8-byte header length, JSON header, F32 data).
raw = open(fixture, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header.pop("__metadata__", None)
t = {}
for k, v in header.items():
    a, b = v["data_offsets"]
    t[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).view(v["shape"])
maps = [t[k].clone().requires_grad_() for k in ("train_p3", "train_p4", "train_p5")]
h, w = t["input"].shape[2:]
total, items = ref.detection_loss(maps, 3, t["batch_idx"], t["cls"], t["bboxes"], (h, w))
total.backward()
def rel(x, y):
    return float((x - y).abs().max() / y.abs().max().clamp(min=1e-12))
checks = [("loss items", rel(items, t["loss_items"])), ("loss total", rel(total.detach().view(1), t["loss_total"]))]
checks += [(g, rel(m.grad, t[g])) for m, g in zip(maps, ("grad_p3", "grad_p4", "grad_p5"))]
for name, e in checks:
    print("fixture %s: max relative difference %.2e%s" % (name, e, "" if e <= 1e-5 else "  OVER 1e-5"))
    bad += not e <= 1e-5
(row,) = json.load(open(d + "/t.json"))["rows"]
if row["ratio"] is None or not row["ratio"] > 0:
    print("table: no ratio for n fp32: %r" % row)
    bad += 1
sys.exit(1 if bad else 0)
PY
