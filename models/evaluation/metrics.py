"""Evaluation metrics for watch time and click heads: pure NumPy, exact.

- ``mae``      = mean |y - y_hat|
- ``xauc``     = concordant pairs / pairs with different labels (watch-time ranking;
                 XAUC of the CREAD and CQE papers), ties in prediction count 1/2
                 (split by the pairs' click: models/evaluation/xauc_pairs.py)
- ``auc``      = P(score_pos > score_neg) + 1/2 P(tie), via mid-ranks
- ``gauc``     = sum_u w_u AUC_u / sum_u w_u, w_u = impressions of user u
- ``logloss``  = -mean(y log p + (1 - y) log(1 - p))
- quantile heads: models/evaluation/quantile_metrics.py (coverage, pinball loss)

References: Sun et al., CREAD, AAAI 2024; Lin et al., CQE, 2024 (XAUC, coverage).
All are O(n log n); tests check them against brute-force pair counts.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from models.evaluation import grouped as G


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
    num, denom = _xauc_num_den(y, p)
    if denom == 0:
        return float("nan")
    return float(num / denom)


def _xauc_num_den(y: np.ndarray, p: np.ndarray):
    """(half-tie weighted concordant pairs, pairs with y_i < y_j) of :func:`xauc`."""
    n = y.size
    order = np.lexsort((p, y))
    ys, ps = y[order], p[order]
    total = n * (n - 1) / 2
    ties_p = _pairs(np.unique(ps, return_counts=True)[1])
    s = total - count_strict_inversions(ps) - 0.5 * ties_p
    y_groups = _pairs(np.unique(ys, return_counts=True)[1])
    yp_ties = _pairs(np.unique(np.stack([ys, ps], 1), axis=0, return_counts=True)[1])
    return s - (y_groups - 0.5 * yp_ties), total - y_groups


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


def _delong_components(y: np.ndarray, p: np.ndarray):
    """DeLong's structural components of AUC: per positive i, V10_i = P(p_i > p_neg) + ½ P(=);
    per negative j, V01_j = P(p_pos > p_j) + ½ P(=); AUC = mean V10 = mean V01."""
    pos, neg = y == 1, y == 0
    n1, n0 = pos.sum(), neg.sum()
    r = _mid_ranks(p)
    v10 = (r[pos] - _mid_ranks(p[pos])) / n0
    v01 = 1.0 - (r[neg] - _mid_ranks(p[neg])) / n1
    return v10, v01


def auc_difference_se(labels, preds_a, preds_b) -> float:
    """Standard error of AUC(a) − AUC(b) for two scorers of the SAME rows (DeLong, DeLong &
    Clarke-Pearson 1988): with D10 = V10(a) − V10(b) over the m positives and D01 likewise
    over the n negatives (_delong_components),

        Var[AUC(a) − AUC(b)] = s²(D10) / m + s²(D01) / n    (s²: sample variance, ddof 1).

    Paired, so two near-identical scorers (a model and its int8 copy) get a small SE: it
    measures how far the drop is from the rows' own resolution. nan for a single class or
    fewer than two rows of a class."""
    y = _binary(labels)
    a, b = _1d(preds_a, "preds_a"), _1d(preds_b, "preds_b")
    _same_len(y, a, b)
    m, n = int(y.sum()), int(y.size - y.sum())
    if m < 2 or n < 2:
        return float("nan")
    (a10, a01), (b10, b01) = _delong_components(y, a), _delong_components(y, b)
    return float(np.sqrt(np.var(a10 - b10, ddof=1) / m + np.var(a01 - b01, ddof=1) / n))


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


# ----------------------------------------------------------------------------------
# Ranking, catalog and calibration metrics (issue 5). Same conventions as above: pure
# NumPy, exact, order-independent (ties are averaged, never broken by input order),
# checked against brute force in tests/test_metrics.py.


def xgauc(user_ids, y_true, y_pred) -> Dict[str, float]:
    """Group XAUC: ``sum_u w_u XAUC_u / sum_u w_u`` with ``w_u`` = impressions of u.

    ``XAUC_u`` is :func:`xauc` on user u's rows. Users whose rows all have the same
    label (including single-impression users) have no XAUC and are skipped. Returns
    ``xgauc`` (nan if no user is usable), ``num_users_used``, ``num_users_skipped``,
    ``num_impressions_used``.
    """
    y, p = _1d(y_true, "y_true"), _1d(y_pred, "y_pred")
    uid, num_users = _user_index(user_ids, y, p)
    num, den = G.xauc_counts_by_user(uid, y, p, num_users, _xauc_num_den)
    ok = den > 0  # a user with one label value has no pair with different labels
    w = np.where(ok, np.bincount(uid, minlength=num_users), 0)
    xauc_u = np.where(ok, num / np.where(ok, den, 1.0), 0.0)
    used = int(w.sum())
    return {"xgauc": float(np.sum(w * xauc_u) / used) if used else float("nan"),
            "num_users_used": int(ok.sum()), "num_users_skipped": int((~ok).sum()),
            "num_impressions_used": used}


def _user_index(user_ids, *arrays):
    """(dense user index per row, number of users); checks equal lengths."""
    u = np.asarray(user_ids).reshape(-1)
    _same_len(u, *arrays)
    if u.size == 0:
        raise ValueError("user_ids is empty")
    uniq, uid = np.unique(u, return_inverse=True)
    return uid.reshape(-1), uniq.size


def tie_averaged_discounts(scores, k: int, discount: str = "log2") -> np.ndarray:
    """Expected rank discount of each item when ranking by ``scores`` descending.

    Items with equal scores occupy a run of ranks ``a..b``; each gets the mean discount
    of that run, i.e. the expectation over a uniformly random tie order (McSherry &
    Najork, ECIR 2008). So the result never depends on input order.
    """
    s = _1d(scores, "scores")
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    d = G.rank_discount(s.size, k, discount)
    new = np.ones(s.size, dtype=bool)
    new[1:] = ss[1:] != ss[:-1]
    run = np.cumsum(new) - 1
    mean_d = (np.bincount(run, weights=d) / np.bincount(run))[run]
    out = np.empty(s.size)
    out[order] = mean_d
    return out


def ndcg_at_k(user_ids, gains, scores, k: int = 10) -> Dict[str, float]:
    """Per-user nDCG@k averaged over users (each user counts once).

    For user u ranking its impressions by ``scores`` descending,
    ``DCG@k = sum_i g_i * d_i`` with ``d_i`` the tie-averaged discount
    ``1/log2(rank+1)`` (0 beyond rank k, see :func:`tie_averaged_discounts`) and
    **linear** gain ``g`` (watch seconds or click; ``2^g - 1`` would overflow on
    seconds); ``IDCG@k`` ranks by gain. Users with ``IDCG = 0`` (no click / no watch)
    are skipped. Gains must be >= 0. Returns ``ndcg`` (nan if no user is usable),
    ``num_users_used``, ``num_users_skipped``.
    """
    g, s = _1d(gains, "gains"), _1d(scores, "scores")
    _same_len(np.asarray(user_ids).reshape(-1), g, s)
    if np.any(g < 0):
        raise ValueError("gains must be >= 0")
    uid, num_users = _user_index(user_ids, g, s)
    idcg = G.ideal_dcg_by_user(uid, g, k, num_users)
    dcg = np.bincount(uid, weights=g * G.tie_averaged_discounts_by_user(uid, s, k), minlength=num_users)
    ok = idcg > 0
    return {"ndcg": float(np.mean(dcg[ok] / idcg[ok])) if ok.any() else float("nan"),
            "num_users_used": int(ok.sum()), "num_users_skipped": int((~ok).sum())}


def ecs(item_ids, weights) -> float:
    """Effective catalog size (Gomez-Uribe & Hunt, Netflix, 2015).

    ``ECS = 2 * sum_i i * p_i - 1`` with ``p_i`` the share of total ``weights`` (e.g.
    watch time) of the i-th item, items sorted by share descending, i from 1. ECS is 1
    when one item takes everything and N when N items share equally. nan when the
    total weight is 0. Weights must be >= 0.
    """
    items = np.asarray(item_ids).reshape(-1)
    w = _1d(weights, "weights")
    _same_len(items, w)
    if np.any(w < 0):
        raise ValueError("weights must be >= 0")
    per_item = np.bincount(np.unique(items, return_inverse=True)[1].reshape(-1), weights=w)
    total = per_item.sum()
    if total <= 0:
        return float("nan")
    p = np.sort(per_item / total)[::-1]
    return float(2.0 * np.sum(np.arange(1, p.size + 1) * p) - 1.0)


def ranking_exposure(user_ids, scores, k: int = 10, discount: str = "log2") -> np.ndarray:
    """Exposure each impression gets when every user's rows are ranked by ``scores``:
    the tie-averaged rank discount (``1/log2(rank+1)`` or 1 up to rank k, 0 beyond)."""
    s = _1d(scores, "scores")
    uid, _ = _user_index(user_ids, s)
    G.rank_discount_table(1, k, discount)  # validates k and discount
    return G.tie_averaged_discounts_by_user(uid, s, k, discount)


def model_ecs(user_ids, item_ids, scores, k: int = 10, discount: str = "log2") -> float:
    """ECS of the model's rankings: :func:`ecs` of the exposure the model gives items
    when it ranks each user's eval impressions by ``scores`` and shows the top k
    (exposure per :func:`ranking_exposure`)."""
    return ecs(item_ids, ranking_exposure(user_ids, scores, k, discount))


def binary_entropy(p: float) -> float:
    """``H(p) = -p log p - (1 - p) log(1 - p)`` in nats; 0 at p in {0, 1}."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    return float(-sum(q * np.log(q) for q in (p, 1.0 - p) if q > 0))


def ne(labels, probs, eps: float = 1e-7) -> float:
    """Normalized entropy (He et al., Facebook, ADKDD 2014):
    ``NE = logloss / H(mean label)``; 1 = no better than predicting the base rate.
    nan when all labels are equal."""
    y = _binary(labels)
    h = binary_entropy(float(y.mean()))
    return logloss(y, probs, eps) / h if h > 0 else float("nan")


def rmse(y_true, y_pred) -> float:
    """``sqrt(mean_i (y_i - y_hat_i)^2)``."""
    y, p = _1d(y_true, "y_true"), _1d(y_pred, "y_pred")
    _same_len(y, p)
    return float(np.sqrt(np.mean((y - p) ** 2)))


def calibration(labels, preds) -> float:
    """``mean prediction / mean label`` (1 = calibrated on average; nan if no positive)."""
    y, p = _1d(labels, "labels"), _1d(preds, "preds")
    _same_len(y, p)
    return float(p.sum() / y.sum()) if y.sum() != 0 else float("nan")


# ----------------------------------------------------------------------------------
# Watch-time estimate calibration (issue 13): does a head estimate E[y | x]? On real
# logs E[y | x] is unknown; binning rows by their prediction and comparing the bin's
# mean label with its mean prediction measures it (the regression analogue of a
# reliability diagram). XGAUC (per-user XAUC) is `xgauc` above.


def mean_calibration_by_bin(y_true, y_pred, num_bins: int = 10) -> Dict[str, object]:
    """Mean calibration by quantile bin of the prediction (deciles by default).

    Bin edges ``e_k`` = the k/B quantiles of ``y_pred`` (k = 1..B-1); row n is in bin
    ``b_n = #{k : e_k <= p_n}`` (equal predictions share a bin, so the result does not
    depend on row order; bins can be fewer or unequal under ties). Per non-empty bin:
    ``pred_b`` = mean prediction, ``label_b`` = mean label. Returns ``mean_abs_gap`` =
    ``sum_b n_b |pred_b - label_b| / n`` (0 for an unbiased E[y] estimator, large for
    a median estimator on right-skewed labels), ``relative_gap`` = mean_abs_gap / mean
    label, and the per-bin lists ``count``, ``pred``, ``label``.
    """
    y, p = _1d(y_true, "y_true"), _1d(y_pred, "y_pred")
    _same_len(y, p)
    if int(num_bins) != num_bins or num_bins < 1:
        raise ValueError(f"num_bins must be an integer >= 1, got {num_bins}")
    edges = np.quantile(p, np.arange(1, int(num_bins)) / num_bins)
    bins = np.searchsorted(edges, p, side="right")
    count = np.bincount(bins, minlength=int(num_bins)).astype(np.float64)
    used = count > 0
    pred_b = np.bincount(bins, weights=p, minlength=int(num_bins))[used] / count[used]
    label_b = np.bincount(bins, weights=y, minlength=int(num_bins))[used] / count[used]
    gap = float(np.sum(count[used] * np.abs(pred_b - label_b)) / y.size)
    mean_y = float(np.mean(y))
    return {"mean_abs_gap": gap, "relative_gap": gap / mean_y if mean_y != 0 else float("nan"),
            "count": count[used].astype(int).tolist(), "pred": pred_b.tolist(), "label": label_b.tolist()}
