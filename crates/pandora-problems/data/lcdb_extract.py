"""Extracts crates/pandora-problems/data/lcdb_freeze_thaw.csv from LCDB 1.0's summary table.

Input: lcdb_accuracy_summary.csv.gz (per openmlid, learner, size_train: mean validation and
test accuracy and mean training time over LCDB's 5 x 5 splits; see data/README.md). For each
dataset below: the anchors (training-set sizes) up to the largest one that at least 16 learners
reached at every anchor, and those learners only, so that every kept learner has the whole
schedule. Usage: python3 lcdb_extract.py PATH/lcdb_accuracy_summary.csv.gz > lcdb_freeze_thaw.csv
"""
import collections
import csv
import gzip
import sys

DATASETS = [554, 901, 1483, 23512, 40996, 41027]
MIN_LEARNERS = 16
COLUMNS = ["openmlid", "learner", "size_train", "n_runs", "valid_acc_mean", "test_acc_mean",
           "traintime_mean_s"]


def main(path):
    rows = collections.defaultdict(dict)
    with gzip.open(path, "rt") as f:
        for r in csv.DictReader(f):
            i = int(r["openmlid"])
            if i in DATASETS:
                rows[i][(r["learner"], int(r["size_train"]))] = r
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(COLUMNS)
    for i in DATASETS:
        d = rows[i]
        sizes = sorted({s for (_, s) in d})
        learners = sorted({l for (l, _) in d})
        keep = None
        for k in range(len(sizes)):
            done = [l for l in learners if all((l, s) in d for s in sizes[: k + 1])]
            if len(done) >= MIN_LEARNERS:
                keep = (sizes[: k + 1], done)
        anchors, done = keep
        for l in done:
            for s in anchors:
                r = d[(l, s)]
                out.writerow([r[c] for c in COLUMNS])


if __name__ == "__main__":
    main(sys.argv[1])
