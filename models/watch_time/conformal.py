"""Split-conformal calibration of quantile heads: conformal recalibration of the levels.

The model gives quantiles ``t_i(x)`` at levels ``tau_1 < ... < tau_N`` (non-negative,
non-decreasing in i). Read as a predictive distribution it has the piecewise-linear
quantile function through ``(0, 0), (tau_1, t_1), ..., (tau_N, t_N)``, flat at t_N
up to level 1 and, past the grid, rising one second per unit of "level" (so a model whose
top quantile is too low can still be corrected). The conformity score of a row is where
its label falls on that curve, the model's probability integral transform (PIT) inside
the grid::

    s(y | x) = the level at which the curve reaches y     (0 <= y <= t_N; the lowest
                                                           such level on a flat stretch)
             = 1 + (y - t_N)                               (y > t_N: seconds past the grid)

On the calibration rows (the validation split, never seen by the gradient) each level
gets a recalibrated level (split conformal, Romano, Patterson and Candès 2019; the same
order statistic as their CQR, on the level scale: the "recalibrated regression" of
Kuleshov et al. 2018 with a finite-sample rank)::

    g_i = s_(k),   k = ceil((N_cal + 1) tau_i)   (k-th smallest score; the largest if k > N_cal)
    q_i(x) = the curve at g_i                    (linear between grid levels,
                                                  t_N + (g_i - 1) past level 1)

Because ``y <= q_i(x)`` exactly when ``s(y | x) <= g_i``, the usual finite-sample
guarantee holds for a new row exchangeable with the calibration rows, marginally over
both::

    tau_i  <=  P(y <= q_i(x))  <=  tau_i + 1 / (N_cal + 1)

(the upper bound needs almost surely distinct scores; ties, e.g. every y = 0 row has
PIT 0, only raise coverage). Conditional on the calibration set the coverage is
Beta(k, N_cal + 1 - k) distributed, so its spread is ~sqrt(tau (1 - tau) / N_cal).

Why levels and not CQR's additive offsets ``t_i + o_i`` (what this module did first): the
recalibrated quantiles are monotone in i (``g`` is a sorted sequence's order statistics)
and non-negative (they are the model's own quantiles) by construction, so nothing has to
clip or sort them afterwards. Additive offsets on watch time, whose label has an atom at
0 (~9 % skipped videos), need ``max(t + o, 0)`` and a running max; with the negative
offsets of an over-covering model the clip puts many rows' low quantiles at 0, where
every skipped video counts as covered, and the running max undoes decreasing offsets:
on the real eval days additive offsets left a coverage error of 0.032-0.063 where the
levels give 0.004-0.007 (6 seeds; bench/README.md, watch-time section).

`fit_levels` is the NumPy math (`scores` the conformity scores, `apply_levels` the
served quantiles);
`fit_model_levels` runs a Keras model with a `CqeHead` over the validation data and
sets its non-trainable ``conformal_levels`` weight (so the levels are part of the
SavedModel's variables), and records the calibration split's coverage before / after
in ``conformal_coverage`` [2, N] (read by the model report's quantile-calibration plot).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np


def conformal_rank(num_calibration: int, tau: float) -> int:
    """``k = ceil((n + 1) tau)``, the 1-based rank of the score that is the new level."""
    if num_calibration < 1:
        raise ValueError(f"need at least one calibration row, got {num_calibration}")
    if not 0.0 < tau < 1.0:
        raise ValueError(f"tau must be in (0, 1), got {tau}")
    # the tiny slack keeps (n + 1) tau = integer from rounding up past it
    return int(np.ceil((num_calibration + 1) * tau - 1e-9))


def _grid(quantiles, taus):
    """(q [n, N], taus [N]) validated; levels strictly increasing in (0, 1)."""
    q = np.asarray(quantiles, np.float64)
    taus = np.asarray(taus, np.float64).reshape(-1)
    if q.ndim != 2 or q.shape[1] != taus.size:
        raise ValueError(f"quantiles must be [n, N={taus.size}], got {q.shape}")
    if not (np.all(np.diff(taus) > 0) and taus[0] > 0 and taus[-1] < 1):
        raise ValueError(f"levels must increase inside (0, 1), got {taus}")
    if not np.all(np.isfinite(q)):
        raise ValueError("quantiles must be finite")
    return q, taus


def scores(y, quantiles, taus) -> np.ndarray:
    """``s(y_n | x_n)`` [n] (module docstring): the level at which the model's piecewise-
    linear quantile function through (0, 0) and ``(tau_i, t_i)`` reaches ``y_n`` (its PIT);
    ``1 + (y_n - t_N)`` above ``t_N``. Quantiles must be non-negative and non-decreasing
    along the grid."""
    q, taus = _grid(quantiles, taus)
    y = np.asarray(y, np.float64).reshape(-1)
    if y.size != q.shape[0] or not np.all(np.isfinite(y)):
        raise ValueError(f"need {q.shape[0]} finite labels, got {y.size}")
    t = np.concatenate([np.zeros((q.shape[0], 1)), q], axis=1)  # [n, N + 1]
    levels = np.concatenate([[0.0], taus])
    i = np.clip(np.sum(t < y[:, None], axis=1), 1, taus.size)  # y in (t[i - 1], t[i]]
    rows = np.arange(y.size)
    lo, hi = t[rows, i - 1], t[rows, i]
    width = np.where(hi > lo, hi - lo, 1.0)
    w = np.where(hi > lo, np.clip((y - lo) / width, 0.0, 1.0), 0.0)  # hi = lo only for y <= 0 = t_1: level 0
    out = levels[i - 1] + w * (levels[i] - levels[i - 1])
    return np.where(y > t[:, -1], 1.0 + (y - t[:, -1]), out)


def fit_levels(y, quantiles, taus) -> np.ndarray:
    """Recalibrated levels ``g_i = s_(k_i)`` [N] of the conformity scores (module docstring) from
    labels ``y`` [n] and the model's quantiles ``quantiles`` [n, N] at levels ``taus``.

    When ``k > n`` (tau above n / (n + 1): too few rows for the guarantee) the level is
    the largest score (with the validation day's ~20k rows this only happens for
    tau > 0.99995)."""
    return levels_of_scores(scores(y, quantiles, taus), taus)


def levels_of_scores(s, taus) -> np.ndarray:
    """``g_i = s_(k_i)``, ``k_i = conformal_rank(n, tau_i)`` capped at n, of the scores ``s`` [n]."""
    s = np.sort(np.asarray(s, np.float64).reshape(-1))
    n = s.size
    return np.array([s[min(conformal_rank(n, t), n) - 1] for t in np.asarray(taus).reshape(-1)])


def apply_levels(quantiles, levels, taus) -> np.ndarray:
    """``q_i(x)`` [n, N]: the curve of the module docstring at level ``levels[i]`` (linear
    between grid levels, 0 at level 0, ``t_N`` from ``tau_N`` to 1, ``t_N + (g - 1)``
    past 1). NumPy; the CqeHead does the same in TF."""
    q, taus = _grid(quantiles, taus)
    levels = np.asarray(levels, np.float64).reshape(-1)
    if levels.size != taus.size or not np.all(np.isfinite(levels) & (levels >= 0)):
        raise ValueError(f"need {taus.size} finite levels >= 0, got {levels}")
    t = np.concatenate([np.zeros((q.shape[0], 1)), q], axis=1)
    grid = np.concatenate([[0.0], taus])
    g = np.minimum(levels, taus[-1])
    j = np.clip(np.searchsorted(grid, g, side="right") - 1, 0, taus.size - 1)
    w = (g - grid[j]) / (grid[j + 1] - grid[j])
    return (1.0 - w) * t[:, j] + w * t[:, j + 1] + np.maximum(levels - 1.0, 0.0)


def coverage_bounds(num_calibration: int, tau: float) -> tuple:
    """``(tau, tau + 1/(n + 1))``: the marginal coverage guarantee of `fit_levels`."""
    conformal_rank(num_calibration, tau)  # validates
    return float(tau), float(tau) + 1.0 / (num_calibration + 1)


# ------------------------------------------------------------------ Keras plumbing
def cqe_layers(model) -> List:
    """Every `CqeHead` layer of a Keras model (searching nested models)."""
    from models.watch_time.cqe import CqeHead

    found, stack = [], list(model.layers)
    while stack:
        layer = stack.pop(0)
        if isinstance(layer, CqeHead):
            found.append(layer)
        stack.extend(getattr(layer, "layers", []) or [])
    return found


FIT_CHUNK_ROWS = 16384  # rows per [n, N] temporary in fit_model_levels


def fit_model_levels(model, dataset, quantiles_output: str = "quantiles",
                     label_key: str = "quantiles") -> Dict[str, object]:
    """Fits the conformal levels of the model's (single) `CqeHead` on ``dataset``
    (a tf.data.Dataset of ``(features, labels)`` batches, labels a dict holding ``label_key``: the
    validation split) and sets them in the layer. The levels are fitted on the
    uncalibrated quantiles (levels reset to the grid first; a warm-started model's old
    levels are discarded). Returns a summary: ``num_rows``, ``levels`` and the
    coverage at every level before and after, on the calibration rows."""
    layers = cqe_layers(model)
    if len(layers) != 1:
        raise ValueError(f"fit_model_levels needs exactly one CqeHead, found {len(layers)}")
    head = layers[0]
    head.set_conformal_levels(head.taus)
    import tensorflow as tf

    # One graph for every batch: eager calls run the model op by op in Python (py-spy of the
    # Trainer at 0.25M rows: ~15 % of its wall time went there). Traced once for the dataset's
    # features (batch dimension None), not again for the last, shorter batch.
    quantiles_of = tf.function(lambda features: model(features, training=False)[quantiles_output],
                               input_signature=[dataset.element_spec[0]])
    ys, qs = [], []
    for features, labels in dataset:
        if label_key not in labels:
            raise ValueError(f"calibration labels have no {label_key!r}: {sorted(labels)}")
        ys.append(np.asarray(labels[label_key], np.float64).reshape(-1))
        qs.append(np.asarray(quantiles_of(features)))  # the model's float32: exact, half of float64
    if not ys:
        raise ValueError("fit_model_levels: the calibration dataset is empty")
    y, q = np.concatenate(ys), np.concatenate(qs)
    del qs
    # [n, N] float64 temporaries a chunk of rows at a time: whole, the scores and the calibrated
    # quantiles held ~5 copies of q (~1.7 GB on a 371k-row validation split: the Trainer's peak)
    chunks = [slice(a, a + FIT_CHUNK_ROWS) for a in range(0, y.size, FIT_CHUNK_ROWS)]
    levels = levels_of_scores(np.concatenate([scores(y[c], q[c], head.taus) for c in chunks]), head.taus)
    before = sum(np.sum(y[c, None] <= q[c], axis=0) for c in chunks) / y.size
    after = sum(np.sum(y[c, None] <= apply_levels(q[c], levels, head.taus), axis=0) for c in chunks) / y.size
    head.set_conformal_levels(levels, before, after)
    return {"num_rows": int(y.size), "levels": levels.tolist(), "taus": head.taus.tolist(),
            "coverage_before": before.tolist(), "coverage_after": after.tolist()}
