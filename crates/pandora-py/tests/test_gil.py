"""The heavy native calls release the GIL: another Python thread runs while they compute.

No timing assertion. The switch interval is raised to 1000 s for the test, so a thread holding
the GIL never hands it over on its own: the helper thread B can run Python code only when the
calling thread A blocks or releases the GIL. A wakes B (an Event), calls the native function
directly (not through the Python wrappers, whose NumPy conversions may release the GIL on their
own) and records that the call returned. If the call held the GIL throughout, B runs only after it
returned and always sees ``done = True``; if the call released it, B takes the GIL during the
call and sees ``done = False`` (A cannot take the GIL back before B finishes). B may be scheduled
too late in a particular attempt (the call was over before B woke up), so a call passes when any of
a few attempts observes B running during it; a call that holds the GIL can never pass. Two controls
check the helper itself: ``time.sleep`` (releases the GIL) passes, and a pure-Python loop and a
long C builtin call (both hold it) fail.
"""

import json
import sys
import threading
import time

import numpy as np
import pytest

import pandora
from pandora._pandora import NativeGp, NativeStudy, acquisition_values

pytestmark = pytest.mark.skipif(
    hasattr(sys, "_is_gil_enabled") and not sys._is_gil_enabled(),
    reason="free-threaded interpreter: there is no GIL to release",
)


def other_thread_ran_during(call, attempts=5):
    """True if a second Python thread executed bytecode while ``call()`` was running."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        for _ in range(attempts):
            go = threading.Event()
            state = {"done": False, "seen": None}

            def other():
                go.wait()
                state["seen"] = state["done"]

            th = threading.Thread(target=other)
            th.start()  # returns once `other` is blocked in go.wait() (it held the GIL till then)
            go.set()
            call()
            state["done"] = True
            th.join()
            if state["seen"] is False:
                return True
        return False
    finally:
        sys.setswitchinterval(old)


def test_the_helper_tells_a_released_gil_from_a_held_one():
    assert other_thread_ran_during(lambda: time.sleep(0.2))

    def spin():
        t = time.perf_counter()
        while time.perf_counter() - t < 0.2:
            pass

    assert not other_thread_ran_during(spin, attempts=2)
    # A long call into C that keeps the GIL (as a native function that forgot to release it).
    assert not other_thread_ran_during(lambda: sum(range(5_000_000)), attempts=2)


def test_acquisition_batch_releases_the_gil():
    rng = np.random.default_rng(0)
    n = 400_000
    mu = rng.uniform(-3, 3, n)
    sd = 10 ** rng.uniform(-3, 1, n)
    logc = np.log(10 ** rng.uniform(-12, 0, n))
    assert other_thread_ran_during(
        lambda: acquisition_values("pbgi", mu, sd, log_cost_mean=logc, lam=1.0))


def test_gp_fit_and_predict_release_the_gil():
    rng = np.random.default_rng(1)
    X = np.ascontiguousarray(rng.uniform(size=(60, 2)))
    y = np.ascontiguousarray(np.sin(4 * X[:, 0]) + X[:, 1])
    assert other_thread_ran_during(
        lambda: NativeGp.fit(X, y, "matern52", None, None, True, 1e-4, True, True, 1, 0))
    gp = NativeGp.fit(X, y, "matern52", None, None, True, 1e-4, True, True, 1, 0)
    Q = np.ascontiguousarray(rng.uniform(size=(20_000, 2)))
    assert other_thread_ran_during(lambda: gp.posterior(Q, True))


def test_study_ask_releases_the_gil():
    s = pandora.Study.create("gil", "sqlite::memory:", space={"a": (0.0, 1.0), "b": (0.0, 1.0)},
                             initial_design=4, max_trials=1000)
    native = NativeStudy.open(json.dumps(s.config))  # the native study (its own memory DB)
    for _ in range(12):
        tj, _ = native.ask("w")
        t = json.loads(tj)
        native.tell(t["number"], -sum((v - 0.3) ** 2 for v in t["x"]), 1.0)

    def ask_and_tell():  # a model step: GP fit and acquisition maximization
        tj, _ = native.ask("w")
        native.tell(json.loads(tj)["number"], 0.0, 1.0)

    assert other_thread_ran_during(ask_and_tell)
