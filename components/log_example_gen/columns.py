"""Columnar row batches and the grouped, time-ordered sums every signal and history needs.

A *batch* is a dict ``{column: numpy array}`` of equal lengths (one entry per log row).
Rows travel between the Beam stages as batches keyed by a shard or an entity, never as
one Python object per row. ``row_id`` identifies a log record: ``file_index << 40 |
byte offset`` with the log files in path order, so sorting by ``row_id`` is sorting by
``(file, offset)``, the tie order of every pass (user_examples.py, signals.py).

Known prefix (``known_prefix``): rows sorted by ``(group, time, row_id)``; for row i the
rows of its group it may use are a prefix of the group,

    K(i) = {j in group(i): t_j + D < t_i}  =  sorted positions [start(i), p(i))

so every running statistic is a sum over ``[start(i), p(i))`` of a per-group cumulative
sum (``prefix_sums``): exact in the order of the sequential passes of signals.py.
"""
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np
import pandas as pd

Batch = Dict[str, np.ndarray]
FILE_SHIFT = 40  # row_id = file_index << FILE_SHIFT | byte offset


def row_ids(file_index: int, offsets: np.ndarray) -> np.ndarray:
    return (np.int64(file_index) << FILE_SHIFT) | offsets.astype(np.int64)


def file_of(row_id: int) -> int:
    return int(row_id) >> FILE_SHIFT


def offset_of(row_id: int) -> int:
    return int(row_id) & ((1 << FILE_SHIFT) - 1)


def length(batch: Batch) -> int:
    return len(next(iter(batch.values()))) if batch else 0


def take(batch: Batch, index) -> Batch:
    return {k: v[index] for k, v in batch.items()}


def concat(batches: Iterable[Batch]) -> Batch:
    batches = [b for b in batches if length(b)]
    if not batches:
        return {}
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def shard_of(values: np.ndarray, num_shards: int) -> np.ndarray:
    """A stable shard of integer keys (the same in every worker): multiplicative hash mod S."""
    mixed = (values.astype(np.uint64) * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF)
    return (mixed % np.uint64(num_shards)).astype(np.int64)


def split_by(batch: Batch, keys: np.ndarray) -> Iterable[Tuple[int, Batch]]:
    """(key, sub-batch) for every distinct integer key of the rows."""
    if not length(batch):
        return
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    cuts = np.flatnonzero(np.diff(sorted_keys)) + 1
    for part in np.split(order, cuts):
        yield int(keys[part[0]]), take(batch, part)


def group_codes(*keys: np.ndarray) -> np.ndarray:
    """Dense int codes of the distinct tuples of the key columns (any dtype)."""
    code = np.zeros(len(keys[0]), dtype=np.int64)
    for k in keys:
        _, inv = np.unique(k, return_inverse=True)
        code = code * (int(inv.max()) + 1 if len(inv) else 1) + inv
        _, code = np.unique(code, return_inverse=True)
    return code.astype(np.int64)


def sort_rows(group: np.ndarray, time_ms: np.ndarray, row_id: np.ndarray) -> np.ndarray:
    """The permutation sorting rows by (group, time, row_id)."""
    return np.lexsort((row_id, time_ms, group))


def group_starts(group_sorted: np.ndarray) -> np.ndarray:
    """For each sorted row, the position of its group's first row."""
    n = len(group_sorted)
    is_start = np.ones(n, dtype=bool)
    is_start[1:] = group_sorted[1:] != group_sorted[:-1]
    return np.maximum.accumulate(np.where(is_start, np.arange(n), 0))


def known_prefix(group_sorted: np.ndarray, time_sorted: np.ndarray, delay_ms: int,
                 strict: bool = True) -> np.ndarray:
    """p(i) of the module doc: rows [start(i), p(i)) of i's group have t_j + delay < t_i
    (``strict=False``: t_j + delay <= t_i). Rows sorted by (group, time)."""
    n = len(group_sorted)
    if delay_ms < 0:
        raise ValueError(f"label delay must be >= 0, got {delay_ms}")
    # Merge the queries (group, t_i - delay) into the rows: at an equal (group, time) a
    # query sorts before the rows when strict (they are not known), after them otherwise.
    kind = np.concatenate([np.full(n, 0 if strict else 2), np.ones(n, dtype=np.int64)])
    g = np.concatenate([group_sorted, group_sorted])
    t = np.concatenate([time_sorted.astype(np.int64) - delay_ms, time_sorted.astype(np.int64)])
    order = np.lexsort((kind, t, g))
    is_row = order >= n
    rows_before = np.cumsum(is_row) - is_row  # rows placed before each merged position
    p = np.empty(n, dtype=np.int64)
    queries = ~is_row
    p[order[queries]] = rows_before[queries]
    return p


def group_cumsums(group_sorted: np.ndarray, values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """{name: inclusive cumulative sum of values within each group} (float64), summed
    sequentially per group (the order of the Python passes, so the sums agree to the last
    bit or nearly); every column in one grouping."""
    if not len(group_sorted) or not values:
        return {k: v.astype(np.float64) for k, v in values.items()}
    frame = pd.DataFrame({k: v.astype(np.float64) for k, v in values.items()})
    out = frame.groupby(group_sorted, sort=False).cumsum()
    return {k: out[k].to_numpy() for k in values}


def _upto(inclusive: np.ndarray, starts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Sum of the values of [start(i), end(i)) from their group's inclusive cumulative sums."""
    has = end > starts
    return np.where(has, inclusive[np.where(has, end - 1, 0)] if len(inclusive) else 0.0, 0.0)


def prefix_sums(group_sorted: np.ndarray, starts: np.ndarray, p: np.ndarray,
                values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """{name: sum of values[start(i):p(i)]} per sorted row (``group_cumsums``)."""
    return {k: _upto(c, starts, p) for k, c in group_cumsums(group_sorted, values).items()}


def range_sums(group_sorted: np.ndarray, starts: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """{name: sum of values[lo(i):hi(i)]} per sorted row (start(i) <= lo(i) <= hi(i)):
    the prefix sum up to hi minus the one up to lo, from one ``group_cumsums``."""
    return {k: _upto(c, starts, hi) - _upto(c, starts, lo)
            for k, c in group_cumsums(group_sorted, values).items()}


def window_sums(group_sorted: np.ndarray, starts: np.ndarray, p: np.ndarray, width: int,
                values: Dict[str, np.ndarray]) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:
    """(count, {name: sum}) over the last ``width`` rows of [start(i), p(i))."""
    lo = np.maximum(starts, p - width)
    return (p - lo).astype(np.float64), range_sums(group_sorted, starts, lo, p, values)


def unsort(sorted_values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Values computed on rows[order] back in the rows' own order."""
    out = np.empty_like(sorted_values)
    out[order] = sorted_values
    return out


def lookup(ids: np.ndarray, table_ids: np.ndarray, table_columns: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Columns of a side table (``table_ids`` sorted) at ``ids`` (every id must be present)."""
    pos = np.searchsorted(table_ids, ids)
    return [c[pos] for c in table_columns]
