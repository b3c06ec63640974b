"""PandoraSampler(pbgi_d) against Optuna's GPSampler and TPESampler on two cost-aware problems.

Problems:

* ``gp8``: a d = 8 sample of a GP with a Matérn-5/2-like spectrum (random Fourier features,
  lengthscale 0.2, fixed by the seed) on [0, 1]^8, minimized, with the PBGI paper's cost
  ``c(x) = 1 + 20 · mean(x)`` (known to Pandora through ``cost=callable``; the Optuna samplers
  ignore costs). Regret is measured against the best of 2^16 Sobol points.
* ``sklearn``: a support vector classifier on scikit-learn's digits (C, gamma, kernel, degree;
  3-fold CV accuracy, maximized), cost = training time in seconds (``cost="runtime"``); regret against the best
  accuracy any run found.

For each sampler and seed the script records the best value against the cumulative cost and
the sampler's own time per trial (the trial's wall time minus the objective's). Results go to a
JSON file; ``--report`` prints the median and quartiles of the regret at fixed fractions of the
budget and the median overhead per trial (the table for docs/results.md).

Optuna's ``GPSampler`` needs PyTorch (``pip install torch``); without it use
``--samplers pandora,tpe``. Run (16 seeds as in issue 25; the sklearn problem takes about budget × seeds × 3 seconds)::

    python examples/python/optuna_compare.py --problem gp8 --seeds 16 --budget 300 --out gp8.json
    python examples/python/optuna_compare.py --problem sklearn --seeds 16 --budget 60 --out sk.json
    python examples/python/optuna_compare.py --report gp8.json --csv gp8.csv

The report gives, per sampler and at 1/4, 1/2, 3/4 and all of the budget, the regret's median
and quartiles and its mean ± 2 standard errors over the seeds (the columns of
docs/results/*.csv), the median sampler overhead per trial and the median number of trials.
"""

import argparse
import json
import math
import time

import numpy as np
import optuna

import pandora.optuna

D = 8


class GPSample:
    """A GP sample path by random Fourier features (1024 features), fixed by its seed."""

    def __init__(self, seed: int, lengthscale: float = 0.2, features: int = 1024) -> None:
        rng = np.random.default_rng(seed)
        # Matérn-5/2 spectral density: a Student-t with 5 degrees of freedom.
        g = rng.standard_normal((features, D))
        chi = rng.chisquare(5.0, size=(features, 1))
        self.w = g / np.sqrt(chi / 5.0) / lengthscale
        self.b = rng.uniform(0.0, 2.0 * math.pi, features)
        self.a = rng.standard_normal(features) * math.sqrt(2.0 / features)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.cos(np.atleast_2d(x) @ self.w.T + self.b) @ self.a

    def minimum(self) -> float:
        from scipy.stats import qmc  # noqa: PLC0415 - scipy comes with scikit-learn

        pts = qmc.Sobol(D, seed=0).random(2**16)
        return float(self(pts).min())


def gp8_objective(f: GPSample):
    def objective(trial):
        x = np.array([trial.suggest_float(f"x{k}", 0.0, 1.0) for k in range(D)])
        trial.set_user_attr("cost", 1.0 + 20.0 * float(x.mean()))
        return float(f(x)[0])

    return objective


def sklearn_objective():
    from sklearn.datasets import load_digits  # noqa: PLC0415
    from sklearn.model_selection import cross_val_score  # noqa: PLC0415
    from sklearn.svm import SVC  # noqa: PLC0415

    X, y = load_digits(return_X_y=True)

    def objective(trial):
        clf = SVC(C=trial.suggest_float("C", 1e-2, 1e3, log=True),
                  gamma=trial.suggest_float("gamma", 1e-4, 1.0, log=True),
                  degree=trial.suggest_int("degree", 2, 5),
                  kernel=trial.suggest_categorical("kernel", ["rbf", "poly"]))
        t0 = time.perf_counter()
        acc = float(cross_val_score(clf, X / 16.0, y, cv=3).mean())
        trial.set_user_attr("cost", time.perf_counter() - t0)
        return acc

    return objective


def make_sampler(name: str, seed: int, problem: str, budget: float):
    if name == "pandora":
        cost = (lambda p: 1.0 + 20.0 * sum(p[f"x{k}"] for k in range(D)) / D) \
            if problem == "gp8" else "runtime"
        return pandora.optuna.PandoraSampler(cost=cost, budget=budget, seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}")


def run_one(problem: str, sampler_name: str, seed: int, budget: float):
    """One run: the trace (cumulative cost, best value) and the overhead per trial."""
    direction = "minimize" if problem == "gp8" else "maximize"
    objective = gp8_objective(GPSample(seed)) if problem == "gp8" else sklearn_objective()
    sampler = make_sampler(sampler_name, seed, problem, budget)
    study = optuna.create_study(direction=direction, sampler=sampler)
    spent, best, trace, overhead = 0.0, None, [], []

    def callback(study, trial):
        nonlocal spent, best
        if trial.value is None:
            return
        c = float(trial.user_attrs["cost"])
        spent += c
        if best is None or (trial.value < best if direction == "minimize" else trial.value > best):
            best = trial.value
        trace.append((spent, best))
        overhead.append(max(trial.duration.total_seconds() - (c if problem == "sklearn" else 0.0),
                            0.0))
        if spent >= budget:
            study.stop()

    study.optimize(objective, n_trials=10_000, callbacks=[callback])
    return {"trace": trace, "overhead": overhead}


def summary_rows(data):
    """Per sampler and fraction of the budget: the regret of the best value found within that
    cost over the seeds (``n``, median, quartiles, mean and 2 standard errors of the mean), and
    the median sampler overhead per trial and the median number of trials."""
    budget, problem = data["budget"], data["problem"]
    runs = data["runs"]
    seeds = sorted(next(iter(runs.values())))
    if problem == "gp8":
        ref = {seed: GPSample(int(seed)).minimum() for seed in seeds}
    else:
        best = max(b for s in runs.values() for r in s.values() for _, b in r["trace"])
        ref = {seed: best for seed in seeds}
    rows = []
    for name, by_seed in runs.items():
        overhead = float(np.median([o for r in by_seed.values() for o in r["overhead"]]))
        trials = float(np.median([len(r["trace"]) for r in by_seed.values()]))
        for frac in FRACTIONS:
            regrets = []
            for seed, r in by_seed.items():
                vals = [b for c, b in r["trace"] if c <= frac * budget]
                if vals:
                    regrets.append(max(abs(vals[-1] - ref[seed]), 0.0))
            n = len(regrets)
            q = np.percentile(regrets, [50, 25, 75]) if regrets else [math.nan] * 3
            mean = float(np.mean(regrets)) if regrets else math.nan
            se2 = 2.0 * float(np.std(regrets, ddof=1)) / math.sqrt(n) if n > 1 else math.nan
            rows.append({"problem": problem, "policy": name, "cost": frac * budget, "n": n,
                         "median": q[0], "q25": q[1], "q75": q[2], "mean": mean, "se2": se2,
                         "overhead_s": overhead, "trials": trials})
    return rows


def report(path: str, csv_path=None) -> None:
    data = json.load(open(path))
    rows = summary_rows(data)
    print(f"{data['problem']}: regret at fractions of the budget {data['budget']} over the seeds "
          "(median [q25, q75]; mean ± 2 s.e.), median sampler overhead per trial (s), median "
          "trials")
    for r in rows:
        print(f"  {r['policy']:8s} cost {r['cost']:7.1f}  n {r['n']:2d}  {r['median']:.4f} "
              f"[{r['q25']:.4f}, {r['q75']:.4f}]  {r['mean']:.4f} ± {r['se2']:.4f}  "
              f"overhead {r['overhead_s']:.4f}  trials {r['trials']:.0f}")
    if csv_path:
        cols = ["problem", "policy", "cost", "n", "median", "q25", "q75", "mean", "se2",
                "overhead_s", "trials"]
        with open(csv_path, "w") as f:
            f.write(",".join(cols) + "\n")
            for r in rows:
                f.write(",".join(f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])
                                 for c in cols) + "\n")


FRACTIONS = (0.25, 0.5, 0.75, 1.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", choices=["gp8", "sklearn"], default="gp8")
    ap.add_argument("--samplers", default="pandora,gp,tpe")
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--out", default="optuna_compare.json")
    ap.add_argument("--report", default=None, help="print the table of a results file")
    ap.add_argument("--csv", default=None, help="with --report: write the summary CSV")
    args = ap.parse_args()
    if args.report:
        report(args.report, args.csv)
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    runs = {}
    for name in args.samplers.split(","):
        runs[name] = {}
        for seed in range(args.seeds):
            runs[name][str(seed)] = run_one(args.problem, name, seed, args.budget)
            last = runs[name][str(seed)]["trace"][-1]
            print(f"{args.problem} {name} seed {seed}: cost {last[0]:.1f}, best {last[1]:.4f}",
                  flush=True)
    with open(args.out, "w") as f:
        json.dump({"problem": args.problem, "budget": args.budget, "runs": runs}, f)
    report(args.out, args.csv)


if __name__ == "__main__":
    main()
