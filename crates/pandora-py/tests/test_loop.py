"""minimize / maximize: budgets, costs, reproducibility, errors."""

import math

import numpy as np
import pytest

import pandora


def branin(x):
    x1, x2 = 15 * x[0] - 5, 15 * x[1]
    return (x2 - 5.1 / (4 * math.pi ** 2) * x1 ** 2 + 5 / math.pi * x1 - 6) ** 2 \
        + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def test_minimize_uses_the_budget_and_improves():
    res = pandora.minimize(branin, [(0, 1), (0, 1)], budget=30, seed=0, progress=False)
    assert res.nfev == 30 and res.total_cost == pytest.approx(30.0)
    assert res.stop_reason == "budget exhausted: spent 30.0000 of 30.0000"
    vals = [h["value"] for h in res.history]
    assert res.fun == min(vals) and branin(res.x) == pytest.approx(res.fun)
    n_init = 2 * (2 + 1)
    assert res.fun < min(vals[:n_init])  # the model phase found a better point
    assert [h["phase"] for h in res.history[:n_init]] == ["initial"] * n_init
    assert res.history[-1]["best"] == res.fun
    assert res.fun < 1.0  # global minimum 0.398; 30 evaluations get close


def test_reproducible_for_a_seed():
    a = pandora.maximize(lambda x: -np.sum((x - 0.3) ** 2), [(0, 1)] * 3, max_trials=10,
                         seed=5, progress=False)
    b = pandora.maximize(lambda x: -np.sum((x - 0.3) ** 2), [(0, 1)] * 3, max_trials=10,
                         seed=5, progress=False)
    assert [h["value"] for h in a.history] == [h["value"] for h in b.history]
    assert a.stop_reason == "reached max_trials = 10"
    assert a.fun == max(h["value"] for h in a.history)


def test_bounds_are_respected():
    res = pandora.minimize(lambda x: float(np.sum(x)), [(-5, -4), (10, 20)], max_trials=9,
                           progress=False)
    xs = np.array([h["x"] for h in res.history])
    assert (xs[:, 0] >= -5).all() and (xs[:, 0] <= -4).all()
    assert (xs[:, 1] >= 10).all() and (xs[:, 1] <= 20).all()


def test_callable_and_reported_costs():
    res = pandora.minimize(lambda x: float((x[0] - 0.5) ** 2), [(0, 1)],
                           cost=lambda x: 1.0 + x[0], budget=10.0, progress=False)
    for h in res.history:
        assert h["cost"] == pytest.approx(1.0 + h["x"][0])
    assert res.total_cost <= 10.0 + 2.0  # the last trial may overshoot its predicted cost
    res2 = pandora.minimize(lambda x: (float(x[0] ** 2), 2.0), [(0, 1)], cost="reported",
                            max_trials=4, progress=False)
    assert res2.total_cost == pytest.approx(8.0)


def test_runtime_cost():
    res = pandora.minimize(lambda x: float(x[0]), [(0, 1)], cost="runtime", max_trials=4,
                           progress=False)
    assert all(0 < h["cost"] < 1.0 for h in res.history)


def test_non_finite_values_fail_the_trial_and_the_loop_goes_on():
    res = pandora.minimize(lambda x: float("nan") if x[0] > 0.5 else float(x[0]), [(0, 1)],
                           max_trials=6, progress=False)
    states = [t["state"] for t in res.study.trials]
    assert "failed" in states and "complete" in states
    assert res.nfev == 6 and res.fun <= 0.5


def test_exceptions_in_the_objective_propagate_and_are_recorded(tmp_path):
    calls = []

    def boom(x):
        calls.append(x)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return float(x[0])
    url = f"sqlite:{tmp_path / 's.db'}"
    with pytest.raises(RuntimeError, match="boom"):
        pandora.minimize(boom, [(0, 1)], max_trials=5, progress=False, storage=url, name="b")
    # The loop ended at the exception: the trial it raised in is failed, none was asked after.
    trials = pandora.Study.load("b", url).trials
    assert [t["state"] for t in trials] == ["complete", "failed"]
    assert "exception in the objective: RuntimeError: boom" in trials[1]["error"]


def test_keyboard_interrupt_in_the_objective_ends_the_loop():
    def interrupted(x):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        pandora.minimize(interrupted, [(0, 1)], max_trials=5, progress=False)


def test_the_objective_runs_on_the_callers_thread():
    # So that Python's signal handlers (Ctrl-C) run while the loop runs.
    import threading
    seen = set()
    pandora.minimize(lambda x: seen.add(threading.get_ident()) or float(x[0]), [(0, 1)],
                     max_trials=3, progress=False)
    assert seen == {threading.get_ident()}


def test_workers_share_a_stored_study(tmp_path):
    import time
    url = f"sqlite:{tmp_path / 'w.db'}"

    def slow(x):
        time.sleep(0.02)  # releases the GIL: the other worker asks meanwhile
        return float((x[0] - 0.3) ** 2)
    res = pandora.minimize(slow, [(0, 1)], max_trials=8, progress=False, storage=url,
                           name="w", workers=2)
    assert res.nfev == 8 and res.stop_reason == "reached max_trials = 8"
    workers = {t["worker"] for t in pandora.Study.load("w", url).trials}
    assert len(workers) == 2, workers


def test_workers_need_stored_studies():
    with pytest.raises(ValueError, match="workers > 1 needs"):
        pandora.minimize(lambda x: 0.0, [(0, 1)], max_trials=3, progress=False, workers=2)
    with pytest.raises(ValueError, match="workers must be"):
        pandora.minimize(lambda x: 0.0, [(0, 1)], max_trials=3, progress=False, workers=0)


@pytest.mark.parametrize("kw,msg", [
    ({"bounds": [(1, 0)]}, "low < high"),
    ({"bounds": [(0, float("inf"))]}, "low < high"),
    ({"bounds": [0, 1]}, "shape"),
    ({"bounds": []}, "shape"),
    ({"bounds": [(0, 1)], "max_trials": None}, "budget"),
    ({"bounds": [(0, 1)], "cost": "free"}, "cost"),
    ({"bounds": [(0, 1)], "acquisition": "magic"}, "acquisition"),
])
def test_bad_arguments(kw, msg):
    kw = dict(kw)
    kw.setdefault("max_trials", 3)
    bounds = kw.pop("bounds")
    with pytest.raises(ValueError, match=msg):
        pandora.minimize(lambda x: 0.0, bounds, progress=False, **kw)
