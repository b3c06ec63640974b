"""Tune a scikit-learn model with Pandora, paying for training time.

The cost of a trial is its measured training time (``cost="runtime"``): Pandora's default policy,
PBGI-D (the Pandora's Box Gittins index with a decaying λ), learns how the cost depends on the
hyperparameters and prefers cheap configurations while they are promising. The same time budget is
then given to a cost-unaware policy (LogEI) for comparison.

Run:  pip install ./crates/pandora-py scikit-learn && python examples/python/tune_sklearn.py

Stopping: the PBGI *stopping rule* (stop when the Gittins index says further evaluation is not
worth its cost) is not available in Pandora yet, so both runs here stop when the time budget is
exhausted, and the script says so. When the rule lands, create the study with
``stopping="pbgi"`` and ``study.stop_reason`` will report it.
"""

import argparse
import time
import warnings

import pandora
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import cross_val_score

SPACE = {
    "n_estimators": pandora.Int(5, 400, log=True),
    "max_depth": pandora.Int(2, 30),
    "max_features": pandora.Float(0.02, 1.0, log=True),
    "criterion": ["gini", "entropy"],
}


def evaluate(X, y, params):
    """3-fold cross-validated accuracy of a random forest (the cost is its wall time)."""
    model = RandomForestClassifier(random_state=0, n_jobs=1, **params)
    return float(cross_val_score(model, X, y, cv=3).mean())


def tune(X, y, acquisition, budget, seed):
    study = pandora.Study.create(
        f"forest-{acquisition}", "sqlite::memory:", space=SPACE, direction="maximize",
        cost="runtime", budget=budget, acquisition=acquisition, seed=seed)
    while (trial := study.ask()) is not None:
        acc = evaluate(X, y, trial.params)
        study.tell(trial, acc)  # cost = seconds between ask and tell
        t = study.trials[-1]
        print(f"  [{acquisition}] trial {trial.number:3d}  acc {acc:.4f}  "
              f"cost {t['cost']:6.2f} s  {trial.params}")
    return study


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=30.0, help="training-time budget in seconds")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    X, y = load_digits(return_X_y=True)
    results = {}
    for acquisition in ("pbgi_d", "log_ei"):
        print(f"\n== {acquisition}: budget {args.budget:.0f} s of training time ==")
        t0 = time.perf_counter()
        study = tune(X, y, acquisition, args.budget, args.seed)
        s = study.summary
        results[acquisition] = (study, s, time.perf_counter() - t0)
        print(f"stopped: {study.stop_reason}")
        print("  (the PBGI stopping rule is not available yet: the budget decided)")
    print("\n== comparison ==")
    print(f"{'policy':8s} {'trials':>6s} {'cost spent (s)':>15s} {'wall (s)':>9s} "
          f"{'best accuracy':>14s}")
    for name, (study, s, wall) in results.items():
        n = s["complete"] + s["failed"]
        print(f"{name:8s} {n:6d} {s['budget_spent']:15.2f} {wall:9.2f} "
              f"{s['best']['value']:14.4f}")
    (_, sp, _), (_, sl, _) = results["pbgi_d"], results["log_ei"]
    print(f"\nPBGI-D reached {sp['best']['value']:.4f} with {sp['complete']} trials; the "
          f"cost-unaware LogEI run reached {sl['best']['value']:.4f} with {sl['complete']} trials "
          f"on the same {args.budget:.0f} s budget.")
    print(f"best PBGI-D configuration: {sp['best']['params']}")


if __name__ == "__main__":
    main()
