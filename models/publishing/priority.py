"""Which embedding rows a partial (delta) publish sends first: per-row priorities.

For one table with V rows, `current` describes this training and `published` what the
server holds (the state at each row's last publish):

    opt_state_change_r = |s_r − s_r^pub|              s_r = mean_j S_{r,j}, the row's mean optimizer
                                                      second moment (models/publishing/row_importance.py);
                                                      QuickUpdate §5 (Matam et al., NSDI '24), TorchRec
                                                      ModelDeltaTracker MOMENTUM_DIFF
    row_change_r       = ‖E_r − E_r^pub‖₂             the serving error of the row if not sent; with Adam,
                                                      which moves every row each step, this is the direct one
    touch_count_r      = lookups of r since the row's last publish
    random_r           = π(r), π a uniform permutation of 0..V−1 seeded by `seed` (ablation)

With nothing published yet (`published is None`) every row has priority +inf (a full
publish). NaN priorities (e.g. a missing optimizer slot) rank lowest.

`top_rows(priority, fraction)` = the sorted indices of the k = ⌈fraction · V⌉ highest
priorities (fraction ∈ (0, 1]; fraction · V is rounded to 9 decimals before the ceiling
so that 0.07 · 100 gives 7, not 8); ties go to the lower index, so the choice is
deterministic.

Example:

>>> p = row_priority("opt_state_change", {"opt_state": s, "touch_count": c, "rows": E},
...                  {"opt_state": s_pub, "rows": E_pub})
>>> send = top_rows(p, 0.05)                     # int64 [⌈0.05·V⌉], ascending
"""
import math
from typing import Optional

import numpy as np

PRIORITIES = ("opt_state_change", "row_change", "touch_count", "random")


def _vector(d: dict, key: str, who: str) -> np.ndarray:
    if key not in d:
        raise ValueError(f"row_priority: {who} has no {key!r} (keys: {sorted(d)})")
    return np.asarray(d[key], dtype=np.float64)


def _num_rows(current: dict) -> int:
    for key in ("rows", "opt_state", "touch_count"):
        if key in current and current[key] is not None:
            return int(np.shape(current[key])[0])
    raise ValueError("row_priority: current has none of 'rows', 'opt_state', 'touch_count'")


def row_priority(kind: str, current: dict, published: Optional[dict], seed: int = 0) -> np.ndarray:
    """Priority [V] float64 of every row, higher = publish first (module docstring)."""
    if kind not in PRIORITIES:
        raise ValueError(f"row_priority: unknown kind {kind!r}; expected one of {PRIORITIES}")
    v = _num_rows(current)
    if published is None:
        return np.full(v, np.inf)
    if kind == "opt_state_change":
        now, then = _vector(current, "opt_state", "current"), _vector(published, "opt_state", "published")
        if now.shape != then.shape:
            raise ValueError(f"row_priority: opt_state shapes differ: current {now.shape}, published {then.shape}")
        return np.abs(now - then)
    if kind == "row_change":
        now, then = _vector(current, "rows", "current"), _vector(published, "rows", "published")
        if now.shape != then.shape:
            raise ValueError(f"row_priority: rows shapes differ: current {now.shape}, published {then.shape}")
        return np.linalg.norm((now - then).reshape(v, -1), axis=1)
    if kind == "touch_count":
        return _vector(current, "touch_count", "current").reshape(v).copy()
    return np.random.default_rng(seed).permutation(v).astype(np.float64)


def num_top_rows(num_rows: int, fraction: float) -> int:
    """k = ⌈fraction · V⌉ (fraction · V rounded to 9 decimals first)."""
    if not (0.0 < float(fraction) <= 1.0):
        raise ValueError(f"top_rows: fraction must be in (0, 1], got {fraction}")
    return min(int(num_rows), int(math.ceil(round(float(fraction) * int(num_rows), 9))))


def top_rows(priority: np.ndarray, fraction: float) -> np.ndarray:
    """Sorted int64 indices of the ⌈fraction · V⌉ highest priorities; ties to the lower index."""
    p = np.asarray(priority, dtype=np.float64).reshape(-1)
    k = num_top_rows(p.size, fraction)
    key = np.where(np.isnan(p), -np.inf, p)
    order = np.argsort(-key, kind="stable")  # stable: equal priorities keep index order
    return np.sort(order[:k]).astype(np.int64)
