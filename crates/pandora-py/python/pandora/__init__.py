"""Pandora: cost-aware Bayesian optimization with a Rust core.

The package has these parts:

* **Studies** (:class:`Study`): persistent ask/tell loops over a SQLite database shared with the
  ``pandora`` command-line tool.
* **A one-call loop** (:func:`minimize`, :func:`maximize`): optimize a Python function over a box
  with a budget in cost units (evaluations, seconds of runtime, or any reported cost).
* **Building blocks** vectorized over NumPy arrays: :class:`GP` (Gaussian-process regression and
  pathwise posterior samples), :mod:`pandora.acquisition` (EI, LogEI, UCB, EIPC, the Pandora's Box
  Gittins index, with gradients), :func:`boxes` (exact Pandora's Box solutions) and
  :func:`freeze_thaw` (which training run to start, continue or keep, by Gittins indices).
* **Experiments** (:mod:`pandora.experiment`): the research harness of ``pandora experiment``
  and ``pandora cvs`` (grids of problems × policies × seeds, resumable traces, summaries, Slurm
  plans), called from Python.
* **Optuna** (:mod:`pandora.optuna`, imported on demand; needs ``optuna``): a cost-aware sampler
  and the stopping rule as a callback for existing Optuna scripts (docs/optuna.md).

Everything heavy runs in Rust with the GIL released. See ``docs/python.md``.
"""

from ._pandora import __version__
from . import acquisition, experiment
from ._boxes import boxes
from ._freeze_thaw import freeze_thaw
from ._gp import GP, Paths
from ._loop import OptimizeResult, maximize, minimize
from ._space import Categorical, Float, Int, Ordinal
from ._study import Study, Trial

__all__ = [
    "__version__",
    "acquisition",
    "experiment",
    "boxes",
    "freeze_thaw",
    "Categorical",
    "Float",
    "GP",
    "Int",
    "maximize",
    "minimize",
    "OptimizeResult",
    "Ordinal",
    "Paths",
    "Study",
    "Trial",
]
