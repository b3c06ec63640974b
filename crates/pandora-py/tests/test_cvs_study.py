"""Studies with cost-varying variable subsets from Python: a study configured with a [cvs]
section (created here through the CLI) is driven by ask/tell with realized random values."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import pandora

ROOT = Path(__file__).resolve().parents[3]


def _greenhouse(tmp_path, pandora_bin):
    cfg = tmp_path / "g.toml"
    shutil.copy(ROOT / "examples" / "cvs_greenhouse.toml", cfg)
    # Creating the study: `pandora status` opens (creates) it without handing out a trial.
    subprocess.run([pandora_bin, "status", str(cfg)], check=True, capture_output=True,
                   cwd=tmp_path)
    return pandora.Study.load("greenhouse", f"sqlite:{tmp_path}/greenhouse.db"), cfg


def test_ask_and_tell_with_realized_values(tmp_path, pandora_bin):
    s, cfg = _greenhouse(tmp_path, pandora_bin)
    t = s.ask()
    cs = t.control_set
    assert cs["controlled"] == ["temp"] and cs["random"] == ["ph", "humidity"]
    assert cs["cost"] == 0.5 and cs["name"] == "temperature"
    assert set(t.params) == {"temp"}
    # Without the realized values, or with wrong ones, nothing is recorded.
    for bad in (None, {"ph": 6.2}, {"ph": 6.2, "humidity": 150.0},
                {"ph": 6.2, "humidity": 60.0, "temp": 20.0}):
        with pytest.raises(ValueError):
            s.tell(t, 1.0, random=bad)
    with pytest.raises(ValueError):
        s.tell(t, 1.0, random={"ph": "acid", "humidity": 60.0})
    with pytest.raises(ValueError):
        s.tell(t, failed="flood", random={"ph": 6.2})
    assert s.trials[0]["state"] == "running"
    rec = s.tell(t, 2.5, random={"ph": 6.2, "humidity": 60.0})
    assert rec["state"] == "complete" and rec["cost"] == 0.5
    assert rec["params"] == {"temp": t.params["temp"], "ph": 6.2, "humidity": 60.0}
    assert abs(rec["x"][1] - (6.2 - 5.0) / 3.0) < 1e-12
    # The CLI sees the realized point.
    out = subprocess.run([pandora_bin, "export", str(cfg), "--format", "json"], check=True,
                         capture_output=True, cwd=tmp_path, text=True).stdout
    assert json.loads(out)[0]["params"]["humidity"] == 60.0


def test_random_is_refused_outside_cvs_studies(tmp_path):
    s = pandora.Study.create("plain", f"sqlite:{tmp_path}/p.db", space={"x": (0.0, 1.0)},
                             max_trials=3)
    t = s.ask()
    assert t.control_set is None
    with pytest.raises(ValueError, match="cvs"):
        s.tell(t, 1.0, random={"x": 0.5})
