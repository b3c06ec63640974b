"""Exact Pandora's Box: closed forms, the DP check, errors."""

import pytest

import pandora


def test_single_discrete_box_index_in_closed_form():
    # E[max(X - g, 0)] = 0.5 (1 - g) = 0.1  =>  g = 0.8.
    out = pandora.boxes([{"cost": 0.1, "rewards": {"values": [0.0, 1.0], "probs": [0.5, 0.5]}}])
    assert out["indices"][0] == pytest.approx(0.8, rel=1e-14)
    assert out["order"] == [0]
    assert out["expected_utility"] == pytest.approx(0.5 - 0.1, rel=1e-14)


def test_weitzman_equals_dp_optimum():
    bx = [
        {"cost": 0.3, "rewards": {"values": [0.0, 1.0, 4.0], "probs": [0.5, 0.3, 0.2]}},
        {"cost": 0.1, "rewards": {"values": [0.5, 1.5], "probs": [0.6, 0.4]}},
        {"cost": {"values": [0.0, 0.4], "probs": [0.5, 0.5]},
         "rewards": {"values": [1.0, 2.0], "probs": [0.5, 0.5]}},
    ]
    out = pandora.boxes(bx, fallback=0.2, verify=True)
    assert out["dp_expected_utility"] == pytest.approx(out["expected_utility"], rel=1e-12)
    assert out["expected_utility"] == pytest.approx(
        out["expected_reward"] - out["expected_cost"], rel=1e-12)
    assert sorted(out["indices"], reverse=True)[0] == out["indices"][out["order"][0]]


def test_normal_box_index_is_pbgi():
    out = pandora.boxes([{"cost": 0.05, "normal": {"mean": 0.3, "std": 2.0}}])
    g = pandora.acquisition.pbgi([0.3], [2.0], 1.0, 0.05)[0]
    assert out["indices"][0] == pytest.approx(g, rel=1e-12)


@pytest.mark.parametrize("bx,msg", [
    ([{"cost": 0.1}], "exactly one"),
    ([{"cost": 0.1, "rewards": {"values": [0.0, 1.0], "probs": [0.5, 0.6]}}], "prob"),
    ([{"cost": 0.1, "normal": {"mean": 0.0, "std": -1.0}}], "std"),
    ([{"cost": 0.1, "normal": {"mean": 0.0, "std": 1.0}, "colour": 1}], "colour"),
    ({"cost": 0.1}, "list"),
])
def test_bad_boxes_raise_value_error(bx, msg):
    with pytest.raises(ValueError, match=msg):
        pandora.boxes(bx)
