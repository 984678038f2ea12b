"""Evaluation metrics for watch time and click heads: pure NumPy, exact.

- ``mae``      = mean |y - y_hat|
- ``xauc``     = concordant pairs / pairs with different labels (watch-time ranking;
                 XAUC of the CREAD and CQE papers), ties in prediction count 1/2
- ``auc``      = P(score_pos > score_neg) + 1/2 P(tie), via mid-ranks
- ``gauc``     = sum_u w_u AUC_u / sum_u w_u, w_u = impressions of user u
- ``logloss``  = -mean(y log p + (1 - y) log(1 - p))
- ``quantile_coverage``, ``mean_coverage_error``, ``pinball_loss`` for quantile heads

References: Sun et al., CREAD, AAAI 2024; Lin et al., CQE, 2024 (XAUC, coverage).
All are O(n log n); tests check them against brute-force pair counts.
"""
from __future__ import annotations

from typing import Dict

import numpy as np


def _1d(x, name, dtype=np.float64) -> np.ndarray:
    a = np.asarray(x, dtype=dtype).reshape(-1)
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    return a


def _same_len(*arrays):
    if len({a.shape[0] for a in arrays}) != 1:
        raise ValueError(f"length mismatch: {[a.shape[0] for a in arrays]}")


def mae(y_true, y_pred) -> float:
    """``mean_i |y_i - y_hat_i|``."""
    y, p = _1d(y_true, "y_true"), _1d(y_pred, "y_pred")
    _same_len(y, p)
    return float(np.mean(np.abs(y - p)))


def _pairs(counts: np.ndarray) -> float:
    c = counts.astype(np.float64)
    return float(np.sum(c * (c - 1) / 2))


def count_strict_inversions(a) -> int:
    """``#{(i, j) : i < j, a_i > a_j}`` in O(n log K) (K distinct values).

    Bitwise (wavelet-tree) counting on dense ranks: a pair is an inversion iff, at
    the most significant bit where the ranks differ, the earlier one has a 1. Going
    from the top bit down, elements are kept grouped by their rank prefix in
    original order (a stable O(n) partition per bit); for each element with bit 0 we
    add the number of earlier elements of its group with bit 1. Equal values never
    count.
    """
    a = np.asarray(a).reshape(-1)
    n = a.size
    if n < 2:
        return 0
    vals = np.unique(a, return_inverse=True)[1].astype(np.int64).reshape(-1)
    pos = np.arange(n, dtype=np.int64)
    inv = 0
    for b in range(int(vals.max()).bit_length() - 1, -1, -1):
        bits = (vals >> b) & 1
        grp = vals >> (b + 1)
        first = np.empty(n, dtype=bool)
        first[0] = True
        first[1:] = grp[1:] != grp[:-1]
        start = np.maximum.accumulate(np.where(first, pos, 0))
        ones_incl = np.cumsum(bits)
        ones_before = ones_incl - bits - (ones_incl[start] - bits[start])  # in group, before p
        inv += int(np.sum(ones_before[bits == 0]))
        gid = np.cumsum(first) - 1
        zeros_in_group = np.bincount(gid, weights=1 - bits).astype(np.int64)[gid]
        new_pos = np.where(bits == 0, start + (pos - start) - ones_before,
                           start + zeros_in_group + ones_before)
        nxt = np.empty_like(vals)
        nxt[new_pos] = vals
        vals = nxt
    return inv


def xauc(y_true, y_pred) -> float:
    """XAUC: share of concordant pairs among pairs with different labels.

    ``XAUC = sum_{i,j: y_i < y_j} [1(p_i < p_j) + 1/2 1(p_i = p_j)] / #{i,j: y_i < y_j}``

    Ties in prediction count 1/2 (a constant predictor scores 0.5); pairs with
    equal labels are excluded. Exact in O(n log n): sort by (y, p); the half-tie
    weighted count of ordered pairs is ``total - inversions - ties_p / 2``, minus the
    pairs inside equal-y groups (which, sorted by p, have no inversions). Returns nan
    when all labels are equal.
    """
    y, p = _1d(y_true, "y_true"), _1d(y_pred, "y_pred")
    _same_len(y, p)
    n = y.size
    order = np.lexsort((p, y))
    ys, ps = y[order], p[order]
    total = n * (n - 1) / 2
    ties_p = _pairs(np.unique(ps, return_counts=True)[1])
    s = total - count_strict_inversions(ps) - 0.5 * ties_p
    y_groups = _pairs(np.unique(ys, return_counts=True)[1])
    yp_ties = _pairs(np.unique(np.stack([ys, ps], 1), axis=0, return_counts=True)[1])
    denom = total - y_groups
    if denom == 0:
        return float("nan")
    return float((s - (y_groups - 0.5 * yp_ties)) / denom)


def _mid_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties get the average rank."""
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    return (upper - (counts - 1) / 2.0)[inv.reshape(-1)]


def _binary(labels) -> np.ndarray:
    y = _1d(labels, "labels")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("labels must be 0/1")
    return y


def auc(labels, preds) -> float:
    """ROC AUC = ``(R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg)`` with mid-ranks
    R, i.e. ``P(p_pos > p_neg) + 1/2 P(p_pos = p_neg)``. nan for a single class."""
    y, p = _binary(labels), _1d(preds, "preds")
    _same_len(y, p)
    n1 = float(y.sum())
    n0 = y.size - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    r = _mid_ranks(p)
    return float((np.sum(r[y == 1]) - n1 * (n1 + 1) / 2) / (n1 * n0))


def gauc(user_ids, labels, preds) -> Dict[str, float]:
    """Group AUC: ``sum_u w_u AUC_u / sum_u w_u`` with ``w_u`` = impressions of u.

    Users with a single label class have no AUC and are skipped (neither numerator
    nor denominator). Returns ``gauc`` (nan if no user is usable),
    ``num_users_used``, ``num_users_skipped``, ``num_impressions_used``.
    """
    u = np.asarray(user_ids).reshape(-1)
    y, p = _binary(labels), _1d(preds, "preds")
    _same_len(u, y, p)
    uid = np.unique(u, return_inverse=True)[1].reshape(-1)
    order = np.lexsort((p, uid))
    uid, y, p = uid[order], y[order], p[order]
    n_users = int(uid.max()) + 1
    n = np.bincount(uid, minlength=n_users).astype(np.float64)
    n1 = np.bincount(uid, weights=y, minlength=n_users)
    n0 = n - n1
    # mid-rank inside each user: ties are runs of equal (user, pred) in sorted order
    pos = np.arange(y.size, dtype=np.float64)
    start = np.concatenate([[0.0], np.cumsum(n)[:-1]])[uid]
    new_run = np.ones(y.size, dtype=bool)
    new_run[1:] = (uid[1:] != uid[:-1]) | (p[1:] != p[:-1])
    run = np.cumsum(new_run) - 1
    run_first = pos[new_run][run]
    run_len = np.bincount(run).astype(np.float64)[run]
    rank = run_first - start + (run_len + 1) / 2.0
    r1 = np.bincount(uid, weights=rank * y, minlength=n_users)
    ok = (n1 > 0) & (n0 > 0)
    auc_u = np.where(ok, (r1 - n1 * (n1 + 1) / 2) / np.where(ok, n1 * n0, 1.0), 0.0)
    w = np.where(ok, n, 0.0)
    return {"gauc": float(np.sum(w * auc_u) / np.sum(w)) if w.sum() > 0 else float("nan"),
            "num_users_used": int(ok.sum()), "num_users_skipped": int((~ok).sum()),
            "num_impressions_used": int(w.sum())}


def logloss(labels, probs, eps: float = 1e-7) -> float:
    """``-mean(y log p + (1 - y) log(1 - p))``, p clipped to ``[eps, 1 - eps]``."""
    y, p = _binary(labels), np.clip(_1d(probs, "probs"), eps, 1 - eps)
    _same_len(y, p)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


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


def pinball_loss(y, q, taus) -> float:
    """``mean_n sum_i rho_{tau_i}(y_n - t_{tau_i, n})``, ``rho_tau(u) = u (tau - 1(u < 0))``
    (same reduction as the training loss in models/cqe.py)."""
    y, q, taus = _quantile_args(y, q, taus)
    u = y[:, None] - q
    return float(np.mean(np.sum(u * (taus[None, :] - (u < 0)), axis=1)))
