"""Per-user metric kernels for all users at once (no Python loop over users).

The per-user metrics of `models.evaluation.metrics` (XGAUC, nDCG@k, the model's ECS)
were loops calling a one-user function; with ~10^5 users per eval slice the loop is
the cost. These kernels compute the same per-user quantities with whole-array NumPy:

- :func:`tie_averaged_discounts_by_user`: rank every user's rows by score
  (descending); a tie run of ranks ``a..a+L-1`` gets ``(D[a+L-1] - D[a-1]) / L`` with
  ``D`` the cumulative rank discount (``1/log2(r+1)`` or 1 up to rank k, 0 beyond),
  i.e. the mean discount over the run, as `metrics.tie_averaged_discounts` per user.
- :func:`ideal_dcg_by_user`: ``sum_r g_(r) d(r)``, gains sorted descending per user.
- :func:`xauc_counts_by_user`: per user, ``num_u = sum_{y_i < y_j} [1(p_i < p_j) +
  1/2 1(p_i = p_j)]`` and ``den_u = #{y_i < y_j}``, so ``XAUC_u = num_u / den_u``; for
  users with at most ``max_pairwise`` rows as a padded ``[U, m, m]`` pair count (exact
  integers and halves), larger users through `metrics.xauc`'s O(n log n) count.

Every function takes ``uid``: dense user indices ``0..U-1`` per row (``np.unique(...,
return_inverse=True)``). Tested against the per-user functions on random data with
ties, single-row users and constant users (tests/models/evaluation/test_grouped.py).
"""
from __future__ import annotations

from typing import Callable, Tuple

import numpy as np

_PAIR_BUDGET = 1 << 22  # padded pair cells per chunk of users (memory ~ 3 x 8 x this bytes)


def rank_discount(n: int, k: int, discount: str) -> np.ndarray:
    """Exposure of ranks 1..n: ``1/log2(r+1)`` ("log2") or 1 ("uniform") for r <= k, else 0."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    r = np.arange(1, n + 1, dtype=np.float64)
    if discount == "log2":
        d = 1.0 / np.log2(r + 1.0)
    elif discount == "uniform":
        d = np.ones(n)
    else:
        raise ValueError(f"discount must be 'log2' or 'uniform', got {discount!r}")
    d[k:] = 0.0
    return d


def rank_discount_table(n: int, k: int, discount: str) -> np.ndarray:
    """``D[r]`` = summed discount of ranks 1..r (``D[0] = 0``), ranks up to n."""
    return np.concatenate([[0.0], np.cumsum(rank_discount(n, k, discount))])


def _rank_in_user(uid_sorted: np.ndarray) -> np.ndarray:
    """0-based position of each row inside its user's run (rows sorted by user)."""
    n = uid_sorted.size
    first = np.ones(n, dtype=bool)
    first[1:] = uid_sorted[1:] != uid_sorted[:-1]
    pos = np.arange(n)
    return pos - np.maximum.accumulate(np.where(first, pos, 0))


def tie_averaged_discounts_by_user(uid: np.ndarray, scores: np.ndarray, k: int,
                                   discount: str = "log2") -> np.ndarray:
    """Per row: the mean rank discount of its tie run in its user's ranking."""
    n = scores.size
    if n == 0:
        return np.empty(0)
    order = np.lexsort((-scores, uid))
    u, s = uid[order], scores[order]
    rank0 = _rank_in_user(u)
    new = np.ones(n, dtype=bool)
    new[1:] = (u[1:] != u[:-1]) | (s[1:] != s[:-1])
    run = np.cumsum(new) - 1
    run_start = rank0[new][run]
    run_len = np.bincount(run)[run]
    table = rank_discount_table(int(rank0.max()) + 1, k, discount)
    out = np.empty(n)
    out[order] = (table[run_start + run_len] - table[run_start]) / run_len
    return out


def ideal_dcg_by_user(uid: np.ndarray, gains: np.ndarray, k: int, num_users: int) -> np.ndarray:
    """Per user: DCG@k of its gains sorted descending (log2 discount)."""
    if gains.size == 0:
        return np.zeros(num_users)
    order = np.lexsort((-gains, uid))
    rank0 = _rank_in_user(uid[order])
    table = rank_discount_table(int(rank0.max()) + 1, k, "log2")
    d = table[rank0 + 1] - table[rank0]
    return np.bincount(uid[order], weights=gains[order] * d, minlength=num_users)


def xauc_counts_by_user(uid: np.ndarray, y: np.ndarray, p: np.ndarray, num_users: int,
                        one_user_xauc: Callable[[np.ndarray, np.ndarray], Tuple[float, float]],
                        max_pairwise: int = 64) -> Tuple[np.ndarray, np.ndarray]:
    """(num_u, den_u) per user (see the module docstring); ``one_user_xauc(y, p)``
    returns (num, den) of one large user."""
    num, den = np.zeros(num_users), np.zeros(num_users)
    if y.size == 0:
        return num, den
    order = np.argsort(uid, kind="stable")
    u, ys, ps = uid[order], y[order], p[order]
    sizes = np.bincount(u, minlength=num_users)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank0 = _rank_in_user(u)
    small = np.flatnonzero((sizes >= 2) & (sizes <= max_pairwise))
    if small.size:
        m = int(sizes[small].max())
        per_chunk = max(1, _PAIR_BUDGET // (m * m))
        slot = np.full(num_users, -1)
        for c in range(0, small.size, per_chunk):
            users = small[c:c + per_chunk]
            slot[users] = np.arange(users.size)
            rows = np.flatnonzero(np.isin(u, users))
            yy = np.full((users.size, m), np.nan)
            pp = np.zeros((users.size, m))
            yy[slot[u[rows]], rank0[rows]] = ys[rows]
            pp[slot[u[rows]], rank0[rows]] = ps[rows]
            lt = yy[:, :, None] < yy[:, None, :]  # NaN padding compares False
            conc = (pp[:, :, None] < pp[:, None, :]) + 0.5 * (pp[:, :, None] == pp[:, None, :])
            num[users] = np.sum(lt * conc, axis=(1, 2))
            den[users] = np.sum(lt, axis=(1, 2))
            slot[users] = -1
    for user in np.flatnonzero(sizes > max_pairwise):
        rows = slice(starts[user], starts[user] + sizes[user])
        num[user], den[user] = one_user_xauc(ys[rows], ps[rows])
    return num, den
