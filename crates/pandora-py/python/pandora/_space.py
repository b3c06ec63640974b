"""Search-space declarations for :class:`pandora.Study`.

A space is a dict ``name -> declaration``. Declarations:

* ``(low, high)`` (a tuple of two numbers): a float in ``[low, high]``;
* ``Float(low, high, log=False)``, ``Int(low, high, log=False)``: floats and integers, optionally on
  a log scale (``low > 0``; ``low >= 1`` for ints);
* ``Ordinal([v1, v2, ...])``: ordered choices (one coordinate);
* ``Categorical([...])`` or a plain list ``[...]``: unordered choices (one-hot encoded);
* a dict with the configuration-file fields, e.g. ``{"type": "float", "low": 1e-4, "high": 0.1,
  "log": True}``.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Sequence


def Float(low: float, high: float, log: bool = False) -> Dict[str, Any]:
    """A float parameter in ``[low, high]`` (geometric scale if ``log``; needs ``low > 0``)."""
    return {"type": "float", "low": float(low), "high": float(high), "log": bool(log)}


def Int(low: int, high: int, log: bool = False) -> Dict[str, Any]:
    """An integer parameter in ``[low, high]`` (every integer gets an equal share of ``[0, 1]``)."""
    if int(low) != low or int(high) != high:
        raise ValueError(f"Int bounds must be integers, got ({low!r}, {high!r})")
    return {"type": "int", "low": float(low), "high": float(high), "log": bool(log)}


def Ordinal(values: Sequence[Any]) -> Dict[str, Any]:
    """Ordered choices (numbers, strings or booleans), one coordinate ``index / (k - 1)``."""
    return {"type": "ordinal", "values": list(values)}


def Categorical(choices: Sequence[Any]) -> Dict[str, Any]:
    """Unordered choices, one-hot encoded (one coordinate per choice)."""
    return {"type": "categorical", "choices": list(choices)}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def space_to_params(space: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Turns a space dict into the configuration's list of parameter declarations."""
    if not isinstance(space, Mapping) or len(space) == 0:
        raise ValueError("space must be a non-empty dict: name -> (low, high) | Float(...) | ...")
    params = []
    for name, decl in space.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"space: parameter names must be non-empty strings, got {name!r}")
        if isinstance(decl, tuple):
            if len(decl) != 2 or not all(_is_number(v) for v in decl):
                raise ValueError(
                    f"space.{name}: a tuple must be (low, high) with two numbers, got {decl!r}"
                )
            lo, hi = float(decl[0]), float(decl[1])
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"space.{name}: need finite low < high, got ({lo}, {hi})")
            p: Dict[str, Any] = Float(lo, hi)
        elif isinstance(decl, list):
            p = Categorical(decl)
        elif isinstance(decl, Mapping):
            p = dict(decl)
        else:
            raise ValueError(
                f"space.{name}: expected (low, high), a list of choices, Float/Int/Ordinal/"
                f"Categorical(...) or a dict, got {type(decl).__name__}"
            )
        p["name"] = name
        params.append(p)
    return params
