#!/usr/bin/env python3
"""Active-learning benchmark (issue 34, docs/label-audit.md "Which images to
label next"): does `kestrel dataset select strategy=S` reach random
selection's final mAP50-95 with fewer labels?

Drives the CLI only. A synthetic unlabelled pool whose true labels act as
the oracle (`kestrel dataset synth`): --pool mix, two kinds of shapes
images, "easy" ones (1-2 large objects) and "hard" ones (3-8 small
objects), 2:1, the test set the same mix; --pool rare, easy images whose
third class appears only in RARE of them, the test set all three classes.
A small labelled seed set drawn at random from the pool (--seed-set) trains
round 0 (model t, from scratch). Then, for the strategy and for random,
ROUNDS times: select BUDGET images from what is left of the pool with the
current model, "label" them from the true labels, train on everything
labelled so far, score it on the fixed held-out test set (`kestrel val`).
Every round's training fine-tunes the round-0 model for about the same
number of image steps (STEPS / labelled images epochs), so the only thing
that differs between two points of a curve is the labelled data: a larger
set is not also a longer training, and a later round has not had more
fine-tunes than an earlier one (--chain fine-tunes the previous round's
model instead, the first design: there the training rounds, not the
labels, made most of the gain). No validation during training (val=false),
the last weights are scored. Both arms start from the same round-0 model.

The goal: the strategy reaches random's final mAP50-95 with <= 70 % of
random's labelled images (the label count where its curve crosses that
value, linear between rounds). Prints the curve and writes results.json
and results.md into the work folder; summarize.py averages replicates.

  nice -n 10 python3 bench/active_learning/run.py [--build build] [--work DIR]
      [--pool mix|rare] [--strategy uncertainty] [--seed-set 1] [--seed-images 80]
      [--budget 40] [--rounds 3] [--steps0 8000] [--steps 4000]

About 20 min on 2 quiet cores for --pool rare (both arms); a run of one arm
(--arms) and of the other on the same --work can go side by side, and a
last run with both reads what they stored. The round-0 model gets 8000
image steps by default (100 epochs of the 80-image seed set, the
reference's default epochs): with 4000 it was undertrained (mAP50-95 0.31-
0.37 against 0.60 on the rare pool's test set) and no strategy could find
anything with it in round 1.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time


def crossing(curve, target, key):
    """The curve's `key` (images, boxes) where its mAP50-95 first reaches
    `target`, linear between rounds; None when it never does."""
    for a, b in zip(curve, curve[1:]):
        if a["map5095"] >= target:
            return a[key]
        if b["map5095"] >= target:
            return a[key] + (target - a["map5095"]) / (b["map5095"] - a["map5095"]) * (b[key] - a[key])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--work", default="")
    ap.add_argument("--strategy", default="uncertainty")
    ap.add_argument("--easy", type=int, default=480, help="easy pool images")
    ap.add_argument("--hard", type=int, default=240, help="hard pool images")
    ap.add_argument("--pool", choices=["mix", "rare"], default="mix",
                    help="mix: the easy/hard pool; rare: a pool whose third class is rare (RARE of its images "
                         "may hold it, the others have the first two classes only), a test set of all three")
    ap.add_argument("--rare", type=int, default=120,
                    help="--pool rare: pool images drawn with all 3 classes (of EASY + HARD)")
    ap.add_argument("--test", type=int, default=150, help="held-out test images (same 2:1 mix)")
    ap.add_argument("--seed-images", type=int, default=80)
    ap.add_argument("--seed-set", type=int, default=1,
                    help="the draw of the round-0 labelled images (a replicate of the whole experiment: "
                         "another seed set, another round-0 model; use its own --work)")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps0", type=int, default=8000,
                    help="round 0 image steps (from scratch; 8000 = 100 epochs of the 80-image seed set)")
    ap.add_argument("--steps", type=int, default=4000,
                    help="image steps of each later round (fine-tuning the round-0 model)")
    ap.add_argument("--chain", action="store_true",
                    help="fine-tune the previous round's model (the first design) instead of the round-0 model")
    ap.add_argument("--imgsz", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--select-seed", type=int, default=0,
                    help="round r selects with seed=SELECT_SEED + r (strategy=random's draw)")
    ap.add_argument("--select-arg", action="append", default=[],
                    help="KEY=VALUE passed to the strategy's `dataset select` (repeatable), e.g. embedding=model; "
                         "labelled=@ passes the folder of the images labelled so far")
    ap.add_argument("--tag", default="",
                    help="names the strategy's arm STRATEGY-TAG (its folders, curve and report), so variants "
                         "with other --select-arg can share a --work")
    ap.add_argument("--arms", default="",
                    help="comma list of the arms to run (default: STRATEGY,random); a run of one arm and a "
                         "run of the other on the same --work can go side by side, and a last run with both "
                         "reads what they stored and reports")
    args = ap.parse_args()

    kestrel = os.path.abspath(os.path.join(args.build, "src/cli/kestrel"))
    work = os.path.abspath(args.work or f"/tmp/kestrel-al-{os.getpid()}")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, KESTREL_HOME=os.path.join(work, "home"))
    log = open(os.path.join(work, "commands.log"), "a")
    t_start = time.time()

    def k(*a, want_json=True):
        cmd = [kestrel] + (["--json"] if want_json else []) + [str(x) for x in a]
        log.write(" ".join(cmd) + "\n")
        log.flush()
        r = subprocess.run(cmd, env=env, cwd=work, stdout=subprocess.PIPE, stderr=log, text=True)
        if r.returncode != 0:
            sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}")
        return json.loads(r.stdout) if want_json else r.stdout

    easy = ["min_objects=1", "max_objects=2", "min_object=0.25", "max_object=0.5", "background_fraction=0"]
    hard = ["min_objects=3", "max_objects=8", "min_object=0.08", "max_object=0.2", "background_fraction=0"]

    def synth(name, n, kind, seed, classes=3):
        out = os.path.join(work, "synth", name)
        if not os.path.isdir(out):
            k("dataset", "synth", out, f"images={n}", f"classes={classes}", f"imgsz={args.imgsz}", f"seed={seed}",
              "val_fraction=0", *kind)
        return out

    # image file -> (synth folder, stem): every set is synth's train split.
    def items(folder, prefix):
        names = sorted(os.listdir(os.path.join(folder, "images/train")))
        return [(prefix + n, folder, n) for n in names]

    if args.pool == "mix":
        pool = items(synth("pool_easy", args.easy, easy, 11), "e_") + \
            items(synth("pool_hard", args.hard, hard, 12), "h_")
        test = items(synth("test_easy", args.test * 2 // 3, easy, 21), "e_") + \
            items(synth("test_hard", args.test - args.test * 2 // 3, hard, 22), "h_")
        yaml_from = "pool_easy"
        special, special_word = "h_", "hard"
    else:
        # The shapes of classes 0 and 1 are drawn the same way with classes=2
        # and classes=3 (data/synth.cc: class k is shape k, one colour band),
        # so the common images are the rare ones without the third shape.
        pool = items(synth("pool_common", args.easy + args.hard - args.rare, easy, 31, classes=2), "c_") + \
            items(synth("pool_rare", args.rare, easy, 32), "r_")
        test = items(synth("test_all", args.test, easy, 41), "t_")
        yaml_from = "pool_rare"
        special, special_word = "r_", "rare-class"
    by_name = {name: (folder, n) for name, folder, n in pool}
    yaml = open(os.path.join(work, "synth", yaml_from, "data.yaml")).read()

    def boxes(folder, n):
        with open(os.path.join(folder, "labels/train", os.path.splitext(n)[0] + ".txt")) as f:
            return sum(1 for line in f if line.strip())

    def put(dst_root, split, name, folder, n, label=True):
        img = os.path.join(dst_root, "images", split, name)
        os.makedirs(os.path.dirname(img), exist_ok=True)
        shutil.copyfile(os.path.join(folder, "images/train", n), img)
        if label:  # the oracle: the synthetic set's true labels
            lab = os.path.join(dst_root, "labels", split, os.path.splitext(name)[0] + ".txt")
            os.makedirs(os.path.dirname(lab), exist_ok=True)
            shutil.copyfile(os.path.join(folder, "labels/train", os.path.splitext(n)[0] + ".txt"), lab)

    def dataset(dst, train_names):
        shutil.rmtree(dst, ignore_errors=True)
        for name in train_names:
            put(dst, "train", name, *by_name[name])
        with open(os.path.join(dst, "data.yaml"), "w") as f:
            f.write("\n".join(l for l in yaml.splitlines() if not l.startswith("val:")) + "\n")

    # The held-out test set: every image in val.
    tdir = os.path.join(work, "test")
    if not os.path.isdir(tdir):
        for name, folder, n in test:
            put(tdir, "val", name, folder, n)
        with open(os.path.join(tdir, "data.yaml"), "w") as f:
            f.write("\n".join(l for l in yaml.splitlines() if not l.startswith("train:")) + "\n")
        k("dataset", "import", tdir, "--name", "altest")

    def train(name, data_dir, labelled, epochs_steps, pretrained):
        run = os.path.join(work, "runs", name)
        last = os.path.join(run, "weights/last.safetensors")
        if os.path.exists(last):
            return last
        k("dataset", "import", data_dir, "--name", name)
        epochs = max(1, round(epochs_steps / labelled))
        extra = [f"pretrained={pretrained}"] if pretrained else []
        t = time.time()
        k("train", f"data={name}", "model=t", f"imgsz={args.imgsz}", "batch=16", "nbs=16", f"epochs={epochs}",
          "warmup_epochs=1", "close_mosaic=2", "plots=false", "val=false", "seed=1", f"threads={args.threads}",
          f"project={os.path.join(work, 'runs')}", f"name={name}", "exist_ok=true", *extra, want_json=False)
        print(f"  trained {name}: {labelled} images x {epochs} epochs in {time.time() - t:.0f} s", flush=True)
        return last

    def score(weights):
        cached = weights + ".score.json"  # done once per trained model
        if os.path.exists(cached):
            with open(cached) as f:
                return tuple(json.load(f))
        r = k("val", f"model={weights}", "data=altest", "split=val", f"imgsz={args.imgsz}")
        m = r["result"]["metrics"]
        with open(cached + ".tmp", "w") as f:
            json.dump([m["map50"], m["map5095"]], f)
        os.replace(cached + ".tmp", cached)
        return m["map50"], m["map5095"]

    rng = random.Random(args.seed_set)
    names = [name for name, _, _ in pool]
    seed_set = sorted(rng.sample(names, args.seed_images))
    if not os.path.exists(os.path.join(work, "runs/al_r0/weights/last.safetensors")):
        dataset(os.path.join(work, "data/r0"), seed_set)
    w0 = train("al_r0", os.path.join(work, "data/r0"), len(seed_set), args.steps0, None)
    m50, m5095 = score(w0)
    n_boxes = lambda labelled: sum(boxes(*by_name[x]) for x in labelled)
    point0 = {"round": 0, "images": len(seed_set), "boxes": n_boxes(seed_set), "map50": m50, "map5095": m5095,
              "hard_share": sum(x.startswith(special) for x in seed_set) / len(seed_set)}
    print(f"round 0: {point0}", flush=True)

    label = args.strategy + (f"-{args.tag}" if args.tag else "")
    curves = {}
    arms = args.arms.split(",") if args.arms else [label, "random"]
    for arm in arms:
        strategy = args.strategy if arm == label else arm
        labelled = list(seed_set)
        weights = w0
        curve = [dict(point0)]
        for r in range(1, args.rounds + 1):
            sdir = os.path.join(work, "select", f"{arm}_r{r}")
            if os.path.exists(os.path.join(sdir, "selection.json")):  # selected before
                with open(os.path.join(sdir, "selection.json")) as f:
                    sel = json.load(f)
            else:
                # What is left of the pool, as a folder of images only.
                pdir = os.path.join(work, "pool", f"{arm}_r{r}")
                shutil.rmtree(pdir, ignore_errors=True)
                left = sorted(set(names) - set(labelled))
                for name in left:
                    put(pdir, "x", name, *by_name[name], label=False)
                extra = []
                if arm == label:
                    for kv in args.select_arg:
                        if kv == "labelled=@":  # the images labelled so far, as a folder
                            ldir = os.path.join(work, "labelled", f"{arm}_r{r}")
                            shutil.rmtree(ldir, ignore_errors=True)
                            for name in labelled:
                                put(ldir, "x", name, *by_name[name], label=False)
                            kv = f"labelled={os.path.join(ldir, 'images/x')}"
                        extra.append(kv)
                sel = k("dataset", "select", f"pool={os.path.join(pdir, 'images/x')}", f"model={weights}",
                        f"strategy={strategy}", f"budget={args.budget}", f"seed={args.select_seed + r}",
                        f"imgsz={args.imgsz}", "format=yolo", f"out={sdir}", *extra)
            picked = [s["image"] for s in sel["selected"]]
            labelled += picked
            ddir = os.path.join(work, "data", f"{arm}_r{r}")
            if not os.path.exists(os.path.join(work, "runs", f"al_{arm}_r{r}", "weights/last.safetensors")):
                dataset(ddir, labelled)
            weights = train(f"al_{arm}_r{r}", ddir, len(labelled), args.steps, weights if args.chain else w0)
            m50, m5095 = score(weights)
            point = {"round": r, "images": len(labelled), "boxes": n_boxes(labelled), "map50": m50,
                     "map5095": m5095, "hard_share": sum(x.startswith(special) for x in labelled) / len(labelled),
                     "picked_hard": sum(x.startswith(special) for x in picked)}
            curve.append(point)
            print(f"{arm} round {r}: {point}", flush=True)
        curves[arm] = curve
    if set(curves) != {label, "random"}:
        print(f"arms {','.join(curves)} done; run again with both arms for the report")
        return

    # Labels the strategy needs to reach random's final mAP50-95 (linear
    # between rounds; None when it never does).
    target = curves["random"][-1]["map5095"]
    final_images = curves["random"][-1]["images"]
    final_boxes = curves["random"][-1]["boxes"]

    need = crossing(curves[label], target, "images")
    need_boxes = crossing(curves[label], target, "boxes")
    ratio = None if need is None else need / final_images
    box_ratio = None if need_boxes is None else need_boxes / final_boxes
    result = {"strategy": label, "args": vars(args), "curves": curves, "random_final_map5095": target,
              "strategy_images_to_reach_it": need, "ratio": ratio, "strategy_boxes_to_reach_it": need_boxes,
              "box_ratio": box_ratio, "goal": 0.70,
              "goal_met": ratio is not None and ratio <= 0.70, "wall_s": round(time.time() - t_start)}
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = ["| labelled images | " + label + " mAP50-95 | random mAP50-95 | " + label +
             " mAP50 | random mAP50 | boxes " + label + " / random | " + special_word + " share " + label +
             " / random |", "|---|---|---|---|---|---|---|"]
    for a, b in zip(curves[label], curves["random"]):
        lines.append(f"| {a['images']} | {a['map5095']:.4f} | {b['map5095']:.4f} | {a['map50']:.4f} | "
                     f"{b['map50']:.4f} | {a['boxes']} / {b['boxes']} | {a['hard_share']:.2f} / {b['hard_share']:.2f} |")
    verdict = (f"random's final mAP50-95 {target:.4f} at {final_images} images; {label} reaches it at "
               + ("never (within the rounds run)" if need is None else
                  f"{need:.0f} images = {ratio:.0%} of random's ({need_boxes:.0f} boxes labelled = "
                  f"{box_ratio:.0%} of random's {final_boxes})")
               + f"; goal <= 70 %: {'met' if result['goal_met'] else 'missed'}")
    md = "\n".join(lines) + "\n\n" + verdict + "\n"
    with open(os.path.join(work, "results.md"), "w") as f:
        f.write(md)
    print(md)
    print(f"work folder: {work}")


if __name__ == "__main__":
    main()
