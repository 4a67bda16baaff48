#!/usr/bin/env python3
"""Contention benchmark (issue 30, docs/speed.md "Contention"): how much
slower does a training get beside one busy process, and do two trainings at
once on a worker take longer than one after the other?

Drives the CLI only, on a synthetic shapes set (`kestrel dataset synth`,
--images at --imgsz px, no val split). For each variant (a set of
environment variables and train keys, --variant) and each round, in this
order so the variants interleave and share the machine's drift:

  idle   one `kestrel train` alone
  busy   the same beside one `python3 -c "while True: pass"`
  then, per variant:
  seq    two train jobs on `kestrel worker --slots 1 --exit-when-idle`
  pair   two train jobs on `kestrel worker --slots 2 --exit-when-idle`
         (on 2 cores each slot is pinned to one core, docs/speed.md)

A training's speed is the median of its epochs' seconds after the first
(results.csv `time`, val=false, plots=false); seq and pair are the worker's
wall seconds for both jobs. Printed: seconds/epoch per variant and scenario,
busy/idle (goal <= 2.0) and pair/seq (goal <= 1.15), and the `torch
threads:` / `threads policy:` lines the trainer printed. The reference
trainer's column of the issue's table is not measured here (it is not
installable on the build machine).

  nice -n 10 python3 bench/contention/run.py [--build build] [--work DIR]
      [--images 300] [--imgsz 128] [--batch 16] [--epochs 4] [--model n]
      [--rounds 1] [--scenarios idle,busy,seq,pair]
      [--variant NAME=KEY=VAL,KEY=VAL ...]

--variant: UPPERCASE keys are environment variables of the trainer (or of
the worker, whose attempts inherit them), lowercase ones train keys; the
default set is `default` (the build's own defaults), `stock` (libgomp's
own spin count, a fixed threads=2 and workers=2: the behaviour before issue 30's
changes; on a machine with other than 2 usable CPUs pass your own) and
`spin1k` (GOMP_SPINCOUNT=1000, the default before OMP_WAIT_POLICY=PASSIVE). E.g.
  --variant default= --variant spin10k=GOMP_SPINCOUNT=10000 --variant t1=threads=1
Writes results.json and commands.log into the work folder.
"""
import argparse
import csv
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

DEFAULT_VARIANTS = ["default=", "stock=GOMP_SPINCOUNT=300000,threads=2,workers=2", "spin1k=GOMP_SPINCOUNT=1000"]


def parse_variant(text):
    name, _, spec = text.partition("=")
    if not name:
        sys.exit(f"--variant {text!r}: NAME=KEY=VAL,... expected")
    env, keys = {}, []
    for item in filter(None, spec.split(",")):
        k, eq, v = item.partition("=")
        if not eq or not k:
            sys.exit(f"--variant {text!r}: {item!r} is not KEY=VAL")
        if k.isupper():
            env[k] = v
        else:
            keys.append(f"{k}={v}")
    return {"name": name, "env": env, "keys": keys, "spec": spec}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--work", default="")
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--imgsz", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=4, help=">= 2: the first epoch is not counted")
    ap.add_argument("--model", default="n")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--scenarios", default="idle,busy,seq,pair")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=KEY=VAL,... (repeatable; default: " + " ".join(DEFAULT_VARIANTS) + ")")
    args = ap.parse_args()
    if args.epochs < 2:
        sys.exit("--epochs must be >= 2 (the first epoch is not counted)")
    variants = [parse_variant(v) for v in (args.variant or DEFAULT_VARIANTS)]
    scenarios = [s for s in args.scenarios.split(",") if s]
    for s in scenarios:
        if s not in ("idle", "busy", "seq", "pair"):
            sys.exit(f"--scenarios: unknown scenario {s!r}")

    kestrel = os.path.abspath(os.path.join(args.build, "src/cli/kestrel"))
    work = os.path.abspath(args.work or f"/tmp/kestrel-contention-{os.getpid()}")
    os.makedirs(work, exist_ok=True)
    home = os.path.join(work, "home")
    base_env = dict(os.environ, KESTREL_HOME=home)
    log = open(os.path.join(work, "commands.log"), "a")
    print("command: nice -n 10 python3 bench/contention/run.py " + " ".join(
        ([f"--build {args.build}"] if args.build != "build" else []) +
        [f"--images {args.images} --imgsz {args.imgsz} --batch {args.batch} --epochs {args.epochs}",
         f"--model {args.model} --rounds {args.rounds} --scenarios {','.join(scenarios)}"] +
        [f"--variant {v['name']}={v['spec']}" for v in variants]), flush=True)
    print(f"machine: {os.cpu_count()} CPUs, affinity {len(os.sched_getaffinity(0))}, "
          f"load {os.getloadavg()[0]:.2f} at start", flush=True)

    def run(cmd, env, capture=True):
        log.write(" ".join(cmd) + "\n")
        log.flush()
        r = subprocess.run(cmd, env=env, cwd=work, stdout=subprocess.PIPE if capture else log, stderr=log,
                           text=True)
        if r.returncode != 0:
            sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{(r.stdout or '')[-2000:]}")
        return r.stdout

    synth = os.path.join(work, "synth")
    if not os.path.isdir(synth):
        run([kestrel, "dataset", "synth", synth, f"images={args.images}", "classes=3", f"imgsz={args.imgsz}",
             "seed=7", "val_fraction=0"], base_env)
        run([kestrel, "dataset", "import", synth, "--name", "contention"], base_env)

    common = ["data=contention", f"model={args.model}", f"imgsz={args.imgsz}", f"batch={args.batch}",
              f"epochs={args.epochs}", "val=false", "plots=false", "pretrained=false"]
    counter = [0]

    def epoch_seconds(results_csv):
        with open(results_csv) as f:
            times = [float(row["time"]) for row in csv.DictReader(f, skipinitialspace=True)]
        per = [b - a for a, b in zip([0.0] + times, times)]
        return statistics.median(per[1:]), per

    def policy_lines(text):
        return [l.strip() for l in text.splitlines() if "threads" in l and ("torch threads" in l or "policy" in l)]

    def train(v):
        counter[0] += 1
        name = f"r{counter[0]}"
        out = run([kestrel, "train", *common, *v["keys"], f"seed={counter[0]}", f"project={work}/runs",
                   f"name={name}", "exist_ok=true"], dict(base_env, **v["env"]))
        med, per = epoch_seconds(os.path.join(work, "runs", name, "results.csv"))
        return {"median_s": med, "epochs_s": per, "policy": policy_lines(out)}

    def worker(v, slots):
        env = dict(base_env, **v["env"])
        ids = []
        for _ in range(2):
            counter[0] += 1
            out = run([kestrel, "--json", "submit", *common, *v["keys"], f"seed={counter[0]}"], env)
            ids.append(str(json.loads(out)["job_id"]))
        t = time.monotonic()
        run([kestrel, "worker", "--slots", str(slots), "--exit-when-idle", "--usage-s", "0"], env, capture=False)
        wall = time.monotonic() - t
        meds, lines = [], []
        for jid in ids:
            for res in glob.glob(os.path.join(home, "jobs", jid, "**", "results.csv"), recursive=True):
                meds.append(epoch_seconds(res)[0])
            for lg in glob.glob(os.path.join(home, "jobs", jid, "attempt-*.log")):
                lines += policy_lines(open(lg, errors="replace").read())
        return {"wall_s": wall, "median_s_each": meds, "policy": sorted(set(lines))}

    results = {v["name"]: {s: [] for s in scenarios} for v in variants}
    for rnd in range(args.rounds):
        for v in variants:
            if "idle" in scenarios:
                r = train(v)
                results[v["name"]]["idle"].append(r)
                print(f"round {rnd + 1} {v['name']:>10} idle  {r['median_s']:.2f} s/epoch  {r['policy']}", flush=True)
            if "busy" in scenarios:
                spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                try:
                    r = train(v)
                finally:
                    spin.kill()
                    spin.wait()
                results[v["name"]]["busy"].append(r)
                print(f"round {rnd + 1} {v['name']:>10} busy  {r['median_s']:.2f} s/epoch  {r['policy']}", flush=True)
        for v in variants:
            for s, slots in (("seq", 1), ("pair", 2)):
                if s in scenarios:
                    r = worker(v, slots)
                    results[v["name"]][s].append(r)
                    print(f"round {rnd + 1} {v['name']:>10} {s:<5} {r['wall_s']:.1f} s for both "
                          f"(s/epoch each {[round(m, 2) for m in r['median_s_each']]})  {r['policy']}", flush=True)

    def med(v, s, key):
        xs = [r[key] for r in results[v][s]]
        return statistics.median(xs) if xs else None

    print(f"\nload {os.getloadavg()[0]:.2f} at the end")
    print("| variant | idle s/epoch | busy s/epoch | busy/idle (goal <= 2.0) | seq s | pair s | pair/seq (goal <= 1.15) |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for v in variants:
        n = v["name"]
        idle, busy = med(n, "idle", "median_s") if "idle" in scenarios else None, \
            med(n, "busy", "median_s") if "busy" in scenarios else None
        seq, pair = med(n, "seq", "wall_s") if "seq" in scenarios else None, \
            med(n, "pair", "wall_s") if "pair" in scenarios else None
        f = lambda x, d=2: "—" if x is None else f"{x:.{d}f}"
        ratio = lambda a, b: None if a is None or b is None else a / b
        summary[n] = {"idle": idle, "busy": busy, "busy_over_idle": ratio(busy, idle), "seq": seq, "pair": pair,
                      "pair_over_seq": ratio(pair, seq), "spec": v["spec"]}
        print(f"| {n} (`{v['spec']}`) | {f(idle)} | {f(busy)} | {f(ratio(busy, idle))} | {f(seq, 1)} | "
              f"{f(pair, 1)} | {f(ratio(pair, seq))} |")
    print("reference trainer: not measured (not installable on this machine)")
    with open(os.path.join(work, "results.json"), "w") as fo:
        json.dump({"args": vars(args), "summary": summary, "runs": results}, fo, indent=1)
    print(f"results: {os.path.join(work, 'results.json')}")
    shutil.rmtree(os.path.join(work, "runs"), ignore_errors=True)


if __name__ == "__main__":
    main()
