"""Request-level ranking metrics: GAUC over requests and the frozen-state rows.

Per-user GAUC (`models.evaluation.metrics.gauc`) ranks all of a user's impressions of
the evaluation window against each other. A model that reads a running per-user
statistic (history click rate, history outcomes) scores a user's later impressions
with a drifted state, so per-user GAUC mixes the ranking of candidates with the drift
of the user state along the window. At serving time the candidates of one request
share one user state. Two metrics measure that:

- **request GAUC** — GAUC whose groups are requests: a user's impressions within the
  same time window (default the same minute),

      r(i) = (u_i, floor(t_i / W)),     RGAUC = sum_r n_r AUC_r / sum_r n_r

  over requests with both click classes (n_r = impressions of request r).
- **frozen-state GAUC** — every impression of a group (a user's evaluation window,
  or a request) is scored with the user state of the group's *first* impression
  (earliest time, then row order): :func:`frozen_state_rows` gives, per row, the row
  whose user-side features (history, history length) it is scored with; the caller
  re-scores and takes per-user GAUC of those scores.

All pure NumPy and exact; tests compare with brute-force loops.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from models.evaluation.metrics import gauc


def _times(times_ms, n: int) -> np.ndarray:
    t = np.asarray(times_ms).reshape(-1)
    if t.size != n:
        raise ValueError(f"times_ms has {t.size} rows, user_ids {n}")
    if not np.issubdtype(t.dtype, np.number):
        raise ValueError(f"times_ms must be numeric (ms since epoch), got dtype {t.dtype}")
    return t.astype(np.int64)


def request_ids(user_ids, times_ms, window_s: float = 60.0) -> np.ndarray:
    """Request id per row: dense ids of ``(user, floor(time_ms / (1000 window_s)))``.

    Args:
        user_ids: ``[n]`` any hashable ids (ints or bytes).
        times_ms: ``[n]`` impression times in milliseconds.
        window_s: request window W in seconds (> 0); 60 = the same minute.

    Returns:
        ``[n]`` int64, equal iff same user and same window.
    """
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s!r}")
    u = np.asarray(user_ids).reshape(-1)
    if u.size == 0:
        raise ValueError("user_ids is empty")
    uid = np.unique(u, return_inverse=True)[1].reshape(-1).astype(np.int64)
    bucket = np.floor_divide(_times(times_ms, u.size), int(round(window_s * 1000)))
    pairs = np.stack([uid, bucket], axis=1)
    return np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def request_gauc(user_ids, times_ms, labels, preds, window_s: float = 60.0) -> Dict[str, float]:
    """GAUC over requests (:func:`request_ids`): ``sum_r n_r AUC_r / sum_r n_r``.

    Requests with one click class are skipped. Returns ``request_gauc`` (nan when no
    request is usable), ``num_requests_used``, ``num_requests_skipped``,
    ``num_impressions_used``.
    """
    g = gauc(request_ids(user_ids, times_ms, window_s), labels, preds)
    return {"request_gauc": g["gauc"], "num_requests_used": g["num_users_used"],
            "num_requests_skipped": g["num_users_skipped"],
            "num_impressions_used": g["num_impressions_used"]}


def frozen_state_rows(user_ids, times_ms, window_s: Optional[float] = None) -> np.ndarray:
    """Per row, the index of the row whose user state it is scored with: the first
    row (earliest ``times_ms``, ties by row order) of its group.

    Groups: the user's whole evaluation window (``window_s=None``) or the user's
    requests (:func:`request_ids` with ``window_s``).

    Returns:
        ``[n]`` int64 indices into the inputs.
    """
    u = np.asarray(user_ids).reshape(-1)
    if u.size == 0:
        raise ValueError("user_ids is empty")
    t = _times(times_ms, u.size)
    group = (np.unique(u, return_inverse=True)[1].reshape(-1) if window_s is None
             else request_ids(u, t, window_s))
    order = np.lexsort((np.arange(u.size), t, group))  # by group, then time, then row
    g_sorted = group[order]
    first = np.ones(u.size, dtype=bool)
    first[1:] = g_sorted[1:] != g_sorted[:-1]
    head = order[first]  # first row per group, groups in ascending id order
    return head[np.cumsum(first) - 1][np.argsort(order)].astype(np.int64)


def frozen_state_gauc(user_ids, labels, frozen_preds) -> Dict[str, float]:
    """Per-user GAUC of scores computed with the frozen user state
    (rows from :func:`frozen_state_rows`); keys as `metrics.gauc` with a
    ``frozen_`` prefix on ``gauc``."""
    g = gauc(user_ids, labels, frozen_preds)
    return {"frozen_gauc": g["gauc"], **{k: v for k, v in g.items() if k != "gauc"}}
