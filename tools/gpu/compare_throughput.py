#!/usr/bin/env python3
"""Side-by-side table of train_step_bench (Kestrel) and reference_throughput.py (PyTorch eager) JSON lines.

Used by tools/gpu-check.sh (docs/gpu.md). For each model x precision in either
file: both images/s, their ratio Kestrel / PyTorch (the issue's figure: 1.00 =
as fast), both device-memory figures, and, when nvidia-smi samples were
taken during each benchmark, their mean and peak GPU utilisation. A line
with "error" or "skipped" shows that text instead of a figure. No torch
needed: runs under any python3.
"""

import argparse
import json
import os
import sys


def read_lines(path):
    rows = {}
    if not path or not os.path.exists(path):
        return rows
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                j = json.loads(line)
            except ValueError as e:
                sys.exit("%s:%d: not a JSON object (%s)" % (path, n, e))
            if "model" not in j or "precision" not in j:
                continue  # params-only lines
            rows[(j["model"], j["precision"])] = j
    return rows


def read_smi(path):
    """nvidia-smi csv 'utilization.gpu, memory.used' samples -> (mean %, max %, max MiB, n)."""
    if not path or not os.path.exists(path):
        return None
    util, mem = [], []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                util.append(int(parts[0]))
                mem.append(int(parts[1]))
    if not util:
        return None
    return {"util_mean_pct": sum(util) / len(util), "util_max_pct": max(util), "mem_max_mib": max(mem),
            "samples": len(util)}


def cell(j):
    if j is None:
        return "-"
    if "error" in j:
        return "error"
    if "skipped" in j:
        return "skipped"
    return "%.1f" % j["images_per_s"]


def gib(j, key):
    if j is None or key not in j or j[key] is None:
        return "-"
    return "%.2f" % (j[key] / 2**30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kestrel", required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--smi-kestrel")
    ap.add_argument("--smi-reference")
    ap.add_argument("--table", help="also write the table here")
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args()
    k, r = read_lines(args.kestrel), read_lines(args.reference)
    if not k and not r:
        print("compare_throughput: no results in %s or %s" % (args.kestrel, args.reference), file=sys.stderr)
        return 1
    keys = sorted(set(k) | set(r), key=lambda x: ("nsmlxt".find(x[0][-1]), x[1] != "fp32", x))
    header = "%-6s %-5s %12s %12s %8s %10s %10s %10s" % ("model", "prec", "kestrel i/s", "pytorch i/s",
                                                           "ratio", "k mem GiB", "pt mem GiB", "pt peak GiB")
    out = [header, "-" * len(header)]
    rows = []
    for key in keys:
        kj, rj = k.get(key), r.get(key)
        ratio = None
        if kj and rj and "images_per_s" in kj and "images_per_s" in rj and rj["images_per_s"] > 0:
            ratio = kj["images_per_s"] / rj["images_per_s"]
        out.append("%-6s %-5s %12s %12s %8s %10s %10s %10s" % (
            key[0], key[1], cell(kj), cell(rj), "%.2f" % ratio if ratio is not None else "-",
            gib(kj, "device_mem_used_bytes"), gib(rj, "device_mem_used_bytes"),
            gib(rj, "max_memory_allocated_bytes")))
        rows.append({"model": key[0], "precision": key[1],
                     "kestrel_images_per_s": kj.get("images_per_s") if kj else None,
                     "pytorch_images_per_s": rj.get("images_per_s") if rj else None, "ratio": ratio,
                     "kestrel_device_mem_used_bytes": kj.get("device_mem_used_bytes") if kj else None,
                     "pytorch_device_mem_used_bytes": rj.get("device_mem_used_bytes") if rj else None,
                     "pytorch_max_memory_allocated_bytes": rj.get("max_memory_allocated_bytes") if rj else None,
                     "kestrel_note": (kj.get("error") or kj.get("skipped")) if kj else "missing",
                     "pytorch_note": (rj.get("error") or rj.get("skipped")) if rj else "missing"})
    smi = {"kestrel": read_smi(args.smi_kestrel), "pytorch": read_smi(args.smi_reference)}
    for name, s in smi.items():
        if s:
            out.append("nvidia-smi during %s: utilisation mean %.0f%%, max %d%%; memory max %d MiB (%d samples)" % (
                name, s["util_mean_pct"], s["util_max_pct"], s["mem_max_mib"], s["samples"]))
    any_line = next(iter(k.values()), None) or next(iter(r.values()))
    out.append("device %s, imgsz %s, batch %s, %s timed iterations after %s warm-up; ratio = Kestrel / PyTorch" % (
        any_line.get("device"), any_line.get("imgsz"), any_line.get("batch"), any_line.get("iterations"),
        any_line.get("warmup")))
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if args.table:
        with open(args.table + ".tmp", "w") as f:
            f.write(text)
        os.replace(args.table + ".tmp", args.table)
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump({"rows": rows, "nvidia_smi": smi}, f, indent=1)
        os.replace(args.json + ".tmp", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
