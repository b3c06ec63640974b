"""Studies with steps (cost-aware freeze-thaw) from Python: trials carry the steps to run,
``trial.report`` records each, and asks pause, resume and start runs."""

import math
import time

import pytest

import pandora


def _curve(params, step):
    final = 1 - 2 * (params["a"] - 0.3) ** 2
    return final * (1 - math.exp(-step / 2))


def _study(tmp_path, **extra):
    return pandora.Study.create(
        "steps", f"sqlite:{tmp_path}/s.db", space={"a": (0.0, 1.0)}, budget=30,
        initial_design=3, seed=2, fidelity={"max_steps": 6, "lambda": 0.002, **extra})


def test_the_loop_reports_steps_and_resumes_paused_runs(tmp_path):
    s = _study(tmp_path)
    seen = []
    while (trial := s.ask()) is not None:
        assert trial.steps is not None and trial.steps.stop <= 7
        seen.append((trial.number, trial.steps.start, trial.resume))
        for step in trial.steps:
            trial.report(step, _curve(trial.params, step))
        assert len(seen) < 200
    assert s.stop_reason
    summary = s.summary
    told = sum(len(t.get("steps") or []) for t in s.trials)
    assert summary["budget_spent"] == pytest.approx(told) and told <= 30
    assert summary["paused"] >= 1
    for t in s.trials:
        steps = [r["step"] for r in t.get("steps") or []]
        assert steps == list(range(1, len(steps) + 1))
    # Paused runs were resumed from their next step, never from the start.
    resumed = [(n, first) for n, first, again in seen if again]
    assert resumed and all(first > 1 for _, first in resumed)


def test_report_refuses_what_the_storage_refuses(tmp_path):
    s = _study(tmp_path, steps_per_ask=2)
    trial = s.ask()
    assert list(trial.steps) == [1, 2] and not trial.resume
    with pytest.raises(ValueError, match="next step is 1"):
        trial.report(2, 0.5)
    stored = trial.report(1, 0.5)
    assert stored["state"] == "running" and stored["cost"] == 1.0
    with pytest.raises(ValueError, match="already told"):
        trial.report(1, 0.5)
    with pytest.raises(ValueError, match="step"):
        trial.report(0, 0.5)
    assert trial.report(2, 0.6)["state"] == "paused"


def test_report_is_only_for_studies_with_steps(tmp_path):
    s = pandora.Study.create("plain", f"sqlite:{tmp_path}/p.db", space={"a": (0.0, 1.0)},
                             budget=5)
    trial = s.ask()
    assert trial.steps is None and not trial.resume
    with pytest.raises(ValueError, match="steps"):
        trial.report(1, 0.5)


def test_invalid_fidelity_names_the_field(tmp_path):
    with pytest.raises(ValueError, match="fidelity.lambda"):
        pandora.Study.create("bad", f"sqlite:{tmp_path}/b.db", space={"a": (0.0, 1.0)},
                             budget=5, fidelity={"max_steps": 4, "lambda": -1.0})


def test_runtime_step_costs_are_the_seconds_between_reports(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    s = pandora.Study.create(
        "rt", f"sqlite:{tmp_path}/rt.db", space={"a": (0.0, 1.0)}, budget=5.0,
        cost="runtime", initial_design=2, seed=2,
        fidelity={"max_steps": 4, "lambda": 0.002, "steps_per_ask": 2})
    trial = s.ask()
    clock[0] = 100.25
    assert trial.report(1, 0.5)["steps"][0]["cost"] == pytest.approx(0.25)
    clock[0] = 101.0
    second = trial.report(2, 0.6)
    # The second step's own time, from the first report on.
    assert [r["cost"] for r in second["steps"]] == pytest.approx([0.25, 0.75])
    assert second["cost"] == pytest.approx(1.0) and second["state"] == "paused"
    # An explicit cost wins.
    trial = s.ask()
    assert trial.report(1, 0.4, cost=0.01)["steps"][0]["cost"] == 0.01
