"""Exact Pandora's Box (Weitzman 1979) solutions."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence

from ._pandora import solve_boxes


def boxes(boxes: Sequence[Dict[str, Any]], fallback: Optional[float] = None, *,
          verify: bool = False) -> Dict[str, Any]:
    r"""Solves Pandora's Box with independent boxes exactly.

    Each box is a dict with a ``cost`` (a number ``>= 0`` or ``{"values": [...], "probs": [...]}``)
    and exactly one reward: ``rewards={"values": [...], "probs": [...]}`` (discrete) or
    ``normal={"mean": m, "std": s}``. ``fallback`` is a reward available without opening anything
    (``None``: at least one box must be opened). The format is that of ``pandora boxes``
    (docs/boxes.md).

    Returns a dict:

    * ``indices``: the Gittins index :math:`g_i` of every box, solving
      :math:`\mathbb E[\max(X_i - g_i, 0)] = \mathbb E[C_i]`;
    * ``order``: Weitzman's opening order (decreasing index; boxes whose index does not exceed the
      fallback are left out); the policy stops once the best reward seen reaches the next index;
    * ``open_probs``: the probability that each box is opened;
    * ``expected_utility = expected_reward - expected_cost``, computed exactly;
    * ``dp_expected_utility``: with ``verify=True`` (discrete rewards, at most 16 boxes), the
      optimum over all adaptive policies by dynamic programming (equal to ``expected_utility``).
    """
    if isinstance(boxes, dict) or not isinstance(boxes, (list, tuple)):
        raise ValueError("boxes must be a list of box dicts")
    try:
        text = json.dumps({"boxes": list(boxes), "fallback": fallback}, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"boxes: {e}") from None
    return json.loads(solve_boxes(text, verify))
