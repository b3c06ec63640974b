"""The experiment harness from Python: the same grids, traces and summaries as the command line.

``pandora experiment``, ``pandora cvs`` and ``pandora freeze-thaw-bench`` are thin command lines
over one Rust library (``pandora_experiment``); these functions call that library directly, so a
grid started here writes the same files as ``pandora experiment CONFIG`` and either can resume the
other's directory (runs already complete are skipped, interrupted ones continue). Configuration
files are the TOML files of ``experiments/`` (docs/experiments.md, docs/cvs.md,
docs/freeze-thaw.md).

* :func:`run`: run a grid (``kind="experiment"`` or ``"cvs"``), optionally one shard of it, and
  write its summary.
* :func:`summarize`: write the summary of a directory (refused while runs are missing, unless
  ``partial=True``).
* :func:`plan`: estimate the CPU-hours and the longest run, and optionally write an ``sbatch``
  script for a Slurm array.
* :func:`freeze_thaw_bench`: the freeze-thaw benchmark.

The grids run in Rust on all cores (``jobs``) with the GIL released. What the harness reports (a
run that failed, where the files went) is written to ``sys.stderr`` unless ``verbose=False``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from ._pandora import freeze_thaw_bench as _freeze_thaw_bench
from ._pandora import plan_grid, run_grid, summarize_grid

__all__ = ["GridResult", "freeze_thaw_bench", "plan", "run", "summarize"]

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class GridResult:
    """What :func:`run` did.

    Attributes:
        out: the grid's output directory (traces or run records, summaries, figures).
        table: the summary table the command line prints (``None`` for a shard: shards share the
            directory, and :func:`summarize` writes the summary once every shard is done).
        shard: the shard that was run, as ``"K/N"``, or ``None``.
    """

    out: Path
    table: Optional[str]
    shard: Optional[str]


def _opt_path(p: Optional[PathLike]) -> Optional[str]:
    return None if p is None else os.fspath(p)


def run(config: PathLike, *, kind: str = "experiment", out: Optional[PathLike] = None,
        jobs: Optional[int] = None, smoke: bool = False, shard: Optional[str] = None,
        verbose: bool = True) -> GridResult:
    """Runs the grid configured in the TOML file ``config`` and writes its summary.

    Args:
        config: the configuration file.
        kind: ``"experiment"`` (``pandora experiment``) or ``"cvs"`` (``pandora cvs``).
        out: output directory (default ``results/NAME``, ``results/NAME-smoke`` with ``smoke``).
        jobs: runs in parallel (default: the number of CPUs).
        smoke: use the sizes of the configuration's ``[smoke]`` section.
        shard: run only shard ``"K/N"`` (0-based) of the grid, balanced by estimated cost; the
            summary is then left to :func:`summarize`.
        verbose: write the harness's lines to ``sys.stderr``.

    Raises:
        RuntimeError: the configuration was refused (the message names the field), or runs
            failed or were being written by another process (the runs that completed are kept,
            and running again resumes).
    """
    text = run_grid(kind, os.fspath(config), _opt_path(out), jobs, smoke, shard, verbose)
    r = json.loads(text)
    if r["problem"] is not None:
        raise RuntimeError(r["problem"])
    return GridResult(out=Path(r["out"]), table=r["table"], shard=r["shard"])


def summarize(dir: PathLike, *, kind: str = "experiment", partial: bool = False,
              verbose: bool = True) -> str:
    """Writes the summary files and figures of the grid directory ``dir``; returns the table.

    Refused (``RuntimeError`` naming them) while runs of the grid are missing or unfinished,
    unless ``partial=True``.
    """
    return summarize_grid(kind, os.fspath(dir), partial, verbose)


def plan(config: PathLike, *, kind: str = "experiment", smoke: bool = False,
         out: Optional[PathLike] = None, calibration_steps: int = 4,
         slurm: Optional[PathLike] = None, shards: Optional[int] = None, cpus_per_task: int = 1,
         mem: str = "4G", max_parallel: Optional[int] = None, time_margin: float = 1.5,
         partition: Optional[str] = None, bin: Optional[PathLike] = None,
         verbose: bool = True) -> str:
    """Estimates a grid before it is run, as ``pandora experiment plan`` does; returns the report.

    Runs already in ``out`` (default as :func:`run` takes it) give each (problem, policy) pair's
    rate; the others are calibrated by a short run of ``calibration_steps`` steps. With
    ``slurm=FILE`` an ``sbatch`` script for a Slurm array is written there; it calls the
    ``pandora`` executable ``bin`` (required then, e.g. ``shutil.which("pandora")``). See
    docs/experiments.md ("On a cluster") for the other options.
    """
    return plan_grid(kind, os.fspath(config), smoke, _opt_path(out), calibration_steps,
                     _opt_path(slurm), shards, cpus_per_task, mem, max_parallel, time_margin,
                     partition, _opt_path(bin), verbose)


def freeze_thaw_bench(config: PathLike, *, out: Optional[PathLike] = None, smoke: bool = False,
                      verbose: bool = True) -> str:
    """Runs the freeze-thaw benchmark configured in ``config``; returns the final-regret table.

    Writes ``traces.csv``, ``summary.csv``, ``final.csv`` and a figure to ``out`` (default: the
    configuration's ``out``), as ``pandora freeze-thaw-bench`` does (docs/freeze-thaw.md).
    """
    return _freeze_thaw_bench(os.fspath(config), _opt_path(out), smoke, verbose)
