"""UCB-PSQ on Hartmann-3 as the BOCVS reference code runs it, in numpy (no torch), to compare the
distribution of its final simple regret with Pandora's `ucb-psq` (docs/results.md, BOCVS section).

With a full-query control set UCB-PSQ always plays the full query, so costs and variances do not
matter: it is GP-UCB on Hartmann-3 (maximized, BoTorch's `Hartmann(dim=3, negate=True)`), with the
reference's settings (notes B2-B9): 5 uniform random initial points (not charged, not counted in
the regret), observation noise sd 0.01, a fixed GP (zero mean, SE kernel, every lengthscale 0.1,
outputscale 1, noise variance 1e-4, never refitted, raw y), u(x) = mu(x) + 2 sigma(x) on the latent
posterior, maximized by `maximize_fn`: 10,000 uniform warm-up points, then scipy L-BFGS-B with
finite differences from 4 uniform points and the warm-up best, a local result accepted only if
`success` and not worse; budget 50 full queries of cost 1. Simple regret = 3.86278 - the best
noiseless f among the BO iterations' queries.

Usage: python3 tools/bocvs_ucb_psq_reference.py OUT.csv --seeds 0-19 [--budget 50]
Prints each seed's final regret; writes the median, quartiles, mean, 1 s.e. and the counts below
0.1 and above 0.5 over the seeds, then one row per seed.
"""
import argparse

import numpy as np
from scipy.optimize import minimize

ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
A = np.array([[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]])
P = 1e-4 * np.array([[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]])
F_STAR = 3.86278
LS, NOISE_VAR, BETA = 0.1, 1e-4, 2.0


def hartmann3(x):
    x = np.atleast_2d(x)
    r = ((x[:, None, :] - P) ** 2 * A).sum(-1)
    return (ALPHA * np.exp(-r)).sum(-1)


def kern(a, b):
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return np.exp(-0.5 * d2 / LS ** 2)


class Gp:
    def __init__(self, X, y):
        self.X = X
        L = np.linalg.cholesky(kern(X, X) + NOISE_VAR * np.eye(len(X)))
        self.L = L
        self.alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))

    def ucb(self, x):
        x = np.atleast_2d(x)
        k = kern(x, self.X)
        mu = k @ self.alpha
        v = np.linalg.solve(self.L, k.T)
        var = np.clip(1.0 - (v ** 2).sum(0), 1e-12, None)
        return mu + BETA * np.sqrt(var)


def maximize_fn(h, rng, n_warmup=10_000, n_iter=5):
    xs = rng.random((n_warmup, 3))
    vals = h(xs)
    best_x, best_v = xs[vals.argmax()], vals.max()
    starts = list(rng.random((n_iter - 1, 3))) + [best_x]
    for x0 in starts:
        r = minimize(lambda z: -h(z)[0], x0, method="L-BFGS-B", bounds=[(0.0, 1.0)] * 3)
        if r.success and -r.fun >= best_v:
            best_x, best_v = np.clip(r.x, 0.0, 1.0), -r.fun
    return best_x


def run(seed, budget):
    rng = np.random.default_rng(seed)
    X = rng.random((5, 3))
    y = hartmann3(X) + 0.01 * rng.standard_normal(5)
    best = -np.inf
    for _ in range(int(budget)):
        x = maximize_fn(Gp(X, y).ucb, rng)
        fx = hartmann3(x)[0]
        best = max(best, fx)
        X = np.vstack([X, x])
        y = np.append(y, fx + 0.01 * rng.standard_normal())
    return F_STAR - best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--budget", type=float, default=50.0)
    a = ap.parse_args()
    lo, hi = map(int, a.seeds.split("-"))
    regrets = []
    for s in range(lo, hi + 1):
        r = run(s, a.budget)
        regrets.append(r)
        print(f"seed {s} regret {r:.4f}", flush=True)
    r = np.array(regrets)
    se = r.std(ddof=1) / np.sqrt(len(r))
    prob = f"hartmann3-budget{a.budget:g}"
    with open(a.out, "w") as fh:
        fh.write("problem,policy,n,median,q25,q75,mean,se,below_0.1,above_0.5\n")
        fh.write(f"{prob},ucb-psq-reference,{len(r)},{np.median(r):.6f},{np.quantile(r, 0.25):.6f},"
                 f"{np.quantile(r, 0.75):.6f},{r.mean():.6f},{se:.6f},{(r < 0.1).sum()},"
                 f"{(r > 0.5).sum()}\n")
        for s, x in zip(range(lo, hi + 1), regrets):
            fh.write(f"{prob} seed{s},ucb-psq-reference,1,{x:.6f},{x:.6f},{x:.6f},{x:.6f},0,"
                     f"{int(x < 0.1)},{int(x > 0.5)}\n")
    print(f"n {len(r)} median {np.median(r):.4f} [{np.quantile(r, .25):.4f}, {np.quantile(r, .75):.4f}] "
          f"mean {r.mean():.4f} ± {se:.4f} (1 s.e.); below 0.1 in {(r < 0.1).sum()} of {len(r)}, "
          f"above 0.5 in {(r > 0.5).sum()}")

if __name__ == "__main__":
    main()
