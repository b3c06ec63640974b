"""PandoraSampler(pbgi_d) against Optuna's GPSampler and TPESampler on two cost-aware problems.

Problems:

* ``gp8``: a d = 8 sample of a GP with a Matérn-5/2-like spectrum (random Fourier features,
  lengthscale 0.2, fixed by the seed) on [0, 1]^8, minimized, with the PBGI paper's cost
  ``c(x) = 1 + 20 · mean(x)`` (known to Pandora through ``cost=callable``; the Optuna samplers
  ignore costs). Regret is measured against the best of 2^16 Sobol points and of every run on
  the same sample.
* ``sklearn``: a support vector classifier on scikit-learn's digits (C, gamma, kernel, degree;
  3-fold CV accuracy, maximized); cost = the CPU seconds of the cross-validation, measured by
  the objective (``time.process_time``, so that other processes on the machine do not inflate
  it) and given to Pandora as a reported cost it learns with its log-cost GP
  (``cost="reported"``; ``cost="runtime"`` would charge Pandora its own time too). Regret
  against the best accuracy any run found.

For each sampler and seed the script records the best value against the cumulative cost and
the sampler's overhead per trial: the CPU seconds of this process spent inside the sampler's
methods for that trial (``TimedSampler``; threads of Rust and torch included). Each run ends
with the trial that takes the spending to the budget or past it (or when the sampler stops the
study). Results go to a JSON file, rewritten after every run (seed by seed, every sampler on a
seed before the next, so a run cut short has the same seeds for all); ``--report`` prints the
median and quartiles of the regret at fixed fractions of the budget and the overhead per trial,
over the seeds that every sampler has run, and ``--csv`` writes them (docs/results/).

Optuna's ``GPSampler`` needs PyTorch (``pip install torch``; ``greenlet`` for its batched
acquisition optimizer); without it use ``--samplers pandora,tpe``. The runs of docs/results.md
("Optuna: PandoraSampler against ..."), one process per problem (``--first-seed`` splits seeds)::

    python examples/python/optuna_compare.py --problem gp8 --seeds 16 --budget 2000 --out gp8.json
    python examples/python/optuna_compare.py --problem sklearn --seeds 16 --budget 10 --out sk.json
    python examples/python/optuna_compare.py --report gp8.json --csv gp8.csv

The report gives, per sampler and at 1/4, 1/2, 3/4 and all of the budget, the regret's median
and quartiles and its mean ± 2 standard errors over the seeds (the columns of
docs/results/*.csv), the median and mean sampler overhead per trial and the median number of
trials.
"""

import argparse
import json
import math
import time

import numpy as np
import optuna

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
        t0 = time.process_time()
        acc = float(cross_val_score(clf, X / 16.0, y, cv=3).mean())
        trial.set_user_attr("cost", time.process_time() - t0)
        return acc

    return objective


class TimedSampler(optuna.samplers.BaseSampler):
    """A sampler that passes every call to ``inner`` and adds up the CPU time of this process
    spent in it per trial (``cpu[trial.number]``): the sampler's overhead, unlike the wall
    time, not inflated by other processes on a shared machine. Rust threads (Pandora) and torch
    threads (GPSampler) of the process count too."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.cpu = {}

    def _timed(self, number, f, *args):
        t0 = time.process_time()
        try:
            return f(*args)
        finally:
            self.cpu[number] = self.cpu.get(number, 0.0) + time.process_time() - t0

    def infer_relative_search_space(self, study, trial):
        return self._timed(trial.number, self.inner.infer_relative_search_space, study, trial)

    def sample_relative(self, study, trial, search_space):
        return self._timed(trial.number, self.inner.sample_relative, study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._timed(trial.number, self.inner.sample_independent, study, trial,
                           param_name, param_distribution)

    def before_trial(self, study, trial):
        return self._timed(trial.number, self.inner.before_trial, study, trial)

    def after_trial(self, study, trial, state, values):
        return self._timed(trial.number, self.inner.after_trial, study, trial, state, values)

    def reseed_rng(self):
        self.inner.reseed_rng()


def make_sampler(name: str, seed: int, problem: str, budget: float):
    if name == "pandora":
        import pandora.optuna  # noqa: PLC0415 - the Optuna samplers run without the wheel

        # sklearn: the training time the objective measured (user attribute "cost"), the same
        # number the run is charged; cost="runtime" would add the sampler's own time to it.
        cost = (lambda p: 1.0 + 20.0 * sum(p[f"x{k}"] for k in range(D)) / D) \
            if problem == "gp8" else "reported"
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
    sampler = TimedSampler(make_sampler(sampler_name, seed, problem, budget))
    study = optuna.create_study(direction=direction, sampler=sampler)
    spent, best, trace, numbers = 0.0, None, [], []

    def callback(study, trial):
        nonlocal spent, best
        if trial.value is None:
            return
        c = float(trial.user_attrs["cost"])
        spent += c
        if best is None or (trial.value < best if direction == "minimize" else trial.value > best):
            best = trial.value
        trace.append((spent, best))
        numbers.append(trial.number)
        if spent >= budget:
            study.stop()

    study.optimize(objective, n_trials=10_000, callbacks=[callback])
    # after_trial of a trial runs after its callback: the overheads are read at the end.
    return {"trace": trace, "overhead": [sampler.cpu.get(n, 0.0) for n in numbers]}


def summary_rows(data, fractions):
    """Per sampler and fraction of the budget: the regret of the best value found within that
    cost over the seeds (``n``, median, quartiles, mean and 2 standard errors of the mean), and
    the median sampler overhead per trial and the median number of trials."""
    budget, problem = data["budget"], data["problem"]
    # The seeds every sampler has run (a run cut short may have one more for some samplers).
    seeds = sorted(set.intersection(*(set(s) for s in data["runs"].values())), key=int)
    runs = {name: {seed: s[seed] for seed in seeds} for name, s in data["runs"].items()}
    # The reference: for gp8 the best of 2^16 Sobol points or of any run on the seed's sample,
    # for sklearn the best accuracy of any run; so every regret is >= 0.
    if problem == "gp8":
        ref = {seed: min([GPSample(int(seed)).minimum()]
                         + [b for s in runs.values() for _, b in s[seed]["trace"]])
               for seed in seeds}
    else:
        best = max(b for s in runs.values() for r in s.values() for _, b in r["trace"])
        ref = {seed: best for seed in seeds}
    sign = 1.0 if problem == "gp8" else -1.0  # minimized, maximized
    rows = []
    for name, by_seed in runs.items():
        overheads = [o for r in by_seed.values() for o in r["overhead"]]
        overhead, overhead_mean = float(np.median(overheads)), float(np.mean(overheads))
        trials = float(np.median([len(r["trace"]) for r in by_seed.values()]))
        for frac in fractions:
            regrets = []
            for seed, r in by_seed.items():
                vals = [b for c, b in r["trace"] if c <= frac * budget]
                if vals:
                    regrets.append(sign * (vals[-1] - ref[seed]) + 0.0)  # no -0.0
            n = len(regrets)
            q = np.percentile(regrets, [50, 25, 75]) if regrets else [math.nan] * 3
            mean = float(np.mean(regrets)) if regrets else math.nan
            se2 = 2.0 * float(np.std(regrets, ddof=1)) / math.sqrt(n) if n > 1 else math.nan
            rows.append({"problem": problem, "policy": name, "fraction": frac,
                         "cost": frac * budget, "n": n,
                         "median": q[0], "q25": q[1], "q75": q[2], "mean": mean, "se2": se2,
                         "overhead_s": overhead, "overhead_mean_s": overhead_mean,
                         "trials": trials})
    return rows


def merge(paths):
    """The runs of several results files of one problem and budget, as one."""
    data = None
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        if data is None:
            data = {"problem": d["problem"], "budget": d["budget"], "runs": {}}
        elif (d["problem"], d["budget"]) != (data["problem"], data["budget"]):
            raise ValueError(f"{path}: problem {d['problem']} budget {d['budget']}, expected "
                             f"{data['problem']} budget {data['budget']}")
        for name, by_seed in d["runs"].items():
            data["runs"].setdefault(name, {}).update(by_seed)
    return data


def report(paths, csv_path=None, fractions=None) -> None:
    data = merge(paths)
    rows = summary_rows(data, fractions or FRACTIONS)
    print(f"{data['problem']}: regret at fractions of the budget {data['budget']} over the seeds "
          "(median [q25, q75]; mean ± 2 s.e.), median sampler overhead per trial (s), median "
          "trials")
    for r in rows:
        print(f"  {r['policy']:8s} cost {r['cost']:7.1f}  n {r['n']:2d}  {r['median']:.4f} "
              f"[{r['q25']:.4f}, {r['q75']:.4f}]  {r['mean']:.4f} ± {r['se2']:.4f}  "
              f"overhead {r['overhead_s']:.4f} (mean {r['overhead_mean_s']:.4f})  "
              f"trials {r['trials']:.0f}")
    if csv_path:
        cols = ["problem", "policy", "fraction", "cost", "n", "median", "q25", "q75", "mean",
                "se2", "overhead_s", "overhead_mean_s", "trials"]
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
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. +seeds-1")
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--out", default="optuna_compare.json")
    ap.add_argument("--report", nargs="+", default=None,
                    help="print the table of one or more results files (runs merged)")
    ap.add_argument("--csv", default=None, help="with --report: write the summary CSV")
    ap.add_argument("--fractions", default=None,
                    help="with --report: fractions of the budget (default 0.25,0.5,0.75,1)")
    args = ap.parse_args()
    if args.report:
        fractions = [float(f) for f in args.fractions.split(",")] if args.fractions else None
        report(args.report, args.csv, fractions)
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    data = {"problem": args.problem, "budget": args.budget, "runs": {}}
    names = args.samplers.split(",")
    data["runs"] = {name: {} for name in names}
    # Seed by seed (every sampler on a seed before the next seed): a run cut short still has
    # the same seeds for every sampler.
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for name in names:
            t0, c0 = time.perf_counter(), time.process_time()
            run = run_one(args.problem, name, seed, args.budget)
            run["wall_s"], run["cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
            data["runs"][name][str(seed)] = run
            last = run["trace"][-1]
            print(f"{args.problem} {name} seed {seed}: cost {last[0]:.1f}, best {last[1]:.4f}, "
                  f"{len(run['trace'])} trials, {run['wall_s']:.1f} s wall, {run['cpu_s']:.1f} s CPU",
                  flush=True)
            with open(args.out, "w") as f:  # after every run: a partial file is usable
                json.dump(data, f)
    report([args.out], args.csv)


if __name__ == "__main__":
    main()
