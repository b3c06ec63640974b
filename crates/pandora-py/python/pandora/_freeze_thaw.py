"""Cost-aware freeze-thaw with discrete learning curves, solved exactly by Gittins indices."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional, Sequence

from ._pandora import solve_freeze_thaw


def freeze_thaw(runs: Sequence[Dict[str, Any]], fallback: Optional[float] = None, *,
                verify: bool = False) -> Dict[str, Any]:
    r"""Decides which training run to start, continue or keep, by Gittins indices.

    Each run is a dict with exactly one of

    * ``nodes`` (and ``at``, default 0): its learning-curve states in an order where every
      transition goes to a later state; each state has ``value`` (observed; absent before the run
      starts, required in complete states), ``cost`` (of the next step) and ``next`` (a list of
      ``{"node": j, "prob": p}``; empty for a complete state, whose value may be kept);
    * ``walk``: ``{"from": v, "steps": T, "step_cost": c, "increments": {"values": [...],
      "probs": [...]}, "started": False}``, a curve moving by a random increment per step;
    * ``gaussian``: ``{"mean": m, "variance_drops": [...], "step_costs": [...], "points": 41,
      "started": False}``, a run whose final value is predicted by a Gaussian model (each step
      removes ``variance_drops[t]`` of the final value's variance);

    and an optional ``name``. ``fallback`` is a value that can be kept without any further step.
    Costs are in the value's units (multiply by your λ first). The format is that of
    ``pandora freeze-thaw`` (docs/freeze-thaw.md).

    Returns a dict:

    * ``action``: ``{"kind": "start" | "continue", "run": k, "name": ...}``,
      ``{"kind": "select", "run": k, "name": ..., "value": v}`` (keep that complete run) or
      ``{"kind": "stop", "value": fallback}``;
    * ``runs``: for each run its current state ``at``, its ``index`` and ``state_indices``;
    * ``expected_utility``: the exact expected net utility of the index policy, which is optimal;
    * with ``verify=True``: ``dp_expected_utility`` (the optimum over all policies by dynamic
      programming over joint states) and ``dp_index_policy_utility``, both equal to it.
    """
    if isinstance(runs, dict) or not isinstance(runs, (list, tuple)):
        raise ValueError("runs must be a list of run dicts")
    if fallback is not None and not (isinstance(fallback, (int, float)) and math.isfinite(fallback)):
        raise ValueError(f"fallback: must be a finite number, got {fallback!r}")
    try:
        text = json.dumps({"runs": list(runs), "fallback": fallback}, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"runs: {e}") from None
    return json.loads(solve_freeze_thaw(text, verify))
