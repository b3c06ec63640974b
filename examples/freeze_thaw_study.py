#!/usr/bin/env python3
"""Drive a study with steps through the `pandora` CLI: ask, "train" the handed-out epochs, tell
each epoch's value, until the study finishes.

    cargo build --release
    python3 examples/freeze_thaw_study.py [path/to/pandora]

The training is simulated by known learning curves (the best configuration is lr = 0.3,
width = 0.6, final value 1), so the output shows which runs the Gittins index policy trained to
the end and which it paused early. A real loop would load the checkpoint of epoch `from - 1` when
`resume` is true, train epochs `from..to`, and save a checkpoint after each.
"""

import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "freeze_thaw_study.toml")
PANDORA = sys.argv[1] if len(sys.argv) > 1 else "pandora"


def pandora(*args):
    out = subprocess.run([PANDORA, *args, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def accuracy(params, epoch):
    """Where run `params` stands after `epoch` epochs."""
    final = 1 - 2 * ((params["lr"] - 0.3) ** 2 + (params["width"] - 0.6) ** 2)
    return final * (1 - math.exp(-epoch / 2))


def main():
    # The study's SQLite file (freeze_thaw_example.db) is created in the current directory.
    while True:
        trial = pandora("ask", CONFIG)
        if "finished" in trial:
            print("finished:", trial["finished"])
            break
        steps = trial["steps"]
        how = "resume" if steps["resume"] else "start "
        print(f"{how} trial {trial['number']:2d} epochs {steps['from']}..{steps['to']}")
        for epoch in range(steps["from"], steps["to"] + 1):
            value = accuracy(trial["params"], epoch)
            pandora("tell", CONFIG, str(trial["number"]), "--step", str(epoch),
                    "--objective", repr(value))
    status = pandora("status", CONFIG)
    best = status["best"]
    print(f"{status['complete']} runs complete, {status['paused']} paused; "
          f"spent {status['budget_spent']:.0f} epochs; best {best['objective']:.4f} at {best['params']}")


if __name__ == "__main__":
    main()
