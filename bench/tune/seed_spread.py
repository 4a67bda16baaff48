#!/usr/bin/python3
"""How much a 30-seed median moves with the seeds (docs/tune.md "Benchmark").

Reads tune_bench's curves for many seeds and prints, per function, the
median simple regret at the last trial over all seeds (sequential TPE and
the constant liar with 4 in flight, and their ratio), the spread of the
medians over consecutive blocks of 30 seeds (the benchmark's size), and
what sequential TPE reaches 3 and 6 trials earlier - a liar run's last
suggestions are made without the last 3 results, so that ratio is roughly
what 4 trials in flight must cost. Usage:

    build/bench/tune/tune_bench /tmp/kestrel_600.json 600 60
    python3 bench/tune/seed_spread.py /tmp/kestrel_600.json
"""
import json
import statistics
import sys


def main():
    doc = json.load(open(sys.argv[1]))
    block = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    first, trials = doc.get("first_seed", 0), doc["trials"]
    print(f"seeds {first}-{first + doc['seeds'] - 1}, blocks of {block}, regret after {trials} trials")
    for name, methods in doc["curves"].items():
        seq, par = methods["tpe"], methods["tpe_liar4"]
        at = lambda curves, t: [c[t - 1] for c in curves]
        med = lambda curves, t: statistics.median(at(curves, t))
        blocks = range(0, len(seq) - block + 1, block)
        seq_blocks = [statistics.median(at(seq[i:i + block], trials)) for i in blocks]
        ratio_blocks = [statistics.median(at(par[i:i + block], trials)) / seq_blocks[k] for k, i in enumerate(blocks)]
        s, p = med(seq, trials), med(par, trials)
        print(f"{name}: tpe {s:.4g}, liar x4 {p:.4g} ({p / s:.2f}x); "
              f"tpe {trials - 3} / {trials} trials {med(seq, trials - 3) / s:.2f}x, {trials - 6} / {trials} {med(seq, trials - 6) / s:.2f}x")
        print(f"  {len(seq_blocks)} blocks: tpe median {min(seq_blocks):.4g} to {max(seq_blocks):.4g} "
              f"(first block {seq_blocks[0]:.4g}); liar/tpe {min(ratio_blocks):.2f} to {max(ratio_blocks):.2f} "
              f"(first block {ratio_blocks[0]:.2f}), above 1.1 in {sum(r > 1.1 for r in ratio_blocks)}")


if __name__ == "__main__":
    main()
