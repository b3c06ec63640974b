"""`pandora.experiment`: the experiment harness from Python, the same library as the CLI."""

import json
import subprocess

import pytest

import pandora
from pandora import experiment

SMOKE = """
[experiment]
name = "py-smoke"
seeds = 2
raw_samples = 32
num_restarts = 2

[[problem]]
objective = "levy"
dim = 2
cost = "linear_mean"
budget = 10

[[policy]]
acquisition = "random"

[[policy]]
acquisition = "pbgi_d"
lambda0 = 0.1
decay = 2.0
"""

TIMING = (
    "seconds",
    "seconds_fit",
    "seconds_propose",
    "seconds_total",
    "wall_seconds",
    "cpu_seconds",
    "cpu_seconds_propose",
    "cpu_seconds_eval",
)


def stripped(path):
    """A trace's lines without the timing fields (the only nondeterminism)."""
    lines = []
    for line in path.read_text().splitlines():
        v = json.loads(line)
        for k in list(v):
            if k.startswith("seconds") or k in TIMING:
                del v[k]
        lines.append(v)
    return lines


@pytest.fixture
def config(tmp_path):
    p = tmp_path / "smoke.toml"
    p.write_text(SMOKE)
    return p


def test_run_writes_traces_and_summary_and_resumes(tmp_path, config, capsys):
    out = tmp_path / "out"
    r = experiment.run(config, out=out, jobs=2)
    assert r.out == out and r.shard is None
    assert "pbgi_d" in r.table
    traces = sorted((out / "traces").glob("*.jsonl"))
    assert len(traces) == 4  # 1 problem x 2 policies x 2 seeds
    assert (out / "summary" / "final.csv").exists()
    assert "4 run(s) carried out" in capsys.readouterr().err
    # Running again skips every complete run and rewrites the same summary.
    again = experiment.run(config, out=out, jobs=2)
    assert again.table == r.table
    assert "0 run(s) carried out, 4 already complete" in capsys.readouterr().err


def test_python_and_the_cli_write_the_same_traces(tmp_path, config, pandora_bin):
    py_out, cli_out = tmp_path / "py", tmp_path / "cli"
    experiment.run(config, out=py_out, jobs=1, verbose=False)
    done = subprocess.run([pandora_bin, "experiment", str(config), "--out", str(cli_out),
                           "--jobs", "1", "--quiet"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in (py_out / "traces").glob("*.jsonl"))
    assert names == sorted(p.name for p in (cli_out / "traces").glob("*.jsonl"))
    for n in names:
        assert stripped(py_out / "traces" / n) == stripped(cli_out / "traces" / n), n


def test_shards_then_summarize(tmp_path, config):
    out = tmp_path / "out"
    first = experiment.run(config, out=out, shard="0/2", verbose=False)
    assert first.table is None and first.shard == "0/2"
    with pytest.raises(RuntimeError, match="missing|unfinished"):
        experiment.summarize(out, verbose=False)
    partial = experiment.summarize(out, partial=True, verbose=False)
    assert "py-smoke" in partial or "levy" in partial
    experiment.run(config, out=out, shard="1/2", verbose=False)
    table = experiment.summarize(out, verbose=False)
    assert len(list((out / "traces").glob("*.jsonl"))) == 4
    assert "pbgi_d" in table


def test_plan_estimates_and_needs_bin_for_a_script(tmp_path, config):
    report = experiment.plan(config, out=tmp_path / "out", calibration_steps=1, verbose=False)
    assert "CPU-hours" in report and "4 run(s)" in report
    with pytest.raises(ValueError, match="bin"):
        experiment.plan(config, slurm=tmp_path / "grid.sbatch", verbose=False)
    report = experiment.plan(config, out=tmp_path / "out", calibration_steps=1,
                             slurm=tmp_path / "grid.sbatch", bin="/opt/pandora/bin/pandora",
                             verbose=False)
    script = (tmp_path / "grid.sbatch").read_text()
    assert "/opt/pandora/bin/pandora" in script and "--array=0-" in script


def test_errors_name_what_is_wrong(tmp_path, config):
    bad = tmp_path / "bad.toml"
    bad.write_text(SMOKE.replace("seeds = 2", "seeds = \"two\""))
    with pytest.raises(RuntimeError, match="seeds"):
        experiment.run(bad, out=tmp_path / "o", verbose=False)
    with pytest.raises(ValueError, match="kind"):
        experiment.run(config, kind="grid", verbose=False)
    with pytest.raises(ValueError, match="K/N"):
        experiment.run(config, shard="3", verbose=False)
    assert not (tmp_path / "o").exists()


def test_the_package_exports_the_module():
    assert pandora.experiment is experiment
    assert "experiment" in pandora.__all__
