"""pandora.optuna: PandoraSampler and StoppingCallback with the real Optuna package (CI pins
optuna==5.0.0 in .ci/python-tests.sh)."""

import json
import math
import multiprocessing
import os
import uuid

import pytest

optuna = pytest.importorskip("optuna", reason="optuna is not installed (pip install optuna==5.0.0)")

import pandora  # noqa: E402
import pandora.optuna as po  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _quadratic(trial):
    x = trial.suggest_float("x", 0.0, 1.0)
    y = trial.suggest_float("y", 0.0, 1.0)
    return (x - 0.3) ** 2 + (y - 0.6) ** 2


def _decisions(study):
    out = []
    for t in study.get_trials(deepcopy=False):
        d = t.system_attrs.get("pandora:decision")
        out.append(json.loads(d) if d is not None else None)
    return out


def test_every_distribution_type_is_proposed_inside_its_distribution():
    choices = ["a", 3.5, None, True]

    def objective(trial):
        v = [trial.suggest_float("f", -2.0, 3.0),
             trial.suggest_float("flog", 1e-4, 1.0, log=True),
             trial.suggest_float("fstep", 0.0, 1.0, step=0.25),
             trial.suggest_int("i", -3, 7),
             trial.suggest_int("ilog", 1, 1000, log=True),
             trial.suggest_int("istep", 2, 20, step=3)]
        c = trial.suggest_categorical("c", choices)
        trial.suggest_int("fixed", 4, 4)  # a single value: left to Optuna
        return sum(float(a) for a in v) + choices.index(c)

    sampler = po.PandoraSampler(seed=1, initial_design=4)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=6)
    trials = study.trials
    assert len(trials) == 6 and all(t.state.name == "COMPLETE" for t in trials)
    for t in trials:
        for name, dist in t.distributions.items():
            assert dist._contains(dist.to_internal_repr(t.params[name])), (name, t.params)
        assert t.params["fstep"] in (0.0, 0.25, 0.5, 0.75, 1.0)
        assert (t.params["istep"] - 2) % 3 == 0
        assert t.params["fixed"] == 4
    # The first trial is independent (no relative space yet), every later one is Pandora's.
    decisions = _decisions(study)
    assert decisions[0] is None
    assert all(d is not None for d in decisions[1:])
    phases = [d["phase"] for d in decisions[1:]]
    assert phases[:3] == ["initial"] * 3 and phases[-1] == "model", phases


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_direction_drives_model_steps(direction):
    # f(x) = x: the model phase heads for 0 when minimizing and for 1 when maximizing.
    sampler = po.PandoraSampler(seed=0, initial_design=4, acquisition="log_ei")
    study = optuna.create_study(direction=direction, sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=9)
    model = [t.params["x"] for t, d in zip(study.trials, _decisions(study))
             if d is not None and d["phase"] == "model"]
    assert len(model) >= 3
    if direction == "minimize":
        assert max(model) < 0.2, model
    else:
        assert min(model) > 0.8, model


def test_seed_makes_a_run_reproducible():
    def run(seed):
        sampler = po.PandoraSampler(seed=seed, initial_design=3,
                                    cost=lambda p: 1.0 + p["x"] + p["y"])
        study = optuna.create_study(sampler=sampler)
        study.optimize(_quadratic, n_trials=7)
        return [(t.params["x"], t.params["y"]) for t in study.trials]

    a, b, c = run(5), run(5), run(6)
    assert a == b
    assert a != c


def test_budget_counts_trials_and_stops_optimize():
    sampler = po.PandoraSampler(seed=0, budget=6, initial_design=3)
    study = optuna.create_study(sampler=sampler)
    study.optimize(_quadratic, n_trials=50)
    # Uniform costs: exactly six trials, all complete (the loop stops after the sixth).
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 6
    assert study.user_attrs["pandora:stop_reason"].startswith("budget exhausted")
    assert sampler.stop_reason.startswith("budget exhausted")


def test_reported_cost_budget_is_not_exceeded_before_the_last_trial():
    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        trial.set_user_attr("work", 1.0 + 4.0 * x)
        return (x - 0.8) ** 2

    budget = 15.0
    sampler = po.PandoraSampler(seed=2, budget=budget, cost="reported", cost_attr="work",
                                initial_design=3)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=100)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    costs = [t.user_attrs["work"] for t in done]
    # As in pandora.Study: a trial starts only while the budget is not spent (and its predicted
    # cost fits), so only the last trial can take spending past the budget.
    assert sum(costs[:-1]) < budget
    assert sum(costs) < budget + max(costs)
    assert len(study.trials) < 100
    assert "pandora:stop_reason" in study.user_attrs


def test_failed_and_pruned_trials_are_not_fitted_and_the_study_goes_on():
    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        if trial.number % 4 == 1:
            raise ValueError("boom")
        if trial.number % 4 == 2:
            raise optuna.TrialPruned()
        if trial.number % 4 == 3:
            return float("nan")
        return x

    study = optuna.create_study(sampler=po.PandoraSampler(seed=0, initial_design=3))
    study.optimize(objective, n_trials=12, catch=(ValueError,))
    states = [t.state.name for t in study.trials]
    assert states.count("COMPLETE") == 3 and states.count("FAIL") == 6
    assert states.count("PRUNED") == 3
    decisions = _decisions(study)
    assert all(d is not None for d in decisions[1:])
    assert decisions[-1]["phase"] == "model"


def test_pending_trials_are_not_proposed_again():
    sampler = po.PandoraSampler(seed=0, initial_design=3)
    study = optuna.create_study(sampler=sampler)
    for _ in range(5):
        t = study.ask()
        study.tell(t, _quadratic(t))
    # Four trials asked and not told (as four workers would hold them).
    running = [study.ask() for _ in range(4)]
    points = [(t.suggest_float("x", 0.0, 1.0), t.suggest_float("y", 0.0, 1.0)) for t in running]
    assert len(set(points)) == 4
    pending = [d["pending"] for d in _decisions(study)[5:]]
    assert pending == [0, 1, 2, 3]


def test_stopping_callback_stops_and_writes_user_attrs():
    sampler = po.PandoraSampler(seed=0, initial_design=3)
    # λ = 10 objective units per trial on an objective of range < 1: nothing is worth a trial.
    callback = po.StoppingCallback(sampler, lam=10.0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(_quadratic, n_trials=40, callbacks=[callback])
    assert len(study.trials) < 10
    assert study.trials[-1].state.name == "PRUNED"
    reason = study.user_attrs["pandora:stop_reason"]
    assert reason.startswith("stopping rule fired"), reason
    assert study.user_attrs["pandora:stopping:fired"] is True
    assert study.user_attrs["pandora:stopping:threshold"] == pytest.approx(math.log(10.0))
    assert study.user_attrs["pandora:stopping:value"] <= math.log(10.0)


def test_stopping_callback_with_a_tiny_lambda_does_not_stop():
    sampler = po.PandoraSampler(seed=0, initial_design=3)
    study = optuna.create_study(sampler=sampler)
    study.optimize(_quadratic, n_trials=8, callbacks=[po.StoppingCallback(sampler, lam=1e-12)])
    assert len(study.trials) == 8
    assert study.user_attrs["pandora:stopping:fired"] is False
    assert "pandora:stop_reason" not in study.user_attrs


def test_argument_errors_name_the_argument():
    with pytest.raises(ValueError, match="cost"):
        po.PandoraSampler(cost="seconds")
    with pytest.raises(ValueError, match="acquisition"):
        po.PandoraSampler(acquisition="nope")
    with pytest.raises(TypeError, match="PandoraSampler"):
        po.StoppingCallback(optuna.samplers.TPESampler(), lam=1.0)
    with pytest.raises(ValueError, match="budget"):
        po.StoppingCallback(po.PandoraSampler(), lam="auto")


def _worker(url, name, seed):
    """One of four worker processes on the study ``name``: six trials at most, a budget of 12
    trials for the study."""
    import time

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_int("y", 0, 1000)
        time.sleep(0.05)
        return (x - 0.3) ** 2 + (y / 1000 - 0.6) ** 2

    # The parent created the tables: skip Optuna's schema checks; wait for SQLite's write lock
    # as long as it takes on a loaded machine.
    kwargs = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
    storage = optuna.storages.RDBStorage(url, engine_kwargs=kwargs,
                                         skip_compatibility_check=True, skip_table_creation=True)
    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=po.PandoraSampler(seed=seed, initial_design=4, budget=12))
    study.optimize(objective, n_trials=6)


def _four_workers(url):
    name = f"pandora-optuna-{uuid.uuid4().hex[:8]}"
    optuna.create_study(study_name=name, storage=url)
    # A fork server that has imported Optuna, SQLAlchemy and pandora once, so that the workers
    # start in milliseconds (each import takes seconds on a loaded machine) from a process in
    # which no Rust thread pool has started.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["optuna", "optuna.storages._rdb.models", "pandora.optuna"])
    procs = [ctx.Process(target=_worker, args=(url, name, k)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    study = optuna.load_study(study_name=name, storage=url)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    # The budget (12 trials) holds across the four workers, and no point was handed out twice.
    assert len(complete) == 12, [t.state.name for t in study.trials]
    points = [(t.params["x"], t.params["y"]) for t in complete]
    assert len(set(points)) == len(points)
    pending = [d["pending"] for d in _decisions(study) if d is not None]
    assert max(pending) >= 1  # decisions did see other workers' running trials


def test_four_processes_on_one_sqlite_storage(tmp_path):
    _four_workers(f"sqlite:///{tmp_path / 'optuna.db'}")


@pytest.mark.skipif(not os.environ.get("PANDORA_TEST_POSTGRES_URL"),
                    reason="PANDORA_TEST_POSTGRES_URL is not set")
def test_four_processes_on_one_postgresql_storage(tmp_path):
    psycopg2 = pytest.importorskip("psycopg2", reason="psycopg2 is not installed "
                                   "(pip install psycopg2-binary)")
    url = os.environ["PANDORA_TEST_POSTGRES_URL"]
    # Optuna's tables (studies, trials, ...) in a schema of their own: pandora's PostgreSQL
    # storage has tables of the same names in the default schema.
    with psycopg2.connect(url) as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS optuna_test")
    scheme, rest = url.split("://", 1)
    sep = "&" if "?" in rest else "?"
    _four_workers(f"postgresql+psycopg2://{rest}{sep}options=-csearch_path%3Doptuna_test")


# ------------------------------------------------------------------------- budget across workers
def _two_workers(budget):
    """Two "workers" (each its own study object and sampler, as two processes would have) on one
    storage, driven by ask and tell in a chosen interleaving."""
    storage = optuna.storages.InMemoryStorage()
    name = "budget"
    a = optuna.create_study(storage=storage, study_name=name,
                            sampler=po.PandoraSampler(seed=0, budget=budget, initial_design=2))
    b = optuna.load_study(study_name=name, storage=storage,
                          sampler=po.PandoraSampler(seed=1, budget=budget, initial_design=2))
    return a, b


def _sampled(study):
    """Trials that were handed a point (pruned-before-sampling trials have no params)."""
    return [t for t in study.trials if t.params]


def test_budget_holds_for_a_worker_after_another_was_refused():
    # Worker A is refused a trial (the budget is committed to running trials): that trial is
    # pruned before its first suggest and has no params. Worker B then asks while the committed
    # trials still run. Without the fix, the parameterless pruned trial emptied Optuna's
    # intersection search space, B's trial was sampled independently (no budget check) and a
    # fourth point was handed out for a budget of 3 (the 4-process test's 13 trials for 12).
    a, b = _two_workers(budget=3)
    t0 = a.ask()
    a.tell(t0, _quadratic(t0))
    t1 = a.ask()
    v1 = _quadratic(t1)
    t2 = b.ask()
    v2 = _quadratic(t2)
    t3 = a.ask()
    with pytest.raises(optuna.TrialPruned):
        _quadratic(t3)
    a.tell(t3, state=optuna.trial.TrialState.PRUNED)
    t4 = b.ask()
    with pytest.raises(optuna.TrialPruned):
        _quadratic(t4)
    b.tell(t4, state=optuna.trial.TrialState.PRUNED)
    a.tell(t1, v1)
    b.tell(t2, v2)
    assert len(_sampled(a)) == 3
    assert b.user_attrs["pandora:stop_reason"].startswith("budget exhausted")


def test_budget_counts_a_trial_created_but_not_sampled_yet():
    # Optuna samples a trial at its first suggest, so a trial another worker created is RUNNING
    # without a point for a while. Here B's decision sees A's unsampled trial: with 1 complete,
    # 1 running with a point and 1 unsampled, B's trial does not fit a budget of 3.
    a, b = _two_workers(budget=3)
    t0 = a.ask()
    a.tell(t0, _quadratic(t0))
    t1 = b.ask()
    v1 = _quadratic(t1)
    t2 = a.ask()  # created, not sampled
    t3 = b.ask()
    with pytest.raises(optuna.TrialPruned):
        _quadratic(t3)
    b.tell(t3, state=optuna.trial.TrialState.PRUNED)
    v2 = _quadratic(t2)  # A's trial gets the last unit of the budget
    a.tell(t2, v2)
    b.tell(t1, v1)
    assert len(_sampled(a)) == 3
    assert "other trials running" in b.trials[3].user_attrs["pandora:stop_reason"]


def test_budget_gates_independent_sampling_before_any_trial_finished():
    # No trial has finished: there is no relative space and the independent sampler proposes,
    # but only while the running trials fit the (uniform) budget.
    a, b = _two_workers(budget=2)
    t0, t1 = a.ask(), b.ask()
    v0, v1 = _quadratic(t0), _quadratic(t1)
    t2 = a.ask()
    with pytest.raises(optuna.TrialPruned):
        _quadratic(t2)
    a.tell(t2, state=optuna.trial.TrialState.PRUNED)
    a.tell(t0, v0)
    b.tell(t1, v1)
    assert len(_sampled(a)) == 2


# ---------------------------------------------------------------------------------- the pruner
T = 8


def _curve(x, t):
    """A learning curve with a known end: asymptote a(x) = 0.8 − (x − 0.3)², from 0.1, at step
    t = 1..T (the freeze-thaw tests' family in docs/freeze-thaw.md)."""
    a = 0.8 - (x - 0.3) ** 2
    return a - (a - 0.1) * math.exp(-t / 2.0)


def _add_complete(study, x, steps=T):
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    study.add_trial(optuna.trial.create_trial(
        params={"x": x}, distributions=dist, value=_curve(x, steps),
        intermediate_values={s: _curve(x, s + 1) for s in range(steps)}))


def _pruner_study(pruner, xs=(0.0, 0.55, 1.0)):
    study = optuna.create_study(direction="maximize", pruner=pruner)
    for x in xs:
        _add_complete(study, x)
    return study


def _run_until_pruned_at(study, x):
    """Runs a trial at x, reporting its curve step by step until the pruner prunes it: the
    steps it reported and the finished trial."""
    study.enqueue_trial({"x": x})
    trial = study.ask()
    trial.suggest_float("x", 0.0, 1.0)
    for s in range(T):
        trial.report(_curve(x, s + 1), s)
        if trial.should_prune():
            return s + 1, study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    return T, study.tell(trial, _curve(x, T))


def test_gittins_pruner_prunes_a_bad_curve_early_and_keeps_a_good_one():
    # Complete runs at x = 0, 0.55, 1: the best final value 0.7375 (x = 0.55).
    pruner = po.GittinsPruner(lam=0.002, max_steps=T, n_warmup_steps=1, seed=0, grid_points=41)
    study = _pruner_study(pruner)
    # x = 0.95: asymptote 0.378, far below the best complete run: pruned at the first check.
    steps, bad = _run_until_pruned_at(study, 0.95)
    assert steps == 2, bad.user_attrs
    info = bad.user_attrs["pandora:pruner"]
    assert info["pruned"] and info["index"] <= info["best_complete"] == pytest.approx(
        _curve(0.55, T))
    # x = 0.3: the best configuration (asymptote 0.8), above every complete run: trained to
    # the end, its index above the best complete value at every check.
    steps, good = _run_until_pruned_at(study, 0.3)
    assert steps == T, good.user_attrs
    assert good.state.name == "COMPLETE"
    info = good.user_attrs["pandora:pruner"]
    assert not info["pruned"] and info["index"] > info["best_complete"]


def test_gittins_pruner_step_cost_of_the_params_prices_the_trials_steps():
    # The best configuration x = 0.3, trained to the end at a step cost of 1 (test above), is
    # pruned at its first check when its steps cost 100 times as much (λ·c = 0.2 per step, more
    # than its whole remaining gain), and kept when only other configurations are expensive.
    def costly_near(x0):
        return lambda params: 100.0 if abs(params["x"] - x0) < 0.1 else 1.0

    pruner = po.GittinsPruner(lam=0.002, max_steps=T, n_warmup_steps=1, seed=0, grid_points=41,
                              step_cost=costly_near(0.3))
    steps, expensive = _run_until_pruned_at(_pruner_study(pruner), 0.3)
    info = expensive.user_attrs["pandora:pruner"]
    assert steps == 2 and info["pruned"] and info["step_cost"] == 100.0, info
    assert info["index"] <= info["best_complete"]
    pruner = po.GittinsPruner(lam=0.002, max_steps=T, n_warmup_steps=1, seed=0, grid_points=41,
                              step_cost=costly_near(0.9))
    steps, cheap = _run_until_pruned_at(_pruner_study(pruner), 0.3)
    info = cheap.user_attrs["pandora:pruner"]
    assert steps == T and cheap.state.name == "COMPLETE" and info["step_cost"] == 1.0, info
    # A bad value of the callable is an error naming it, at the trial's first check.
    pruner = po.GittinsPruner(lam=0.002, max_steps=T, n_warmup_steps=1, seed=0, grid_points=41,
                              step_cost=lambda params: -1.0)
    with pytest.raises(ValueError, match="step_cost"):
        _run_until_pruned_at(_pruner_study(pruner), 0.3)


def test_gittins_pruner_new_configuration_rule_prunes_what_a_new_run_outranks():
    # The literal comparison with the best new configuration: a fresh configuration's prior
    # curve outranks even the best configuration's observed curve, so it is pruned too.
    pruner = po.GittinsPruner(lam=0.002, max_steps=T, n_warmup_steps=1, seed=0, grid_points=41,
                              rule="new_configuration")
    study = _pruner_study(pruner)
    steps, good = _run_until_pruned_at(study, 0.3)
    info = good.user_attrs["pandora:pruner"]
    assert steps == 2 and info["pruned"] and info["action"] == "start"
    assert info["best_complete"] < info["index"] < info["start_index"]


def test_gittins_pruner_decision_is_the_native_decision_on_the_studys_curves():
    # The pruner's inputs rebuilt here from the study by hand (x in [0, 1] is its own unit-cube
    # coordinate; running, pruned and complete trials are busy; the asked trial first): the
    # native decision on them is the one the pruner recorded.
    pruner = po.GittinsPruner(lam=0.002, max_steps=T, seed=4, grid_points=41)
    study = _pruner_study(pruner)
    _run_until_pruned_at(study, 0.8)
    study.enqueue_trial({"x": 0.25})
    trial = study.ask()
    trial.suggest_float("x", 0.0, 1.0)
    for s in range(3):
        trial.report(_curve(0.25, s + 1), s)
    pruned = trial.should_prune()
    info = study.trials[-1].user_attrs["pandora:pruner"]
    curves = [{"params": {"x": 0.25}, "values": [_curve(0.25, s + 1) for s in range(3)]}]
    for t in study.trials[:-1]:
        values = [t.intermediate_values[s] for s in sorted(t.intermediate_values)]
        curves.append({"params": {"x": t.params["x"]}, "values": values, "busy": True})
    native = pandora.Study.create("check", "sqlite::memory:",
                                  space={"x": {"type": "float", "low": 0.0, "high": 1.0}})._native
    request = {"curves": curves, "positions": [float(s) for s in range(1, T + 1)],
               "lambda": 0.002, "grid_points": 41, "seed": 4}
    out = json.loads(native.decide_curves(json.dumps(request)))
    assert info["index"] == out["indices"][0]
    assert info["start_index"] == out["start_index"]
    assert info["best_complete"] == out["fallback"] == pytest.approx(_curve(0.55, T))
    assert info["action"] == out["action"]["action"]
    assert pruned == out["dominated"][0] == (out["indices"][0] <= out["fallback"])
    assert info["curves"] == len(curves) == 5


def test_gittins_pruner_in_study_optimize_and_for_a_minimized_objective():
    # Losses 1 − curve: the same curves minimized. Optuna's optimize loop with a random sampler.
    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        for s in range(T):
            trial.report(1.0 - _curve(x, s + 1), s)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return 1.0 - _curve(x, T)

    pruner = po.GittinsPruner(lam=0.002, max_steps=T, n_startup_trials=2, seed=0,
                              grid_points=41)
    study = optuna.create_study(direction="minimize", pruner=pruner,
                                sampler=optuna.samplers.RandomSampler(seed=3))
    study.optimize(objective, n_trials=12)
    states = [t.state.name for t in study.trials]
    assert states[:2] == ["COMPLETE", "COMPLETE"]  # the startup trials
    assert states.count("PRUNED") >= 3, states
    for t in study.trials:
        info = t.user_attrs.get("pandora:pruner")
        if t.state.name == "PRUNED":
            assert info["pruned"] and info["step"] < T
            # A loss index: pruned when it is no better than the best complete loss.
            assert info["index"] >= info["best_complete"]
    # Steps spent: far fewer than 12 full runs.
    assert sum(len(t.intermediate_values) for t in study.trials) < 0.75 * 12 * T


def test_gittins_pruner_argument_errors_name_the_argument():
    with pytest.raises(ValueError, match="lam"):
        po.GittinsPruner(lam=0.0, max_steps=5)
    with pytest.raises(ValueError, match="max_steps and steps"):
        po.GittinsPruner(lam=0.1)
    with pytest.raises(ValueError, match="steps"):
        po.GittinsPruner(lam=0.1, steps=[3, 2])
    with pytest.raises(ValueError, match="step_weights"):
        po.GittinsPruner(lam=0.1, max_steps=3, step_weights=[1.0])
    with pytest.raises(ValueError, match="weights\\[1\\]"):
        po.GittinsPruner(lam=0.1, max_steps=3, step_weights=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="rule"):
        po.GittinsPruner(lam=0.1, max_steps=3, rule="median")
    with pytest.raises(ValueError, match="grid_points"):
        po.GittinsPruner(lam=0.1, max_steps=3, grid_points=4)
    with pytest.raises(ValueError, match="step_cost"):
        po.GittinsPruner(lam=0.1, max_steps=3, step_cost=2.0)
    with pytest.raises(ValueError, match="step_cost"):
        po.GittinsPruner(lam=0.1, max_steps=3, step_cost=lambda p: 1.0,
                         rule="new_configuration")


def _pruned_worker(url, name, seed):
    """One of three workers of a study pruned by GittinsPruner (curves of _curve, 4 trials)."""
    import time

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        for s in range(T):
            time.sleep(0.02)
            trial.report(_curve(x, s + 1), s)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return _curve(x, T)

    storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 120}},
                                         skip_compatibility_check=True, skip_table_creation=True)
    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=optuna.samplers.RandomSampler(seed=seed),
                              pruner=po.GittinsPruner(lam=0.002, max_steps=T, grid_points=41))
    study.optimize(objective, n_trials=4)


def test_gittins_pruner_with_three_processes_on_one_sqlite_storage(tmp_path):
    url = f"sqlite:///{tmp_path / 'pruned.db'}"
    name = "pruned"
    study = optuna.create_study(study_name=name, storage=url, direction="maximize")
    for x in (0.0, 0.55):
        _add_complete(study, x)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["optuna", "optuna.storages._rdb.models", "pandora.optuna"])
    procs = [ctx.Process(target=_pruned_worker, args=(url, name, k)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    trials = optuna.load_study(study_name=name, storage=url).trials
    assert len(trials) == 2 + 12
    infos = [t.user_attrs["pandora:pruner"] for t in trials[2:]
             if "pandora:pruner" in t.user_attrs]
    assert any(t.state.name == "PRUNED" for t in trials)
    assert all(t.user_attrs["pandora:pruner"]["pruned"] for t in trials if t.state.name == "PRUNED")
    assert max(i["running"] for i in infos) >= 1  # decisions saw other workers' curves
