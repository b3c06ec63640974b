"""`Study.optimize`: the Optuna-shaped loop over a study, on Pandora's own worker loop."""

import threading

import pytest

import pandora

SPACE = {"x": (-1.0, 1.0), "opt": ["adam", "sgd"]}


def objective(trial):
    return -(trial.params["x"] - 0.3) ** 2 + (0.1 if trial.params["opt"] == "adam" else 0.0)


def create(url, **kw):
    kw.setdefault("max_trials", 20)
    return pandora.Study.create("opt", url, space=SPACE, initial_design=3, seed=5, **kw)


def test_runs_until_the_study_is_finished():
    s = create("sqlite::memory:", max_trials=6)
    assert s.optimize(objective) == "reached max_trials = 6"
    assert s.stop_reason == "reached max_trials = 6"
    assert [t["state"] for t in s.trials] == ["complete"] * 6
    assert s.best["value"] == max(t["value"] for t in s.trials)


def test_n_trials_limits_one_call_and_calls_add_up():
    s = create("sqlite::memory:")
    assert s.optimize(objective, n_trials=4) is None
    assert len(s.trials) == 4
    assert s.optimize(objective, n_trials=3) is None
    assert [t["number"] for t in s.trials] == list(range(7))


def test_trials_carry_params_and_reported_costs(tmp_path):
    s = create(f"sqlite:{tmp_path}/r.db", cost="reported", budget=5.0, max_trials=None)
    seen = []

    def f(trial):
        seen.append((trial.number, dict(trial.params)))
        return objective(trial), 0.75 + trial.params["x"] ** 2

    s.optimize(f)
    assert s.stop_reason.startswith("budget exhausted")
    for (number, params), t in zip(seen, s.trials):
        assert t["number"] == number and t["params"] == params
        assert t["cost"] == pytest.approx(0.75 + params["x"] ** 2)
    with pytest.raises(ValueError, match=r"\(value, cost\)"):
        create(f"sqlite:{tmp_path}/r2.db", cost="reported", budget=5.0).optimize(objective)


def test_an_exception_fails_the_trial_and_is_raised():
    s = create("sqlite::memory:")
    calls = []

    def f(trial):
        calls.append(trial.number)
        if len(calls) == 3:
            raise KeyError("missing checkpoint")
        return objective(trial)

    with pytest.raises(KeyError, match="missing checkpoint"):
        s.optimize(f)
    assert [t["state"] for t in s.trials] == ["complete", "complete", "failed"]
    assert "exception in the objective: KeyError" in s.trials[2]["error"]


def test_non_finite_values_fail_and_the_loop_goes_on():
    s = create("sqlite::memory:", max_trials=4)
    s.optimize(lambda t: float("nan") if t.number == 1 else objective(t))
    assert [t["state"] for t in s.trials] == ["complete", "failed", "complete", "complete"]


def test_workers_share_a_stored_study_and_n_trials_is_exact(tmp_path):
    s = create(f"sqlite:{tmp_path}/w.db", max_trials=None, budget=100.0)
    threads = set()
    both = threading.Barrier(2, timeout=30)

    def f(trial):
        threads.add(threading.get_ident())
        if trial.number < 2:
            both.wait()  # the first two trials run at once: two workers are evaluating
        return objective(trial)

    assert s.optimize(f, n_trials=7, workers=2) is None
    assert len(s.trials) == 7 and len(threads) == 2
    assert len({t["worker"] for t in s.trials}) == 2


@pytest.mark.parametrize("kw, msg", [
    ({"n_trials": 0}, "n_trials"),
    ({"n_trials": 2.5}, "n_trials"),
    ({"workers": 0}, "workers"),
])
def test_bad_arguments(kw, msg):
    with pytest.raises(ValueError, match=msg):
        create("sqlite::memory:").optimize(objective, **kw)


def test_a_non_callable_is_refused():
    s = create("sqlite::memory:")
    with pytest.raises(ValueError, match="callable"):
        s.optimize(3)
    assert s.trials == []
