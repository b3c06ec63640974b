"""Pandora inside Optuna: a cost-aware sampler and the cost-aware stopping rule.

An existing Optuna script changes in two lines (docs/optuna.md)::

    sampler = pandora.optuna.PandoraSampler(cost="runtime", budget=3600, seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler, storage=...)
    study.optimize(objective, callbacks=[pandora.optuna.StoppingCallback(sampler, lam="auto")])

**How it works.** :class:`PandoraSampler` is an adapter, not a second BO loop: every
relative sample reads the study's trials from the Optuna storage, turns them into a Pandora
history (complete trials with their value and cost, failed and pruned trials as failed, RUNNING
trials of every worker as pending points) and asks the same decision function as
:meth:`pandora.Study.ask` (``NativeStudy.propose``: GP fit, log-cost GP for unknown costs,
acquisition with pending points, budget, PBGI-D's λ, the stopping rule) for the next point. The
proposal is written to the trial's system attributes (``pandora:params``, ``pandora:decision``)
before the lock is released, so that the next worker sees it as pending; the study's state
(warm starts, the automatic λ, a stop) is the study system attribute ``pandora:state:<space>``.

**Concurrency.** The read-decide-write sequence runs under a lock: a file lock next to the
database for SQLite storages, an advisory lock (``pg_advisory_lock``) for PostgreSQL, a
process-wide lock otherwise (in-memory storage, ``n_jobs > 1``). Four processes on one SQLite or
PostgreSQL study therefore never receive the same point while trials are pending. Other storages
(journal, gRPC, MySQL) get the process-wide lock only: processes may then decide at the same
moment and propose close points.

**Parameters.** Floats (log or linear; with ``step`` on their grid), ints (log or linear; with
``step`` on their grid) and categoricals; a parameter whose distribution is a single value is
left to Optuna. The relative space is Optuna's intersection search space (as for Optuna's
``GPSampler``); parameters outside it (conditional spaces, the first trial) are sampled by the
independent sampler (``optuna.samplers.RandomSampler(seed)`` by default).

**Finishing.** When the budget is spent, the next trial's predicted cost does not fit, or the
stopping rule fires, the sampler calls ``study.stop()`` and raises ``optuna.TrialPruned`` from
the trial's first ``suggest_*`` call (the objective has not done its work yet): the trial is
recorded as pruned with the reason in its user attribute ``pandora:stop_reason``, the study's
user attribute ``pandora:stop_reason`` says why, and ``study.optimize`` returns.

**Pruning.** :class:`GittinsPruner` answers ``trial.should_prune()`` with the cost-aware
freeze-thaw index policy of ``pandora_core::freeze_thaw`` (docs/freeze-thaw.md): a trial is
pruned when the Gittins index of its learning curve is at most the best complete run's value (the
policy would never continue it again), or, with ``rule="new_configuration"``, whenever the best
new configuration's index is larger.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import math
import os
import threading
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

try:
    import optuna
    from optuna.distributions import (
        BaseDistribution,
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )
    from optuna.samplers import BaseSampler, RandomSampler
    from optuna.trial import FrozenTrial, TrialState
except ImportError as _e:  # pragma: no cover - exercised only without optuna
    raise ImportError(
        "pandora.optuna needs Optuna: pip install optuna (tested with optuna==5.0.0)") from _e

from ._study import Study

__all__ = ["GittinsPruner", "PandoraSampler", "StoppingCallback"]

_PARAMS_KEY = "pandora:params"
_DECISION_KEY = "pandora:decision"
_STATE_KEY = "pandora:state:"
_STOP_KEY = "pandora:stop_reason"
_STOPPING_PREFIX = "pandora:stopping:"
_PRUNER_KEY = "pandora:pruner"
_REFUSED_KEY = "pandora:refused"

CostArg = Union[None, str, Callable[[Dict[str, Any]], float]]


# ---------------------------------------------------------------------------------------- space
class _Param:
    """One Optuna distribution as a Pandora parameter: floats and ints as they are, stepped
    floats and ints as the index ``k`` of their grid ``low + k·step``, categoricals as the index
    of their choice (one-hot in the unit cube)."""

    def __init__(self, name: str, dist: BaseDistribution) -> None:
        self.name = name
        self.dist = dist
        self.grid: Optional[float] = None
        if isinstance(dist, FloatDistribution):
            if dist.step is not None:
                self.grid = float(dist.step)
                self.decl = self._grid_decl(dist.low, dist.high, dist.step)
            else:
                self.decl = {"type": "float", "low": dist.low, "high": dist.high, "log": dist.log}
        elif isinstance(dist, IntDistribution):
            if dist.step != 1:
                self.grid = float(dist.step)
                self.decl = self._grid_decl(dist.low, dist.high, dist.step)
            else:
                self.decl = {"type": "int", "low": float(dist.low), "high": float(dist.high),
                             "log": dist.log}
        elif isinstance(dist, CategoricalDistribution):
            self.decl = {"type": "categorical", "choices": list(range(len(dist.choices)))}
        else:
            raise ValueError(f"parameter {name!r}: unsupported distribution {dist!r}")

    @staticmethod
    def _grid_decl(low: float, high: float, step: float) -> Dict[str, Any]:
        n = int(round((high - low) / step))
        return {"type": "int", "low": 0.0, "high": float(n), "log": False}

    def to_pandora(self, value: Any) -> Optional[float]:
        """The Optuna value in Pandora's terms, or ``None`` if it is not in the distribution."""
        try:
            internal = self.dist.to_internal_repr(value)
        except (ValueError, TypeError):
            return None
        if not self.dist._contains(internal):
            return None
        if isinstance(self.dist, CategoricalDistribution):
            return int(internal)
        if self.grid is not None:
            return int(round((internal - self.dist.low) / self.grid))
        if isinstance(self.dist, IntDistribution):
            return int(internal)
        return float(internal)

    def from_pandora(self, v: Any) -> Any:
        """Pandora's value as Optuna's external value (inside the distribution)."""
        d = self.dist
        if isinstance(d, CategoricalDistribution):
            return d.choices[int(v)]
        if self.grid is not None:
            value = d.low + int(v) * self.grid
            value = min(max(value, d.low), d.high)
            return int(value) if isinstance(d, IntDistribution) else float(value)
        if isinstance(d, IntDistribution):
            return int(min(max(int(round(v)), d.low), d.high))
        return float(min(max(float(v), d.low), d.high))


class _Space:
    """An Optuna relative search space, its Pandora declaration and a key naming it."""

    def __init__(self, search_space: Mapping[str, BaseDistribution]) -> None:
        self.params = [_Param(name, search_space[name]) for name in sorted(search_space)]
        text = json.dumps([[p.name, optuna.distributions.distribution_to_json(p.dist)]
                           for p in self.params])
        self.key = hashlib.sha256(text.encode()).hexdigest()[:16]

    def declaration(self) -> Dict[str, Any]:
        return {p.name: dict(p.decl) for p in self.params}

    def encode(self, params: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """Optuna's external values in Pandora's terms, or ``None`` if one is missing or out of
        its distribution."""
        out = {}
        for p in self.params:
            if p.name not in params:
                return None
            v = p.to_pandora(params[p.name])
            if v is None:
                return None
            out[p.name] = v
        return out

    def decode(self, params: Mapping[str, Any]) -> Dict[str, Any]:
        return {p.name: p.from_pandora(params[p.name]) for p in self.params}


# ----------------------------------------------------------------------------------------- lock
_PROCESS_LOCKS: Dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def _process_lock(key: str) -> threading.Lock:
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(key, threading.Lock())


def _rdb_engine(study: "optuna.Study") -> Any:
    """The SQLAlchemy engine of an RDB storage (possibly behind Optuna's cache), else ``None``."""
    storage = study._storage
    backend = getattr(storage, "_backend", storage)
    if isinstance(backend, optuna.storages.RDBStorage):
        return backend.engine
    return None


@contextmanager
def _decision_lock(study: "optuna.Study") -> Iterator[None]:
    """Excludes every other decision on this study while held (see the module documentation)."""
    engine = _rdb_engine(study)
    key = f"{id(study._storage)}:{study._study_id}"
    with _process_lock(key):
        if engine is None:
            yield
            return
        backend = engine.url.get_backend_name()
        database = engine.url.database
        if backend == "sqlite" and database and database != ":memory:":
            import fcntl

            with open(os.path.abspath(database) + ".pandora-lock", "a+") as f:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        elif backend == "postgresql":
            from sqlalchemy import text

            with engine.connect() as conn:
                # Session-level advisory lock: key space 0x50414e44 ("PAND"), the study's id.
                conn.execute(text("SELECT pg_advisory_lock(:a, :b)"),
                             {"a": 0x50414E44, "b": int(study._study_id)})
                conn.commit()
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:a, :b)"),
                                 {"a": 0x50414E44, "b": int(study._study_id)})
                    conn.commit()
        else:
            yield


# -------------------------------------------------------------------------------------- sampler
class PandoraSampler(BaseSampler):
    """Optuna sampler running Pandora's cost-aware Bayesian optimization.

    Args:
        acquisition: any acquisition of docs/acquisitions.md that proposes one trial at a time:
            ``"pbgi_d"`` (default), ``"pbgi"`` (needs ``lam``), ``"log_ei"``, ``"ei"``,
            ``"log_eipc"``, ``"eipc"``, ``"ucb"``, ``"ts"``, ``"random"``, ...
        cost: what a trial costs: ``None`` (every trial costs 1: the budget counts trials),
            ``"runtime"`` (the trial's duration from Optuna's timestamps, in seconds),
            ``"reported"`` (the trial's user attribute ``cost_attr``, set by the objective with
            ``trial.set_user_attr("cost", c)``) or a callable ``cost(params) -> c > 0`` of the
            trial's parameters (Optuna's values). Unknown costs are learned by Pandora's log-cost
            GP; a callable's values are learned the same way.
        cost_attr: the user attribute holding reported costs (default ``"cost"``).
        budget: total budget in cost units. As in :class:`pandora.Study`, a trial is handed out
            only while the budget is not spent and its (predicted) cost fits; then the study
            stops (module documentation, "Finishing").
        seed: seed of the initial design, the policy and the independent sampler: a
            single-worker run with deterministic costs is reproducible.
        initial_design: size of the Sobol initial design (default ``2 (d + 1)``).
        lam: fixed λ of ``acquisition="pbgi"``. lambda0, decay: PBGI-D's initial λ and divisor.
        beta: fixed UCB β.
        predicted_cost_must_fit: with unknown costs, do not start a trial whose predicted cost
            exceeds the rest of the budget.
        independent_sampler: sampler for parameters outside the relative search space (default
            ``RandomSampler(seed)``).
    """

    def __init__(
        self,
        *,
        acquisition: str = "pbgi_d",
        cost: CostArg = None,
        cost_attr: str = "cost",
        budget: Optional[float] = None,
        seed: Optional[int] = None,
        initial_design: Optional[int] = None,
        lam: Optional[float] = None,
        lambda0: Optional[float] = None,
        decay: Optional[float] = None,
        beta: Optional[float] = None,
        predicted_cost_must_fit: bool = True,
        independent_sampler: Optional[BaseSampler] = None,
    ) -> None:
        if cost is None:
            kind = "uniform"
        elif cost in ("runtime", "reported"):
            kind = str(cost)
        elif callable(cost):
            kind = "reported"
        else:
            raise ValueError(f"cost must be None, 'runtime', 'reported' or a callable of the "
                             f"params, got {cost!r}")
        if not isinstance(cost_attr, str) or not cost_attr:
            raise ValueError(f"cost_attr must be a non-empty string, got {cost_attr!r}")
        self._cost = cost
        self._cost_kind = kind
        self._cost_attr = cost_attr
        self._seed = 0 if seed is None else int(seed)
        self._options: Dict[str, Any] = dict(
            cost=kind, budget=budget, acquisition=acquisition, seed=self._seed,
            initial_design=initial_design, lam=lam, lambda0=lambda0, decay=decay, beta=beta,
            predicted_cost_must_fit=predicted_cost_must_fit)
        self._stopping: Optional[Dict[str, Any]] = None
        # Checks the options now (a study over a one-parameter space), so errors come early.
        self._native_for(_Space({"x": FloatDistribution(0.0, 1.0)}), "minimize")
        self._independent = independent_sampler or RandomSampler(seed=seed)
        self._natives: Dict[Any, Any] = {}
        self._cost_cache: Dict[int, float] = {}
        self._last_check: Optional[Dict[str, Any]] = None
        self._stop_reason: Optional[str] = None

    # ------------------------------------------------------------------ configuration
    @property
    def budget(self) -> Optional[float]:
        """The budget in cost units (``None``: none)."""
        return self._options["budget"]

    @property
    def stopping_status(self) -> Optional[Dict[str, Any]]:
        """The stopping rule's last check in this process (``rule``, ``lambda``, ``statistic``,
        ``value``, ``threshold``, ``iteration``, ``fired``), or ``None`` before the first."""
        return self._last_check

    @property
    def stop_reason(self) -> Optional[str]:
        """Why this sampler stopped the study (budget, stopping rule), or ``None``."""
        return self._stop_reason

    def _set_stopping(self, lam: Union[float, str], options: Dict[str, Any]) -> None:
        """Adds the PBGI stopping rule (by :class:`StoppingCallback`): checked at every model
        step from now on."""
        table = {"lam": lam, "options": dict(options)}
        if table == self._stopping:
            return
        previous, self._stopping = self._stopping, table
        try:  # validates λ and the options (errors name them)
            self._native_for(_Space({"x": FloatDistribution(0.0, 1.0)}), "minimize")
        except Exception:
            self._stopping = previous
            raise
        self._natives.clear()

    def _native_for(self, space: _Space, direction: str) -> Any:
        """The in-memory study whose decision function proposes points of ``space`` (its
        storage is never used: the trials come from Optuna's)."""
        key = (space.key, direction)
        natives = getattr(self, "_natives", {})  # {} while __init__ checks the options
        if key not in natives:
            stopping = {}
            if self._stopping is not None:
                stopping = dict(stopping="pbgi", stopping_lambda=self._stopping["lam"],
                                stopping_options=self._stopping["options"] or None)
            natives[key] = Study.create("optuna", "sqlite::memory:", space=space.declaration(),
                                        direction=direction, **self._options, **stopping)._native
        return natives[key]

    # ------------------------------------------------------------------ BaseSampler
    def reseed_rng(self) -> None:
        self._independent.reseed_rng()

    def infer_relative_search_space(self, study: "optuna.Study",
                                    trial: FrozenTrial) -> Dict[str, BaseDistribution]:
        self._raise_error_if_multi_objective(study)
        # Optuna's intersection over complete and pruned trials, without the pruned trials that
        # have no parameter (pruned before their first suggest: the trials this sampler refuses
        # when the study is finished). One of those would empty the intersection, and every
        # later trial of every worker would be sampled independently, past the budget.
        trials = [t for t in study._get_trials(deepcopy=False, use_cache=True,
                                               states=(TrialState.COMPLETE, TrialState.PRUNED))
                  if t.params or t.state == TrialState.COMPLETE]
        space = optuna.search_space.intersection_search_space(trials, include_pruned=True)
        return {name: dist for name, dist in space.items() if not dist.single()}

    def sample_independent(self, study: "optuna.Study", trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._independent.sample_independent(study, trial, param_name,
                                                    param_distribution)

    def sample_relative(self, study: "optuna.Study", trial: FrozenTrial,
                        search_space: Dict[str, BaseDistribution]) -> Dict[str, Any]:
        if not search_space:
            # No relative space (no trial has finished yet): the independent sampler proposes,
            # but only while the budget allows a trial.
            self._check_budget_without_space(study, trial)
            return {}
        self._raise_error_if_multi_objective(study)
        space = _Space(search_space)
        direction = "maximize" if study.direction == optuna.study.StudyDirection.MAXIMIZE \
            else "minimize"
        native = self._native_for(space, direction)
        storage, state_key = study._storage, _STATE_KEY + space.key
        with _decision_lock(study):
            trials = storage.get_all_trials(study._study_id, deepcopy=False)
            history = [h for t in trials if t.number != trial.number
                       for h in [self._history_entry(t, space)] if h is not None]
            state = storage.get_study_system_attrs(study._study_id).get(state_key)
            out = json.loads(native.propose(json.dumps(history), state or "null"))
            if out["finished"] is None:
                unseen = self._unseen_running(trials, trial, space)
                full = self._uniform_budget_full(trials, unseen)
                if full is not None:
                    out.update(finished=full, state=None)
            if out["state"] is not None:
                storage.set_study_system_attr(study._study_id, state_key,
                                              json.dumps(out["state"]))
            if out["finished"] is None:
                storage.set_trial_system_attr(trial._trial_id, _PARAMS_KEY,
                                              {"space": space.key, "params": out["params"]})
                storage.set_trial_system_attr(trial._trial_id, _DECISION_KEY,
                                              json.dumps(out["decision"]))
            else:  # seen by the next decision as refused, not as a trial still to sample
                storage.set_trial_system_attr(trial._trial_id, _REFUSED_KEY, True)
        if out["finished"] is not None:
            self._finish(study, trial, out["finished"], out["state"])
        self._last_check = (out["decision"] or {}).get("stopping") or self._last_check
        return space.decode(out["params"])

    def after_trial(self, study: "optuna.Study", trial: FrozenTrial, state: TrialState,
                    values: Optional[Sequence[float]]) -> None:
        # A budget spent by the finished trials stops the loop now rather than at the next
        # trial's first suggest (which would then be pruned).
        budget = self.budget
        if budget is None or self._stop_reason is not None:
            return
        spent = 0.0
        for t in study._storage.get_all_trials(study._study_id, deepcopy=False):
            if t.number == trial.number:
                t = copy.copy(t)  # the trial being finished, in its final state
                t.state = state
                t.datetime_complete = datetime.datetime.now()
            if t.state.is_finished():
                spent += self._trial_cost(t) or 0.0
        if spent >= budget:
            self._stop(study, f"budget exhausted: spent {spent:.4f} of {budget:.4f}")

    # ------------------------------------------------------------------ budget
    def _unseen_running(self, trials: Sequence[FrozenTrial], trial: FrozenTrial,
                        space: _Space) -> int:
        """RUNNING trials of other workers that are not points of ``space`` yet: Optuna created
        them, but they have not been sampled (their first ``suggest_*`` has not run)."""
        return sum(1 for t in trials
                   if t.state == TrialState.RUNNING and t.number != trial.number
                   and not t.system_attrs.get(_REFUSED_KEY)
                   and self._history_entry(t, space) is None)

    def _uniform_budget_full(self, trials: Sequence[FrozenTrial], unseen: int) -> Optional[str]:
        """With uniform costs (every trial costs 1), why one more trial does not fit the budget
        when the ``unseen`` running trials are committed too, else ``None``.

        Pandora's decision commits the running trials it sees (points of the space) to the
        budget; a trial another worker's Optuna created but has not sampled yet is not one of
        them, and counting it here closes that window. With unknown costs running trials are not
        committed (as in a Pandora study), so nothing is added."""
        budget = self.budget
        if budget is None or self._cost_kind != "uniform" or unseen == 0:
            return None
        spent = sum(1.0 for t in trials if t.state == TrialState.COMPLETE)
        running = sum(1.0 for t in trials if t.state == TrialState.RUNNING
                      and not t.system_attrs.get(_REFUSED_KEY))
        # `running` counts the trial being sampled itself (it is RUNNING).
        if spent + running > budget * (1.0 + 1e-12):
            return (f"budget exhausted: spent {spent:.4f} of {budget:.4f} with "
                    f"{int(running) - 1} other trials running")
        return None

    def _check_budget_without_space(self, study: "optuna.Study", trial: FrozenTrial) -> None:
        """The budget gate of a trial sampled independently (no relative space): it starts only
        while the budget is not spent, and with uniform costs only while the running trials
        (this one included) fit it; otherwise the study finishes (``TrialPruned``)."""
        budget = self.budget
        if budget is None:
            return
        with _decision_lock(study):
            trials = study._storage.get_all_trials(study._study_id, deepcopy=False)
            spent = sum(self._trial_cost(t) or 0.0 for t in trials if t.state.is_finished())
            reason = None
            if spent >= budget:
                reason = f"budget exhausted: spent {spent:.4f} of {budget:.4f}"
            else:
                reason = self._uniform_budget_full(trials, unseen=1)
            if reason is not None:
                study._storage.set_trial_system_attr(trial._trial_id, _REFUSED_KEY, True)
        if reason is not None:
            self._finish(study, trial, reason, None)

    # ------------------------------------------------------------------ history
    def _trial_cost(self, t: FrozenTrial) -> Optional[float]:
        """The cost of a finished trial, or ``None`` when unknown."""
        kind = self._cost_kind
        if kind == "uniform":
            return 1.0 if t.state == TrialState.COMPLETE else None
        if kind == "runtime":
            if t.datetime_start is None or t.datetime_complete is None:
                return None
            return max((t.datetime_complete - t.datetime_start).total_seconds(), 1e-9)
        if callable(self._cost):
            if t.state != TrialState.COMPLETE:
                return None
            if t._trial_id not in self._cost_cache:
                c = float(self._cost(dict(t.params)))
                if not (math.isfinite(c) and c > 0):
                    raise ValueError(f"cost(params) must be finite and > 0, got {c} for trial "
                                     f"{t.number}")
                self._cost_cache[t._trial_id] = c
            return self._cost_cache[t._trial_id]
        c = t.user_attrs.get(self._cost_attr)
        if c is None:
            return None
        try:
            c = float(c)
        except (TypeError, ValueError):
            raise ValueError(f"trial {t.number}: user attribute {self._cost_attr!r} must be a "
                             f"number, got {c!r}") from None
        if not (math.isfinite(c) and c > 0):
            raise ValueError(f"trial {t.number}: user attribute {self._cost_attr!r} must be "
                             f"finite and > 0, got {c}")
        return c

    def _history_entry(self, t: FrozenTrial, space: _Space) -> Optional[Dict[str, Any]]:
        """The trial as an entry of Pandora's history, or ``None`` if it is not a point of the
        space (yet)."""
        if t.state == TrialState.WAITING:
            return None
        stored = t.system_attrs.get(_PARAMS_KEY)
        if isinstance(stored, dict) and stored.get("space") == space.key:
            params = stored["params"]
        else:
            source = dict(t.system_attrs.get("fixed_params") or {})
            source.update(t.params)
            params = space.encode(source)
            if params is None:
                return None
        entry: Dict[str, Any] = {"number": t.number, "params": params}
        if t.datetime_start is not None:
            entry["created_at"] = t.datetime_start.timestamp()
        if t.datetime_complete is not None:
            entry["finished_at"] = t.datetime_complete.timestamp()
        decision = t.system_attrs.get(_DECISION_KEY)
        if isinstance(decision, str) and isinstance(stored, dict) \
                and stored.get("space") == space.key:
            entry["decision"] = json.loads(decision)
        if t.state == TrialState.RUNNING:
            entry["state"] = "running"
            return entry
        cost = self._trial_cost(t)
        if t.state == TrialState.COMPLETE and t.value is not None and math.isfinite(t.value):
            if cost is None:
                warnings.warn(f"PandoraSampler: trial {t.number} is complete but has no cost "
                              f"(user attribute {self._cost_attr!r}); it is left out",
                              RuntimeWarning, stacklevel=2)
                return None
            entry.update(state="complete", objective=float(t.value), cost=cost)
        else:  # failed, pruned, or complete without a finite value
            entry.update(state="failed", cost=cost)
        return entry

    # ------------------------------------------------------------------ finishing
    def _finish(self, study: "optuna.Study", trial: FrozenTrial, reason: str,
                state: Optional[Dict[str, Any]]) -> None:
        stopped = (state or {}).get("stopped")
        if isinstance(stopped, dict) and isinstance(stopped.get("check"), dict):
            self._last_check = stopped["check"]
        study._storage.set_trial_user_attr(trial._trial_id, _STOP_KEY, reason)
        self._stop(study, reason)
        raise optuna.TrialPruned(f"pandora: {reason}")

    def _stop(self, study: "optuna.Study", reason: str) -> None:
        self._stop_reason = reason
        study._storage.set_study_user_attr(study._study_id, _STOP_KEY, reason)
        try:
            study.stop()
        except RuntimeError:  # outside study.optimize (ask-and-tell): the caller stops
            pass


# ------------------------------------------------------------------------------------- callback
class StoppingCallback:
    r"""The cost-aware PBGI/LogEIPC stopping rule for ``study.optimize(..., callbacks=[...])``.

    The study stops when no point's expected improvement is worth λ times its expected cost,

    .. math:: \max_x \log \mathrm{EIPC}(x) = \max_x\,[\log \mathrm{EI}(x; y^*) -
              \log E[c(x)]] \le \log \lambda

    (docs/stopping.md). The rule needs the model of the next step, so it is checked by
    ``sampler`` (a :class:`PandoraSampler`) at every model step once this callback has run
    once; when it fires the sampler stops the study (``study.stop()``), the trial that would have
    been started is pruned, and the callback writes the check to the study's user attributes
    ``pandora:stopping:{rule,lambda,statistic,value,threshold,iteration,fired}`` and the reason
    to ``pandora:stop_reason`` (optuna-dashboard shows both).

    Args:
        sampler: the study's :class:`PandoraSampler`.
        lam: λ in objective units per cost unit (if 1000 s of training is worth 0.01 accuracy,
            ``1e-5``), or ``"auto"``: λ = U/(B − C) from the sampler's budget, chosen once at
            the first model step.
        burn_in, debounce, window: as in :meth:`pandora.Study.create`'s ``stopping_options``.
    """

    def __init__(self, sampler: PandoraSampler, lam: Union[float, str] = "auto", *,
                 burn_in: int = 0, debounce: int = 1, window: int = 1) -> None:
        if not isinstance(sampler, PandoraSampler):
            raise TypeError("StoppingCallback needs the study's PandoraSampler: the rule is "
                            f"checked at its model step, got {type(sampler).__name__}")
        options = {"burn_in": burn_in, "debounce": debounce, "window": window}
        sampler._set_stopping(lam, options)  # validates lam and the options now
        self._sampler = sampler

    def __call__(self, study: "optuna.Study", trial: FrozenTrial) -> None:
        check = self._sampler.stopping_status
        if check is not None:
            for key in ("rule", "lambda", "statistic", "value", "threshold", "iteration",
                        "fired"):
                if key in check:
                    study.set_user_attr(_STOPPING_PREFIX + key, check[key])
        reason = self._sampler.stop_reason
        if reason is not None:
            study.set_user_attr(_STOP_KEY, reason)
            study.stop()


# --------------------------------------------------------------------------------------- pruner
class GittinsPruner(optuna.pruners.BasePruner):
    r"""Cost-aware freeze-thaw pruning: a trial goes on while the index policy may still want to
    continue it.

    At every ``trial.should_prune()`` the pruner reads the study's learning curves (every trial's
    intermediate values at the schedule's steps) and makes one decision of the index policy of
    docs/freeze-thaw.md, ``pandora_core::freeze_thaw::decide``, computed in Rust: the
    learning-curve GP is fitted to the curves, and three numbers are compared on the objective's
    scale,

    * the Gittins index of continuing this trial (what its remaining steps may still reveal,
      net of λ times their cost),
    * the index of the best new configuration (the same, from the model's prior curve at the
      most promising untried point),
    * the best complete run's value (trials that reported every step).

    Optuna cannot resume a pruned trial, where freeze-thaw would only pause it. So, by default
    (``rule="dominated"``), a trial is pruned when the index policy would never continue it
    again: its index is at most the best complete run's value, which only grows while the trial
    waits (a paused run is resumed only while its index exceeds the best value in hand). With
    ``rule="new_configuration"`` the trial is pruned whenever the policy would not continue it
    now: a new configuration's index is larger, or no step is worth its cost (ties keep it).
    That rule prunes nearly every trial, since a fresh configuration's prior curve has more
    option value than a curve already observed (docs/optuna.md has the numbers). Other workers'
    running trials, pruned and complete trials inform the model but cannot be continued by this
    decision.

    Args:
        lam: λ > 0, the objective units one step of weight 1 is worth (if an epoch is worth 0.2
            accuracy points, ``0.002``). Larger λ prunes sooner.
        max_steps: the steps of a complete run, reported as Optuna steps ``0 .. max_steps − 1``
            (``for epoch in range(max_steps): trial.report(v, epoch)``). Give this or ``steps``.
        steps: the Optuna step numbers of a complete run, in increasing order (e.g. ``[1, 2, 4,
            8]``). Values reported at other steps are ignored; a trial's curve is the values at
            the first steps it reported without a gap.
        positions: the steps on the learning-curve model's time axis (default ``1 .. T``; give
            e.g. the training-set sizes).
        step_weights: the relative cost of each step (default 1 each); step ``t`` costs
            ``λ · step_weights[t]`` in objective units.
        step_cost: a callable ``step_cost(params) -> c > 0`` of the trial's parameters
            (Optuna's values, as the sampler's ``cost=``): the configuration's cost per step of
            weight 1, so that step ``t`` of the trial costs ``λ · c · step_weights[t]`` (e.g.
            an epoch's seconds as a function of the batch size). Default: 1 for every
            configuration. Only with ``rule="dominated"``, whose decision needs the trial's own
            cost alone (the other rule would also need the new configuration's).
        n_startup_trials: no pruning until this many trials are complete.
        n_warmup_steps: no pruning of a trial until it has reported more than this many steps.
        rule: ``"dominated"`` (default) or ``"new_configuration"`` (above).
        grid_points: grid values per step of each run's Markov chain (odd, default 101).
        seed: seed of the model fit and of the new configuration's search: a decision is a
            function of the curves and the seed.

    Each decision is written to the trial's user attribute ``pandora:pruner``: ``step`` (steps
    reported), ``action`` (``continue``, ``start`` or ``stop``), ``index`` (this trial's),
    ``start_index``, ``best_complete``, ``curves`` (trials in the model), ``running`` (other
    workers' running trials among them), ``step_cost`` (the trial's, 1 without a callable) and
    ``pruned``.
    For a minimized objective the indices are losses (smaller is better, the comparisons
    above reversed).
    """

    def __init__(self, lam: float, *, max_steps: Optional[int] = None,
                 steps: Optional[Sequence[int]] = None,
                 positions: Optional[Sequence[float]] = None,
                 step_weights: Optional[Sequence[float]] = None,
                 step_cost: Optional[Callable[[Dict[str, Any]], float]] = None,
                 n_startup_trials: int = 1, n_warmup_steps: int = 0,
                 rule: str = "dominated", grid_points: int = 101, seed: int = 0) -> None:
        if rule not in ("dominated", "new_configuration"):
            raise ValueError(f"rule: must be 'dominated' or 'new_configuration', got {rule!r}")
        self._rule = rule
        if step_cost is not None and not callable(step_cost):
            raise ValueError(f"step_cost: must be None or a callable of the params, got "
                             f"{step_cost!r}")
        if step_cost is not None and rule != "dominated":
            raise ValueError("step_cost: a configuration-dependent step cost needs "
                             "rule='dominated' (rule='new_configuration' would also need the "
                             "new configuration's cost, which is not modelled)")
        self._step_cost = step_cost
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) \
                or not (math.isfinite(lam) and lam > 0):
            raise ValueError(f"lam: must be a finite number > 0, got {lam!r}")
        if (max_steps is None) == (steps is None):
            raise ValueError("give exactly one of max_steps and steps")
        if steps is None:
            if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
                raise ValueError(f"max_steps: must be an int >= 1, got {max_steps!r}")
            steps = range(max_steps)
        steps = list(steps)
        if not steps or any(isinstance(s, bool) or not isinstance(s, int) for s in steps) \
                or any(b <= a for a, b in zip(steps, steps[1:])):
            raise ValueError(f"steps: must be increasing ints (at least one), got {steps!r}")
        for name, v in (("n_startup_trials", n_startup_trials),
                        ("n_warmup_steps", n_warmup_steps)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name}: must be an int >= 0, got {v!r}")
        self._steps = steps
        self._request: Dict[str, Any] = {
            "positions": [float(p) for p in (positions if positions is not None
                                             else range(1, len(steps) + 1))],
            "weights": None if step_weights is None else [float(w) for w in step_weights],
            "lambda": float(lam), "grid_points": int(grid_points), "seed": int(seed)}
        for name, v in (("positions", self._request["positions"]),
                        ("step_weights", self._request["weights"])):
            if v is not None and len(v) != len(steps):
                raise ValueError(f"{name}: {len(v)} values for {len(steps)} steps")
        self._n_startup = n_startup_trials
        self._n_warmup = n_warmup_steps
        self._natives: Dict[Any, Any] = {}
        # Checks λ, the schedule and the grid now, so errors come early.
        self._decide(_Space({"x": FloatDistribution(0.0, 1.0)}), "maximize",
                     [{"params": {"x": 0.5}, "values": [0.0]}])

    def curve(self, trial: FrozenTrial) -> List[float]:
        """The trial's values at the schedule's first steps, up to the first one it has not
        reported."""
        out = []
        for s in self._steps:
            v = trial.intermediate_values.get(s)
            if v is None or not math.isfinite(v):
                break
            out.append(float(v))
        return out

    def _decide(self, space: _Space, direction: str, curves: List[Dict[str, Any]],
                step_cost: float = 1.0) -> Dict[str, Any]:
        """The native decision; ``step_cost`` (the asked trial's, the first curve) scales λ.
        That prices exactly the asked trial's steps at ``λ · c · w_t``; the new
        configuration's index is priced with the same ``c``, which only ``rule="dominated"``,
        not using that index, can afford (the constructor refuses the other rule)."""
        key = (space.key, direction)
        if key not in self._natives:
            self._natives[key] = Study.create("optuna-pruner", "sqlite::memory:",
                                              space=space.declaration(),
                                              direction=direction)._native
        request = dict(self._request, curves=curves,
                       **{"lambda": self._request["lambda"] * step_cost})
        return json.loads(self._natives[key].decide_curves(json.dumps(request)))

    def prune(self, study: "optuna.Study", trial: FrozenTrial) -> bool:
        if study._is_multi_objective():
            raise ValueError("GittinsPruner does not support multi-objective studies")
        values = self.curve(trial)
        if len(values) <= self._n_warmup or len(values) >= len(self._steps):
            return False
        trials = study.get_trials(deepcopy=False)
        complete = sum(1 for t in trials if t.state == TrialState.COMPLETE)
        if complete < self._n_startup:
            return False
        space = _Space({n: d for n, d in trial.distributions.items() if not d.single()})
        if not space.params:
            return False
        curves = [{"params": space.encode(trial.params), "values": values}]
        for t in trials:
            if t.number == trial.number or t.state not in (
                    TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED):
                continue
            params, curve = space.encode(t.params), self.curve(t)
            if params is not None and curve:
                curves.append({"params": params, "values": curve, "busy": True})
        running = sum(1 for t in trials if t.state == TrialState.RUNNING
                      and t.number != trial.number and self.curve(t))
        direction = "maximize" if study.direction == optuna.study.StudyDirection.MAXIMIZE \
            else "minimize"
        cost = self._trial_step_cost(trial)
        out = self._decide(space, direction, curves, cost)
        action = out["action"]
        if self._rule == "dominated":
            keep = not out["dominated"][0]
        else:
            keep = action["action"] == "continue" and action["trial"] == 0
        study._storage.set_trial_user_attr(trial._trial_id, _PRUNER_KEY, {
            "step": len(values), "action": action["action"], "index": out["indices"][0],
            "start_index": out["start_index"], "best_complete": out["fallback"],
            "curves": len(curves), "running": running, "step_cost": cost,
            "pruned": not keep})
        return not keep

    def _trial_step_cost(self, trial: FrozenTrial) -> float:
        """``step_cost(params)`` of the trial (1 without a callable), checked finite and > 0."""
        if self._step_cost is None:
            return 1.0
        c = self._step_cost(dict(trial.params))
        if isinstance(c, bool) or not isinstance(c, (int, float)) \
                or not (math.isfinite(c) and c > 0):
            raise ValueError(f"step_cost(params) must be a finite number > 0, got {c!r} for "
                             f"trial {trial.number} (params {trial.params})")
        return float(c)
