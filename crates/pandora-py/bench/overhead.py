"""Python overhead of Study.ask + tell over the native calls, and pandora.acquisition.pbgi
throughput on 1e5 points. Run with the installed wheel: python crates/pandora-py/bench/overhead.py
"""

import json
import statistics
import time

import numpy as np

import pandora
from pandora._pandora import NativeStudy, acquisition_values


def study(name):
    # A long initial design: every ask is a cheap Sobol point, so the storage round trip and
    # the binding dominate.
    return pandora.Study.create(name, "sqlite::memory:", space={"a": (0.0, 1.0), "b": (0.0, 1.0)},
                                max_trials=100000, initial_design=100000)


def steps(fn, n=200):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


class CannedNative:
    """Stands in for the native study: returns the strings a real one returned, instantly, so
    that timing the Python API measures only the Python layer."""

    def __init__(self, real):
        self.trial_json, _ = real.ask("w")
        self.told = real.tell(json.loads(self.trial_json)["number"], 0.5, 1.0)
        self.conf = real.config_json()

    def ask(self, worker):
        return self.trial_json, None

    def tell(self, number, value, cost):
        return self.told

    def known_cost(self, x):
        return 1.0

    def config_json(self):
        return self.conf


def main():
    py_times, nat_times = [], []
    for rep in range(7):  # interleaved, fresh studies of the same size
        s = study(f"py{rep}")

        def py_step():
            t = s.ask()
            s.tell(t, 0.5)

        native = NativeStudy.open(json.dumps(study(f"nat{rep}").config))

        def native_step():
            tj, _ = native.ask("w")
            native.tell(json.loads(tj)["number"], 0.5, 1.0)

        py_times.append(steps(py_step))
        nat_times.append(steps(native_step))
    t_py, t_nat = statistics.median(py_times), statistics.median(nat_times)
    print(f"ask+tell (200 trials per study, in-memory SQLite): Python API {t_py * 1e6:.0f} us, "
          f"native calls {t_nat * 1e6:.0f} us per trial (median of 7)")
    canned = pandora.Study(CannedNative(NativeStudy.open(json.dumps(study("c").config))))

    def canned_step():
        t = canned.ask()
        canned.tell(t, 0.5)

    layer = statistics.median(steps(canned_step, 2000) for _ in range(7))
    print(f"Python layer alone (native calls replaced by canned answers): {layer * 1e6:.1f} us "
          f"per ask+tell (median of 7 x 2000)")

    rng = np.random.default_rng(7)
    n = 100_000
    mu = rng.uniform(-3, 3, n)
    sd = 10 ** rng.uniform(-3, 1, n)
    lc = 10 ** rng.uniform(-12, 0, n)
    for label, f in [
        ("pandora.acquisition.pbgi", lambda: pandora.acquisition.pbgi(mu, sd, 1.0, lc)),
        ("pandora.acquisition.pbgi(grad=True)",
         lambda: pandora.acquisition.pbgi(mu, sd, 1.0, lc, grad=True)),
        ("native acquisition_values", lambda: acquisition_values(
            "pbgi", mu, sd, log_cost_mean=np.log(lc), lam=1.0)),
    ]:
        ts = []
        for _ in range(15):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        med = statistics.median(ts)
        print(f"{label}: {med * 1e3:.2f} ms per 1e5 points = {med / n * 1e9:.1f} ns/point "
              f"(median of 15)")


if __name__ == "__main__":
    main()
