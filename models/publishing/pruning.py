"""Inference pruning: keep the most important rows of a table and remap ids to them.

For a table with V rows and a per-row importance s_r (models/publishing/row_importance.py:
the mean optimizer second moment — QuickUpdate's criterion — or the row's L2 norm,
FBGEMM's default), the kept set is

    K = {always-kept rows (padding row 0, OOV rows)} ∪ top_{n}(s) ,
        n = V − ⌊fraction · V⌋ − |always|       (fixed fraction), or
    K = always ∪ {r : s_r > threshold}           (threshold)

The compact table holds the kept rows in index order; `remap` [V] sends every id to
its compact row, and every pruned id to one shared default row:

    remap[r] = position of r in K   if r ∈ K
             = d                    otherwise

with d the compact position of the first OOV row (`default_row="oov"`), or of an extra
row appended to the compact table: all zeros (`default_row="zeros"`, FBGEMM's −1 remap
contributing zero) or the mean of the pruned rows (`default_row="mean"`, the "tail
centroid": the least-squares single stand-in for every pruned row, learning-free).

`default_row="centroids"`: C extra rows, the k-means centroids of the pruned rows
(tail_clusters); a pruned id goes to its own cluster's row, d(r) = K + cluster(r). The
remap holds one index per id anyway, so C centroids cost C rows, not a byte per id:

    cluster = argmin_c ‖E_r − μ_c‖²  (Lloyd, seeded),   μ_c = mean{E_r : cluster(r) = c}

A plan's extra rows are recomputed from the table being compacted (compact_table: the
mean of the ids remapped to each), so a delta publish of newer weights under the same
plan gets the newer means. The remap lives in the serving graph (`ids = gather(remap, ids)`),
so the transform graph and the clients are unchanged.

Example:

>>> plan = prune_plan(importance, num_rows=1000, fraction=0.5, always_keep=[0, 999])
>>> compact = table[plan.kept]             # then append a zero row if plan.zero_row
>>> plan.remap[[0, 5, 999]]
"""
import dataclasses
from typing import Optional, Sequence

import numpy as np

DEFAULT_ROWS = ("oov", "zeros", "mean", "centroids")


@dataclasses.dataclass(frozen=True)
class PrunePlan:
    """kept: sorted original row ids kept; remap: int [V] -> compact row; zero_row: an
    extra zero row at index len(kept) (default_row "zeros"); centroid_rows: C extra rows
    at len(kept) .. len(kept)+C−1, each the mean of the pruned ids remapped to it
    ("mean": C = 1, "centroids": the k-means clusters)."""

    kept: np.ndarray
    remap: np.ndarray
    zero_row: bool
    centroid_rows: int = 0

    @property
    def num_rows(self) -> int:
        return int(self.remap.shape[0])

    @property
    def compact_rows(self) -> int:
        return int(len(self.kept) + int(self.zero_row) + int(self.centroid_rows))

    @property
    def pruned(self) -> int:
        return self.num_rows - int(len(self.kept))


def select_rows(importance, fraction: Optional[float] = None, threshold: Optional[float] = None,
                always_keep: Sequence[int] = (0,)) -> np.ndarray:
    """Sorted row ids to keep (module docstring); exactly one of fraction / threshold."""
    s = np.asarray(importance, dtype=np.float64).reshape(-1)
    v = s.shape[0]
    if (fraction is None) == (threshold is None):
        raise ValueError("select_rows: give exactly one of fraction and threshold")
    always = np.unique(np.asarray(list(always_keep), dtype=np.int64))
    if always.size and (always.min() < 0 or always.max() >= v):
        raise ValueError(f"select_rows: always_keep {always.tolist()} outside [0, {v})")
    if np.any(np.isnan(s)):
        raise ValueError("select_rows: importance has NaN")
    keep = np.zeros(v, dtype=bool)
    keep[always] = True
    if threshold is not None:
        keep |= s > float(threshold)
    else:
        if not 0.0 <= float(fraction) <= 1.0:
            raise ValueError(f"select_rows: fraction must be in [0, 1], got {fraction}")
        n = max(v - int(np.floor(float(fraction) * v)) - int(keep.sum()), 0)
        candidates = np.flatnonzero(~keep)
        # stable: ties keep the lower id, so the plan is deterministic
        order = candidates[np.argsort(-s[candidates], kind="stable")]
        keep[order[:n]] = True
    return np.flatnonzero(keep)


def build_remap(kept, num_rows: int, default_row: str = "oov", oov_rows: Sequence[int] = (),
                clusters: Optional[np.ndarray] = None) -> PrunePlan:
    """The remap of `kept` rows (sorted ids) in a table of `num_rows` (module docstring);
    `clusters` [num_rows] (default_row "centroids"): each pruned id's cluster 0..C−1."""
    if default_row not in DEFAULT_ROWS:
        raise ValueError(f"build_remap: default_row must be one of {DEFAULT_ROWS}, got {default_row!r}")
    kept = np.asarray(kept, dtype=np.int64)
    if kept.size == 0 or np.any(np.diff(kept) <= 0) or kept[0] < 0 or kept[-1] >= num_rows:
        raise ValueError("build_remap: kept must be non-empty, sorted, unique ids in [0, num_rows)")
    remap = np.full(int(num_rows), -1, dtype=np.int64)
    remap[kept] = np.arange(kept.size)
    pruned = remap < 0
    centroid_rows = 0
    if default_row == "centroids" and clusters is not None and pruned.any():
        labels = np.asarray(clusters, np.int64)[pruned]
        _, dense = np.unique(labels, return_inverse=True)  # clusters with no pruned id take no row
        remap[pruned] = kept.size + dense
        centroid_rows = int(dense.max()) + 1
    elif default_row in ("zeros", "mean", "centroids"):
        remap[pruned] = kept.size
        centroid_rows = int(default_row != "zeros")
    else:
        oov = [r for r in oov_rows if remap[r] >= 0]
        if not oov:
            raise ValueError("build_remap: default_row 'oov' needs a kept OOV row (oov_rows)")
        remap[pruned] = int(remap[oov[0]])
    return PrunePlan(kept=kept, remap=remap, zero_row=default_row == "zeros", centroid_rows=centroid_rows)


def tail_clusters(rows, k: int, iterations: int = 20, seed: int = 0) -> np.ndarray:
    """k-means (Lloyd) cluster of each row of `rows` [N, D] (module docstring), k-means++
    seeding (Arthur & Vassilvitskii 2007) with a seeded generator; an emptied cluster keeps
    its centroid. Returns int [N] in [0, k)."""
    x = np.asarray(rows, np.float64)
    k = int(min(max(k, 1), len(x)))
    rng = np.random.default_rng(seed)
    mu = np.empty((k, x.shape[1]))
    mu[0] = x[rng.integers(len(x))]
    nearest = ((x - mu[0]) ** 2).sum(1)
    for c in range(1, k):  # next seed drawn with probability ∝ squared distance to the chosen ones
        total = nearest.sum()
        mu[c] = x[rng.choice(len(x), p=nearest / total) if total > 0 else rng.integers(len(x))]
        nearest = np.minimum(nearest, ((x - mu[c]) ** 2).sum(1))
    labels = np.zeros(len(x), np.int64)
    for _ in range(iterations):
        d = (x * x).sum(1)[:, None] - 2.0 * x @ mu.T + (mu * mu).sum(1)[None, :]
        labels = d.argmin(axis=1)
        counts = np.bincount(labels, minlength=k)
        sums = np.zeros_like(mu)
        np.add.at(sums, labels, x)
        nonempty = counts > 0
        mu[nonempty] = sums[nonempty] / counts[nonempty, None]
    return labels


def prune_plan(importance, num_rows: int, fraction=None, threshold=None, default_row: str = "oov",
               oov_rows: Sequence[int] = (), padding_row: int = 0) -> PrunePlan:
    """select_rows (padding and OOV rows always kept) + build_remap."""
    kept = select_rows(importance, fraction=fraction, threshold=threshold,
                       always_keep=[padding_row] + list(oov_rows))
    return build_remap(kept, num_rows, default_row=default_row, oov_rows=oov_rows)


def compact_table(table, plan: PrunePlan) -> np.ndarray:
    """The kept rows of `table` in compact order, then the zero row or the centroid rows
    (each the mean of the pruned ids the remap sends to it)."""
    table = np.asarray(table)
    out = table[plan.kept]
    extra = int(plan.zero_row) + int(plan.centroid_rows)
    if extra:
        rows = np.zeros((extra,) + table.shape[1:], np.float64)
        if plan.centroid_rows:
            pruned = np.setdiff1d(np.arange(table.shape[0]), plan.kept)
            slot = plan.remap[pruned] - len(plan.kept)
            counts = np.bincount(slot, minlength=extra)
            np.add.at(rows, slot, table[pruned].astype(np.float64))
            rows[counts > 0] /= counts[counts > 0].reshape((-1,) + (1,) * (table.ndim - 1))
        out = np.concatenate([out, rows.astype(table.dtype)], axis=0)
    return out


def remap_dtype(compact_rows: int):
    """uint16 when every compact index fits (2 bytes per vocabulary row), else int32; the
    serving graph casts the gathered index to int32."""
    return np.uint16 if compact_rows <= np.iinfo(np.uint16).max + 1 else np.int32
