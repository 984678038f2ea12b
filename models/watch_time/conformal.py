"""Split-conformal calibration of quantile heads (conformalized quantile regression).

Romano, Patterson and Candès, "Conformalized Quantile Regression", NeurIPS 2019,
applied one level at a time (one-sided). A model gives quantiles ``t_tau(x)``; on a
calibration set (the validation split, never seen by the gradient) of n rows, for each
level tau the conformity scores and the offset are::

    s_n   = y_n - t_tau(x_n),                 n = 1..N_cal
    o_tau = s_(k),  k = ceil((N_cal + 1) tau)  (k-th smallest score)
    t'_tau(x) = t_tau(x) + o_tau

Finite-sample guarantee (exchangeable calibration and test rows, any model): for a
new row, marginally over both::

    tau  <=  P(y <= t'_tau(x))  <=  tau + 1 / (N_cal + 1)

(the upper bound needs the scores to be almost surely distinct; ties, e.g. at y = 0,
only raise coverage). Conditional on the calibration set the coverage is
Beta(k, N_cal + 1 - k) distributed, so its spread is ~sqrt(tau (1 - tau) / N_cal).

Served quantiles must stay monotone in tau and non-negative (watch time >= 0), so the
calibrated quantiles are::

    q_i(x) = max_{j <= i} max(t_j(x) + o_j, 0)       (running max over levels)

Both operations only raise a quantile, so the lower bound ``tau`` still holds; they
are the identity when the offsets are non-decreasing in tau (usual: the offsets are a
smooth function of tau), so the upper bound holds in practice too (the benchmark
reports the measured coverage, tests check both bounds).

`fit_offsets` is the NumPy math; `fit_model_offsets` runs a Keras model with a
`CqeHead` over the validation data and sets its non-trainable ``conformal_offsets``
weight (so the offsets are part of the SavedModel's variables), and records the
calibration split's coverage before / after in ``conformal_coverage`` [2, N] (read by
the model report's quantile-calibration plot).
"""
from __future__ import annotations

from typing import Dict, Iterable, List

import numpy as np


def conformal_rank(num_calibration: int, tau: float) -> int:
    """``k = ceil((n + 1) tau)``, the 1-based rank of the score that is the offset."""
    if num_calibration < 1:
        raise ValueError(f"need at least one calibration row, got {num_calibration}")
    if not 0.0 < tau < 1.0:
        raise ValueError(f"tau must be in (0, 1), got {tau}")
    # the tiny slack keeps (n + 1) tau = integer from rounding up past it
    return int(np.ceil((num_calibration + 1) * tau - 1e-9))


def fit_offsets(y, quantiles, taus) -> np.ndarray:
    """Per-level offsets ``o_i`` (CQR, module docstring) from labels ``y`` [n] and the
    model's quantiles ``quantiles`` [n, N] at levels ``taus`` [N].

    When ``k > n`` (tau above n / (n + 1): too few rows for the guarantee) the offset
    is the largest score (the guarantee does not hold there; with the validation day's
    ~20k rows this only happens for tau > 0.99995)."""
    y = np.asarray(y, np.float64).reshape(-1)
    q = np.asarray(quantiles, np.float64)
    taus = np.asarray(taus, np.float64).reshape(-1)
    if q.ndim != 2 or q.shape != (y.size, taus.size):
        raise ValueError(f"quantiles must be [n={y.size}, N={taus.size}], got {q.shape}")
    if not np.all(np.isfinite(y)) or not np.all(np.isfinite(q)):
        raise ValueError("labels and quantiles must be finite")
    n = y.size
    scores = np.sort(y[:, None] - q, axis=0)  # [n, N], each column ascending
    ranks = np.array([min(conformal_rank(n, t), n) for t in taus]) - 1
    return scores[ranks, np.arange(taus.size)]


def apply_offsets(quantiles, offsets) -> np.ndarray:
    """``q_i = max_{j <= i} max(t_j + o_j, 0)`` (NumPy; the CqeHead does the same in TF)."""
    q = np.asarray(quantiles, np.float64) + np.asarray(offsets, np.float64)[None, :]
    return np.maximum.accumulate(np.maximum(q, 0.0), axis=-1)


def coverage_bounds(num_calibration: int, tau: float) -> tuple:
    """``(tau, tau + 1/(n + 1))``: the marginal coverage guarantee of `fit_offsets`."""
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


def fit_model_offsets(model, dataset: Iterable, quantiles_output: str = "quantiles",
                      label_key: str = "quantiles") -> Dict[str, object]:
    """Fits the conformal offsets of the model's (single) `CqeHead` on ``dataset``
    (batches of ``(features, labels)``, labels a dict holding ``label_key``: the
    validation split) and sets them in the layer. The offsets are fitted on the
    uncalibrated quantiles (offsets set to zero first; a warm-started model's old
    offsets are discarded). Returns a summary: ``num_rows``, ``offsets`` and the
    coverage at every level before and after, on the calibration rows."""
    layers = cqe_layers(model)
    if len(layers) != 1:
        raise ValueError(f"fit_model_offsets needs exactly one CqeHead, found {len(layers)}")
    head = layers[0]
    head.set_conformal_offsets(np.zeros(head.num_quantiles))
    ys, qs = [], []
    for features, labels in dataset:
        if label_key not in labels:
            raise ValueError(f"calibration labels have no {label_key!r}: {sorted(labels)}")
        ys.append(np.asarray(labels[label_key], np.float64).reshape(-1))
        qs.append(np.asarray(model(features, training=False)[quantiles_output], np.float64))
    if not ys:
        raise ValueError("fit_model_offsets: the calibration dataset is empty")
    y, q = np.concatenate(ys), np.concatenate(qs)
    offsets = fit_offsets(y, q, head.taus)
    calibrated = apply_offsets(q, offsets)
    before, after = np.mean(y[:, None] <= q, axis=0), np.mean(y[:, None] <= calibrated, axis=0)
    head.set_conformal_offsets(offsets, before, after)
    return {"num_rows": int(y.size), "offsets": offsets.tolist(), "taus": head.taus.tolist(),
            "coverage_before": before.tolist(), "coverage_after": after.tolist()}
