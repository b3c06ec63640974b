#!/usr/bin/env python3
"""Re-maximize a traced step's acquisition with two maximization settings on the same model.

For the PBGI paper's Bayesian-regret runs (frozen kernel: Matérn-5/2 or another, isotropic
length scale, outputscale 1, unstandardized values; the constant mean and the noise are read
from the step's recorded `params`), this rebuilds the model a BO step proposed with: the data
`D` of the trace's steps before step `k` and the step's hyperparameters. It then asks
`pandora eval` to

1. evaluate the acquisition at the point the run proposed (its value must equal the trace's
   `acquisition_value`: a check that the model and acquisition were rebuilt exactly), and
2. maximize the acquisition with each setting (`raw_samples`, `restarts`) and several
   optimizer seeds,

and writes one CSV row per (trace, step, setting, optimizer seed) with the maximum found, its
gap to the recorded value, and the distance from the maximizer to the nearest point of `D`.
With `--summary FILE` it also writes one row per policy and setting
(`problem,policy,states,maximizations,missed,recheck_max_error,median_distance_found,
median_distance_missed`, `policy` = "POLICY RAWxRESTARTS" so that results_claims.rs can key the
rows), where a maximization *missed* when it ended more than 1e-3·max(1, |recorded|) below the
recorded value.

Usage:
    tools/maximization_effort.py TRACE.jsonl [TRACE.jsonl ...] --steps 100,200,300 \
        --settings 3200x160,512x8 --seeds 0,1,2 [--pandora target/release/pandora] \
        [--summary SUMMARY.csv] > out.csv

Acquisitions: `pbgi` (λ from the step), `log_eipc`, `log_ei` (best observed value of `D`);
costs: uniform or `linear_mean` (1 + 20·mean(x)), from the trace header.
"""

import argparse
import json
import math
import statistics
import subprocess
import sys


def read_trace(path):
    header, steps = None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            if rec["kind"] == "header":
                header = rec
            elif rec["kind"] == "step":
                steps.append(rec)
    if header is None:
        raise SystemExit(f"{path}: no header line")
    return header, steps


def model_of(header):
    """The frozen kernel of a Bayesian-regret problem, from the run's settings."""
    model = header["settings"]["problem"]["config"]["model"]
    return model.get("kernel") or "matern52", model["lengthscale"]


def acquisition_of(header, step, best_f):
    acq = header["acquisition"]
    cost_setting = header["cost_setting"]
    problem_cost = header["settings"]["problem"]["config"]["cost"]
    if cost_setting == "uniform":
        cost = {"type": "uniform"}
    elif problem_cost == "linear_mean":
        cost = {"type": "linear_mean", "offset": 1.0, "slope": 20.0}
    else:
        raise SystemExit(f"cost '{problem_cost}' ({cost_setting}) is not supported here")
    if acq in ("pbgi", "pbgi_d"):
        return {"name": acq, "lambda": step["lambda"], "cost": cost}
    if acq == "log_eipc":
        return {"name": "log_eipc", "best_f": best_f, "cost": cost}
    if acq == "log_ei":
        return {"name": "log_ei", "best_f": best_f}
    raise SystemExit(f"acquisition '{acq}' is not supported here")


def nearest(x, points):
    return min(math.dist(x, p) for p in points)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--steps", required=True, help="comma-separated step indices k")
    ap.add_argument("--settings", default="3200x160,512x8", help="RAWxRESTARTS,...")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--pandora", default="target/release/pandora")
    ap.add_argument("--summary", help="also write the per-policy summary CSV here")
    a = ap.parse_args()
    steps = [int(s) for s in a.steps.split(",")]
    settings = [tuple(int(v) for v in s.split("x")) for s in a.settings.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]
    out = sys.stdout
    # (problem, policy, raw, restarts) -> rows (recorded, recheck, found, distance_found, state)
    groups = {}
    out.write(
        "trace,step,n,raw_samples,restarts,opt_seed,recorded,recheck,found,found_minus_recorded,"
        "distance_found,distance_proposed\n"
    )
    for path in a.traces:
        header, trace = read_trace(path)
        kernel, lengthscale = model_of(header)
        name = path.rsplit("/", 1)[-1]
        for k in steps:
            if k >= len(trace) or trace[k]["params"] is None:
                continue
            step = trace[k]
            data = trace[:k]
            xs = [s["x"] for s in data]
            ys = [s["y"] for s in data]
            params = step["params"]
            best_f = max(ys)
            request = {
                "train_x": xs,
                "train_y": ys,
                "kernel": {
                    "type": kernel,
                    "lengthscale": lengthscale,
                    "outputscale": params["outputscale"],
                },
                "noise": params["noise"],
                "mean": params["mean"],
                "points": [step["x"]],
                "acquisitions": [acquisition_of(header, step, best_f)],
            }
            d = len(step["x"])
            for raw, restarts in settings:
                for seed in seeds:
                    request["optimize"] = {
                        "acquisition": 0,
                        "bounds": [[0.0] * d, [1.0] * d],
                        "raw_samples": raw,
                        "restarts": restarts,
                        "seed": seed,
                    }
                    r = subprocess.run(
                        [a.pandora, "eval", "-"],
                        input=json.dumps(request),
                        capture_output=True,
                        text=True,
                    )
                    if r.returncode != 0:
                        raise SystemExit(f"pandora eval failed: {r.stderr}")
                    resp = json.loads(r.stdout)
                    recheck = resp["acquisitions"][0]["value"][0]
                    found = resp["optimum"]["value"]
                    recorded = step["acquisition_value"]
                    dist = nearest(resp["optimum"]["x"], xs)
                    key = (header["problem"], header["policy"], raw, restarts)
                    groups.setdefault(key, []).append((recorded, recheck, found, dist, (name, k)))
                    out.write(
                        f"{name},{k},{len(data)},{raw},{restarts},{seed},{recorded!r},"
                        f"{recheck!r},{found!r},{found - recorded!r},"
                        f"{dist!r},{nearest(step['x'], xs)!r}\n"
                    )
                    out.flush()
    if a.summary:
        write_summary(a.summary, groups)


def write_summary(path, groups):
    with open(path, "w") as f:
        f.write(
            "problem,policy,states,maximizations,missed,recheck_max_error,"
            "median_distance_found,median_distance_missed\n"
        )
        for (problem, policy, raw, restarts), rows in sorted(groups.items()):
            missed = [r for r in rows if r[2] < r[0] - 1e-3 * max(1.0, abs(r[0]))]
            states = len({r[4] for r in rows})
            err = max(abs(r[1] - r[0]) for r in rows)
            med_found = statistics.median(r[3] for r in rows)
            med_missed = statistics.median(r[3] for r in missed) if missed else float("nan")
            f.write(
                f'{problem},"{policy} {raw}x{restarts}",{states},{len(rows)},{len(missed)},'
                f"{err!r},{med_found!r},{med_missed!r}\n"
            )


if __name__ == "__main__":
    main()
