"""Agreement with the Rust CLI (`pandora eval`, `pandora boxes`) on the same inputs."""

import json
import subprocess

import numpy as np
import pytest

import pandora
from pandora import acquisition as acq


def run(bin_, args, payload):
    out = subprocess.run([bin_, *args], input=json.dumps(payload), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_gp_and_acquisitions_agree_with_pandora_eval(pandora_bin):
    rng = np.random.default_rng(4)
    X = rng.uniform(size=(9, 2))
    y = np.cos(5 * X[:, 0]) * X[:, 1]
    P = rng.uniform(size=(6, 2))
    ls, s2, noise, c = [0.3, 0.5], 1.7, 1e-4, 0.2
    best = float(y.max())
    req = {
        "train_x": X.tolist(), "train_y": y.tolist(),
        "kernel": {"type": "matern52", "lengthscales": ls, "outputscale": s2},
        "noise": noise, "mean": c, "points": P.tolist(),
        "acquisitions": [
            {"name": "log_ei", "best_f": best},
            {"name": "ei", "best_f": best},
            {"name": "ucb", "beta": 2.0},
            {"name": "pbgi", "lambda": 0.01, "cost": {"type": "linear_mean", "offset": 1.0,
                                                       "slope": 20.0}},
            {"name": "log_eipc", "best_f": best,
             "cost": {"type": "linear_mean", "offset": 1.0, "slope": 20.0}},
        ],
    }
    ref = run(pandora_bin, ["eval", "-"], req)
    gp = pandora.GP("matern52", lengthscales=ls, outputscale=s2, noise=noise, mean=c).fit(X, y)
    mean, std, gm, gs = gp.predict(P, return_grad=True)
    np.testing.assert_allclose(mean, ref["mean"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(std, ref["std"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(gm, ref["mean_gradient"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gs, ref["std_gradient"], rtol=1e-8, atol=1e-12)
    cost = 1.0 + 20.0 * P.mean(axis=1)
    ours = [
        acq.log_ei(mean, std, best),
        acq.ei(mean, std, best),
        acq.ucb(mean, std, 2.0),
        acq.pbgi(mean, std, 0.01, cost),
        acq.log_eipc(mean, std, best, cost),
    ]
    for a, r in zip(ours, ref["acquisitions"]):
        np.testing.assert_allclose(a, r["value"], rtol=1e-12, atol=1e-14, err_msg=r["name"])


def test_boxes_agree_with_pandora_boxes(pandora_bin):
    inst = {"boxes": [
        {"cost": 0.3, "rewards": {"values": [0.0, 1.0, 4.0], "probs": [0.5, 0.3, 0.2]}},
        {"cost": 0.1, "normal": {"mean": 0.5, "std": 1.0}},
        {"cost": {"values": [0.0, 0.4], "probs": [0.5, 0.5]},
         "rewards": {"values": [1.0, 2.0], "probs": [0.5, 0.5]}},
    ], "fallback": None}
    ref = run(pandora_bin, ["boxes", "-"], inst)
    out = pandora.boxes(inst["boxes"], inst["fallback"])
    assert out["order"] == ref["order"]
    for k in ("indices", "expected_utility", "expected_reward", "expected_cost"):
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-14)
