#!/usr/bin/env python3
"""An objective for `pandora run` with the stdin/stdout protocol.

Pandora writes the trial's parameters as a JSON object on stdin; the script prints the result on
stdout, either a bare number or {"objective": v, "cost": c}. Here the "training" sleeps for a time
that grows with the number of epochs, so with `cost.kind = "runtime"` the cost is the wall time.
"""
import json
import math
import sys
import time

p = json.load(sys.stdin)
lr, epochs, opt = p["lr"], p["epochs"], p["optimizer"]
time.sleep(0.002 * epochs)  # the expensive part
loss = (math.log10(lr) + 2.5) ** 2 + 3.0 / epochs + (0.0 if opt == "adam" else 0.3)
print(json.dumps({"objective": loss}))
