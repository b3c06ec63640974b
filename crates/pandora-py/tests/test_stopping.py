"""The PBGI stopping rule from Python: Study(stopping="pbgi"), minimize/maximize(stopping=...),
agreement with `pandora status` on the same database, and the statistic recomputed independently
(pandora.GP + pandora.acquisition.log_ei on a dense grid)."""

import json
import subprocess

import numpy as np
import pytest

import pandora
from pandora import acquisition as acq


def bumpy(x):
    """A cheap 1-D objective (maximize) with a global maximum near x = 0.77 and a local one."""
    return float(np.sin(7.0 * x) * np.exp(-x) + 0.3 * x)


def drive(study, limit=100):
    n = 0
    while n < limit and (t := study.ask()) is not None:
        study.tell(t, bumpy(t.params["x"]))
        n += 1
    return n


def cli_json(bin_, *args):
    out = subprocess.run([bin_, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_large_lambda_stops_at_the_first_check_and_agrees_with_the_cli(tmp_path, pandora_bin):
    # λ = 1 with unit costs: stop when max_x EI(x) <= 1; the objective's range is below 1, so the
    # first check after the 3-point design fires.
    url = f"sqlite:///{tmp_path}/stop.db"
    s = pandora.Study.create("stop", url, space={"x": (0.0, 1.0)}, direction="maximize",
                             max_trials=30, initial_design=3, stopping="pbgi", stopping_lambda=1.0)
    assert not s.should_stop and s.stop_reason is None and s.stopping_status is None
    assert drive(s) == 3
    assert s.should_stop
    assert s.stop_reason.startswith("stopping rule fired: pbgi: max_log_eipc = ")
    st = s.stopping_status
    assert st["rule"] == "pbgi" and st["fired"] is True and st["lambda"] == 1.0
    assert st["statistic"] == "max_log_eipc" and st["threshold"] == 0.0
    assert st["value"] <= st["threshold"] and st["iteration"] == 0
    # The stop is stored: a fresh object (another process) sees it, and asks stop at once.
    again = pandora.Study.load("stop", url)
    assert again.should_stop and again.stop_reason == s.stop_reason
    assert again.ask() is None and len(again.trials) == 3
    # `pandora status --json` on the same database: the same content.
    cfg = s.write_config(tmp_path / "stop.toml")
    status = cli_json(pandora_bin, "status", cfg, "--json")
    assert status["stopping"] == st
    assert s.stop_reason == status["stop_reason"]
    summary = s.summary
    for k in ("complete", "running", "failed", "total_cost", "budget_spent", "stop_reason",
              "stopping"):
        assert summary[k] == status[k], k
    by_flags = cli_json(pandora_bin, "status", "--storage", url, "--study", "stop", "--json")
    assert by_flags == status
    assert cli_json(pandora_bin, "ask", cfg, "--json") == {"finished": s.stop_reason}


def test_the_statistic_is_max_log_ei_of_the_recorded_model_and_stops_below_log_lambda():
    # λ = 1e-3 lets a few BO steps happen before the rule fires (max EI falls below 1e-3).
    lam = 1e-3
    s = pandora.Study.create("stat", "sqlite::memory:", space={"x": (0.0, 1.0)},
                             max_trials=40, initial_design=3, stopping="pbgi",
                             stopping_lambda=lam, seed=2)
    n = drive(s)
    assert s.stop_reason is not None and s.stop_reason.startswith("stopping rule fired"), \
        s.stop_reason
    assert 3 < n < 40
    trials = s.trials
    checked = [t for t in trials if t["decision"].get("phase") == "model"]
    assert checked, "at least one check that did not fire"
    grid = np.linspace(0.0, 1.0, 4001).reshape(-1, 1)
    for t in checked:
        st, p = t["decision"]["stopping"], t["decision"]["params"]
        assert st["fired"] is False and st["value"] > st["threshold"] == pytest.approx(np.log(lam))
        # Independent recomputation: the GP of the recorded hyperparameters (standardized
        # outcomes, sample standard deviation) on the complete trials before this one, log EI
        # of the best observed value maximized on a dense grid (unit costs: log EIPC = log EI).
        prev = [u for u in trials if u["number"] < t["number"]]
        X = np.array([u["x"] for u in prev])
        y = np.array([u["value"] for u in prev])
        m, sd = y.mean(), y.std(ddof=1)
        gp = pandora.GP(p["kernel"], lengthscales=p["lengthscales"],
                        outputscale=p["outputscale"], mean=p["mean"], noise=p["noise"])
        mu, sigma = gp.fit(X, (y - m) / sd).predict(grid)
        grid_max = float(np.max(acq.log_ei(m + sd * mu, sd * sigma, float(y.max()))))
        assert grid_max == pytest.approx(st["value"], abs=2e-3), t["number"]
    last = s.stopping_status
    assert last["fired"] is True and last["value"] <= np.log(lam)
    assert last["iteration"] == len(checked)


def test_minimize_with_the_stopping_rule_reports_the_reason():
    f = lambda x: -bumpy(x[0])  # noqa: E731
    res = pandora.minimize(f, [(0.0, 1.0)], stopping="pbgi", stopping_lambda=1e-3,
                           initial_design=3, max_trials=40, seed=2, progress=False)
    assert res.stop_reason.startswith("stopping rule fired: pbgi")
    assert res.nfev < 40 and res.stopping_status["fired"] is True
    assert res.fun == min(h["value"] for h in res.history)
    # Without budget or max_trials, the rule alone ends the loop.
    res2 = pandora.maximize(lambda x: bumpy(x[0]), [(0.0, 1.0)], stopping="pbgi",
                            stopping_lambda=0.5, initial_design=3, progress=False)
    assert res2.nfev == 3 and res2.stop_reason.startswith("stopping rule fired")
    # The same run without the rule goes on to max_trials.
    res3 = pandora.minimize(f, [(0.0, 1.0)], initial_design=3, max_trials=12, seed=2,
                            progress=False)
    assert res3.nfev == 12 and res3.stop_reason == "reached max_trials = 12"
    assert res3.stopping_status is None


def test_auto_lambda_and_options(tmp_path, pandora_bin):
    s = pandora.Study.create("auto", f"sqlite:{tmp_path}/a.db", space={"x": (0.0, 1.0)},
                             cost="known", cost_offset=1.0, cost_slope=1.0, budget=40.0,
                             initial_design=3, stopping="pbgi", stopping_lambda="auto",
                             stopping_options={"burn_in": 2, "debounce": 2,
                                               "u_samples": np.int64(16)})
    drive(s, limit=5)
    stop = s.config["policy"]["stopping"]
    assert stop["lambda"] == "auto" and stop["burn_in"] == 2 and stop["debounce"] == 2
    assert stop["u_samples"] == 16
    st = s.stopping_status
    assert st is not None and st["lambda"] > 0 and st["threshold"] == pytest.approx(
        np.log(st["lambda"]))
    # burn_in = 2: the first two checks cannot stop, whatever the statistic.
    first = [t["decision"]["stopping"] for t in s.trials if t["decision"]["phase"] == "model"]
    assert all(not c["fired"] for c in first[:2])
    cfg = s.write_config(tmp_path / "a.toml")
    assert cli_json(pandora_bin, "status", cfg, "--json")["stopping"] == st


@pytest.mark.parametrize("kw,msg", [
    ({"stopping_lambda": 1.0}, "need stopping='pbgi'"),
    ({"stopping": "pbgi"}, "cost scale"),
    ({"stopping": "pbgi", "stopping_lambda": -1.0}, "> 0"),
    ({"stopping": "pbgi", "stopping_lambda": float("nan")}, "> 0"),
    ({"stopping": "pbgi", "stopping_lambda": "big"}, "'auto'"),
    ({"stopping": "pbgi", "stopping_lambda": True}, "number"),
    ({"stopping": "pbgi", "stopping_lambda": "auto"}, "budget"),
    ({"stopping": "pbgi", "stopping_lambda": 1.0, "stopping_options": {"windw": 3}}, "windw"),
    ({"stopping": "pbgi", "stopping_lambda": 1.0, "stopping_options": {"debounce": 0}},
     "debounce"),
    ({"stopping": "pbgi", "stopping_lambda": 1.0, "stopping_options": [1]}, "dict"),
    ({"stopping": "regret"}, "stopping must be"),
])
def test_bad_stopping_arguments(tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg):
        pandora.Study.create("b", f"sqlite:{tmp_path}/b.db", space={"a": (0.0, 1.0)}, **kw)


def test_fixed_pbgi_lambda_is_the_default_stopping_lambda():
    s = pandora.Study.create("fx", "sqlite::memory:", space={"x": (0.0, 1.0)},
                             acquisition="pbgi", lam=1.0, stopping="pbgi", initial_design=3,
                             max_trials=20)
    assert drive(s) == 3
    assert s.stopping_status["lambda"] == 1.0 and s.should_stop
