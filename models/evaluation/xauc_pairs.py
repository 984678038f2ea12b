"""XAUC split by a binary label of the pairs' rows (for watch time: the click).

XAUC (models/evaluation/metrics.py) scores the pairs with different watch times. They fall
in three kinds k: two clicks, two skips, one of each. With N_k pairs of kind k and XAUC_k
the XAUC over those pairs only,

    XAUC = sum_k (N_k / N) XAUC_k,

so a watch-time head's XAUC can be read as how it orders clicks among themselves, skips
among themselves, and clicks against skips (where the click is nearly always the longer
view: ``positive_longer``). Exact, O(n log n); tested against brute-force pair counts.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from models.evaluation import metrics


def _distinct_label_pairs(y: np.ndarray) -> float:
    """Pairs of rows whose labels differ: the pairs XAUC scores."""
    return y.size * (y.size - 1) / 2 - metrics._pairs(np.unique(y, return_counts=True)[1])


def xauc_by_label_pairs(y_true, y_pred, positive) -> Dict[str, object]:
    """XAUC split by a binary label of the rows (the click, for watch time).

    The pairs XAUC scores (different y) fall in three kinds k: both rows positive
    (``within_positive``), both negative (``within_negative``) and one of each
    (``across``). With N_k such pairs, N = sum_k N_k and XAUC_k the XAUC over kind k only,

        XAUC = sum_k (N_k / N) XAUC_k,

    so each kind's ``share`` = N_k / N and ``xauc`` = XAUC_k add up to the whole. For
    across pairs, ``positive_longer`` is the share whose positive row has the larger y:
    the XAUC_across that ordering every positive above every negative would reach. A kind
    with no scored pair has xauc nan and share 0. Returns {kind: {"share", "xauc"}, "xauc"}
    (``across`` also has ``positive_longer``).
    """
    y, p = metrics._1d(y_true, "y_true"), metrics._1d(y_pred, "y_pred")
    pos = metrics._binary(positive)
    metrics._same_len(y, p, pos)
    n_all = _distinct_label_pairs(y)
    concordant_all = metrics.xauc(y, p) * n_all if n_all else 0.0
    out, concordant_within, n_within = {}, 0.0, 0.0
    for kind, rows in (("within_positive", pos == 1), ("within_negative", pos == 0)):
        n_k = _distinct_label_pairs(y[rows])
        x_k = metrics.xauc(y[rows], p[rows]) if n_k else float("nan")
        out[kind] = {"share": n_k / n_all if n_all else 0.0, "xauc": x_k}
        concordant_within += x_k * n_k if n_k else 0.0
        n_within += n_k
    n_across = n_all - n_within
    neg_sorted = np.sort(y[pos == 0])
    longer = float(np.searchsorted(neg_sorted, y[pos == 1], side="left").sum())  # pairs y_pos > y_neg
    out["across"] = {"share": n_across / n_all if n_all else 0.0,
                     "xauc": (concordant_all - concordant_within) / n_across if n_across else float("nan"),
                     "positive_longer": longer / n_across if n_across else float("nan")}
    out["xauc"] = concordant_all / n_all if n_all else float("nan")
    return out
