"""Type stubs of the native module ``pandora._pandora`` (use the public API in ``pandora``)."""

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

def acquisition_values(
    name: str,
    mean: npt.NDArray[np.float64],
    std: npt.NDArray[np.float64],
    *,
    log_cost_mean: Optional[npt.NDArray[np.float64]] = ...,
    log_cost_var: Optional[npt.NDArray[np.float64]] = ...,
    best_f: Optional[float] = ...,
    beta: Optional[float] = ...,
    alpha: Optional[float] = ...,
    lam: Optional[float] = ...,
    convention: Optional[str] = ...,
    minimize: bool = ...,
    grad: bool = ...,
) -> Tuple[
    npt.NDArray[np.float64],
    Optional[npt.NDArray[np.float64]],
    Optional[npt.NDArray[np.float64]],
    Optional[npt.NDArray[np.float64]],
]: ...
def solve_boxes(instance_json: str, verify: bool = ...) -> str: ...
def solve_freeze_thaw(instance_json: str, verify: bool = ...) -> str: ...
def run_grid(
    kind_name: str,
    config: str,
    out: Optional[str] = ...,
    jobs: Optional[int] = ...,
    smoke: bool = ...,
    shard: Optional[str] = ...,
    verbose: bool = ...,
) -> str: ...
def summarize_grid(kind_name: str, dir: str, partial: bool = ..., verbose: bool = ...) -> str: ...
def plan_grid(
    kind_name: str,
    config: str,
    smoke: bool = ...,
    out: Optional[str] = ...,
    calibration_steps: int = ...,
    slurm: Optional[str] = ...,
    shards: Optional[int] = ...,
    cpus_per_task: int = ...,
    mem: str = ...,
    max_parallel: Optional[int] = ...,
    time_margin: float = ...,
    partition: Optional[str] = ...,
    bin: Optional[str] = ...,
    verbose: bool = ...,
) -> str: ...
def freeze_thaw_bench(
    config: str, out: Optional[str] = ..., smoke: bool = ..., verbose: bool = ...
) -> str: ...

class NativeGp:
    @staticmethod
    def fit(
        x: npt.NDArray[np.float64],
        y: npt.NDArray[np.float64],
        kernel: str,
        lower: Optional[List[float]] = ...,
        upper: Optional[List[float]] = ...,
        standardize: bool = ...,
        noise: Optional[float] = ...,
        ard: bool = ...,
        priors: bool = ...,
        restarts: int = ...,
        seed: int = ...,
    ) -> "NativeGp": ...
    @staticmethod
    def condition(
        x: npt.NDArray[np.float64],
        y: npt.NDArray[np.float64],
        kernel: str,
        lengthscales: List[float],
        outputscale: float = ...,
        noise: float = ...,
        mean: float = ...,
    ) -> "NativeGp": ...
    @property
    def dim(self) -> int: ...
    def posterior(
        self, x: npt.NDArray[np.float64], grad: bool = ...
    ) -> Tuple[
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        Optional[npt.NDArray[np.float64]],
        Optional[npt.NDArray[np.float64]],
    ]: ...
    def params(self) -> Dict[str, Any]: ...
    def sample_paths(self, n: int, seed: int = ..., num_features: int = ...) -> "NativePaths": ...

class NativePaths:
    def __len__(self) -> int: ...
    @property
    def dim(self) -> int: ...
    def values(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]: ...

class NativeStudy:
    @staticmethod
    def open(config_json: str) -> "NativeStudy": ...
    @staticmethod
    def load(name: str, url: str) -> "NativeStudy": ...
    def config_json(self) -> str: ...
    def config_toml(self) -> str: ...
    def optimize(
        self,
        evaluate: Callable[[str], Tuple[Optional[float], Optional[float], Optional[str], float, bool]],
        told: Callable[[str], None],
        workers: int = ...,
        prefix: Optional[str] = ...,
        n_trials: Optional[int] = ...,
    ) -> Optional[str]:
        """The worker loop (``pandora run``'s) with a Python objective: see
        ``crates/pandora-py/src/optimize.rs``; returns why the study is finished, or ``None``."""
        ...
    def ask(self, worker: str) -> Tuple[Optional[str], Optional[str]]: ...
    def tell(self, number: int, objective: float, cost: float) -> str: ...
    def tell_realized(
        self, number: int, objective: float, cost: Optional[float], random_json: str
    ) -> str: ...
    def fail(self, number: int, reason: str, cost: Optional[float] = ...) -> str: ...
    def tell_step(
        self, number: int, step: int, value: float, cost: Optional[float] = ...
    ) -> str: ...
    def known_cost(self, x: List[float]) -> Optional[float]: ...
    def trials_json(self) -> str: ...
    def summary_json(self) -> str:
        """``pandora status --json``'s object: running, complete, failed, abandoned,
        total_cost, budget_spent, lambda, best {number, objective, params}, stopping {rule,
        lambda, statistic, value, threshold, iteration, fired}, stop_reason."""
        ...
    def propose(self, history_json: str, state_json: str) -> str: ...
    def decide_curves(self, request_json: str) -> str: ...
    def abandon_stale(self, timeout_s: float) -> List[int]: ...
    def heartbeat(self, number: int) -> None: ...
