"""Metrics of quantile heads: pure NumPy, exact (models/evaluation/metrics.py's conventions).

- ``quantile_coverage``    c_i = mean_n 1(y_n <= t_{tau_i, n})   (ideal c_i = tau_i)
- ``mean_coverage_error``  mean_i |c_i - tau_i|
- ``randomized_coverage``  c_i for labels with an atom at 0 (skipped videos; randomized PIT),
  with ``zero_cdf`` the predicted P(y <= 0 | x) read off a quantile grid
- ``pinball_loss``         mean_n sum_i rho_{tau_i}(y_n - t_{tau_i, n})

Reference: Lin et al., CQE, 2024 (coverage); Czado, Gneiting and Held 2009 (randomized PIT).
"""
from __future__ import annotations

import numpy as np

from models.evaluation.metrics import _1d, _same_len


def _quantile_args(y, q, taus):
    y = _1d(y, "y")
    q = np.asarray(q, dtype=np.float64)
    taus = _1d(taus, "taus")
    if q.ndim != 2 or q.shape != (y.size, taus.size):
        raise ValueError(f"quantiles must be [n={y.size}, N={taus.size}], got {q.shape}")
    return y, q, taus


def quantile_coverage(y, q, taus) -> np.ndarray:
    """Coverage per level: ``c_i = mean_n 1(y_n <= t_{tau_i, n})`` (ideal ``c_i = tau_i``)."""
    y, q, _ = _quantile_args(y, q, taus)
    return np.mean(y[:, None] <= q, axis=0)


def mean_coverage_error(y, q, taus) -> float:
    """``mean_i |c_i - tau_i|`` with ``c_i`` from :func:`quantile_coverage`."""
    y, q, taus = _quantile_args(y, q, taus)
    return float(np.mean(np.abs(quantile_coverage(y, q, taus) - taus)))


def zero_cdf(quantiles, grid_taus) -> np.ndarray:
    """``F0_n``, the predicted ``P(y <= 0 | x_n)`` read off a quantile grid: the largest
    level whose quantile is ``<= 0`` (0 when none is). Linear interpolation in tau keeps
    the quantile function at 0 up to that level and positive after it."""
    q = np.asarray(quantiles, np.float64)
    grid = _1d(grid_taus, "grid_taus")
    if q.ndim != 2 or q.shape[1] != grid.size:
        raise ValueError(f"quantiles must be [n, {grid.size}], got {q.shape}")
    zero = q <= 0.0
    last = grid.size - 1 - np.argmax(zero[:, ::-1], axis=1)  # last level at 0
    return np.where(zero.any(axis=1), grid[last], 0.0)


def randomized_coverage(y, q, taus, f0) -> np.ndarray:
    """Coverage per level for labels with an atom at 0 (Czado, Gneiting and Held 2009,
    the randomized PIT ``V = F(y-) + U (F(y) - F(y-))``, U ~ Uniform(0, 1), which is
    uniform for a calibrated predictive distribution even when it has atoms)::

        c_i = mean_n  1(y_n <= t_{tau_i,n})        if y_n > 0 or t_{tau_i,n} > 0
                      tau_i / F0_n                 if y_n = 0 and t_{tau_i,n} = 0

    (``P(U F0 <= tau)``, in expectation over U: no random draws). ``f0`` [n]: the
    predicted ``P(y <= 0 | x)`` (:func:`zero_cdf`). Where the conditional tau-quantile is
    0 because ``P(y = 0 | x) >= tau``, even the true quantile covers ``P(y = 0 | x) >
    tau`` in :func:`quantile_coverage`'s ``1(y <= t)``; this counts the atom's share
    below tau only, so a calibrated model has ``c_i = tau_i`` (ideal as before)."""
    y, q, taus = _quantile_args(y, q, taus)
    f0 = _1d(f0, "f0")
    _same_len(y, f0)
    tie = (y[:, None] <= 0.0) & (q <= 0.0)
    at_tie = taus[None, :] / np.maximum(f0[:, None], taus[None, :])  # <= 1 (f0 >= tau when t_tau = 0)
    return np.mean(np.where(tie, at_tie, (y[:, None] <= q).astype(np.float64)), axis=0)


def pinball_loss(y, q, taus) -> float:
    """``mean_n sum_i rho_{tau_i}(y_n - t_{tau_i, n})``, ``rho_tau(u) = u (tau - 1(u < 0))``
    (same reduction as the training loss in models/watch_time/cqe.py)."""
    y, q, taus = _quantile_args(y, q, taus)
    u = y[:, None] - q
    return float(np.mean(np.sum(u * (taus[None, :] - (u < 0)), axis=1)))
