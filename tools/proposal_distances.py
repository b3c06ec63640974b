"""How far a run's BO proposals lie from the data already observed, per policy.

For every trace of the named run directories, the Euclidean distance (in the unit cube) from each
BO-phase proposal to the nearest earlier observation; per run its median, then the mean of those
medians over the runs of a policy. Used in docs/results.md (PBGI Fig. 4 d = 16 at two acquisition
maximization settings) to see whether a more thorough maximization proposes nearer to or farther
from the data.

Usage: python3 tools/proposal_distances.py OUT.csv LABEL=RUN_DIR [LABEL=RUN_DIR ...] [--seeds 0-7]

Writes `problem,policy,runs,mean_median_distance,mean_cost` with `policy` = "POLICY LABEL" (the
policy's trace name and the run directory's label) so that results_claims.rs can key the rows.
"""
import argparse
import csv
import glob
import json
import math
import os
import statistics


def proposals(path):
    """(x, cost) of every step of a trace, with whether it is a BO-phase step."""
    out = []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "step":
                out.append((rec["x"], rec["cost"], rec["phase"] != "initial"))
    return out


def run_stats(path):
    """Median distance of the BO proposals to the nearest earlier point, and their mean cost."""
    seen, dists, costs = [], [], []
    for x, cost, bo in proposals(path):
        if bo and seen:
            dists.append(min(math.dist(x, y) for y in seen))
            costs.append(cost)
        seen.append(x)
    return statistics.median(dists), statistics.mean(costs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("runs", nargs="+", help="LABEL=RUN_DIR")
    ap.add_argument("--seeds", default=None, help="A-B: only these seeds")
    a = ap.parse_args()
    keep = None
    if a.seeds:
        lo, hi = (int(v) for v in a.seeds.split("-"))
        keep = set(range(lo, hi + 1))
    rows = []
    for spec in a.runs:
        label, run_dir = spec.split("=", 1)
        groups = {}
        for path in sorted(glob.glob(os.path.join(run_dir, "traces", "*.jsonl"))):
            stem, seed = os.path.basename(path)[: -len(".jsonl")].rsplit("__s", 1)
            problem, policy = stem.split("__", 1)
            policy = policy.rstrip("_")
            if keep is not None and int(seed) not in keep:
                continue
            if policy == "random":
                continue
            groups.setdefault((problem, policy), []).append(run_stats(path))
        for (problem, policy), stats in sorted(groups.items()):
            rows.append([
                problem,
                f"{policy} {label}",
                len(stats),
                statistics.mean(s[0] for s in stats),
                statistics.mean(s[1] for s in stats),
            ])
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["problem", "policy", "runs", "mean_median_distance", "mean_cost"])
        w.writerows(rows)


if __name__ == "__main__":
    main()
