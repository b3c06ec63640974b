"""Acquisition functions: closed forms, finite differences, broadcasting, errors."""

import math

import numpy as np
import pytest

import pandora
from pandora import acquisition as acq


def norm_pdf(u):
    return math.exp(-0.5 * u * u) / math.sqrt(2 * math.pi)


def norm_cdf(u):
    return 0.5 * math.erfc(-u / math.sqrt(2))


def h(u):
    return norm_pdf(u) + u * norm_cdf(u)


MU = np.array([-1.0, 0.0, 0.3, 2.0, 0.5])
SD = np.array([0.5, 1.0, 0.2, 3.0, 1e-3])


def test_ei_and_log_ei_match_closed_form():
    best = 0.4
    v = acq.ei(MU, SD, best)
    lv = acq.log_ei(MU, SD, best)
    for i in range(len(MU)):
        u = (MU[i] - best) / SD[i]
        ref = SD[i] * h(u)
        assert v[i] == pytest.approx(ref, rel=1e-12, abs=1e-300)
        if ref > 1e-250:
            assert lv[i] == pytest.approx(math.log(ref), rel=1e-10)


def test_log_ei_finite_far_in_the_tail():
    lv = acq.log_ei(np.array([-1e4]), np.array([1.0]), 0.0)
    assert np.isfinite(lv).all() and lv[0] < -1e7


def test_pbgi_solves_its_defining_equation():
    lam, cost = 0.05, np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    g = acq.pbgi(MU, SD, lam, cost)
    for i in range(len(MU)):
        u = (MU[i] - g[i]) / SD[i]
        assert SD[i] * h(u) == pytest.approx(lam * cost[i], rel=1e-9)


def test_pbgi_limits_and_minimize_mode():
    # std = 0: g = mu - lam c.
    g = acq.pbgi([1.0], [0.0], 0.1, 2.0)
    assert g[0] == pytest.approx(0.8, rel=1e-15)
    gmin = acq.pbgi(MU, SD, 0.1, minimize=True)
    gmax = acq.pbgi(-MU, SD, 0.1)
    np.testing.assert_allclose(gmin, -gmax, rtol=1e-15)


@pytest.mark.parametrize("name,kw", [
    ("ei", {"best_f": 0.4}), ("log_ei", {"best_f": 0.4}), ("pi", {"best_f": 0.1}),
    ("log_pi", {"best_f": 0.1}), ("ucb", {"beta": 2.0}), ("lcb", {"beta": 2.0}),
    ("eipc", {"best_f": 0.4, "cost": 1.7}), ("log_eipc", {"best_f": 0.4, "cost": 1.7}),
    ("pbgi", {"lam": 0.03, "cost": 1.7}),
])
def test_gradients_match_finite_differences(name, kw):
    f = getattr(acq, name)
    mu = np.array([-0.3, 0.2, 0.9])
    sd = np.array([0.4, 1.1, 0.7])
    p = f(mu, sd, grad=True, **kw)
    eps = 1e-6
    dmu = (f(mu + eps, sd, **kw) - f(mu - eps, sd, **kw)) / (2 * eps)
    dsd = (f(mu, sd + eps, **kw) - f(mu, sd - eps, **kw)) / (2 * eps)
    np.testing.assert_allclose(p.d_mean, dmu, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(p.d_std, dsd, rtol=1e-6, atol=1e-8)
    if "cost" in kw:
        c = kw["cost"]
        kp = dict(kw, cost=c + eps)
        km = dict(kw, cost=c - eps)
        dc = (f(mu, sd, **kp) - f(mu, sd, **km)) / (2 * eps)
        np.testing.assert_allclose(p.d_cost, dc, rtol=1e-6, atol=1e-8)
    else:
        assert (p.d_cost == 0).all()


def test_broadcasting_and_shapes():
    mu = np.zeros((3, 4))
    v = acq.pbgi(mu, 1.0, 0.1, cost=np.array([1.0, 2.0, 3.0, 4.0]))
    assert v.shape == (3, 4)
    np.testing.assert_allclose(v[0], v[2])
    assert v[0, 0] > v[0, 3]  # dearer boxes have smaller indices
    assert acq.ucb(0.5, 2.0, 4.0).shape == ()
    assert float(acq.ucb(0.5, 2.0, 4.0)) == pytest.approx(4.5)


def test_non_contiguous_and_integer_inputs():
    mu = np.arange(10)[::2]
    v = acq.ucb(mu, np.ones(5, dtype=np.int32), 1.0)
    np.testing.assert_allclose(v, mu + 1.0)


@pytest.mark.parametrize("call,msg", [
    (lambda: acq.log_ei([0.0, np.nan], [1.0, 1.0], 0.0), "not finite"),
    (lambda: acq.log_ei([0.0], [-1.0], 0.0), "std"),
    (lambda: acq.ei([0.0], [0.0], 0.0), "std"),
    (lambda: acq.pbgi([0.0], [1.0], 0.0), "lam"),
    (lambda: acq.pbgi([0.0], [1.0], 0.1, cost=-1.0), "cost"),
    (lambda: acq.pbgi([0.0, 1.0], [1.0, 1.0, 1.0], 0.1), "broadcast"),
    (lambda: acq.ei(["a"], [1.0], 0.0), "numeric"),
    (lambda: acq.ucb([0.0], [1.0], float("nan")), "beta"),
    (lambda: acq.ei([0.0], [1.0], float("inf")), "best_f"),
])
def test_bad_input_raises_value_error(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()


def test_large_batch_runs():
    rng = np.random.default_rng(0)
    n = 100_000
    mu = rng.uniform(-3, 3, n)
    sd = 10 ** rng.uniform(-3, 1, n)
    g = acq.pbgi(mu, sd, 1e-4)
    assert g.shape == (n,) and np.isfinite(g).all()
    assert (g >= mu).all()  # small lam c: the index exceeds the mean
