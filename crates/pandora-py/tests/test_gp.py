"""GP: closed-form posterior with fixed hyperparameters, fitting, gradients, paths, errors."""

import numpy as np
import pytest

import pandora


def matern52(X, Z, ls, s2):
    r = np.sqrt(((X[:, None, :] - Z[None, :, :]) ** 2 / np.asarray(ls) ** 2).sum(-1))
    return s2 * (1 + np.sqrt(5) * r + 5 * r * r / 3) * np.exp(-np.sqrt(5) * r)


def data(n=12, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    y = np.sin(6 * X[:, 0]) + X[:, 1] ** 2
    return X, y


def test_fixed_hyperparameters_match_numpy_closed_form():
    X, y = data()
    ls, s2, noise, c = [0.3, 0.5], 1.7, 1e-3, 0.2
    gp = pandora.GP("matern52", lengthscales=ls, outputscale=s2, noise=noise, mean=c).fit(X, y)
    Xq = np.random.default_rng(1).uniform(size=(7, 2))
    mean, std = gp.predict(Xq)
    K = matern52(X, X, ls, s2) + noise * np.eye(len(X))
    Ks = matern52(Xq, X, ls, s2)
    ref_mean = c + Ks @ np.linalg.solve(K, y - c)
    ref_var = s2 - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T))
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(std, np.sqrt(ref_var), rtol=1e-8, atol=1e-10)


def test_prior_with_no_data():
    gp = pandora.GP("rbf", lengthscales=0.5, outputscale=2.0, mean=1.0).fit(np.zeros((0, 3)), [])
    mean, std = gp.predict(np.ones((4, 3)))
    np.testing.assert_allclose(mean, 1.0)
    np.testing.assert_allclose(std, np.sqrt(2.0))


def test_fit_interpolates_and_gradients_match_finite_differences():
    X, y = data(20)
    gp = pandora.GP().fit(X, y)
    mean, std = gp.predict(X)
    np.testing.assert_allclose(mean, y, atol=0.05)
    assert gp.params["fitted"] and len(gp.params["lengthscales"]) == 2
    Xq = np.array([[0.31, 0.62], [0.8, 0.1]])
    m, s, gm, gs = gp.predict(Xq, return_grad=True)
    eps = 1e-6
    for k in range(2):
        e = np.zeros(2)
        e[k] = eps
        mp, sp = gp.predict(Xq + e)
        mm, sm = gp.predict(Xq - e)
        np.testing.assert_allclose(gm[:, k], (mp - mm) / (2 * eps), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gs[:, k], (sp - sm) / (2 * eps), rtol=1e-5, atol=1e-6)


def test_bounds_change_normalization_not_shapes():
    X, y = data(15)
    gp = pandora.GP(bounds=[(0, 1), (0, 1)]).fit(X, y)
    assert gp.params["lower"] == [0.0, 0.0] and gp.params["upper"] == [1.0, 1.0]


def test_sample_paths_statistics_match_the_posterior():
    X, y = data(10)
    gp = pandora.GP("matern52", lengthscales=[0.3, 0.3], outputscale=1.0, noise=1e-4).fit(X, y)
    Xq = np.array([[0.5, 0.5], [0.05, 0.9], [2.0, 2.0]])
    mean, std = gp.predict(Xq)
    vals = gp.sample_paths(2000, seed=3, X=Xq)
    assert vals.shape == (2000, 3)
    se = std / np.sqrt(2000)
    assert (np.abs(vals.mean(0) - mean) < 5 * se + 1e-3).all()
    np.testing.assert_allclose(vals.std(0), std, rtol=0.1)
    # The same paths on every call; a seed reproduces them.
    paths = gp.sample_paths(4, seed=9)
    np.testing.assert_array_equal(paths(Xq), paths(Xq))
    np.testing.assert_array_equal(paths(Xq), gp.sample_paths(4, seed=9)(Xq))
    assert len(paths) == 4


@pytest.mark.parametrize("call,msg", [
    (lambda: pandora.GP("cubic"), "kernel"),
    (lambda: pandora.GP().fit(np.ones((3, 2)), np.ones(4)), "rows"),
    (lambda: pandora.GP().fit([[0.0, np.nan]], [1.0]), "not finite"),
    (lambda: pandora.GP().fit([[0.0, 1.0]], [np.inf]), "not finite"),
    (lambda: pandora.GP().fit(np.ones((2, 2, 2)), np.ones(2)), "2-D"),
    (lambda: pandora.GP().predict([[0.0]]), "not fitted"),
    (lambda: pandora.GP().fit(np.eye(2), [0.0, 1.0]).predict(np.ones((3, 3))), "columns"),
    (lambda: pandora.GP(lengthscales=[-1.0]).fit([[0.0]], [1.0]), "lengthscale"),
    (lambda: pandora.GP(bounds=[(1, 0), (0, 1)]).fit(np.eye(2), [0.0, 1.0]), "bounds"),
    (lambda: pandora.GP().fit(np.eye(2), [0.0, 1.0]).sample_paths(0), "positive"),
    (lambda: pandora.GP().fit(np.eye(2), [0.0, 1.0]).sample_paths(2, num_features=3), "num_features"),
])
def test_bad_input_raises_value_error(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()
