"""Studies with steps (cost-aware freeze-thaw) from Python: trials carry the steps to run,
``trial.report`` records each, and asks pause, resume and start runs."""

import math

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
