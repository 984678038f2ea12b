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
all-zero row appended to the compact table (`default_row="zeros"`, FBGEMM's −1 remap
contributing zero). The remap lives in the serving graph (`ids = gather(remap, ids)`),
so the transform graph and the clients are unchanged.

Example:

>>> plan = prune_plan(importance, num_rows=1000, fraction=0.5, always_keep=[0, 999])
>>> compact = table[plan.kept]             # then append a zero row if plan.zero_row
>>> plan.remap[[0, 5, 999]]
"""
import dataclasses
from typing import Optional, Sequence

import numpy as np

DEFAULT_ROWS = ("oov", "zeros")


@dataclasses.dataclass(frozen=True)
class PrunePlan:
    """kept: sorted original row ids kept; remap: int [V] -> compact row; zero_row: the
    compact table gets an extra zero row at index len(kept) (default_row "zeros")."""

    kept: np.ndarray
    remap: np.ndarray
    zero_row: bool

    @property
    def num_rows(self) -> int:
        return int(self.remap.shape[0])

    @property
    def compact_rows(self) -> int:
        return int(len(self.kept) + int(self.zero_row))

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


def build_remap(kept, num_rows: int, default_row: str = "oov", oov_rows: Sequence[int] = ()) -> PrunePlan:
    """The remap of `kept` rows (sorted ids) in a table of `num_rows` (module docstring)."""
    if default_row not in DEFAULT_ROWS:
        raise ValueError(f"build_remap: default_row must be one of {DEFAULT_ROWS}, got {default_row!r}")
    kept = np.asarray(kept, dtype=np.int64)
    if kept.size == 0 or np.any(np.diff(kept) <= 0) or kept[0] < 0 or kept[-1] >= num_rows:
        raise ValueError("build_remap: kept must be non-empty, sorted, unique ids in [0, num_rows)")
    remap = np.full(int(num_rows), -1, dtype=np.int64)
    remap[kept] = np.arange(kept.size)
    zero_row = default_row == "zeros"
    if zero_row:
        default = kept.size
    else:
        oov = [r for r in oov_rows if remap[r] >= 0]
        if not oov:
            raise ValueError("build_remap: default_row 'oov' needs a kept OOV row (oov_rows)")
        default = int(remap[oov[0]])
    remap[remap < 0] = default
    return PrunePlan(kept=kept, remap=remap, zero_row=zero_row)


def prune_plan(importance, num_rows: int, fraction=None, threshold=None, default_row: str = "oov",
               oov_rows: Sequence[int] = (), padding_row: int = 0) -> PrunePlan:
    """select_rows (padding and OOV rows always kept) + build_remap."""
    kept = select_rows(importance, fraction=fraction, threshold=threshold,
                       always_keep=[padding_row] + list(oov_rows))
    return build_remap(kept, num_rows, default_row=default_row, oov_rows=oov_rows)


def compact_table(table, plan: PrunePlan) -> np.ndarray:
    """The kept rows of `table` in compact order (+ a zero row with default_row 'zeros')."""
    table = np.asarray(table)
    out = table[plan.kept]
    if plan.zero_row:
        out = np.concatenate([out, np.zeros((1,) + table.shape[1:], table.dtype)], axis=0)
    return out


def remap_dtype(compact_rows: int):
    """uint16 when every compact index fits (2 bytes per vocabulary row), else int32; the
    serving graph casts the gathered index to int32."""
    return np.uint16 if compact_rows <= np.iinfo(np.uint16).max + 1 else np.int32
