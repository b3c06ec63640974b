"""Studies: ask/tell round trips, persistence, budgets, CLI interop, errors."""

import json
import os
import time
import math
import subprocess

import numpy as np
import pytest

import pandora

SPACE = {"x": (0.0, 1.0), "n": pandora.Int(1, 8), "opt": ["adam", "sgd"]}


def objective(p):
    return -(p["x"] - 0.3) ** 2 - 0.01 * (p["n"] - 4) ** 2 + (0.1 if p["opt"] == "adam" else 0.0)


def run(study, k, f=objective):
    for _ in range(k):
        t = study.ask()
        if t is None:
            break
        study.tell(t, f(t.params))


def test_round_trip_and_reload(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"  # four slashes: tolerated
    s = pandora.Study.create("rt", url, space=SPACE, direction="maximize", max_trials=6,
                             initial_design=4)
    t = s.ask()
    assert isinstance(t, pandora.Trial) and t.number == 0
    assert set(t.params) == {"x", "n", "opt"} and t.params["opt"] in ("adam", "sgd")
    assert isinstance(t.params["n"], int) and 1 <= t.params["n"] <= 8
    rec = s.tell(t, objective(t.params))
    assert rec["state"] == "complete" and rec["cost"] == 1.0
    run(s, 10)
    assert s.ask() is None and s.should_stop
    assert s.stop_reason == "reached max_trials = 6"
    trials = s.trials
    assert [tr["number"] for tr in trials] == list(range(6))
    assert all(tr["state"] == "complete" for tr in trials)
    best = max(trials, key=lambda tr: tr["value"])
    assert s.best["number"] == best["number"] and s.best["value"] == best["value"]
    # Reload from another object: same trials.
    s2 = pandora.Study.load("rt", f"sqlite:{tmp_path}/s.db")
    assert s2.trials == trials and s2.direction == "maximize"
    assert s2.should_stop


def test_minimize_direction_and_tell_by_number(tmp_path):
    s = pandora.Study.create("m", str(tmp_path / "m.db"), space={"x": (-1.0, 1.0)},
                             direction="minimize", max_trials=5, initial_design=3, seed=3)
    for _ in range(5):
        t = s.ask()
        s.tell(t.number, (t.params["x"] - 0.2) ** 2)
    assert s.best["value"] == min(tr["value"] for tr in s.trials)


def test_budget_with_known_and_reported_costs(tmp_path):
    s = pandora.Study.create("k", f"sqlite:{tmp_path}/k.db", space={"a": (0.0, 1.0)},
                             cost="known", cost_offset=1.0, cost_slope=2.0, budget=6.0,
                             initial_design=3)
    run(s, 50, lambda p: -abs(p["a"] - 0.4))
    spent = sum(tr["cost"] for tr in s.trials)
    for tr in s.trials:
        assert tr["cost"] == pytest.approx(1.0 + 2.0 * tr["x"][0])
    assert spent <= 6.0 + 1e-9 and s.should_stop
    assert s.stop_reason.startswith("budget exhausted")
    r = pandora.Study.create("r", f"sqlite:{tmp_path}/k.db", space={"a": (0.0, 1.0)},
                             cost="reported", budget=3.0, initial_design=2)
    t = r.ask()
    with pytest.raises(ValueError, match="cost= is required"):
        r.tell(t, 1.0)
    r.tell(t, 1.0, cost=2.5)
    assert r.summary["budget_spent"] == pytest.approx(2.5)
    assert not r.should_stop


def test_runtime_cost_is_measured(tmp_path):
    import time
    s = pandora.Study.create("rtm", f"sqlite:{tmp_path}/t.db", space={"a": (0.0, 1.0)},
                             cost="runtime", max_trials=2)
    t = s.ask()
    time.sleep(0.05)
    rec = s.tell(t, 0.5)
    assert 0.04 < rec["cost"] < 5.0


def test_failed_trials_and_to_pandas(tmp_path):
    s = pandora.Study.create("f", f"sqlite:{tmp_path}/f.db", space={"a": (0.0, 1.0)},
                             max_trials=3)
    t = s.ask()
    rec = s.tell(t, failed="diverged")
    assert rec["state"] == "failed" and rec["error"] == "diverged"
    with pytest.raises(ValueError):
        s.tell(t, 1.0)  # already failed: an error that changes nothing
    pd = pytest.importorskip("pandas")
    df = s.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df["state"]) == ["failed"]
    assert "param.a" in df.columns


def test_existing_study_with_other_space_is_refused(tmp_path):
    url = f"sqlite:{tmp_path}/e.db"
    pandora.Study.create("e", url, space={"a": (0.0, 1.0)})
    pandora.Study.create("e", url, space={"a": (0.0, 1.0)})  # same: reopens
    with pytest.raises(ValueError, match="different search space"):
        pandora.Study.create("e", url, space={"a": (0.0, 2.0)})


@pytest.mark.parametrize("kw,msg", [
    ({"space": {}}, "non-empty"),
    ({"space": {"a": (1.0, 0.0)}}, "low < high"),
    ({"space": {"a": (0.0, float("nan"))}}, "low < high"),
    ({"space": {"a": 3}}, "expected"),
    ({"space": {"a": pandora.Float(-1.0, 1.0, log=True)}}, "log"),
    ({"space": {"a": (0.0, 1.0)}, "direction": "up"}, "direction"),
    ({"space": {"a": (0.0, 1.0)}, "cost": "free"}, "cost"),
    ({"space": {"a": (0.0, 1.0)}, "budget": -1}, "budget"),
    ({"space": {"a": (0.0, 1.0)}, "acquisition": "magic"}, "acquisition"),
    ({"space": {"a": (0.0, 1.0)}, "acquisition": "pbgi"}, "lambda"),
    ({"space": {"a": (0.0, 1.0)}, "storage": "mysql://x"}, "scheme"),
])
def test_bad_study_arguments(tmp_path, kw, msg):
    kw = dict(kw)
    storage = kw.pop("storage", f"sqlite:{tmp_path}/b.db")
    with pytest.raises(ValueError, match=msg):
        pandora.Study.create("b", storage, **kw)


def test_b_ms_ei_tree_refill_and_warm_start(tmp_path):
    url = f"sqlite:{tmp_path}/l.db"
    s = pandora.Study.create("l", url, space={"a": (0.0, 1.0), "b": (0.0, 1.0)},
                             acquisition="b_ms_ei", cost="reported", budget=8.0,
                             initial_design=3, tree=(np.int64(2), 1), refill=False,
                             warm_start=False, seed=1)
    assert s.config["policy"]["tree"] == [2, 1]
    assert s.config["policy"]["refill"] is False and s.config["policy"]["warm_start"] is False
    phases = []
    for _ in range(5):
        t = s.ask()
        assert t is not None
        phases.append(t.decision["phase"])
        a, b = t.params["a"], t.params["b"]
        s.tell(t, -((a - 0.3) ** 2) - (b - 0.6) ** 2, cost=0.5 + a)
        if t.decision["phase"] != "initial":
            # The suggested budget of the EI-PUC-CC rollout is recorded on every model step.
            assert t.decision["bmsei"]["suggested_budget"] > 0.0
    assert phases[:3] == ["initial"] * 3 and "initial" not in phases[3:]
    # The tree is part of the stored configuration: a reload keeps it.
    assert pandora.Study.load("l", url).config["policy"]["tree"] == [2, 1]


def test_b_ms_ei_recent_costs_budget(tmp_path):
    url = f"sqlite:{tmp_path}/r.db"
    s = pandora.Study.create("r", url, space={"a": (0.0, 1.0)}, acquisition="b_ms_ei",
                             cost="reported", budget=8.0, initial_design=4,
                             tree_budget="recent_costs", seed=2)
    assert s.config["policy"]["tree_budget"] == "recent_costs"
    costs = []
    for _ in range(6):
        t = s.ask()
        assert t is not None
        if t.decision["phase"] != "initial":
            # The PBGI repository's rule: the last four observed costs, at most the budget left.
            want = min(sum(costs[-4:]), 8.0 - sum(costs))
            assert t.decision["bmsei"]["suggested_budget"] == pytest.approx(want, rel=1e-12)
        cost = 0.25 + 0.5 * t.params["a"]
        s.tell(t, -((t.params["a"] - 0.3) ** 2), cost=cost)
        costs.append(cost)
    assert pandora.Study.load("r", url).config["policy"]["tree_budget"] == "recent_costs"


@pytest.mark.parametrize("kw,msg", [
    ({"acquisition": "log_ei", "tree": [1, 1]}, "tree"),
    ({"acquisition": "b_ms_ei", "budget": 5.0, "tree": "11"}, "tree must be"),
    ({"acquisition": "b_ms_ei", "budget": 5.0, "tree": [1, 0]}, "tree"),
    ({"acquisition": "ms_ei", "refill": True}, "refill"),
    ({"acquisition": "b_ms_ei", "budget": 5.0, "warm_start": 1}, "warm_start must be"),
    ({"acquisition": "b_ms_ei", "budget": 5.0, "tree_budget": "last"}, "recent_costs"),
    ({"acquisition": "b_ms_ei", "budget": 5.0, "tree_budget": 4}, "tree_budget must be"),
    ({"acquisition": "log_ei", "tree_budget": "recent_costs"}, "tree_budget"),
    ({"acquisition": "b_ms_ei"}, "budget"),
])
def test_bad_lookahead_arguments(tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg):
        pandora.Study.create("bl", f"sqlite:{tmp_path}/bl.db", space={"a": (0.0, 1.0)},
                             cost="reported", **kw)


def test_load_missing_study(tmp_path):
    with pytest.raises(ValueError, match="no study named"):
        pandora.Study.load("nope", f"sqlite:{tmp_path}/none.db")


def test_tell_bad_values(tmp_path):
    s = pandora.Study.create("tv", f"sqlite:{tmp_path}/tv.db", space={"a": (0.0, 1.0)})
    t = s.ask()
    with pytest.raises(ValueError, match="finite"):
        s.tell(t, float("nan"))
    with pytest.raises(ValueError, match="number"):
        s.tell(t, "abc")
    with pytest.raises(ValueError, match="cost"):
        s.tell(t, 1.0, cost=-2.0)
    with pytest.raises((ValueError, LookupError)):
        s.tell(99, 1.0, cost=1.0)


def cli(bin_, *args):
    out = subprocess.run([bin_, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_python_and_cli_share_the_database(tmp_path, pandora_bin):
    s = pandora.Study.create("shared", f"sqlite:///{tmp_path}/shared.db", space=SPACE,
                             direction="maximize", max_trials=8, initial_design=3)
    run(s, 4)
    cfg = s.write_config(tmp_path / "shared.toml")
    status = json.loads(cli(pandora_bin, "status", cfg, "--json"))
    assert status["complete"] == 4 and status["running"] == 0
    assert status["budget_spent"] == s.summary["budget_spent"]
    best = json.loads(cli(pandora_bin, "best", cfg, "--json"))
    assert best["number"] == s.best["number"]
    assert best["objective"] == s.best["value"]
    # The CLI asks and tells; Python sees it.
    asked = json.loads(cli(pandora_bin, "ask", cfg, "--json"))
    n = asked["number"]
    assert n == 4
    cli(pandora_bin, "tell", cfg, str(n), "--objective", "7.5")
    again = pandora.Study.load("shared", f"sqlite:{tmp_path}/shared.db")
    tr = again.trials[n]
    assert tr["state"] == "complete" and tr["value"] == 7.5 and tr["params"] == asked["params"]
    assert again.best["number"] == n
    # And back: Python continues the study the CLI extended.
    run(again, 10)
    assert len(again.trials) == 8
    exported = cli(pandora_bin, "export", cfg, "--format", "json")
    assert len(json.loads(exported)) == 8


def test_pandora_run_refuses_a_python_driven_study(tmp_path, pandora_bin):
    s = pandora.Study.create("it's", f"sqlite:{tmp_path}/r.db", space={"a": (0.0, 1.0)},
                             max_trials=3)
    assert s.config["objective"]["kind"] == "external"
    cfg = s.write_config(tmp_path / "r.toml")
    assert 'kind = "external"' in (tmp_path / "r.toml").read_text()
    for args in ([cfg], ["--storage", f"sqlite:{tmp_path}/r.db", "--study", "it's"]):
        out = subprocess.run([pandora_bin, "run", *args, "--quiet"], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 2, out.stderr
        assert "external objective" in out.stderr and "pandora ask" in out.stderr
    assert pandora.Study.load("it's", f"sqlite:{tmp_path}/r.db").trials == []
    # Every other command works on it.
    run(s, 3, lambda p: -abs(p["a"] - 0.5))
    status = json.loads(cli(pandora_bin, "status", cfg, "--json"))
    assert status["complete"] == 3
    assert json.loads(cli(pandora_bin, "best", cfg, "--json"))["number"] == s.best["number"]
    assert len(cli(pandora_bin, "export", cfg, "--format", "csv").splitlines()) == 4
    fig = tmp_path / "r.svg"
    cli(pandora_bin, "plot", cfg, "--out", str(fig))
    assert "<svg" in fig.read_text()


def test_a_command_study_without_a_limit_is_refused_unless_unbounded(tmp_path):
    # `pandora run` would never stop: the configuration names the fields that bound it.
    with pytest.raises(ValueError, match=r"budget\.total.*budget\.max_trials.*policy\.stopping"):
        pandora.Study.create("nolimit", f"sqlite:{tmp_path}/n.db", space={"a": (0.0, 1.0)},
                             command=["python3", "f.py"])
    s = pandora.Study.create("nolimit", f"sqlite:{tmp_path}/n.db", space={"a": (0.0, 1.0)},
                             command=["python3", "f.py"], unbounded=True)
    assert s.config["budget"]["unbounded"] is True
    # A study driven by ask/tell from Python is bounded by the caller's own loop.
    pandora.Study.create("ext", f"sqlite:{tmp_path}/n.db", space={"a": (0.0, 1.0)})


def test_a_command_makes_the_study_runnable_by_the_cli(tmp_path, pandora_bin):
    import sys
    code = "import json,sys; p=json.load(sys.stdin); print(-(p['a']-0.25)**2)"
    s = pandora.Study.create("cmd", f"sqlite:{tmp_path}/c.db", space={"a": (0.0, 1.0)},
                             max_trials=4, initial_design=3, command=[sys.executable, "-c", code])
    cfg = s.write_config(tmp_path / "c.toml")
    cli(pandora_bin, "run", cfg, "--quiet")
    trials = s.trials
    assert [t["state"] for t in trials] == ["complete"] * 4
    for t in trials:
        assert t["value"] == pytest.approx(-(t["params"]["a"] - 0.25) ** 2)


@pytest.mark.skipif(not os.environ.get("PANDORA_TEST_POSTGRES_URL"),
                    reason="PANDORA_TEST_POSTGRES_URL is not set")
def test_study_on_postgresql():
    url = os.environ["PANDORA_TEST_POSTGRES_URL"]
    name = f"py-{os.getpid()}-{time.time_ns()}"
    study = pandora.Study.create(name, url, space={"a": (0.0, 1.0)}, max_trials=3)
    for _ in range(3):
        t = study.ask()
        study.tell(t, t.params["a"] ** 2)
    again = pandora.Study.load(name, url)
    assert len(again.trials) == 3
    assert again.ask() is None


def test_unreachable_postgresql_is_a_clear_error():
    with pytest.raises(RuntimeError, match="connecting"):
        pandora.Study.create("b", "postgresql://u:secret@127.0.0.1:1/db?connect_timeout=2",
                             space={"a": (0.0, 1.0)})
