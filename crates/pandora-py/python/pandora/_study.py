"""Persistent studies: ask/tell over a SQLite database shared with the ``pandora`` CLI."""

from __future__ import annotations

import json
import math
import numbers
import os
import socket
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._pandora import NativeStudy
from ._space import space_to_params

_COST_KINDS = ("uniform", "known", "reported", "runtime")
_STOPPING = (None, "budget", "pbgi")
# Keys of ``stopping_options`` (the rule's table in docs/studies.md, without ``rule``/``lambda``,
# which are arguments of their own).
_STOPPING_OPTIONS = ("burn_in", "debounce", "window", "optimizer", "u_samples", "start_pbgi_d")


def _stopping_config(stopping: Optional[str], stopping_lambda: Union[None, float, str],
                     stopping_options: Optional[Mapping[str, Any]], acquisition: str,
                     lam: Optional[float], budget: Optional[float]) -> Optional[Dict[str, Any]]:
    """The ``[policy] stopping`` table for :meth:`Study.create`'s stopping arguments (``None``
    without a rule); argument errors are ``ValueError`` naming the argument."""
    if stopping not in _STOPPING:
        raise ValueError(f"stopping must be None, 'budget' or 'pbgi', got {stopping!r}")
    if stopping != "pbgi":
        if stopping_lambda is not None or stopping_options:
            raise ValueError("stopping_lambda and stopping_options need stopping='pbgi'")
        return None
    table: Dict[str, Any] = {"rule": "pbgi"}
    if stopping_lambda is None:
        if not (acquisition == "pbgi" and lam is not None):
            raise ValueError(
                "stopping='pbgi' needs a cost scale: stopping_lambda=<number> (objective units "
                "per cost unit) or stopping_lambda='auto' (chosen from the budget), or "
                "acquisition='pbgi' with lam=<number>")
    elif isinstance(stopping_lambda, str):
        if stopping_lambda != "auto":
            raise ValueError(f"stopping_lambda must be a number > 0 or 'auto', got "
                             f"{stopping_lambda!r}")
        if budget is None:
            raise ValueError("stopping_lambda='auto' chooses λ = U/(B - C) from the budget: "
                             "give budget=")
        table["lambda"] = "auto"
    else:
        if isinstance(stopping_lambda, bool) or not isinstance(stopping_lambda, (int, float,
                                                                               np.number)):
            raise ValueError(f"stopping_lambda must be a number > 0 or 'auto', got "
                             f"{stopping_lambda!r}")
        value = float(stopping_lambda)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"stopping_lambda must be a finite number > 0, got {value!r}")
        table["lambda"] = value
    if stopping_options is not None:
        if not isinstance(stopping_options, Mapping):
            raise ValueError(f"stopping_options must be a dict, got {stopping_options!r}")
        for key, value in stopping_options.items():
            if key not in _STOPPING_OPTIONS:
                raise ValueError(f"stopping_options: unknown key {key!r} (known: "
                                 f"{', '.join(_STOPPING_OPTIONS)}; the rule and λ are the "
                                 "stopping and stopping_lambda arguments)")
            if isinstance(value, np.generic):
                value = value.item()
            table[key] = value
    return table


def _normalize_url(storage: str) -> str:
    """``sqlite:path`` / ``sqlite:///abs/path`` / a plain path -> ``sqlite:`` + absolute path."""
    if not isinstance(storage, str) or not storage:
        raise ValueError(f"storage must be a URL such as 'sqlite:///path.db', got {storage!r}")
    if storage in ("sqlite::memory:", ":memory:"):
        return "sqlite::memory:"
    if storage.startswith("sqlite://"):
        path = storage[len("sqlite://"):]
    elif storage.startswith("sqlite:"):
        path = storage[len("sqlite:"):]
    elif "://" in storage:
        scheme = storage.split("://", 1)[0]
        if scheme in ("postgres", "postgresql"):
            return storage
        raise ValueError(f"storage: unsupported scheme {scheme!r} (expected sqlite:)")
    else:
        path = storage
    if not path:
        raise ValueError(f"storage: no path in {storage!r}")
    path = os.path.abspath(path)
    while path.startswith("//"):
        path = path[1:]
    return "sqlite://" + path


def _worker_name() -> str:
    return f"{socket.gethostname()}-py{os.getpid()}"


class Trial:
    """One trial handed out by :meth:`Study.ask`.

    Attributes:
        number: the trial's number in its study (0-based, in order of creation).
        params: the parameters to evaluate, ``name -> value``.
        x: the same point in the unit cube ``[0, 1]^d`` (one-hot for categorical parameters).
        decision: what the policy recorded when it proposed the trial (phase, acquisition value,
            λ, model hyperparameters, predicted cost).
        steps: in a study with steps (a ``fidelity`` section): ``range(first, last + 1)``, the
            steps to run now (``first > 1``: resume from your checkpoint after step
            ``first - 1``); report each with :meth:`report`. ``None`` otherwise.
    """

    __slots__ = ("number", "params", "x", "decision", "steps", "_asked_at", "_reported_at",
                 "_study")

    def __init__(self, number: int, params: Dict[str, Any], x: Sequence[float],
                 decision: Dict[str, Any], steps: Optional[range] = None,
                 study: Optional["Study"] = None) -> None:
        self.number = number
        self.params = params
        self.x = np.asarray(x, dtype=float)
        self.decision = decision
        self.steps = steps
        self._asked_at = time.perf_counter()
        self._reported_at = self._asked_at
        self._study = study

    @property
    def resume(self) -> bool:
        """Whether this run continues a paused one (load the checkpoint after step
        ``steps.start - 1``) rather than starting from scratch."""
        return self.steps is not None and self.steps.start > 1

    def report(self, step: int, value: float, cost: Optional[float] = None) -> Dict[str, Any]:
        """Records the objective ``value`` at ``step`` (one of :attr:`steps`, in order) of a
        trial of a study with steps; ``cost`` is required when the study's costs are
        ``"reported"``, defaults to the seconds since the previous report (the first: since
        :meth:`Study.ask`) when they are ``"runtime"``, and is computed by the study otherwise.
        The trial pauses after the last of :attr:`steps` and completes at ``max_steps``.
        Returns the stored trial as a dict."""
        if self._study is None or self.steps is None:
            raise ValueError("report() is for trials of a study with steps (fidelity=...)")
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
            raise ValueError(f"step must be a whole number >= 1, got {step!r}")
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"value must be a number, got {value!r}") from None
        now = time.perf_counter()
        if cost is None and self._study.cost_kind == "runtime":
            cost = max(now - self._reported_at, 1e-9)
        if cost is not None:
            cost = float(cost)
        told = json.loads(self._study._native.tell_step(self.number, int(step), value, cost))
        # The next step's time starts now: the study's own time is not the objective's.
        self._reported_at = time.perf_counter()
        return told

    @property
    def control_set(self) -> Optional[Dict[str, Any]]:
        """In a study with cost-varying variable subsets (a ``[cvs]`` section): the control set
        handed out, ``{"control_set": index, "name", "controlled": [...], "random": [...],
        "cost", ...}``; the parameters listed under ``"random"`` are left to chance and their
        realized values go to :meth:`Study.tell` (``random={...}``). ``None`` otherwise."""
        return self.decision.get("cvs")

    def __repr__(self) -> str:
        return f"Trial(number={self.number}, params={self.params!r})"


class _TrialLoop:
    """The Python half of :meth:`Study.optimize`: calls ``f(trial)`` for the native worker loop
    and interprets its return value as the study's cost setting says."""

    def __init__(self, study: "Study", f: Callable[[Trial], Any]) -> None:
        self.study = study
        self.f = f
        self.reported = study.cost_kind == "reported"
        self.raised: Optional[BaseException] = None

    def evaluate(self, trial_json: str) -> Tuple[Optional[float], Optional[float], Optional[str],
                                                 float, bool]:
        """``(value, cost, error, elapsed, stop)``, as ``NativeStudy.optimize`` expects."""
        t = json.loads(trial_json)
        trial = Trial(t["number"], t["params"], t["x"], t.get("decision") or {}, None, self.study)
        t0 = time.perf_counter()
        try:
            out = self.f(trial)
        except BaseException as e:  # noqa: BLE001 - raised again once the loop has returned
            self.raised = e
            reason = f"exception in the objective: {type(e).__name__}: {e}"
            return None, None, reason, time.perf_counter() - t0, True
        elapsed = max(time.perf_counter() - t0, 1e-9)
        cost: Optional[float] = None
        try:
            if self.reported:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise ValueError("the study's costs are 'reported': f must return "
                                     "(value, cost)")
                value, cost = float(out[0]), float(out[1])
                if not (math.isfinite(cost) and cost > 0):
                    raise ValueError(f"the cost must be finite and > 0, got {cost}")
            else:
                value = float(out)
        except BaseException as e:  # noqa: BLE001 - raised again once the loop has returned
            self.raised = e
            return None, None, f"invalid output: {e}", elapsed, True
        if not math.isfinite(value):
            return None, cost, f"non-finite value {value}", elapsed, False
        return value, cost, None, elapsed, False

    def told(self, trial_json: str) -> None:
        """Nothing to keep: the study holds every trial."""


class Study:
    """A study: a search space, a direction, costs, a budget and the trials, stored in a database.

    Create with :meth:`Study.create`, open an existing one with :meth:`Study.load`. The loop is::

        study = pandora.Study.create("lr", "sqlite:///tmp/lr.db", space={"lr": pandora.Float(1e-4, 1e-1, log=True)},
                                     direction="maximize", cost="runtime", budget=600)
        while (trial := study.ask()) is not None:
            study.tell(trial, train(**trial.params))   # cost: measured between ask and tell
        print(study.stop_reason, study.best)

    With ``stopping="pbgi"`` the loop also ends when further trials are not worth their cost
    (see :meth:`create`, :attr:`stopping_status`).

    The same database works with the ``pandora`` CLI: ``study.write_config("study.toml")`` writes
    a configuration file for ``pandora status|best|ask|tell|export|plot study.toml`` (or use
    ``--storage URL --study NAME``); ``pandora run`` refuses a study created without
    ``command=``, since its objective is evaluated by your Python code.
    """

    def __init__(self, native: NativeStudy) -> None:
        self._native = native
        self._config: Dict[str, Any] = json.loads(native.config_json())
        self._finished: Optional[str] = None
        self._worker = _worker_name()

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        name: str,
        storage: str = "sqlite:pandora.db",
        *,
        space: Mapping[str, Any],
        direction: str = "maximize",
        cost: str = "uniform",
        budget: Optional[float] = None,
        max_trials: Optional[int] = None,
        acquisition: str = "pbgi_d",
        stopping: Optional[str] = None,
        stopping_lambda: Union[None, float, str] = None,
        stopping_options: Optional[Mapping[str, Any]] = None,
        seed: int = 0,
        initial_design: Optional[int] = None,
        lam: Optional[float] = None,
        lambda0: Optional[float] = None,
        decay: Optional[float] = None,
        beta: Optional[float] = None,
        alpha: Optional[float] = None,
        tree: Optional[Sequence[int]] = None,
        refill: Optional[bool] = None,
        warm_start: Optional[bool] = None,
        tree_budget: Optional[str] = None,
        count_initial: bool = True,
        cost_offset: float = 1.0,
        cost_slope: float = 20.0,
        predicted_cost_must_fit: bool = True,
        command: Optional[Sequence[str]] = None,
        unbounded: bool = False,
        fidelity: Optional[Mapping[str, Any]] = None,
    ) -> "Study":
        r"""Creates the study ``name`` in ``storage`` (or opens it if it exists with the same space
        and direction; otherwise ``ValueError``).

        Args:
            name: study name (several studies can share one database).
            storage: ``"sqlite:///abs/path.db"``, ``"sqlite:rel/path.db"``, a plain path, or
                ``"sqlite::memory:"`` (private to this object).
            space: ``name -> declaration`` (see :mod:`pandora._space`: ``(low, high)``,
                ``Float``, ``Int``, ``Ordinal``, ``Categorical``/list).
            direction: ``"maximize"`` or ``"minimize"``.
            cost: ``"uniform"`` (every trial costs 1), ``"known"`` (the formula
                ``c(x) = cost_offset + cost_slope · mean(x)`` on the unit cube), ``"reported"``
                (pass ``cost=`` to :meth:`tell`) or ``"runtime"`` (seconds between :meth:`ask` and
                :meth:`tell`, unless ``cost=`` is given).
            budget: total budget in cost units (trials whose cost would exceed it are not handed
                out; with unknown costs the *predicted* cost must fit, see
                ``predicted_cost_must_fit``).
            max_trials: maximum number of trials.
            acquisition: ``pbgi_d`` (default), ``pbgi`` (needs ``lam``), ``log_ei``, ``ei``,
                ``log_eipc``, ``eipc``, ``ucb``, ``ts``, ``random``, ... (docs/acquisitions.md).
            stopping: ``None`` or ``"budget"``: stop when the budget or ``max_trials`` is
                exhausted. ``"pbgi"``: also the cost-aware PBGI/LogEIPC stopping rule: every
                :meth:`ask` after the initial design stops the study when, on the posterior of the
                complete trials,

                .. math:: \max_x \log \mathrm{EIPC}(x) = \max_x\,[\log \mathrm{EI}(x; y^*) -
                          \log E[c(x)]] \le \log \lambda,

                i.e. no point's expected improvement is worth λ times its expected cost
                (docs/stopping.md). :attr:`stop_reason` then says so.
            stopping_lambda: the rule's λ (objective units per cost unit: if 1000 s of
                training is worth 0.01 accuracy, ``1e-5``), or ``"auto"``: λ = U/(B − C) from
                ``budget`` (Theorem 1 of the PBGI stopping paper: the expected total cost stays
                within the budget), computed once at the first model step. Default: ``lam``
                (with ``acquisition="pbgi"``).
            stopping_options: more settings of the rule: ``burn_in`` (no stop before this many
                BO evaluations, default 0), ``debounce`` (stop after this many consecutive
                triggers, default 1), ``window`` (moving average of the statistic over this many
                checks, default 1), ``optimizer`` (``{"raw_samples": .., "num_restarts": ..}``),
                ``u_samples`` (paths of the U estimate for ``"auto"``, default 64),
                ``start_pbgi_d`` (PBGI-D starts from the automatic λ).
            seed: seed of the initial design and the policy.
            initial_design: size of the initial Sobol design (default ``2 (d + 1)``).
            lam: fixed λ of ``pbgi``. lambda0, decay: PBGI-D's initial λ and its divisor
                (defaults 0.1 and 2).
            beta: fixed UCB/LCB β (default: the GP-UCB schedule).
            alpha: cost exponent of ``eipc``/``log_eipc`` (default 1) or a fixed one for
                ``eicc``/``log_eicc``.
            The acquisition's keys are those of docs/acquisitions.md ("Policy keys"): a key
            given for an acquisition it does not apply to (``lam`` with ``ucb``) is a
            ``ValueError`` naming it.
            tree: ``b_ms_ei``'s and ``ms_ei``'s scenario tree, fantasies per look-ahead stage
                (default ``[1, 1, 1]``, the 4-step path; ``[4, 4, 2]`` is the paper's tree).
            refill: ``b_ms_ei`` only: the refill rule for the suggested budget (default
                ``True``; ``False`` recomputes it by an EI-PUC-CC rollout at every ask).
            warm_start: ``b_ms_ei``, ``ms_ei``: start each tree maximization from perturbations
                of the previous ask's trees (default ``True``).
            tree_budget: ``b_ms_ei`` only: the budget the tree plans for, ``"suggested"`` (the
                default: the B-MS-EI paper's rollout and refill rule) or ``"recent_costs"`` (the
                PBGI repository's: the sum of the last four observed costs, at most the budget
                left).
            count_initial: whether the initial design's cost counts toward the budget.
            command: optionally the objective command of the configuration (so that
                ``pandora run`` can evaluate trials too); see docs/python.md. A study with a
                command needs a limit (``budget``, ``max_trials`` or ``stopping="pbgi"``) or
                ``unbounded=True``: ``pandora run`` would otherwise never stop.
            unbounded: says that a study with a ``command`` and no limit is meant to run until
                stopped by hand (``[budget] unbounded = true``).
            fidelity: a study with steps (cost-aware freeze-thaw; the TOML ``[fidelity]``
                section): ``{"max_steps": 20, "lambda": 0.002}`` and optionally
                ``steps_per_ask``, ``step_weights``, ``positions``, ``grid_points``. Every trial
                is then a training run: :attr:`Trial.steps` says which steps to run (resume from
                your checkpoint when :attr:`Trial.resume`), :meth:`Trial.report` records each
                step, and asks pause, resume and start runs by Gittins indices
                (docs/freeze-thaw.md, "Studies with steps").
        """
        if budget is not None and not (isinstance(budget, (int, float)) and math.isfinite(budget)
                                       and budget > 0):
            raise ValueError(f"budget must be a finite number > 0, got {budget!r}")
        stopping_table = _stopping_config(stopping, stopping_lambda, stopping_options,
                                          acquisition, lam, budget)
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
        if cost not in _COST_KINDS:
            raise ValueError(f"cost must be one of {', '.join(_COST_KINDS)}, got {cost!r}")
        if max_trials is not None and not (isinstance(max_trials, int) and max_trials > 0):
            raise ValueError(f"max_trials must be a positive integer, got {max_trials!r}")
        url = _normalize_url(storage)
        params = space_to_params(space)
        # A study driven from Python has no command of its own: its objective is "external"
        # (`pandora run` refuses it with an explanation; status/best/ask/tell/export/plot work).
        objective: Dict[str, Any] = ({"kind": "external"} if command is None
                                     else {"command": [str(c) for c in command]})
        config: Dict[str, Any] = {
            "study": {"name": name, "storage": url, "direction": direction},
            "objective": objective,
            "space": params,
            "cost": {"kind": cost, "offset": float(cost_offset), "slope": float(cost_slope)},
            "budget": {
                "total": None if budget is None else float(budget),
                "max_trials": max_trials,
                "count_initial": bool(count_initial),
                "predicted_cost_must_fit": bool(predicted_cost_must_fit),
            },
            "policy": {
                "acquisition": acquisition,
                "initial_design": initial_design,
                "seed": int(seed),
            },
        }
        # Only the keys given: the policy refuses those that do not apply to the acquisition.
        for key, value in (("lambda", lam), ("lambda0", lambda0), ("decay", decay),
                           ("beta", beta), ("alpha", alpha)):
            if value is not None:
                config["policy"][key] = value
        if stopping_table is not None:
            config["policy"]["stopping"] = stopping_table
        if tree is not None:
            if isinstance(tree, (str, bytes)) or not all(
                    isinstance(k, numbers.Integral) and not isinstance(k, bool) for k in tree):
                raise ValueError(f"tree must be a sequence of positive integers, got {tree!r}")
            config["policy"]["tree"] = [int(k) for k in tree]
        for key, value in (("refill", refill), ("warm_start", warm_start)):
            if value is not None:
                if not isinstance(value, bool):
                    raise ValueError(f"{key} must be True or False, got {value!r}")
                config["policy"][key] = value
        if tree_budget is not None:
            if not isinstance(tree_budget, str):
                raise ValueError(f"tree_budget must be a string, got {tree_budget!r}")
            config["policy"]["tree_budget"] = tree_budget
        if not isinstance(unbounded, bool):
            raise ValueError(f"unbounded must be True or False, got {unbounded!r}")
        if unbounded:
            config["budget"]["unbounded"] = True
        if cost == "known":
            config["cost"]["formula"] = "linear_mean"
        if fidelity is not None:
            if not isinstance(fidelity, Mapping):
                raise ValueError(f"fidelity must be a mapping, got {fidelity!r}")
            config["fidelity"] = dict(fidelity)
        return cls(NativeStudy.open(json.dumps(config)))

    @classmethod
    def load(cls, name: str, storage: str) -> "Study":
        """Opens the existing study ``name`` in ``storage`` with its stored configuration (a
        missing study raises ``ValueError`` naming it)."""
        return cls(NativeStudy.load(name, _normalize_url(storage)))

    # ------------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        """The study's name."""
        return self._config["study"]["name"]

    @property
    def storage(self) -> str:
        """The storage URL."""
        return self._config["study"]["storage"]

    @property
    def direction(self) -> str:
        """``"maximize"`` or ``"minimize"``."""
        return self._config["study"]["direction"]

    @property
    def config(self) -> Dict[str, Any]:
        """The configuration (the TOML file's structure) as a dict."""
        return json.loads(json.dumps(self._config))

    @property
    def cost_kind(self) -> str:
        """``uniform``, ``known``, ``reported`` or ``runtime``."""
        return self._config["cost"]["kind"]

    # ------------------------------------------------------------------ ask / tell
    def ask(self) -> Optional[Trial]:
        """The next trial to evaluate, or ``None`` when the study is finished (then
        :attr:`stop_reason` says why). Runs the BO step (GP fit, acquisition maximization) in Rust
        with the GIL released."""
        trial_json, reason = self._native.ask(self._worker)
        if trial_json is None:
            self._finished = reason
            return None
        t = json.loads(trial_json)
        steps = None
        if t.get("step_to") is not None:
            steps = range(len(t.get("steps") or []) + 1, t["step_to"] + 1)
        return Trial(t["number"], t["params"], t["x"], t.get("decision") or {}, steps, self)

    def optimize(self, f: Callable[["Trial"], Any], *, n_trials: Optional[int] = None,
                 workers: int = 1) -> Optional[str]:
        """Runs Pandora's worker loop (the one ``pandora run`` runs) with the Python objective
        ``f``, the way Optuna's ``study.optimize`` does: ask a trial, call ``f(trial)``, tell its
        outcome, until the study is finished (budget, ``max_trials``, stopping rule) or
        ``n_trials`` trials have been handed out by this call.

        ``f`` receives a :class:`Trial` (``trial.params``, ``trial.number``, ``trial.x``) and
        returns the objective value, or ``(value, cost)`` when the study's costs are
        ``"reported"``; ``"runtime"`` costs are the seconds ``f`` took, ``"uniform"``/``"known"``
        costs the study's. A non-finite value fails the trial and the loop goes on; an exception
        in ``f`` fails the trial ("exception in the objective: TYPE: message"), ends the loop and
        is raised. ``workers > 1`` evaluates that many trials at once, each worker on its own
        connection to the storage (so not for ``sqlite::memory:``); ``f`` then runs on several
        threads, one at a time under the GIL. Returns why the study is finished
        (:attr:`stop_reason`), or ``None`` when ``n_trials`` ended the call first.

        Studies with cost-varying variable subsets (``[cvs]``) or steps (``fidelity``) report
        more than a value: drive them with :meth:`ask` and :meth:`tell`.
        """
        if not callable(f):
            raise ValueError("f must be callable")
        if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, int)
                                     or n_trials < 1):
            raise ValueError(f"n_trials must be a whole number >= 1 or None, got {n_trials!r}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
        if self._config.get("cvs") is not None or self._config.get("fidelity") is not None:
            raise ValueError("optimize: a study with [cvs] or fidelity= reports more than a "
                             "value; use ask() and tell() (or Trial.report)")
        loop = _TrialLoop(self, f)
        finished = self._native.optimize(loop.evaluate, loop.told, workers, self._worker,
                                         n_trials)
        if loop.raised is not None:
            raise loop.raised
        self._finished = finished
        return finished

    def tell(
        self,
        trial: Union[Trial, int],
        value: Optional[float] = None,
        cost: Optional[float] = None,
        *,
        failed: Optional[str] = None,
        random: Optional[Dict[str, float]] = None,
    ) -> Dict[str, Any]:
        """Records the outcome of ``trial`` (a :class:`Trial` or its number).

        ``value`` is the objective in the study's direction. ``cost``: required for
        ``cost="reported"``; for ``"runtime"`` it defaults to the seconds since :meth:`ask`
        handed out the trial; for ``"uniform"``/``"known"`` it defaults to the known cost.
        Pass ``failed="reason"`` instead of a value to mark the evaluation failed. In a study with
        cost-varying variable subsets (``[cvs]``), ``random`` gives the realized values of the
        parameters the trial's control set left random (see :attr:`Trial.control_set`), and the
        cost defaults to the control set's. Returns the stored trial as a dict.

        An outcome that arrives after the trial was abandoned (a ``pandora run`` found no
        heartbeat for longer than its ``--abandon-after``) is recorded all the same, its cost
        counting toward the budget, and a ``RuntimeWarning`` says so, with the spending against
        the budget (which it may exceed).
        """
        number = trial.number if isinstance(trial, Trial) else trial
        if isinstance(number, bool) or not isinstance(number, (int, np.integer)) or number < 0:
            raise ValueError(f"trial must be a Trial or a trial number >= 0, got {trial!r}")
        number = int(number)
        if cost is not None:
            cost = float(cost)
        kind = self.cost_kind
        if failed is not None:
            if value is not None:
                raise ValueError("give either value or failed, not both")
            if cost is None and kind == "runtime" and isinstance(trial, Trial):
                cost = time.perf_counter() - trial._asked_at
            if random is not None:
                raise ValueError("random= goes with a value: a failed trial has no realized values")
            return json.loads(self._native.fail(number, str(failed), cost))
        if value is None:
            raise ValueError("tell needs a value (or failed='reason')")
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"value must be a number, got {value!r}") from None
        if self._config.get("cvs") is not None:
            values = {}
            for k, v in (random or {}).items():
                try:
                    values[str(k)] = float(v)
                except (TypeError, ValueError):
                    raise ValueError(f"random[{k!r}] must be a number, got {v!r}") from None
            return json.loads(self._native.tell_realized(number, value, cost, json.dumps(values)))
        if random is not None:
            raise ValueError("random= is only for studies with cost-varying variable subsets ([cvs])")
        if cost is None:
            if kind == "reported":
                raise ValueError("cost= is required because the study's costs are 'reported'")
            if kind == "runtime":
                if isinstance(trial, Trial):
                    cost = time.perf_counter() - trial._asked_at
                else:
                    t = self._trial_dict(number)
                    cost = time.time() - t["created_at"]
                cost = max(cost, 1e-9)
            else:
                x = trial.x if isinstance(trial, Trial) else self._trial_dict(number)["x"]
                cost = self._native.known_cost([float(v) for v in x])
        return json.loads(self._native.tell(number, value, float(cost)))

    def _trial_dict(self, number: int) -> Dict[str, Any]:
        for t in json.loads(self._native.trials_json()):
            if t["number"] == number:
                return t
        raise ValueError(f"trial {number} does not exist in study '{self.name}'")

    # ------------------------------------------------------------------ results
    @property
    def trials(self) -> List[Dict[str, Any]]:
        """Every trial as a plain dict: ``number``, ``state`` (running/complete/failed/abandoned),
        ``params``, ``x`` (unit cube), ``value``, ``cost``, ``worker``, ``created_at``,
        ``finished_at``, ``heartbeat_at`` (Unix seconds) and ``created_at_iso``,
        ``finished_at_iso``, ``heartbeat_at_iso`` (the same instants as ISO 8601 UTC strings),
        ``decision`` (phase, acquisition value, λ, ...), ``error``; in a study with steps also
        ``step_to`` and ``steps`` (``[{"step", "value", "cost", "at"}, ...]``, state ``paused``
        between runs)."""
        out = []
        for t in json.loads(self._native.trials_json()):
            t["value"] = t.pop("objective")
            out.append(t)
        return out

    def to_pandas(self) -> Any:
        """The trials as a ``pandas.DataFrame`` with one ``param.NAME`` column per parameter
        (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("to_pandas() needs pandas: pip install pandas") from None
        rows = []
        for t in self.trials:
            row = {k: t[k] for k in ("number", "state", "value", "cost", "worker", "created_at",
                                     "created_at_iso", "finished_at", "finished_at_iso",
                                     "error")}
            row["phase"] = (t.get("decision") or {}).get("phase")
            for k, v in t["params"].items():
                row[f"param.{k}"] = v
            rows.append(row)
        return pd.DataFrame(rows)

    @property
    def summary(self) -> Dict[str, Any]:
        """Counts by state (``running``, ``complete``, ``failed``, ``abandoned``), ``total_cost``,
        ``budget_spent`` (cost counted toward the budget), ``best`` (``number``, ``value``,
        ``params``), ``lambda`` (PBGI-D's current λ), ``stopping`` (see :attr:`stopping_status`)
        ``stop_reason`` (why the study is finished, in words, or ``None``) and ``finished`` (the
        same as data, e.g. ``{"budget": {"spent": S, "total": B}}``): the content of
        ``pandora status --json``, with ``best["objective"]`` named ``value``."""
        s = json.loads(self._native.summary_json())
        if s.get("best") is not None:
            s["best"]["value"] = s["best"].pop("objective")
        return s

    @property
    def best(self) -> Optional[Dict[str, Any]]:
        """The best complete trial (in the study's direction) as a dict, or ``None``."""
        return self.summary["best"]

    @property
    def stop_reason(self) -> Optional[str]:
        """Why the study does not hand out more trials, or ``None`` while it goes on.

        Reasons, in the same words as the CLI (``pandora ask``/``run``): ``"stopping rule fired:
        pbgi: max_log_eipc = V <= threshold T"`` (the PBGI stopping rule; ``T = log λ``),
        ``"budget exhausted: spent S of B"``, ``"reached max_trials = N"``, and whatever the last
        :meth:`ask` of this object reported (e.g. with unknown costs, a budget that cannot pay
        for the next trial's predicted cost).

        The stopping rule is checked by :meth:`ask` (it needs the model fit of the next step),
        and its stop is stored with the study: every process sees it, and later asks stop at
        once with the same reason.
        """
        if self._finished is not None:
            return self._finished
        budget = self._config["budget"]
        s = json.loads(self._native.summary_json())
        if s.get("stop_reason") is not None:
            return s["stop_reason"]
        n = s["running"] + s["complete"] + s["failed"] + s["abandoned"]
        if budget.get("max_trials") is not None and n >= budget["max_trials"]:
            return f"reached max_trials = {budget['max_trials']}"
        total = budget.get("total")
        if total is not None and s["budget_spent"] >= total:
            return f"budget exhausted: spent {s['budget_spent']:.4f} of {total:.4f}"
        return None

    @property
    def should_stop(self) -> bool:
        """Whether the study is finished (see :attr:`stop_reason`): the stopping rule fired at
        an :meth:`ask`, or the budget or ``max_trials`` is used up."""
        return self.stop_reason is not None

    @property
    def stopping_status(self) -> Optional[Dict[str, Any]]:
        """The stopping rule's last check (the one that fired, if it did), or ``None`` without a
        rule or before the first check (the first :meth:`ask` after the initial design):

        ``rule`` (``"pbgi"``), ``lambda`` (λ), ``statistic`` (``"max_log_eipc"``, or
        ``"log_mean_eipc_window"`` with ``window > 1``), ``value`` (the statistic; ``None`` while
        not available, e.g. before a window is full), ``threshold`` (``log λ``), ``iteration``
        (complete BO evaluations at the check), ``fired`` (bool): the ``"stopping"`` object of
        ``pandora status --json``. The rule fires when ``value <= threshold`` (after
        ``burn_in`` and ``debounce``).
        """
        return json.loads(self._native.summary_json()).get("stopping")

    # ------------------------------------------------------------------ CLI interop
    def to_toml(self) -> str:
        """The configuration as TOML: a file the ``pandora`` CLI accepts."""
        return self._native.config_toml()

    def write_config(self, path: Union[str, "os.PathLike[str]"]) -> str:
        """Writes :meth:`to_toml` to ``path`` (for ``pandora status|best|ask|tell|export PATH``);
        returns the path."""
        path = os.fspath(path)
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_toml())
        return path

    def __repr__(self) -> str:
        return f"Study(name={self.name!r}, storage={self.storage!r})"
