#!/usr/bin/python3
"""Optuna's TPE beside Kestrel's on tune_bench's functions and budgets.

A development-time reference only (Debian's python3-optuna 3.1: `apt-get
install -y python3-optuna`, run with /usr/bin/python3); Kestrel never
imports Python at run time. Usage:

    build/bench/tune/tune_bench /tmp/kestrel_tune.json 30 60
    /usr/bin/python3 bench/tune/optuna_compare.py /tmp/kestrel_tune.json

Optuna runs with its 3.1 defaults, which are the settings Kestrel's TPE
documents (10 start-up trials, gamma(n) = min(ceil(0.1 n), 25), 24 EI
candidates, prior weight 1, magic clip, univariate), seed = the study
index; "optuna tpe_liar4" is constant_liar=True with 4 trials in flight
(ask 4, then tell the oldest and ask one more), as tune_bench does.
"optuna+5110 tpe" is the same Optuna 3.1 with its truncated-normal log
density corrected as upstream did in optuna/optuna#5110 (3.1's
`_truncnorm.logpdf` omits the -log(scale) term, so its Parzen estimators
are not normalized densities: optuna/optuna#5109); Kestrel's TPE uses the
normalized density of the published algorithm, so that column is the
like-for-like reference.
Prints one Markdown table: median and mean simple regret at 10/30/60, and
the goal checks (Kestrel TPE median at 60 <= 0.5x random's and <= 1.1x
Optuna's; the liar within 10% of sequential).
"""
import json
import math
import statistics
import sys

import numpy as np
import optuna
from optuna.samplers._tpe import _truncnorm
from optuna.samplers._tpe import parzen_estimator

optuna.logging.set_verbosity(optuna.logging.WARNING)


def branin(x):
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x[1] - b * x[0] ** 2 + c * x[0] - 6) ** 2 + 10 * (1 - t) * math.cos(x[0]) + 10


A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886], [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
     [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650], [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]


def hartmann6(x):
    alpha = [1.0, 1.2, 3.0, 3.2]
    return -sum(alpha[i] * math.exp(-sum(A[i][j] * (x[j] - P[i][j]) ** 2 for j in range(6))) for i in range(4))


def rosenbrock(x):
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(len(x) - 1))


PROBLEMS = {
    "branin": ([(-5, 10), (0, 15)], 0.39788735772973816, 0.0, branin),
    "hartmann6": ([(0, 1)] * 6, -3.3223680114155147, 0.0, hartmann6),
    "rosenbrock10": ([(-5, 10)] * 10, 0.0, 0.0, rosenbrock),
    "hartmann6_noisy": ([(0, 1)] * 6, -3.3223680114155147, 0.1, hartmann6),
}


_LOGPDF_31 = _truncnorm.logpdf


def _logpdf_fixed(x, a, b, loc=0, scale=1):
    return _LOGPDF_31(x, a, b, loc=loc, scale=scale) - np.log(scale)


def use_fixed_logpdf(fixed):
    # parzen_estimator calls truncnorm.logpdf through its module import.
    parzen_estimator.truncnorm.logpdf = _logpdf_fixed if fixed else _LOGPDF_31


def run_study(name, seed, trials, parallel, fixed=False):
    use_fixed_logpdf(fixed)
    bounds, minimum, noise, f = PROBLEMS[name]
    rng = np.random.RandomState(seed)
    sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=parallel > 1)
    study = optuna.create_study(sampler=sampler, direction="minimize")
    in_flight, regret = [], []
    best_obs, best_true = math.inf, math.inf

    def finish(trial):
        nonlocal best_obs, best_true
        x = [trial.params[f"x{i}"] for i in range(len(bounds))]
        truth = f(x)
        observed = truth + noise * rng.normal()
        study.tell(trial, observed)
        if observed < best_obs:
            best_obs, best_true = observed, truth
        regret.append(best_true - minimum)

    for _ in range(trials):
        if len(in_flight) >= parallel:
            finish(in_flight.pop(0))
        t = study.ask()
        for i, (lo, hi) in enumerate(bounds):
            t.suggest_float(f"x{i}", lo, hi)
        in_flight.append(t)
    while in_flight:
        finish(in_flight.pop(0))
    return regret


def main():
    kestrel = json.load(open(sys.argv[1]))
    seeds, trials = kestrel["seeds"], kestrel["trials"]
    first = kestrel.get("first_seed", 0)  # Optuna runs the same seed numbers
    checkpoints = [c for c in (10, 30, 60) if c <= trials]
    print("| function | method | " + " | ".join(f"median@{c}" for c in checkpoints) + " | " +
          " | ".join(f"mean@{c}" for c in checkpoints) + " |")
    print("|---|---|" + "---|" * (2 * len(checkpoints)))
    med60 = {}
    for name in PROBLEMS:
        rows = {f"kestrel {m}": kestrel["curves"][name][m] for m in ("random", "tpe", "tpe_liar4")}
        study_seeds = range(first, first + seeds)
        rows["optuna tpe"] = [run_study(name, s, trials, 1) for s in study_seeds]
        rows["optuna tpe_liar4"] = [run_study(name, s, trials, 4) for s in study_seeds]
        rows["optuna+5110 tpe"] = [run_study(name, s, trials, 1, fixed=True) for s in study_seeds]
        for method, curves in rows.items():
            at = {c: [curve[c - 1] for curve in curves] for c in checkpoints}
            med = [statistics.median(at[c]) for c in checkpoints]
            mean = [statistics.fmean(at[c]) for c in checkpoints]
            med60[(name, method)] = med[-1]
            print(f"| {name} | {method} | " + " | ".join(f"{v:.4g}" for v in med) + " | " +
                  " | ".join(f"{v:.4g}" for v in mean) + " |")
    print()
    print("| function | kestrel tpe / kestrel random | kestrel tpe / optuna tpe | kestrel tpe / optuna+5110 tpe |"
          " kestrel liar4 / kestrel tpe | kestrel liar4 / optuna liar4 |")
    print("|---|---|---|---|---|---|")
    for name in PROBLEMS:
        k = med60[(name, "kestrel tpe")]
        r = [k / med60[(name, "kestrel random")], k / med60[(name, "optuna tpe")],
             k / med60[(name, "optuna+5110 tpe")],
             med60[(name, "kestrel tpe_liar4")] / k,
             med60[(name, "kestrel tpe_liar4")] / med60[(name, "optuna tpe_liar4")]]
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in r) + " |")
    print(f"\nmedian simple regret at {checkpoints[-1]} trials, seeds {first}-{first + seeds - 1}; goals: <= 0.5, <= 1.1, <= 1.1, <= 1.1")


if __name__ == "__main__":
    main()
