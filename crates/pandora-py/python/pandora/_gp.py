r"""Gaussian-process regression on NumPy arrays.

The model is :math:`f \sim \mathcal{GP}(c, \sigma^2\kappa(r))`, :math:`r^2 = \sum_k (x_k -
z_k)^2/\ell_k^2`, :math:`y = f + \varepsilon`, :math:`\varepsilon\sim\mathcal N(0,\sigma_n^2)`, with
Matérn-1/2 :math:`\kappa = e^{-r}`, Matérn-3/2 :math:`(1+\sqrt3 r)e^{-\sqrt3 r}`, Matérn-5/2
:math:`(1+\sqrt5 r+\tfrac53 r^2)e^{-\sqrt5 r}` or RBF :math:`e^{-r^2/2}` kernels.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ._pandora import NativeGp, NativePaths

_KERNELS = ("matern12", "matern32", "matern52", "rbf")


def _as_matrix(X: Any, d: Optional[int], what: str = "X") -> np.ndarray:
    try:
        a = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a numeric array") from None
    if a.ndim == 1:
        if d is None or d == 1:
            a = a.reshape(-1, 1)
        elif a.shape[0] == d:
            a = a.reshape(1, d)
        else:
            raise ValueError(f"{what} has shape {a.shape}; expected (m, {d})")
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D (m, d), got shape {a.shape}")
    if d is not None and a.shape[1] != d:
        raise ValueError(f"{what} has {a.shape[1]} columns but the model has dimension {d}")
    if not np.isfinite(a).all():
        i = np.argwhere(~np.isfinite(a))[0]
        raise ValueError(f"{what}[{i[0]}, {i[1]}] = {a[i[0], i[1]]} is not finite")
    return np.ascontiguousarray(a)


class Paths:
    """Pathwise posterior samples drawn by :meth:`GP.sample_paths`: call with ``X`` (m × d) to get
    an ``(n_paths, m)`` array of path values. The same paths are evaluated on every call (each is
    one smooth function, e.g. for Thompson sampling)."""

    def __init__(self, native: NativePaths) -> None:
        self._native = native

    def __len__(self) -> int:
        return len(self._native)

    def __call__(self, X: Any) -> np.ndarray:
        return self._native.values(_as_matrix(X, self._native.dim))


class GP:
    r"""A Gaussian-process regressor.

    Two modes:

    * **fitted** (default): :meth:`fit` maps inputs to ``[0, 1]^d`` (with ``bounds`` if given, else
      the data's bounding box), standardizes ``y``, and fits the lengthscales, outputscale and
      constant mean by maximum a posteriori under the papers' Gamma priors (``priors=False``:
      maximum likelihood). The noise variance is fixed at ``noise`` (in standardized units;
      ``noise=None`` learns it).
    * **fixed hyperparameters**: give ``lengthscales`` (and ``outputscale``, ``mean``, ``noise``);
      :meth:`fit` only conditions on the data with no transforms — exactly the model of
      ``pandora eval``.

    Example::

        gp = pandora.GP("matern52").fit(X, y)
        mean, std = gp.predict(Xq)
        paths = gp.sample_paths(8, seed=1)   # paths(Xq) -> (8, m)
    """

    def __init__(
        self,
        kernel: str = "matern52",
        *,
        lengthscales: Union[None, float, Sequence[float]] = None,
        outputscale: float = 1.0,
        mean: float = 0.0,
        noise: Optional[float] = 1e-4,
        bounds: Optional[Sequence[Tuple[float, float]]] = None,
        standardize: bool = True,
        ard: bool = True,
        priors: bool = True,
        restarts: int = 1,
        seed: int = 0,
    ) -> None:
        if kernel not in _KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(_KERNELS)}, got {kernel!r}")
        self.kernel = kernel
        self.lengthscales = (None if lengthscales is None
                             else [float(v) for v in np.atleast_1d(lengthscales)])
        self.outputscale = float(outputscale)
        self.mean = float(mean)
        self.noise = None if noise is None else float(noise)
        self.bounds = bounds
        self.standardize = bool(standardize)
        self.ard = bool(ard)
        self.priors = bool(priors)
        self.restarts = int(restarts)
        self.seed = int(seed)
        self._native: Optional[NativeGp] = None

    def fit(self, X: Any, y: Any) -> "GP":
        """Fits (or, with fixed hyperparameters, conditions) the model on ``X`` (n × d) and
        ``y`` (n). Returns ``self``."""
        Xa = _as_matrix(X, None)
        try:
            ya = np.ascontiguousarray(np.asarray(y, dtype=float).reshape(-1))
        except (TypeError, ValueError):
            raise ValueError("y must be a numeric array") from None
        if ya.shape[0] != Xa.shape[0]:
            raise ValueError(f"X has {Xa.shape[0]} rows but y has {ya.shape[0]} values")
        if not np.isfinite(ya).all():
            i = int(np.argmax(~np.isfinite(ya)))
            raise ValueError(f"y[{i}] = {ya[i]} is not finite")
        if self.lengthscales is not None:
            self._native = NativeGp.condition(
                Xa, ya, self.kernel, self.lengthscales, self.outputscale,
                0.0 if self.noise is None else self.noise, self.mean)
            return self
        if Xa.shape[0] == 0:
            raise ValueError("fit needs at least one point (give lengthscales for the prior)")
        lower = upper = None
        if self.bounds is not None:
            b = np.asarray(self.bounds, dtype=float)
            if b.ndim != 2 or b.shape != (Xa.shape[1], 2):
                raise ValueError(f"bounds must have shape ({Xa.shape[1]}, 2), got {b.shape}")
            lower, upper = list(b[:, 0]), list(b[:, 1])
        self._native = NativeGp.fit(
            Xa, ya, self.kernel, lower, upper, self.standardize, self.noise, self.ard,
            self.priors, self.restarts, self.seed)
        return self

    def _model(self) -> NativeGp:
        if self._native is None:
            raise ValueError("the GP is not fitted yet: call fit(X, y) first")
        return self._native

    @property
    def dim(self) -> int:
        """Input dimension (after :meth:`fit`)."""
        return self._model().dim

    @property
    def params(self) -> Dict[str, Any]:
        """Hyperparameters (internal units) and transforms of the fitted model."""
        return self._model().params()

    def predict(self, X: Any, return_grad: bool = False) -> Tuple[np.ndarray, ...]:
        r"""Latent posterior mean :math:`\mu(x)` and standard deviation :math:`\sigma(x)` at the
        rows of ``X`` (without observation noise), in the units of ``y``. With
        ``return_grad=True`` also :math:`\nabla\mu` and :math:`\nabla\sigma` (m × d each)."""
        m = self._model()
        mean, std, gm, gs = m.posterior(_as_matrix(X, m.dim), return_grad)
        if return_grad:
            return mean, std, gm, gs
        return mean, std

    def sample_paths(self, n: int, seed: int = 0, num_features: int = 1024,
                     X: Any = None) -> Union[Paths, np.ndarray]:
        """Draws ``n`` independent posterior sample paths (random Fourier features with
        ``num_features`` features for the prior, Matheron's rule for the data). Returns a callable
        :class:`Paths`, or directly their values ``(n, m)`` at ``X`` if given."""
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        paths = Paths(self._model().sample_paths(int(n), int(seed), int(num_features)))
        return paths if X is None else paths(X)
