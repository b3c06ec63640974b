"""An Optuna script made cost-aware by Pandora: the two changed lines are marked.

The objective is an ordinary Optuna objective: scikit-learn's support vector classifier on the
digits data (C and gamma on log scales, the kernel, RBF or polynomial, and the polynomial's
degree), scored by 3-fold cross-validated accuracy; training time varies with all four by more
than an order of magnitude. The *cost* of a trial is its training time,
which Pandora reads from Optuna's trial timestamps (``cost="runtime"``): PBGI-D learns how the
time depends on the hyperparameters with its log-cost GP and prefers cheap configurations while
they are promising, within a budget in seconds. The stopping callback ends the study when no
configuration's expected gain in accuracy is worth λ per second of training (here 0.001 accuracy
for 10 s: λ = 1e-4).

Run:  pip install . optuna scikit-learn && python examples/python/optuna_sampler.py
Several workers on one study: give them the same ``--storage sqlite:///tuning.db`` (or a
``postgresql://`` URL) and start the script in several terminals.
"""

import argparse
import warnings

import optuna
from sklearn.datasets import load_digits
from sklearn.model_selection import cross_val_score
from sklearn.svm import SVC

import pandora.optuna


def make_objective(X, y):
    def objective(trial):
        clf = SVC(C=trial.suggest_float("C", 1e-2, 1e3, log=True),
                  gamma=trial.suggest_float("gamma", 1e-4, 1.0, log=True),
                  degree=trial.suggest_int("degree", 2, 5),
                  kernel=trial.suggest_categorical("kernel", ["rbf", "poly"]))
        return float(cross_val_score(clf, X, y, cv=3).mean())

    return objective


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of training (default 60)")
    ap.add_argument("--storage", default=None, help="Optuna storage URL (default: in memory)")
    ap.add_argument("--study", default="digits", help="study name")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    # Changed line 1: the sampler (cost = training time, a budget in seconds).
    sampler = pandora.optuna.PandoraSampler(cost="runtime", budget=args.budget, seed=args.seed)
    study = optuna.create_study(study_name=args.study, storage=args.storage,
                                direction="maximize", sampler=sampler, load_if_exists=True)
    # Changed line 2: the cost-aware stopping rule as a callback.
    stop = pandora.optuna.StoppingCallback(sampler, lam=1e-4)
    study.optimize(make_objective(X, y), n_trials=500, callbacks=[stop])

    for t in study.trials:
        seconds = (t.duration.total_seconds() if t.duration is not None else float("nan"))
        print(f"trial {t.number:3d} {t.state.name:8s} acc {t.value if t.value is not None else float('nan'):.4f}"
              f"  {seconds:6.2f} s  {t.params}")
    print(f"best accuracy {study.best_value:.4f} with {study.best_params}")
    print("stopped:", study.user_attrs.get("pandora:stop_reason", "n_trials reached"))
    value = study.user_attrs.get("pandora:stopping:value")
    if value is not None:
        print(f"last stopping check: max log EIPC = {value:.2f} vs log λ = "
              f"{study.user_attrs['pandora:stopping:threshold']:.2f}")


if __name__ == "__main__":
    main()
