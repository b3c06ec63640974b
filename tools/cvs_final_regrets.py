"""Per-run final simple regrets of a `pandora cvs` output directory, as CSVs that
crates/pandora-cli/tests/results_claims.rs can read.

OUT.csv has one row per run (`problem` = setting and seed, `policy`, the final regret, the control
set of the best value played and the sets played, as indices into the objective's sets).
OUT_summary.csv (next to it) has one row per setting and policy: n, median, quartiles, mean and
its 1 standard error (as the BOCVS paper plots), and how many runs end below `--low` and above
`--high` (default 0.1 and 0.5: on Hartmann-3, below ETC-50's floor and stuck at a local maximum).

Usage: python3 tools/cvs_final_regrets.py RUN_DIR OUT.csv [--low 0.1] [--high 0.5]
"""
import argparse
import glob
import json
import math
import os


def quantile(v, p):
    """Linear interpolation between order statistics (numpy's default)."""
    h = (len(v) - 1) * p
    lo = math.floor(h)
    return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("out")
    ap.add_argument("--low", type=float, default=0.1)
    ap.add_argument("--high", type=float, default=0.5)
    a = ap.parse_args()
    rows = ["problem,policy,seed,final,optimum,best_set,sets_played"]
    groups = {}
    for p in sorted(glob.glob(os.path.join(a.run_dir, "runs", "*.json"))):
        r = json.load(open(p))
        spec, steps = r["spec"], r["steps"]
        best = max(steps, key=lambda s: s["value"])
        played = " ".join(str(i) for i in sorted({s["set"] for s in steps}))
        setting = f'{spec["objective"]} {spec["cost_level"]} var={spec["variance"]}'
        final = steps[-1]["simple_regret"]
        rows.append(f'{setting} seed{spec["seed"]},{spec["policy"]},{spec["seed"]},{final:.6f},'
                    f'{r["optimum"]:.6f},{best["set"]},{played}')
        groups.setdefault((setting, spec["policy"]), []).append(final)
    with open(a.out, "w") as fh:
        fh.write("\n".join(rows) + "\n")
    summary = [f"problem,policy,n,median,q25,q75,mean,se,below_{a.low:g},above_{a.high:g}"]
    for (setting, pol), v in sorted(groups.items()):
        v = sorted(v)
        n = len(v)
        mean = sum(v) / n
        se = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1) / n) if n > 1 else float("nan")
        summary.append(f"{setting},{pol},{n},{quantile(v, 0.5):.6f},{quantile(v, 0.25):.6f},"
                       f"{quantile(v, 0.75):.6f},{mean:.6f},{se:.6f},"
                       f"{sum(x < a.low for x in v)},{sum(x > a.high for x in v)}")
    with open(a.out.removesuffix(".csv") + "_summary.csv", "w") as fh:
        fh.write("\n".join(summary) + "\n")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
