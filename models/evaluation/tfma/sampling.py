"""Row-keeping combiners with a bounded, mergeable hash sample (the "rows*" metrics).

XAUC and the per-user metrics are exact: the accumulator (:class:`Rows`) keeps the rows
it needs (2-3 numbers per impression), merges by concatenation, and the metric is
computed once at the end. Each kept column is stored in the narrowest dtype that holds
its values exactly (:func:`narrow`: a prediction or label that came from a float32
tensor as float32, ids in the fewest bytes that hold them) and widened back to
float64 / int64 (:func:`widen`) only to compute the metric, so the values, the hashes
and the metrics are those of the float64 / int64 columns, while the accumulators that
Beam encodes, groups and merges (the Evaluator's memory above its model: every slice's
rows of every row metric, ~5 copies in the in-process runner's GroupByKey) are ~2x
smaller; pickled, each column is compressed (:func:`pack`), ~40 % fewer bytes again.
Above ``max_rows`` rows per slice (default :data:`DEFAULT_MAX_ROWS`)
:class:`RowsCombiner` keeps a deterministic hash sample, mergeable and independent of
Beam's bundling:

- each row gets a group hash (:func:`stable_hash`, SplitMix64 with ``sample_seed``):
  the user id for per-user metrics (so a sampled user keeps *all* its impressions and
  its per-user metric stays exact), the (label, prediction) pair for XAUC;
- the kept set is the groups with the smallest hashes whose total rows fit in
  ``max_rows`` (a bottom-k sketch by groups). Partial accumulators keep a superset of
  this set with complete groups (their cut-off hash is never below the global one and
  merging takes the minimum), so the result equals a one-pass computation;
- ``{name}_rows_sampled_out`` counts the rows left out (0 = exact), never silent.

Error when sampling (m rows kept, δ the failure probability), treating the hash as a
uniform random draw:

- XAUC: numerator N and denominator D (share of pairs with different labels) are
  U-statistics of order 2 with kernels in [0, 1]; Hoeffding (1963) gives
  ``P(|Û - U| >= t) <= 2 exp(-2 floor(m/2) t^2)`` for each, and with both within t,
  ``|XAUC_hat - XAUC| <= 2 t / D_hat``, ``t = sqrt(ln(4/δ) / (2 floor(m/2)))``.
  For m = 2e6, δ = 0.01 and continuous watch time (D ≈ 1): ``|error| <= 0.0035``.
  Identical (label, prediction) rows share a hash and are kept or left out together.
- UserNDCG (mean over sampled users of values in [0, 1]): Hoeffding-Serfling,
  ``|error| <= sqrt(ln(2/δ) / (2 m_users))``.
- GroupAUC / XGAUC (impression-weighted ratio over sampled users): delta-method
  standard error ``sqrt(1 - f) sqrt(sum_u w_u^2 (a_u - G)^2) / sum_u w_u`` (f = share
  of users kept); no distribution-free bound is claimed.
- ModelECS on sampled users is biased low (fewer users reach fewer items): keep
  ``max_rows`` above the eval size when ECS matters; the counter shows if it was not.
"""
from __future__ import annotations

import hashlib
import zlib
from typing import Dict, Iterable, List, Optional, Sequence

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.metrics import metric_types

from models.evaluation.tfma.inputs import Reader

DEFAULT_MAX_ROWS = 2_000_000
_CHUNK = 1024  # pending inputs joined into one array per column this often

_U = np.uint64


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of uint64 values (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x.astype(_U) + _U(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U(27))) * _U(0x94D049BB133111EB)
        return z ^ (z >> _U(31))


_SIGNED = (np.int8, np.int16, np.int32, np.int64)


def narrow(a: np.ndarray) -> np.ndarray:
    """``a`` in the narrowest dtype of its kind that holds every value exactly: floats as
    float32 when float32 round-trips them (NaN and inf included), signed integers as the
    smallest of int8..int64 spanning [min, max]; anything else (bool, unsigned, bytes,
    objects) unchanged. ``widen(narrow(a))`` equals ``a`` for float64 and int64 input."""
    a = np.asarray(a)
    if a.dtype.kind == "f" and a.dtype.itemsize > 4:
        b = a.astype(np.float32)
        same = (b.astype(a.dtype) == a) | (np.isnan(a) & np.isnan(b))
        return b if bool(np.all(same)) else a
    if a.dtype.kind == "i" and a.dtype.itemsize > 1:
        if a.size == 0:
            return a.astype(np.int8)
        lo, hi = int(a.min()), int(a.max())
        for t in _SIGNED:
            info = np.iinfo(t)
            if info.min <= lo and hi <= info.max:
                return a.astype(t) if t().itemsize < a.dtype.itemsize else a
    return a


def widen(columns: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Narrowed columns back to float64 / int64 (other kinds unchanged)."""
    return [c.astype(np.float64) if c.dtype.kind == "f" else c.astype(np.int64) if c.dtype.kind == "i"
            else c for c in columns]


def pack(a: np.ndarray):
    """A 1-D numeric column as (dtype, size, zlib level 1 of its bytes grouped by byte
    position): the form accumulators are pickled in. Grouping the bytes (first bytes of
    every value, then the second, ...) puts a column's near-constant high bytes (times,
    ids in runs, float exponents) next to each other: ~40 % fewer bytes on eval rows
    (8 table columns: 25 -> 15 bytes a row on bench-scale's 0.25M eval split), at about
    3 ms per 10k rows. Other kinds (bytes, objects) are returned unchanged."""
    a = np.asarray(a)
    if a.dtype.kind not in "biuf" or a.ndim != 1:
        return a
    grouped = np.ascontiguousarray(a.view(np.uint8).reshape(a.size, a.dtype.itemsize).T)
    return (a.dtype.str, a.size, zlib.compress(grouped.tobytes(), 1))


def unpack(p) -> np.ndarray:
    """Inverse of :func:`pack`: the same values, dtype and order."""
    if isinstance(p, np.ndarray):
        return p
    dtype, size, data = p
    dtype = np.dtype(dtype)
    grouped = np.frombuffer(zlib.decompress(data), np.uint8).reshape(dtype.itemsize, size)
    return np.ascontiguousarray(grouped.T).view(dtype).reshape(size)


def stable_hash(values: np.ndarray, seed: int) -> np.ndarray:
    """Deterministic 63-bit hash (fits int64, so thresholds compare exactly).

    Integers and floats hash their 64-bit patterns, anything else (bytes, str) its
    8-byte BLAKE2b digest; then ``splitmix64(bits ^ splitmix64(seed)) >> 1``.
    """
    a = np.asarray(values).reshape(-1)
    if a.dtype.kind in "iub":
        bits = a.astype(np.int64).view(_U)
    elif a.dtype.kind == "f":
        bits = a.astype(np.float64).view(_U)
    else:
        bits = np.array([int.from_bytes(hashlib.blake2b(
            v if isinstance(v, bytes) else str(v).encode(), digest_size=8).digest(), "little")
            for v in a], dtype=_U)
    seed_mix = splitmix64(np.array([seed & (2 ** 64 - 1)], dtype=_U))[0]
    return (splitmix64(bits ^ seed_mix) >> _U(1)).astype(np.int64)


class Rows:
    """Accumulator: kept rows as column arrays plus row batches still being appended.

    ``threshold``: None while nothing was sampled out, else only groups with hash <=
    threshold are kept (-1 keeps none). ``sampled_out`` counts rows left out.
    """

    __slots__ = ("columns", "chunks", "pending", "num_pending", "threshold", "sampled_out")

    def __init__(self, num_columns: int):
        self.columns: Optional[List[np.ndarray]] = None
        self.chunks: List[List[np.ndarray]] = [[] for _ in range(num_columns)]
        self.pending: List[List[np.ndarray]] = [[] for _ in range(num_columns)]
        self.num_pending = 0  # rows in chunks and pending
        self.threshold: Optional[int] = None
        self.sampled_out = 0

    def __getstate__(self):  # what Beam encodes, groups and merges: packed columns
        columns = self.flush()
        return (len(self.pending), None if columns is None else [pack(c) for c in columns],
                self.threshold, self.sampled_out)

    def __setstate__(self, state):
        num_columns, packed, self.threshold, self.sampled_out = state
        self.columns = None if packed is None else [unpack(p) for p in packed]
        self.chunks = [[] for _ in range(num_columns)]
        self.pending = [[] for _ in range(num_columns)]
        self.num_pending = 0

    def size(self) -> int:
        kept = 0 if self.columns is None else self.columns[0].size
        return kept + self.num_pending

    def append(self, rows: Sequence[np.ndarray]) -> None:
        """Appends one input's rows (an example or a batch); every ``_CHUNK`` inputs
        are joined into one array per column, so per-example inputs stay compact."""
        for p, r in zip(self.pending, rows):
            p.append(r)
        self.num_pending += len(rows[0])
        if len(self.pending[0]) >= _CHUNK:
            for c, p in zip(self.chunks, self.pending):
                c.append(np.concatenate(p))
            self.pending = [[] for _ in self.pending]

    def flush(self) -> List[np.ndarray]:
        if self.num_pending:
            new = [np.concatenate(c + p) for c, p in zip(self.chunks, self.pending)]
            self.columns = new if self.columns is None else [
                np.concatenate([c, n]) for c, n in zip(self.columns, new)]
            self.chunks = [[] for _ in self.chunks]
            self.pending = [[] for _ in self.pending]
            self.num_pending = 0
        return self.columns


class RowsCombiner(beam.CombineFn):
    """Keeps rows (columns defined by subclasses) with the bounded hash sample above.

    Subclasses set ``num_columns`` and define ``_rows`` (one example's columns),
    ``_group_hash`` (the sampling group of each row) and ``_compute`` (metric values by
    key name from the kept rows), or ``_output`` for another output than metric values
    (`models.evaluation.tfma.user_table`).
    """

    num_columns = 0

    def __init__(self, keys: List[metric_types.MetricKey], reader: Optional[Reader],
                 max_rows: int, sample_seed: int):
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        self._keys = keys
        self._reader = reader
        self._max_rows = int(max_rows)
        self._seed = int(sample_seed)

    # subclass API
    def _rows(self, element) -> List[np.ndarray]:
        raise NotImplementedError

    def _group_hash(self, columns: Sequence[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def _compute(self, columns: Sequence[np.ndarray]) -> Dict[str, float]:
        """Metric values by key name from the kept rows (at least one row)."""
        raise NotImplementedError

    # sampling
    def _restrict(self, columns, threshold, bound):
        """(columns, threshold, dropped): drop groups above threshold, then keep the
        smallest-hash groups whose rows fit in ``bound`` when there are more."""
        n = columns[0].size
        if threshold is None and n <= bound:
            return columns, None, 0
        h = self._group_hash(columns)
        keep = np.ones(n, dtype=bool) if threshold is None else h <= threshold
        if keep.sum() > bound:
            uh, counts = np.unique(h[keep], return_counts=True)
            # Cut just below the first group that does not fit, not at the last one
            # that does: a group missing from this partial state may hash in between
            # and fit in the global prefix.
            first_out = int(np.searchsorted(np.cumsum(counts), bound, side="right"))
            threshold = int(uh[first_out]) - 1
            keep &= h <= threshold
        return [c[keep] for c in columns], threshold, int(n - keep.sum())

    def _shrink(self, acc: Rows) -> None:
        columns = acc.flush()
        columns, acc.threshold, dropped = self._restrict(columns, acc.threshold, self._max_rows)
        acc.columns = columns
        acc.sampled_out += dropped

    # beam.CombineFn
    def create_accumulator(self) -> Rows:
        return Rows(self.num_columns)

    def add_input(self, acc: Rows, element) -> Rows:
        rows = [narrow(r) for r in self._rows(element)]
        if acc.threshold is not None:
            keep = self._group_hash(rows) <= acc.threshold
            acc.sampled_out += int((~keep).sum())
            rows = [r[keep] for r in rows]
        acc.append(rows)
        if acc.size() > 2 * self._max_rows:  # hysteresis: shrink to max_rows, rarely
            self._shrink(acc)
        return acc

    def merge_accumulators(self, accumulators: Iterable[Rows]) -> Rows:
        accs = list(accumulators)
        out = self.create_accumulator()
        thresholds = [a.threshold for a in accs if a.threshold is not None]
        out.threshold = min(thresholds) if thresholds else None
        parts = [a.flush() for a in accs]
        parts = [p for p in parts if p is not None and p[0].size]
        out.sampled_out = sum(a.sampled_out for a in accs)
        if parts:
            out.columns = [np.concatenate(c) for c in zip(*parts)]
            if out.threshold is not None:
                keep = self._group_hash(out.columns) <= out.threshold
                out.sampled_out += int((~keep).sum())
                out.columns = [c[keep] for c in out.columns]
            if out.columns[0].size > 2 * self._max_rows:
                self._shrink(out)
        return out

    def compact(self, acc: Rows) -> Rows:
        acc.flush()
        return acc

    def _output(self, columns: Optional[List[np.ndarray]], dropped: int) -> Dict[metric_types.MetricKey, object]:
        """The combiner's output from the kept rows (narrowed; None when there are none)
        and the count of rows sampled out: by default ``_compute`` on the widened
        columns, NaN where it gives no value, and ``{name}_rows_sampled_out``."""
        values = self._compute(widen(columns)) if columns is not None else {}
        values[f"{self._keys[0].name}_rows_sampled_out"] = float(dropped)
        return {k: float(values.get(k.name, float("nan"))) for k in self._keys}

    def extract_output(self, acc: Rows) -> Dict[metric_types.MetricKey, object]:
        columns = acc.flush()
        dropped = acc.sampled_out
        if columns is not None and columns[0].size:
            columns, _, extra = self._restrict(columns, acc.threshold, self._max_rows)
            dropped += extra
        return self._output(columns if columns is not None and columns[0].size else None, dropped)
