"""The one-call loop: :func:`minimize` and :func:`maximize` a Python function over a box."""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._study import Study

CostArg = Union[None, str, Callable[[np.ndarray], float]]


class OptimizeResult:
    """The result of :func:`minimize` / :func:`maximize`.

    Attributes:
        x: the best point found (a NumPy array in the original bounds).
        fun: its objective value.
        nfev: number of evaluations.
        total_cost: cost of all evaluations.
        budget_spent: cost counted toward the budget.
        stop_reason: why the loop stopped: ``"stopping rule fired: pbgi: max_log_eipc = V <=
            threshold T"`` (with ``stopping="pbgi"``), ``"budget exhausted: spent S of B"`` or
            ``"reached max_trials = N"``.
        stopping_status: the stopping rule's last check (``rule``, ``lambda``, ``statistic``,
            ``value``, ``threshold``, ``iteration``, ``fired``; see
            :attr:`pandora.Study.stopping_status`), or ``None`` without a rule.
        history: one dict per evaluation: ``number``, ``x``, ``value``, ``cost``, ``phase``
            (``initial``/``model``/``random``), ``best`` (best value so far).
        study: the underlying :class:`pandora.Study` (in memory unless ``storage=`` was given).
    """

    def __init__(self, x: np.ndarray, fun: float, history: List[Dict[str, Any]],
                 stop_reason: Optional[str], study: Study, total_cost: float,
                 budget_spent: float, stopping_status: Optional[Dict[str, Any]] = None) -> None:
        self.x = x
        self.fun = fun
        self.history = history
        self.nfev = len(history)
        self.stop_reason = stop_reason
        self.study = study
        self.total_cost = total_cost
        self.budget_spent = budget_spent
        self.stopping_status = stopping_status

    def __repr__(self) -> str:
        return (f"OptimizeResult(fun={self.fun!r}, x={np.array2string(self.x, precision=6)}, "
                f"nfev={self.nfev}, total_cost={self.total_cost:.4g}, "
                f"stop_reason={self.stop_reason!r})")


class _Progress:
    """tqdm.auto (terminals and notebooks) if installed, else one updating stderr line on a
    terminal, else nothing."""

    def __init__(self, enabled: bool, total: Optional[float], unit: str) -> None:
        self.bar = None
        self.line = False
        self.total = total
        self.unit = unit
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm  # type: ignore

            self.bar = tqdm(total=total, unit=unit, desc="pandora", leave=True)
        except Exception:  # noqa: BLE001 - any import problem: fall back to the plain line
            self.line = sys.stderr.isatty()

    def update(self, n: int, spent: float, cost: float, best: float) -> None:
        if self.bar is not None:
            self.bar.update(cost if self.total is not None else 1)
            self.bar.set_postfix(best=f"{best:.6g}", trials=n, refresh=False)
        elif self.line:
            tot = f"/{self.total:.4g}" if self.total is not None else ""
            sys.stderr.write(f"\rpandora: {n} trials, cost {spent:.4g}{tot} {self.unit}, "
                             f"best {best:.6g}   ")
            sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.line:
            sys.stderr.write("\n")


def _check_bounds(bounds: Any) -> np.ndarray:
    try:
        b = np.asarray(bounds, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("bounds must be a sequence of (low, high) pairs") from None
    if b.ndim != 2 or b.shape[1] != 2 or b.shape[0] == 0:
        raise ValueError(f"bounds must have shape (d, 2) with d >= 1, got shape {b.shape}")
    for k, (lo, hi) in enumerate(b):
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds[{k}] = ({lo}, {hi}): need finite low < high")
    return b


class _Loop:
    """The Python half of one loop: calls ``f`` on a trial, interprets what it returns as the
    cost setting says, and keeps the history."""

    def __init__(self, f: Callable[[np.ndarray], Any], d: int, cost: CostArg, kind: str,
                 direction: str) -> None:
        self.f = f
        self.d = d
        self.cost = cost
        self.kind = kind
        self.sign = 1.0 if direction == "maximize" else -1.0
        self.best = -math.inf
        self.spent = 0.0
        self.history: List[Dict[str, Any]] = []
        self.nonfinite: Dict[int, float] = {}
        self.raised: Optional[BaseException] = None

    def point(self, t: Dict[str, Any]) -> np.ndarray:
        return np.array([t["params"][f"x{k}"] for k in range(self.d)], dtype=float)

    def evaluate(self, trial_json: str) -> Tuple[Optional[float], Optional[float], Optional[str],
                                                 float, bool]:
        """``(value, cost, error, elapsed, stop)`` for the native loop (see
        ``crates/pandora-py/src/optimize.rs``)."""
        t = json.loads(trial_json)
        x = self.point(t)
        t0 = time.perf_counter()
        try:
            out = self.f(x.copy())
        except BaseException as e:  # noqa: BLE001 - raised again once the loop has returned
            self.raised = e
            reason = f"exception in the objective: {type(e).__name__}: {e}"
            return None, None, reason, time.perf_counter() - t0, True
        elapsed = max(time.perf_counter() - t0, 1e-9)
        c: Optional[float] = None
        try:
            if self.cost == "reported":
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise ValueError("with cost='reported', f must return (value, cost)")
                value, c = float(out[0]), float(out[1])
            else:
                value = float(out)
                if callable(self.cost):
                    c = float(self.cost(x.copy()))
            if c is not None and not (math.isfinite(c) and c > 0):
                raise ValueError(f"the cost must be finite and > 0, got {c} at x = {x}")
        except BaseException as e:  # noqa: BLE001 - raised again once the loop has returned
            self.raised = e
            return None, None, f"invalid output: {e}", elapsed, True
        if not math.isfinite(value):
            self.nonfinite[t["number"]] = value
            return None, c, f"non-finite value {value}", elapsed, False
        return value, c, None, elapsed, False

    def told(self, t: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """Adds a recorded trial to the history; returns its entry (``None`` for a trial failed
        by an exception, which is raised instead)."""
        number = t["number"]
        if t["state"] == "failed" and number not in self.nonfinite:
            return None
        value = t["objective"] if t["state"] == "complete" else self.nonfinite.pop(number)
        c = t.get("cost")
        if t["state"] == "complete":
            self.best = max(self.best, self.sign * value)
            self.spent += c
        entry = {"number": number, "x": self.point(t), "value": value, "cost": c,
                 "phase": (t.get("decision") or {}).get("phase"), "best": self.sign * self.best}
        self.history.append(entry)
        return entry


def _optimize(
    f: Callable[[np.ndarray], Any],
    bounds: Any,
    direction: str,
    *,
    budget: Optional[float],
    cost: CostArg,
    acquisition: str,
    seed: int,
    max_trials: Optional[int],
    initial_design: Optional[int],
    lam: Optional[float],
    stopping: Optional[str],
    stopping_lambda: Union[None, float, str],
    stopping_options: Optional[Dict[str, Any]],
    progress: bool,
    storage: Optional[str],
    name: Optional[str],
    workers: int = 1,
) -> OptimizeResult:
    if not callable(f):
        raise ValueError("f must be callable")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if workers > 1 and (storage is None or ":memory:" in storage):
        raise ValueError("workers > 1 needs a study in a file or PostgreSQL: give storage=")
    b = _check_bounds(bounds)
    d = b.shape[0]
    if budget is None and max_trials is None and stopping != "pbgi":
        raise ValueError("give a budget (in cost units), max_trials and/or stopping='pbgi'")
    if cost is None:
        kind = "uniform"
    elif cost == "runtime":
        kind = "runtime"
    elif cost == "reported":
        kind = "reported"
    elif callable(cost):
        kind = "reported"
    else:
        raise ValueError(f"cost must be None, 'runtime', 'reported' or a callable, got {cost!r}")
    space = {f"x{k}": (float(b[k, 0]), float(b[k, 1])) for k in range(d)}
    study = Study.create(
        name or f"{direction}-{int(time.time() * 1e6)}",
        storage or "sqlite::memory:",
        space=space,
        direction=direction,
        cost=kind,
        budget=budget,
        max_trials=max_trials,
        acquisition=acquisition,
        seed=seed,
        initial_design=initial_design,
        lam=lam,
        stopping=stopping,
        stopping_lambda=stopping_lambda,
        stopping_options=stopping_options,
    )
    unit = {"uniform": "evals", "runtime": "s"}.get(kind, "cost")
    bar = _Progress(progress, budget, unit)
    loop = _Loop(f, d, cost, kind, direction)

    # The worker loop is Pandora's own (the one `pandora run` runs): it asks, calls `evaluate`,
    # tells, and calls `told` after each recorded trial; an exception in either ends it and is
    # raised here.
    def told(trial_json: str) -> None:
        entry = loop.told(json.loads(trial_json))
        if entry is not None:
            bar.update(len(loop.history), loop.spent, entry["cost"], entry["best"])

    try:
        finished = study._native.optimize(loop.evaluate, told, workers, study._worker)
    finally:
        bar.close()
    if loop.raised is not None:
        raise loop.raised
    study._finished = finished
    s = study.summary
    if s["best"] is None:
        x_best = np.full(d, np.nan)
        f_best = math.nan
    else:
        x_best = np.array([s["best"]["params"][f"x{k}"] for k in range(d)], dtype=float)
        f_best = float(s["best"]["value"])
    return OptimizeResult(x_best, f_best, loop.history, study.stop_reason, study,
                          float(s["total_cost"]), float(s["budget_spent"]), s["stopping"])


def minimize(
    f: Callable[[np.ndarray], Any],
    bounds: Sequence[Tuple[float, float]],
    *,
    budget: Optional[float] = None,
    cost: CostArg = None,
    acquisition: str = "pbgi_d",
    seed: int = 0,
    max_trials: Optional[int] = None,
    initial_design: Optional[int] = None,
    lam: Optional[float] = None,
    stopping: Optional[str] = None,
    stopping_lambda: Union[None, float, str] = None,
    stopping_options: Optional[Dict[str, Any]] = None,
    progress: bool = True,
    storage: Optional[str] = None,
    name: Optional[str] = None,
    workers: int = 1,
) -> OptimizeResult:
    """Minimizes ``f(x)`` over the box ``bounds`` by cost-aware Bayesian optimization.

    Args:
        f: objective, called with a 1-D NumPy array of length ``d``; returns a float (or
            ``(value, cost)`` with ``cost="reported"``). A non-finite value marks the trial failed.
        bounds: ``d`` pairs ``(low, high)``.
        budget: total budget in cost units: evaluations for ``cost=None``, seconds for
            ``"runtime"``, the callable's units otherwise. The loop stops before a trial that
            cannot fit (for unknown costs: whose *predicted* cost does not fit).
        cost: ``None`` (every evaluation costs 1), ``"runtime"`` (measured wall time of ``f``),
            ``"reported"`` (``f`` returns ``(value, cost)``), or a callable ``cost(x) -> c > 0``
            called after each evaluation. The policy learns unknown costs with a log-cost GP.
        acquisition: ``"pbgi_d"`` (default: the Pandora's Box Gittins index with λ decayed by the
            Gittins stopping condition), ``"pbgi"`` (fixed ``lam``), ``"log_ei"``, ``"log_eipc"``,
            ``"ei"``, ``"ucb"``, ``"ts"``, ``"random"``, ...
        seed: seed of the initial design and the policy (runs are reproducible).
        max_trials: maximum number of evaluations.
        initial_design: size of the Sobol initial design (default ``2 (d + 1)``).
        lam: the fixed λ of ``acquisition="pbgi"``.
        stopping: ``"pbgi"`` adds the cost-aware PBGI stopping rule: stop when no point's
            expected improvement is worth ``stopping_lambda`` times its expected cost
            (``max_x log EIPC(x) <= log λ``). Then ``budget`` and ``max_trials`` may both be
            omitted.
        stopping_lambda: the rule's λ in objective units per cost unit, or ``"auto"`` (needs a
            budget: λ = U/(B − C), so that the expected total cost stays within the budget).
        stopping_options: ``burn_in``, ``debounce``, ``window``, ... (see
            :meth:`pandora.Study.create`).
        progress: show a progress bar (tqdm.auto if installed, else a stderr line on terminals).
        storage, name: keep the study in this database under this name (default: in memory).
        workers: evaluations run at once, each in a thread of its own (worth it when ``f``
            releases the GIL: a subprocess, a simulation in native code). More than one needs
            ``storage`` (a file or PostgreSQL); every worker asks, evaluates and tells on its own
            connection, as ``pandora run --workers`` does.

    The loop is Pandora's own worker loop (the one ``pandora run`` runs): each trial keeps a
    heartbeat while ``f`` runs (with ``storage``, another process can see it is alive), and an
    exception in ``f`` (``KeyboardInterrupt`` too) fails the trial, ends the loop and is raised.

    Returns:
        An :class:`OptimizeResult` (best ``x`` and ``fun``, ``history``, ``stop_reason``,
        ``stopping_status``, costs).
    """
    return _optimize(f, bounds, "minimize", budget=budget, cost=cost, acquisition=acquisition,
                     seed=seed, max_trials=max_trials, initial_design=initial_design, lam=lam,
                     stopping=stopping, stopping_lambda=stopping_lambda,
                     stopping_options=stopping_options, progress=progress, storage=storage,
                     name=name, workers=workers)


def maximize(
    f: Callable[[np.ndarray], Any],
    bounds: Sequence[Tuple[float, float]],
    *,
    budget: Optional[float] = None,
    cost: CostArg = None,
    acquisition: str = "pbgi_d",
    seed: int = 0,
    max_trials: Optional[int] = None,
    initial_design: Optional[int] = None,
    lam: Optional[float] = None,
    stopping: Optional[str] = None,
    stopping_lambda: Union[None, float, str] = None,
    stopping_options: Optional[Dict[str, Any]] = None,
    progress: bool = True,
    storage: Optional[str] = None,
    name: Optional[str] = None,
    workers: int = 1,
) -> OptimizeResult:
    """Maximizes ``f(x)`` over the box ``bounds``; the arguments are those of :func:`minimize`."""
    return _optimize(f, bounds, "maximize", budget=budget, cost=cost, acquisition=acquisition,
                     seed=seed, max_trials=max_trials, initial_design=initial_design, lam=lam,
                     stopping=stopping, stopping_lambda=stopping_lambda,
                     stopping_options=stopping_options, progress=progress, storage=storage,
                     name=name, workers=workers)
