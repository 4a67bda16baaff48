#!/usr/bin/env python3
"""Averages bench/active_learning/run.py over replicates (docs/label-audit.md
"Benchmark: active learning against random selection").

Each WORK folder is one finished run with both arms (its results.json): a
replicate with another round-0 seed set (--seed-set), or another draw of
the random arm (--select-seed) on the same round 0. Prints each
replicate's crossing (the labelled images at which the strategy reaches
random's final mAP50-95, linear between rounds, as run.py computes it) and
the same for the mean curves, and writes summary.json / summary.md into
--out when it is given.

  python3 bench/active_learning/summarize.py WORK [WORK ...] [--out DIR]
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import crossing  # noqa: E402  (the same crossing as one run's report)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work", nargs="+")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    runs = []
    for w in args.work:
        path = os.path.join(w, "results.json")
        if not os.path.exists(path):
            sys.exit(f"{path}: missing (run.py with both arms writes it)")
        with open(path) as f:
            runs.append(json.load(f))
    strategy = runs[0]["strategy"]
    if any(r["strategy"] != strategy for r in runs):
        sys.exit("the folders ran different strategies")
    lines = [f"| replicate | {strategy} mAP50-95 by round | random mAP50-95 by round | random final | "
             f"{strategy} reaches it at | share of random's images |", "|---|---|---|---|---|---|"]
    for w, r in zip(args.work, runs):
        s, q = r["curves"][strategy], r["curves"]["random"]
        need = r["strategy_images_to_reach_it"]
        lines.append(f"| {os.path.basename(w.rstrip('/'))} | " + " / ".join(f"{p['map5095']:.3f}" for p in s) +
                     " | " + " / ".join(f"{p['map5095']:.3f}" for p in q) + f" | {q[-1]['map5095']:.4f} | " +
                     ("never" if need is None else f"{need:.0f}") + " | " +
                     ("-" if need is None else f"{need / q[-1]['images']:.0%}") + " |")
    n_rounds = min(len(r["curves"][strategy]) for r in runs)
    mean = {}
    for arm in (strategy, "random"):
        mean[arm] = []
        for i in range(n_rounds):
            pts = [r["curves"][arm][i] for r in runs]
            mean[arm].append({"images": statistics.mean(p["images"] for p in pts),
                              "boxes": statistics.mean(p["boxes"] for p in pts),
                              "map5095": statistics.mean(p["map5095"] for p in pts),
                              "map50": statistics.mean(p["map50"] for p in pts)})
    target = mean["random"][-1]["map5095"]
    need = crossing(mean[strategy], target, "images")
    need_boxes = crossing(mean[strategy], target, "boxes")
    final = mean["random"][-1]["images"]
    ratio = None if need is None else need / final
    lines += ["", f"| labelled images | {strategy} mean mAP50-95 | random mean mAP50-95 | {strategy} mean boxes | "
              "random mean boxes |", "|---|---|---|---|---|"]
    for a, b in zip(mean[strategy], mean["random"]):
        lines.append(f"| {a['images']:.0f} | {a['map5095']:.4f} | {b['map5095']:.4f} | {a['boxes']:.0f} | "
                     f"{b['boxes']:.0f} |")
    verdict = (f"mean over {len(runs)} runs: random's final mAP50-95 {target:.4f} at {final:.0f} images; {strategy} "
               "reaches it at " + ("never" if need is None else f"{need:.0f} images = {ratio:.0%} of random's "
                                   f"({need_boxes:.0f} boxes = {need_boxes / mean['random'][-1]['boxes']:.0%} of "
                                   f"random's)") +
               f"; goal <= 70 %: {'met' if ratio is not None and ratio <= 0.70 else 'missed'}")
    md = "\n".join(lines) + "\n\n" + verdict + "\n"
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump({"strategy": strategy, "work": args.work, "mean": mean, "random_final_map5095": target,
                       "images_to_reach_it": need, "ratio": ratio, "goal_met": ratio is not None and ratio <= 0.70},
                      f, indent=1)
        with open(os.path.join(args.out, "summary.md"), "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
