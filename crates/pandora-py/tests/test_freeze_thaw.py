"""Exact cost-aware freeze-thaw: a closed form, the DP check, the shared example, errors."""

import json
import pathlib

import pytest

import pandora

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "freeze_thaw.json"


def test_one_step_run_is_a_pandora_box():
    # Index g with 0.5 (2 - g) = 0.1 => g = 1.8; E[max(0.5, min(1.8, X))] = 0.25 + 0.9.
    runs = [
        {"name": "done", "nodes": [{"value": 0.5}]},
        {"nodes": [{"cost": 0.1, "next": [{"node": 1, "prob": 0.5}, {"node": 2, "prob": 0.5}]},
                   {"value": 0.0}, {"value": 2.0}]},
    ]
    out = pandora.freeze_thaw(runs)
    assert out["runs"][1]["index"] == pytest.approx(1.8, rel=1e-14)
    assert out["action"] == {"kind": "start", "run": 1, "name": "run 1"}
    assert out["expected_utility"] == pytest.approx(1.15, rel=1e-14)
    assert pandora.freeze_thaw(runs, fallback=1.9)["action"] == {"kind": "stop", "value": 1.9}


def test_example_agrees_with_dynamic_programming():
    inst = json.loads(EXAMPLE.read_text())
    out = pandora.freeze_thaw(inst["runs"], inst["fallback"], verify=True)
    assert out["dp_expected_utility"] == pytest.approx(out["expected_utility"], abs=1e-12)
    assert out["dp_index_policy_utility"] == pytest.approx(out["expected_utility"], abs=1e-12)
    assert [r["name"] for r in out["runs"]] == [r["name"] for r in inst["runs"]]


def test_errors_name_the_field():
    bad = [{"nodes": [{"value": 0.1, "cost": 0.1, "next": [{"node": 1, "prob": 0.4}]},
                      {"value": 1.0}]}]
    with pytest.raises(ValueError, match=r"runs\[0\]\.nodes\[0\]\.next"):
        pandora.freeze_thaw(bad)
    with pytest.raises(ValueError, match="runs must be a list"):
        pandora.freeze_thaw({"nodes": []})
    with pytest.raises(ValueError, match="fallback"):
        pandora.freeze_thaw([{"nodes": [{"value": 1.0}]}], fallback=float("nan"))
