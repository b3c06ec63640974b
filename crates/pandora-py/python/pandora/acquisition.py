r"""Acquisition functions of a Gaussian posterior, vectorized over NumPy arrays.

Every function takes the posterior ``mean`` :math:`\mu` and standard deviation ``std``
:math:`\sigma` at a batch of points (arrays of any shape; scalars broadcast) and returns an array of
the same shape, in the **maximization** convention (larger is better). With ``grad=True`` it
returns :class:`Partials` ``(value, d_mean, d_std, d_cost)``: the exact partial derivatives
:math:`\partial a/\partial\mu`, :math:`\partial a/\partial\sigma` and, for cost-aware functions,
:math:`\partial a/\partial c` (zero otherwise).

Notation: :math:`u = (\mu - f^*)/\sigma` with the incumbent :math:`f^*` = ``best_f``,
:math:`h(u) = \varphi(u) + u\,\Phi(u)`.

=============  =====================================================================
``ei``         :math:`\sigma\,h(u)`
``log_ei``     :math:`\log\sigma + \log h(u)`, accurate for every finite :math:`u`
``pi``         :math:`\Phi(u)`;  ``log_pi``: :math:`\log\Phi(u)`
``ucb``        :math:`\mu + \sqrt{\beta}\,\sigma`;  ``lcb``: :math:`\mu - \sqrt{\beta}\,\sigma`
``eipc``       :math:`\mathrm{EI}/c^\alpha`
``log_eipc``   :math:`\log\mathrm{EI} - \alpha\log c`
``pbgi``       the Pandora's Box Gittins index :math:`g` solving
               :math:`\sigma\,h((\mu - g)/\sigma) = \lambda c`
=============  =====================================================================

The values are computed by the same Rust code as Pandora's optimizer and ``pandora eval``; the GIL
is released during the computation.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

import numpy as np

from ._pandora import acquisition_values

ArrayLike = Any
Result = Union[np.ndarray, "Partials"]

__all__ = ["Partials", "ei", "log_ei", "pi", "log_pi", "ucb", "lcb", "eipc", "log_eipc", "pbgi"]


class Partials(NamedTuple):
    """An acquisition's values and partial derivatives (arrays of the broadcast shape)."""

    value: np.ndarray
    d_mean: np.ndarray
    d_std: np.ndarray
    d_cost: np.ndarray


def _float_array(a: ArrayLike, what: str) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be numeric (an array or a number)") from None
    return arr


def _evaluate(name: str, mean: ArrayLike, std: ArrayLike, cost: Optional[ArrayLike],
              grad: bool, minimize: bool = False, **params: Any) -> Result:
    m = _float_array(mean, "mean")
    s = _float_array(std, "std")
    arrays = [m, s]
    if cost is not None:
        c = _float_array(cost, "cost")
        arrays.append(c)
    try:
        arrays = np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"mean, std (and cost) must broadcast to one shape, got {shapes}") from None
    shape = arrays[0].shape
    flat = [np.ascontiguousarray(a, dtype=float).reshape(-1) for a in arrays]
    log_cost = None
    if cost is not None:
        c = flat[2]
        bad = ~(np.isfinite(c) & (c > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"cost must be finite and > 0, got {c[i]} at flat index {i}")
        log_cost = np.log(c)
    for k, v in list(params.items()):
        if v is not None:
            try:
                params[k] = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"{k} must be a number, got {v!r}") from None
    value, d_mu, d_sigma, d_logc = acquisition_values(
        name, flat[0], flat[1], log_cost_mean=log_cost, grad=grad, minimize=minimize, **params)
    if not grad:
        return value.reshape(shape)
    if cost is not None:
        d_cost = d_logc / flat[2]  # ∂a/∂c = (∂a/∂log c) / c
    else:
        d_cost = np.zeros_like(value)
    return Partials(value.reshape(shape), d_mu.reshape(shape), d_sigma.reshape(shape),
                    d_cost.reshape(shape))


def ei(mean: ArrayLike, std: ArrayLike, best_f: float, *, grad: bool = False) -> Result:
    r"""Expected improvement :math:`\sigma h(u)`; :math:`\partial/\partial\mu = \Phi(u)`,
    :math:`\partial/\partial\sigma = \varphi(u)`. Needs ``std > 0``."""
    return _evaluate("ei", mean, std, None, grad, best_f=best_f)


def log_ei(mean: ArrayLike, std: ArrayLike, best_f: float, *, grad: bool = False) -> Result:
    r"""Log expected improvement :math:`\log\sigma + \log h(u)`, finite for every finite ``u``
    (no underflow far below the incumbent). Needs ``std > 0``."""
    return _evaluate("log_ei", mean, std, None, grad, best_f=best_f)


def pi(mean: ArrayLike, std: ArrayLike, best_f: float, *, grad: bool = False) -> Result:
    r"""Probability of improvement :math:`\Phi(u)`. Needs ``std > 0``."""
    return _evaluate("pi", mean, std, None, grad, best_f=best_f)


def log_pi(mean: ArrayLike, std: ArrayLike, best_f: float, *, grad: bool = False) -> Result:
    r"""Log probability of improvement :math:`\log\Phi(u)`, accurate in the lower tail."""
    return _evaluate("log_pi", mean, std, None, grad, best_f=best_f)


def ucb(mean: ArrayLike, std: ArrayLike, beta: float, *, grad: bool = False) -> Result:
    r"""Upper confidence bound :math:`\mu + \sqrt{\beta}\sigma` (``beta >= 0``)."""
    return _evaluate("ucb", mean, std, None, grad, beta=beta)


def lcb(mean: ArrayLike, std: ArrayLike, beta: float, *, grad: bool = False) -> Result:
    r"""Lower confidence bound :math:`\mu - \sqrt{\beta}\sigma` (``beta >= 0``)."""
    return _evaluate("lcb", mean, std, None, grad, beta=beta)


def eipc(mean: ArrayLike, std: ArrayLike, best_f: float, cost: ArrayLike = 1.0, *,
         alpha: float = 1.0, grad: bool = False) -> Result:
    r"""Expected improvement per unit cost :math:`\mathrm{EI}/c^\alpha` (known cost ``c > 0``)."""
    return _evaluate("eipc", mean, std, cost, grad, best_f=best_f, alpha=alpha)


def log_eipc(mean: ArrayLike, std: ArrayLike, best_f: float, cost: ArrayLike = 1.0, *,
             alpha: float = 1.0, grad: bool = False) -> Result:
    r"""Log expected improvement per unit cost :math:`\log\mathrm{EI} - \alpha\log c`."""
    return _evaluate("log_eipc", mean, std, cost, grad, best_f=best_f, alpha=alpha)


def pbgi(mean: ArrayLike, std: ArrayLike, lam: float, cost: ArrayLike = 1.0, *,
         minimize: bool = False, grad: bool = False) -> Result:
    r"""The Pandora's Box Gittins index (Xie et al., NeurIPS 2024).

    Maximization: the unique :math:`g` with :math:`\mathrm{EI}(\mu,\sigma;g) =
    \sigma\,h\!\left(\frac{\mu-g}{\sigma}\right) = \lambda c`. Partial derivatives (Proposition 3
    of the paper): :math:`\partial g/\partial\mu = 1`, :math:`\partial g/\partial\sigma =
    \varphi(u)/\Phi(u)`, :math:`\partial g/\partial c = -\lambda/\Phi(u)` at
    :math:`u = (\mu-g)/\sigma`. ``std = 0`` gives :math:`g = \mu - \lambda c`.

    With ``minimize=True`` the minimization index :math:`g_{\min}(\mu) = -g_{\max}(-\mu)` (pick the
    smallest). ``lam > 0``; ``cost > 0`` (scalar or array).
    """
    return _evaluate("pbgi", mean, std, cost, grad, lam=lam, minimize=bool(minimize))
