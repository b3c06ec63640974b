"""Tune a scikit-learn model with Pandora, paying for training time, and stop when it no longer pays.

The cost of a trial is its measured training time (``cost="runtime"``: the seconds between
``ask`` and ``tell``). Pandora's default policy, PBGI-D (the Pandora's Box Gittins index with a
decaying λ), learns how the cost depends on the hyperparameters and prefers cheap configurations
while they are promising. The PBGI *stopping rule* (``stopping="pbgi"``) ends the study when no
configuration's expected improvement in accuracy is worth what it is expected to cost:

    stop when  max_x [ log EI(x) − log E[cost(x)] ]  <=  log λ

The model is an RBF-kernel support vector classifier on scikit-learn's digits (pixels scaled to
[0, 1]); its hyperparameters C and gamma are searched on log scales, and the objective is the
3-fold cross-validated accuracy.

**Choosing λ.** λ is an exchange rate: accuracy per second of training. Here we decide that one
more correctly classified digit in a thousand (0.001 accuracy) is worth about 10 s of training:
λ = 0.001 / 10 s = 1e-4 per second. A configuration expected to train for 0.2 s must then promise
an expected improvement of at least 2e-5 accuracy. (Half the λ: keep tuning for smaller gains;
double it: stop sooner.) The rule waits for ``burn_in`` BO evaluations first and needs
``debounce`` consecutive checks below the threshold, since runtimes are noisy.

The same study is then run without the rule on the same fixed time budget, for comparison.

Run:  pip install . scikit-learn && python examples/python/tune_sklearn.py
"""

import argparse
import time
import warnings

import pandora
from sklearn.datasets import load_digits
from sklearn.model_selection import cross_val_score
from sklearn.svm import SVC

SPACE = {
    "C": pandora.Float(0.01, 1000.0, log=True),
    "gamma": pandora.Float(1e-4, 1.0, log=True),
}


def evaluate(X, y, params):
    """3-fold cross-validated accuracy of an RBF SVM (the cost is its wall time)."""
    return float(cross_val_score(SVC(**params), X, y, cv=3).mean())


def tune(X, y, label, budget, seed, **stopping):
    study = pandora.Study.create(
        f"svm-{label}", "sqlite::memory:", space=SPACE, direction="maximize",
        cost="runtime", budget=budget, acquisition="pbgi_d", seed=seed, **stopping)
    t0 = time.perf_counter()
    while (trial := study.ask()) is not None:
        acc = evaluate(X, y, trial.params)
        told = study.tell(trial, acc)  # cost = seconds between ask and tell
        check = trial.decision.get("stopping")
        note = ""
        if check and check.get("value") is not None:
            note = f"  stat {check['value']:7.2f} vs {check['threshold']:.2f}"
        print(f"  [{label}] trial {trial.number:3d}  acc {acc:.4f}  cost {told['cost']:5.2f} s"
              f"{note}  C = {trial.params['C']:.4g}, gamma = {trial.params['gamma']:.4g}")
    return study, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=60.0,
                    help="training-time budget in seconds (both runs)")
    ap.add_argument("--lam", type=float, default=1e-4,
                    help="the stopping rule's λ: accuracy per second of training")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    X, y = load_digits(return_X_y=True)
    X = X / 16.0  # pixel intensities 0..16 -> [0, 1]
    runs = {
        "pbgi-stop": dict(stopping="pbgi", stopping_lambda=args.lam,
                          stopping_options={"burn_in": 5, "debounce": 2}),
        "budget": {},
    }
    results = {}
    for label, stopping in runs.items():
        what = (f"PBGI-D with the PBGI stopping rule (λ = {args.lam:g} accuracy/s), at most "
                if stopping else "PBGI-D, fixed budget of ")
        print(f"\n== {label}: {what}{args.budget:.0f} s of training time ==")
        study, wall = tune(X, y, label, args.budget, args.seed, **stopping)
        results[label] = (study, study.summary, wall)
        print(f"stopped: {study.stop_reason}")
        if study.stopping_status is not None:
            print(f"stopping rule's last check: {study.stopping_status}")
    print("\n== comparison ==")
    print(f"{'run':10s} {'trials':>6s} {'cost spent (s)':>15s} {'wall (s)':>9s} "
          f"{'best accuracy':>14s}")
    for label, (study, s, wall) in results.items():
        n = s["complete"] + s["failed"]
        print(f"{label:10s} {n:6d} {s['total_cost']:15.2f} {wall:9.2f} "
              f"{s['best']['value']:14.4f}")
    (_, ss, _), (_, sb, _) = results["pbgi-stop"], results["budget"]
    saved = sb["total_cost"] - ss["total_cost"]
    gain = sb["best"]["value"] - ss["best"]["value"]
    print(f"\nThe stopping rule spent {ss['total_cost']:.1f} s of training instead of "
          f"{sb['total_cost']:.1f} s ({saved:+.1f} s saved); the fixed-budget run's extra "
          f"training changed the best accuracy by {gain:+.4f}, worth {gain / args.lam:+.1f} s "
          f"at λ = {args.lam:g} accuracy/s.")
    print(f"best configuration (stopping rule): {ss['best']['params']}")


if __name__ == "__main__":
    main()
