#!/usr/bin/env python3
"""Generate `epochs_freeze_thaw.csv`: per-epoch learning curves with measured epoch times.

A scikit-learn MLPClassifier (SGD with Nesterov momentum) on the digits data set that ships
with scikit-learn (`sklearn.datasets.load_digits`, 1 797 8x8 images, 10 classes), trained
epoch by epoch with `partial_fit` (one pass over the training set per call), for CONFIGS
hyperparameter configurations on a scrambled Sobol design (seed 0) over five hyperparameters:

    u_lr        log10 learning rate      in [-3.5, -0.5]
    u_alpha     log10 L2 penalty         in [-6, -1]
    u_hidden    log2 hidden units        in [3, 8]     (rounded: 8 to 256 units)
    u_batch     log2 batch size          in [4, 8]     (rounded: 16 to 256)
    u_momentum  momentum                 in [0.5, 0.99]

The file stores the design point in [0, 1]^5 (the `u_` columns) and the raw values used.
After every epoch it records the validation and test accuracy and the epoch's measured wall
time and process CPU time (training only: `partial_fit`, not the evaluation). Fixed split
(stratified, seed 0): 60 % train, 20 % validation, 20 % test; features standardized on the
training part. Run with one BLAS thread (set below) so that epoch times are comparable.

Usage:  nice -n 19 python3 epochs_extract.py [--configs 256] [--epochs 20] [--out FILE]
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from scipy.stats import qmc  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

COLUMNS = [
    "config", "u_lr", "u_alpha", "u_hidden", "u_batch", "u_momentum",
    "learning_rate", "alpha", "hidden", "batch_size", "momentum",
    "epoch", "valid_acc", "test_acc", "time_s", "cpu_s",
]


def split():
    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(
        X, y, test_size=0.4, stratify=y, random_state=0)
    X_va, X_te, y_va, y_te = train_test_split(
        X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=0)
    scaler = StandardScaler().fit(X_tr)
    return (scaler.transform(X_tr), y_tr, scaler.transform(X_va), y_va,
            scaler.transform(X_te), y_te)


def raw(u):
    """Design point in [0, 1]^5 -> (learning rate, alpha, hidden, batch size, momentum)."""
    lr = 10.0 ** (-3.5 + 3.0 * u[0])
    alpha = 10.0 ** (-6.0 + 5.0 * u[1])
    hidden = int(round(2.0 ** (3.0 + 5.0 * u[2])))
    batch = int(round(2.0 ** (4.0 + 4.0 * u[3])))
    momentum = 0.5 + 0.49 * u[4]
    return lr, alpha, hidden, batch, momentum


def curve(k, u, data, epochs):
    X_tr, y_tr, X_va, y_va, X_te, y_te = data
    lr, alpha, hidden, batch, momentum = raw(u)
    model = MLPClassifier(
        hidden_layer_sizes=(hidden,), solver="sgd", learning_rate_init=lr, alpha=alpha,
        batch_size=batch, momentum=momentum, nesterovs_momentum=True, shuffle=True,
        random_state=k)
    classes = np.unique(y_tr)
    rows = []
    for epoch in range(1, epochs + 1):
        w0, c0 = time.perf_counter(), time.process_time()
        model.partial_fit(X_tr, y_tr, classes=classes)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        with np.errstate(all="ignore"):
            va = float(np.mean(model.predict(X_va) == y_va))
            te = float(np.mean(model.predict(X_te) == y_te))
        rows.append([
            k, *(f"{v:.6f}" for v in u), f"{lr:.6g}", f"{alpha:.6g}", hidden, batch,
            f"{momentum:.6g}", epoch, f"{va:.6f}", f"{te:.6f}", f"{max(wall, 1e-6):.6g}",
            f"{max(cpu, 1e-6):.6g}"])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__),
                                                  "epochs_freeze_thaw.csv"))
    args = ap.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", RuntimeWarning)
    data = split()
    design = qmc.Sobol(d=5, scramble=True, seed=0).random(args.configs)
    start = time.perf_counter()
    with open(args.out, "w") as f:
        f.write(",".join(COLUMNS) + "\n")
        for k, u in enumerate(design):
            for row in curve(k, u, data, args.epochs):
                f.write(",".join(str(v) for v in row) + "\n")
            if (k + 1) % 32 == 0:
                print(f"{k + 1}/{args.configs} configurations, "
                      f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    print(f"wrote {args.out}: {args.configs} configurations x {args.epochs} epochs in "
          f"{time.perf_counter() - start:.0f} s; scikit-learn {sklearn.__version__}, "
          f"numpy {np.__version__}, Python {platform.python_version()}", file=sys.stderr)


if __name__ == "__main__":
    main()
