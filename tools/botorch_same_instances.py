"""BoTorch on exactly the instances and initial designs of a Pandora Bayesian-regret run.

The PBGI paper's Fig. 4 uniform-cost panel (Matern-5/2 GP prior sample, l = 0.1, d = 8, 200 BO
steps) run by BoTorch on the *same* objective (the frequencies and weights exported by
`cargo run --release -p pandora-problems --example export_gp_sample -- D SEED`) and the *same*
initial design (read from the Pandora trace of that seed), so the two libraries can be compared
seed by seed instead of over different random-feature draws (bench/peer/botorch_bayes_regret.py).

Model and acquisitions as the reference code (notes 2, 3.2, 3.3): SingleTaskGP, ScaleKernel(Matern
2.5) with l = 0.1 and outputscale 1 frozen, fixed noise 1e-4, the constant mean fitted by marginal
likelihood at every step (as the reference and Pandora; `--zero-mean` keeps it at 0), no standardization;
UCB with beta_t = 0.4 log(d (C_t + 1)^2 pi^2 / 0.6), C_t = BO-phase cost so far; LogEI with
best_f = best observed y; optimize_acqf(q = 1, num_restarts = 10 d, raw_samples = 200 d,
options = {batch_limit: 5, maxiter: 200}; `--batch-limit 0`: BoTorch's defaults).

Usage:
  python3 tools/botorch_same_instances.py run OUT.jsonl --instances DIR --traces DIR --seeds 0-3 \
      --policies ucb,log_ei [--steps 200]
  python3 tools/botorch_same_instances.py compare OUT.csv --traces DIR --botorch RUN.jsonl ...
  python3 tools/botorch_same_instances.py progress-csv OUT.csv --traces DIR --botorch RUN.log ...
  python3 tools/botorch_same_instances.py replay-csv OUT.csv --traces DIR --botorch REPLAY.jsonl
  python3 tools/botorch_same_instances.py replay OUT.jsonl --instances DIR --traces DIR --seeds 0-3 \
      --policy ucb --at 0,50,100,199
DIR for --instances holds `d{D}_seed{S}.json` (the example's output); DIR for --traces holds the
Pandora traces `*.jsonl` (a run directory's `runs/`), matched by their header's policy and seed.
`run` writes one JSON line per run with the regret trajectory against Pandora's searched optimum.
`replay` rebuilds BoTorch's model on Pandora's own data before BO step k and reports Pandora's
acquisition value and proposal next to BoTorch's maximum of the same acquisition (a check that both
maximize the same function equally well).
"""
import argparse
import glob
import json
import math
import os
import re
import time

import torch

torch.set_default_dtype(torch.float64)
from botorch.acquisition.analytic import LogExpectedImprovement, UpperConfidenceBound  # noqa: E402
from botorch.models import SingleTaskGP  # noqa: E402
from botorch.optim import optimize_acqf  # noqa: E402
from botorch.fit import fit_gpytorch_mll  # noqa: E402
from gpytorch.kernels import MaternKernel, ScaleKernel  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood  # noqa: E402


def load_instance(path):
    inst = json.load(open(path))
    W = torch.tensor(inst["freqs"])
    a = torch.tensor(inst["w_cos"])
    b = torch.tensor(inst["w_sin"])

    def f(X):
        Z = X @ W.T
        return torch.cos(Z) @ a + torch.sin(Z) @ b

    got = f(torch.tensor(inst["check_x"]))
    err = (got - torch.tensor(inst["check_f"])).abs().max().item()
    if err > 1e-9:
        raise SystemExit(f"{path}: the port of the objective differs from Pandora's by {err:g}")
    return inst, f


def load_trace(traces, policy, seed, partial=False):
    """Pandora's trace of (policy, seed); with `partial`, an unfinished one (`*.jsonl.part`) too,
    enough for the initial design, which every policy of a seed shares."""
    pats = ["*.jsonl"] + (["*.jsonl.part"] if partial else [])
    files = [p for pat in pats for p in glob.glob(os.path.join(traces, "**", pat), recursive=True)]
    for p in sorted(files):
        lines = []
        with open(p) as fh:
            for line in fh:
                try:
                    lines.append(json.loads(line))
                except ValueError:  # the last line of a trace being written
                    break
        if not lines:
            continue
        head = lines[0].get("header", lines[0])
        if head.get("seed") == seed and (policy is None or head.get("acquisition") == policy):
            steps = [ln.get("step", ln) for ln in lines[1:]]
            return head, [s for s in steps if "x" in s]
    raise SystemExit(f"no trace for policy {policy} seed {seed} under {traces}")


def model_of(X, Y):
    cov = ScaleKernel(MaternKernel(nu=2.5))
    cov.base_kernel.lengthscale = 0.1
    cov.outputscale = 1.0
    m = SingleTaskGP(X, Y, train_Yvar=torch.full_like(Y, 1e-4), covar_module=cov, outcome_transform=None)
    m.mean_module.constant.data.fill_(0.0)
    if FIT_MEAN:  # the reference (and Pandora) fit the constant mean with the kernel frozen
        for prm in m.covar_module.parameters():
            prm.requires_grad_(False)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(m.likelihood, m))
    m.eval()
    return m


def beta_of(d, cum):
    return 0.4 * math.log(d * (cum + 1) ** 2 * math.pi ** 2 / 0.6)


def acquisition(policy, model, Y, d, cum):
    if policy == "ucb":
        return UpperConfidenceBound(model, beta=beta_of(d, cum))
    if policy == "log_ei":
        return LogExpectedImprovement(model, best_f=Y.max())
    raise SystemExit(f"unknown policy {policy}")


BATCH_LIMIT = 5
FIT_MEAN = True


def maximize(acq, d):
    bounds = torch.stack([torch.zeros(d), torch.ones(d)])
    opts = {"batch_limit": BATCH_LIMIT, "maxiter": 200} if BATCH_LIMIT > 0 else {}
    return optimize_acqf(acq, bounds, q=1, num_restarts=10 * d, raw_samples=200 * d, options=opts)


def run(policy, seed, a):
    inst, f = load_instance(os.path.join(a.instances, f"d{a.d}_seed{seed}.json"))
    d = inst["dim"]
    while True:  # wait for Pandora's first run of this seed to have written its design
        try:
            _, steps = load_trace(a.traces, None, seed, partial=True)
            init = [s for s in steps if s["phase"] == "initial"]
            if init and any(s["phase"] != "initial" for s in steps):
                break
        except SystemExit:
            pass
        time.sleep(10)
    X = torch.tensor([s["x"] for s in init])
    Y = f(X).unsqueeze(-1)
    fstar = inst["optimum"]
    torch.manual_seed(seed)
    cum, traj, t0 = 0.0, [(0.0, fstar - Y.max().item())], time.process_time()
    for _ in range(a.steps):
        model = model_of(X, Y)
        x, _ = maximize(acquisition(policy, model, Y, d, cum), d)
        y = f(x).reshape(1, 1)
        X, Y = torch.cat([X, x]), torch.cat([Y, y])
        cum += 1.0
        traj.append((cum, fstar - Y.max().item()))
        if a.progress and int(cum) % 25 == 0:
            print(f"  {policy} seed {seed} step {int(cum)} regret {traj[-1][1]:.4f} "
                  f"{time.process_time() - t0:.0f} CPU s", flush=True)
    return {"library": "botorch", "policy": policy, "seed": seed, "d": d, "fstar": fstar,
            "best": Y.max().item(), "final_regret": traj[-1][1], "n_init": len(init),
            "cpu_seconds": time.process_time() - t0, "trajectory": traj}


def replay(seed, a):
    inst, f = load_instance(os.path.join(a.instances, f"d{a.d}_seed{seed}.json"))
    d = inst["dim"]
    _, steps = load_trace(a.traces, a.policy, seed)
    n0 = sum(1 for s in steps if s["phase"] == "initial")
    out = []
    for k in a.at:
        if n0 + k >= len(steps):
            continue
        X = torch.tensor([s["x"] for s in steps[: n0 + k]])
        Y = torch.tensor([[s["y"]] for s in steps[: n0 + k]])
        cum = sum(s["cost"] for s in steps[n0: n0 + k])
        acq = acquisition(a.policy, model_of(X, Y), Y, d, cum)
        torch.manual_seed(seed * 1000 + k)
        xb, vb = maximize(acq, d)
        xp = torch.tensor([steps[n0 + k]["x"]])
        with torch.no_grad():
            at_pandora = acq(xp.unsqueeze(0)).item()
        out.append({"policy": a.policy, "seed": seed, "step": k, "n": n0 + k,
                    "pandora_acq": steps[n0 + k].get("acquisition_value"),
                    "botorch_acq_at_pandora_x": at_pandora, "botorch_max": vb.item(),
                    "distance": (xb - xp).norm().item()})
    return out


def pandora_final(traces, policy, seed, steps):
    """Pandora's simple regret after `steps` BO steps of (policy, seed), against the trace's
    optimum (the instance's searched optimum, the one the BoTorch runs use)."""
    head, st = load_trace(traces, policy, seed)
    n0 = sum(1 for s in st if s["phase"] == "initial")
    best = max(s["y"] for s in st[: n0 + steps])
    return head["optimum"] - best


def stats(v):
    v = sorted(v)
    n = len(v)
    q = lambda p: v[min(n - 1, max(0, round(p * (n - 1))))]  # noqa: E731
    mean = sum(v) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else float("nan")
    med = (v[(n - 1) // 2] + v[n // 2]) / 2
    return n, med, q(0.25), q(0.75), mean, 2 * sd / math.sqrt(n)


def compare(a):
    """A summary CSV (the columns of docs/results/*.csv): per policy and library the final regret
    over the seeds both have, each seed's pair, and the paired difference Pandora - BoTorch."""
    runs = {}
    for p in a.botorch:
        for line in open(p):
            r = json.loads(line)
            runs[(r["policy"], r["seed"])] = r
    rows = ["problem,policy,n,median,q25,q75,mean,se2"]
    fmt = lambda k, pol, st: "%s,%s,%d,%.4f,%.4f,%.4f,%.4f,%.4f" % ((k, pol) + st)  # noqa: E731
    for pol in sorted({k[0] for k in runs}):
        seeds = sorted(s for (q, s) in runs if q == pol)
        bt = [runs[(pol, s)]["final_regret"] for s in seeds]
        pd = [pandora_final(a.traces, pol, s, a.steps) for s in seeds]
        prob = f"gp-matern52-l0.1-d{a.d}-same-instances"
        rows.append(fmt(prob, f"{pol}|botorch", stats(bt)))
        rows.append(fmt(prob, f"{pol}|pandora", stats(pd)))
        rows.append(fmt(prob, f"{pol}|pandora-minus-botorch", stats([x - y for x, y in zip(pd, bt)])))
        for s, x, y in zip(seeds, pd, bt):
            rows.append(fmt(f"seed{s}", f"{pol}|pandora", (1, x, x, x, x, 0.0)))
            rows.append(fmt(f"seed{s}", f"{pol}|botorch", (1, y, y, y, y, 0.0)))
    # Pandora alone, every seed with a trace: how much the policies still gain after step 100.
    for pol in sorted({k[0] for k in runs} | {"ucb", "log_ei"}):
        for k in (100, a.steps):
            v = []
            for s in range(a.pandora_seeds):
                try:
                    v.append(pandora_final(a.traces, pol, s, k))
                except SystemExit:
                    break
            if v:
                rows.append(fmt(f"gp-matern52-l0.1-d{a.d}-pandora-seeds0-{len(v) - 1}", f"{pol}|step{k}", stats(v)))
    with open(a.out, "w") as fh:
        fh.write("\n".join(rows) + "\n")
    print("\n".join(rows))


def replay_csv(a):
    """`replay`'s JSON lines (`--botorch`) as a summary CSV: per seed and step, Pandora's
    acquisition value, BoTorch's value at Pandora's point and BoTorch's maximum, and over all of
    them the largest |Pandora - BoTorch at the same point| and the largest BoTorch max - Pandora."""
    recs = [json.loads(line) for p in a.botorch for line in open(p)]
    rows = ["problem,policy,pandora_acq,botorch_at_x,botorch_max,diff_at_x,max_gap"]
    for r in recs:
        rows.append("seed%d step%d,%s,%.12f,%.12f,%.12f,%.3e,%.3e" % (
            r["seed"], r["step"], r["policy"], r["pandora_acq"], r["botorch_acq_at_pandora_x"],
            r["botorch_max"], abs(r["pandora_acq"] - r["botorch_acq_at_pandora_x"]),
            r["botorch_max"] - r["pandora_acq"]))
    d = max(abs(r["pandora_acq"] - r["botorch_acq_at_pandora_x"]) for r in recs)
    g = max(r["botorch_max"] - r["pandora_acq"] for r in recs)
    rows.append("all,%s,,,,%.3e,%.3e" % (recs[0]["policy"], d, g))
    with open(a.out, "w") as fh:
        fh.write("\n".join(rows) + "\n")
    print("\n".join(rows))


def progress_csv(a):
    """The `--progress` lines of unfinished `run` logs (`--botorch`) next to Pandora's regret at
    the same step of the same seed: rows `seed{S} step{K}`, `{policy}|botorch` / `|pandora`."""
    rows = ["problem,policy,regret"]
    pat = re.compile(r"^\s*(\w+) seed (\d+) step (\d+) regret (-?[0-9.]+)")
    for p in a.botorch:
        for line in open(p):
            m = pat.match(line)
            if not m:
                continue
            pol, seed, k, r = m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))
            rows.append(f"seed{seed} step{k},{pol}|botorch,{r:.4f}")
            rows.append(f"seed{seed} step{k},{pol}|pandora,{pandora_final(a.traces, pol, seed, k):.4f}")
    with open(a.out, "w") as fh:
        fh.write("\n".join(rows) + "\n")
    print("\n".join(rows))


def seeds_of(s):
    lo, hi = map(int, s.split("-")) if "-" in s else (int(s), int(s))
    return range(lo, hi + 1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["run", "replay", "compare", "replay-csv", "progress-csv"])
    ap.add_argument("out")
    ap.add_argument("--instances", default=".")
    ap.add_argument("--botorch", nargs="*", default=[], help="compare: the `run` outputs")
    ap.add_argument("--pandora-seeds", type=int, default=8, help="compare: Pandora's seeds 0..N-1")
    ap.add_argument("--traces", required=True)
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--seeds", default="0-3")
    ap.add_argument("--policies", default="ucb,log_ei")
    ap.add_argument("--policy", default="ucb")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--at", default="0,50,100,150,199")
    ap.add_argument("--progress", action="store_true", help="print every 25 steps")
    ap.add_argument("--zero-mean", action="store_true",
                    help="keep the constant mean at 0 (default: fit it, as the reference and Pandora)")
    ap.add_argument("--batch-limit", type=int, default=5,
                    help="restarts per L-BFGS-B batch (the reference: 5, maxiter 200); 0: BoTorch's "
                         "defaults (all restarts in one batch), several times faster")
    a = ap.parse_args()
    a.at = [int(k) for k in a.at.split(",")]
    if a.mode == "progress-csv":
        progress_csv(a)
        raise SystemExit(0)
    if a.mode == "replay-csv":
        replay_csv(a)
        raise SystemExit(0)
    BATCH_LIMIT = a.batch_limit
    FIT_MEAN = not a.zero_mean
    if a.mode == "compare":
        compare(a)
        raise SystemExit(0)
    with open(a.out, "a") as fh:
        for seed in seeds_of(a.seeds):
            if a.mode == "replay":
                for r in replay(seed, a):
                    fh.write(json.dumps(r) + "\n")
                    print(json.dumps(r), flush=True)
                continue
            for pol in a.policies.split(","):
                r = run(pol, seed, a)
                fh.write(json.dumps(r) + "\n")
                fh.flush()
                print(pol, seed, "regret %.4f" % r["final_regret"], "best %.4f" % r["best"],
                      "%.0f CPU s" % r["cpu_seconds"], flush=True)
