"""Beam CombineFns of the custom metrics: plumbing around `models.evaluation.metrics`.

The math lives in the pure NumPy functions of `models.evaluation.metrics` (tested
against brute force); a combiner here only gathers the rows or sufficient statistics
a metric needs, merges partial states and calls the pure function:

=====================  ==========================================  ================
combiner               value                                       state
=====================  ==========================================  ================
XAUCCombiner           ``xauc(y, p)``                              rows (y, p)*
ObservedECSCombiner    ``ecs(items, sum of label per item)``       sum per item
NECombiner             ``(sum logloss / n) / H(sum y / n)``        n, sum y, sum ll
RMSECombiner           ``sqrt(sum (y - p)^2 / n)``                 n, sum sq. error
QuantileCombiner       ``c_i = #(y <= t_tau_i) / n``,              n, sum pinball,
                       ``mean_i |c_i - tau_i|``, pinball / n       N counts
HistogramCombiner      TFMA's calibration histogram (AUC's input)  occupied buckets
=====================  ==========================================  ================

``*``: kept by :class:`~models.evaluation.tfma.sampling.RowsCombiner`, exact up to
``max_rows`` rows, then a hash sample (see `models.evaluation.tfma.sampling`). The
per-user metrics (GAUC, request GAUC, XGAUC, nDCG, the model's ECS) share one table of
rows per slice instead (`models.evaluation.tfma.user_table`). The
streaming combiners buffer rows and reduce them to sums every ``_FLUSH_ROWS`` rows, so
their memory is constant. Every combiner returns all its keys; a value it cannot
compute (empty slice, undefined metric) is NaN.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.metrics import calibration_histogram, metric_types

from models.evaluation import metrics as M
from models.evaluation import quantile_metrics as QM
from models.evaluation.tfma.inputs import Reader, flat_rows, hashable_id
from models.evaluation.tfma.sampling import RowsCombiner, stable_hash
from models.watch_time.cqe import quantile_levels

_FLUSH_ROWS = 4096  # streaming combiners reduce buffered rows to sums this often
PINBALL_KEY = "pinball_loss"


def coverage_key(tau: float) -> str:
    """Metric key name of the coverage at level tau."""
    return f"quantile_coverage@{tau:.4f}"


# ---------------------------------------------------------------------- row-keeping


class XAUCCombiner(RowsCombiner):
    num_columns = 2  # label, prediction

    def _rows(self, element):
        return flat_rows(self._reader.label(element), self._reader.prediction(element))

    def _group_hash(self, columns):
        y, p = columns[0], columns[1]
        return stable_hash(stable_hash(y, self._seed) ^ stable_hash(p, self._seed + 1),
                           self._seed)

    def _compute(self, columns):
        y, p = columns
        return {self._keys[0].name: M.xauc(y, p)}


# ---------------------------------------------------------------------- streaming


class Sums:
    """Accumulator: a vector of sums plus row batches (column arrays) not yet reduced."""

    __slots__ = ("sums", "pending", "num_pending")

    def __init__(self, size: int, num_columns: int):
        self.sums = np.zeros(size)
        self.pending: List[List[np.ndarray]] = [[] for _ in range(num_columns)]
        self.num_pending = 0

    def __getstate__(self):
        return (self.sums, self.pending, self.num_pending)

    def __setstate__(self, state):
        self.sums, self.pending, self.num_pending = state


class SumsCombiner(beam.CombineFn):
    """Constant-memory metrics: rows are reduced to sums with the pure functions.

    ``add_input`` takes one example or a batch of rows (an input's values are rows,
    see `models.evaluation.tfma.inputs`); batches are reduced with NumPy every
    ``_FLUSH_ROWS`` rows."""

    num_columns = 2
    size = 0

    def __init__(self, keys: List[metric_types.MetricKey], reader: Reader):
        self._keys = keys
        self._reader = reader

    def _rows(self, element) -> List[np.ndarray]:
        return flat_rows(self._reader.label(element), self._reader.prediction(element))

    def _reduce(self, columns: List[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def _finish(self, sums: np.ndarray) -> Dict[str, float]:
        raise NotImplementedError

    def _flush(self, acc: Sums) -> Sums:
        if acc.num_pending:
            acc.sums = acc.sums + self._reduce([np.concatenate(p).astype(np.float64)
                                                for p in acc.pending])
            acc.pending = [[] for _ in acc.pending]
            acc.num_pending = 0
        return acc

    def create_accumulator(self) -> Sums:
        return Sums(self.size, self.num_columns)

    def add_input(self, acc: Sums, element) -> Sums:
        rows = self._rows(element)
        for p, r in zip(acc.pending, rows):
            p.append(r)
        acc.num_pending += len(rows[0])
        if acc.num_pending >= _FLUSH_ROWS:
            self._flush(acc)
        return acc

    def merge_accumulators(self, accumulators: Iterable[Sums]) -> Sums:
        out = self.create_accumulator()
        for a in accumulators:
            out.sums = out.sums + self._flush(a).sums
        return out

    def compact(self, acc: Sums) -> Sums:
        return self._flush(acc)

    def extract_output(self, acc: Sums) -> Dict[metric_types.MetricKey, float]:
        sums = self._flush(acc).sums
        values = self._finish(sums) if sums[0] > 0 else {}
        return {k: float(values.get(k.name, float("nan"))) for k in self._keys}


class NECombiner(SumsCombiner):
    size = 3  # n, sum labels, sum logloss

    def _reduce(self, columns):
        y, p = columns
        return np.array([y.size, y.sum(), M.logloss(y, p) * y.size])

    def _finish(self, sums):
        n, pos, ll = sums
        h = M.binary_entropy(pos / n)
        return {self._keys[0].name: (ll / n) / h if h > 0 else float("nan")}


class CountCombiner(SumsCombiner):
    """Rows (values of the prediction output): TFMA's unweighted example_count, counted
    per row instead of per ``add_input``."""

    num_columns = 1
    size = 1

    def _rows(self, element):
        return [self._reader.prediction(element).reshape(-1)]

    def _reduce(self, columns):
        return np.array([columns[0].size])

    def _finish(self, sums):
        return {self._keys[0].name: float(sums[0])}


class BCECombiner(SumsCombiner):
    """``mean_rows -(y log p + (1 - y) log(1 - p))``, unclipped: TFMA's
    BinaryCrossEntropy (from_logits False, no label smoothing), averaged over rows
    instead of over ``add_input`` calls."""

    size = 2  # n, sum of the row losses

    def _reduce(self, columns):
        y, p = columns
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = -np.multiply(y, np.log(p)) - np.multiply(1 - y, np.log(1 - p))
        return np.array([y.size, loss.sum()])

    def _finish(self, sums):
        return {self._keys[0].name: float(sums[1] / sums[0])}


class MeanCombiner(SumsCombiner):
    """Sums n, sum y, sum p, sum |y - p| over rows; the value is one ``statistic``:
    "label" (sum y / n), "prediction" (sum p / n), "calibration" (sum p / sum y) or
    "absolute_error" (sum |y - p| / n): TFMA's unweighted MeanLabel, MeanPrediction,
    Calibration and MeanAbsoluteError, summed with NumPy instead of one value at a time."""

    size = 4
    STATISTICS = ("label", "prediction", "calibration", "absolute_error")

    def __init__(self, keys, reader, statistic: str):
        super().__init__(keys, reader)
        if statistic not in self.STATISTICS:
            raise ValueError(f"statistic must be one of {self.STATISTICS}, got {statistic!r}")
        self._statistic = statistic

    def _reduce(self, columns):
        y, p = columns
        return np.array([y.size, y.sum(), p.sum(), np.abs(y - p).sum()])

    def _finish(self, sums):
        n, sy, sp, sae = sums
        value = {"label": sy / n, "prediction": sp / n, "absolute_error": sae / n,
                 "calibration": sp / sy if sy != 0 else float("nan")}[self._statistic]
        return {self._keys[0].name: float(value)}


class RMSECombiner(SumsCombiner):
    size = 2  # n, sum squared error

    def _reduce(self, columns):
        y, p = columns
        return np.array([y.size, M.rmse(y, p) ** 2 * y.size])

    def _finish(self, sums):
        return {self._keys[0].name: float(np.sqrt(sums[1] / sums[0]))}


class QuantileCombiner(SumsCombiner):
    """Sums: n, pinball sum, then per level the count of y <= t_tau."""

    num_columns = 2  # label, quantile vector (kept as a list per row)

    def __init__(self, keys, reader, num_quantiles: int):
        super().__init__(keys, reader)
        self._taus = quantile_levels(num_quantiles)
        self.size = 2 + num_quantiles

    def _rows(self, element):
        y = self._reader.label(element).reshape(-1)
        q = self._reader.prediction(element).reshape(y.size, -1)
        if q.shape[1] != self._taus.size:
            raise ValueError(f"output {self._reader.output!r} has {q.shape[1]} quantiles, "
                             f"config num_quantiles={self._taus.size}")
        return [y, q]

    def _reduce(self, columns):
        y, q = columns
        return np.concatenate([[y.size, QM.pinball_loss(y, q, self._taus) * y.size],
                               QM.quantile_coverage(y, q, self._taus) * y.size])

    def _finish(self, sums):
        n, pin, covered = sums[0], sums[1], sums[2:]
        cov = covered / n
        out = {coverage_key(t): c for t, c in zip(self._taus, cov)}
        out[self._keys[0].name] = float(np.mean(np.abs(cov - self._taus)))
        out[PINBALL_KEY] = pin / n
        return out


# ---------------------------------------------------------------------- per item


class ObservedECSCombiner(beam.CombineFn):
    """Accumulator: {item id: summed label}; memory O(catalog)."""

    def __init__(self, keys, reader, item_key: str):
        self._keys, self._reader, self._item_key = keys, reader, item_key

    def create_accumulator(self) -> Dict[Any, float]:
        return {}

    def add_input(self, acc, element):
        items, w = flat_rows(self._reader.feature(element, self._item_key),
                             self._reader.label(element))
        if items.size == 1:
            i = hashable_id(items[0])
            acc[i] = acc.get(i, 0.0) + float(w[0])
            return acc
        uniq, inverse = np.unique(items, return_inverse=True)  # one dict update per item
        for i, x in zip(uniq.tolist(), np.bincount(inverse.reshape(-1), weights=w).tolist()):
            acc[i] = acc.get(i, 0.0) + x
        return acc

    def merge_accumulators(self, accumulators):
        accs = iter(accumulators)
        out = dict(next(accs))
        for a in accs:
            for i, x in a.items():
                out[i] = out.get(i, 0.0) + x
        return out

    def extract_output(self, acc):
        value = M.ecs(list(acc), list(acc.values())) if acc else float("nan")
        return {self._keys[0]: float(value)}


# ---------------------------------------------------------------------- per bucket


class Histogram:
    """Accumulator: the occupied buckets (sorted ids; rows of weighted labels, weighted
    predictions, weighted examples) plus rows (label, prediction) not yet binned."""

    __slots__ = ("ids", "sums", "pending", "num_pending")

    def __init__(self):
        self.ids = np.zeros(0, np.int64)
        self.sums = np.zeros((0, 3))
        self.pending: List[List[np.ndarray]] = [[], []]
        self.num_pending = 0

    def __getstate__(self):
        return (self.ids, self.sums, self.pending, self.num_pending)

    def __setstate__(self, state):
        self.ids, self.sums, self.pending, self.num_pending = state


def _bucket_sums(ids: np.ndarray, values: np.ndarray):
    """(unique ids, per-id column sums of ``values`` [n, 3])."""
    uniq, inverse = np.unique(ids, return_inverse=True)
    inverse = inverse.reshape(-1)
    return uniq, np.stack([np.bincount(inverse, weights=values[:, j], minlength=uniq.size)
                           for j in range(values.shape[1])], axis=1)


class HistogramCombiner(beam.CombineFn):
    """TFMA 0.47's calibration histogram (``calibration_histogram.py``, unweighted,
    no sub key / class weights / aggregation) from rows with NumPy instead of one value
    at a time. Each row (y, p) becomes, with fractional labels (the default on [0, 1];
    y must lie in [0, 1]), the tuples (0, p, 1 - y) and (1, p, y), a tuple of weight 0
    dropped; without, the tuple (y, p, 1). A tuple (l, p, w) adds (l w, p w, w) to
    bucket ``b = clip(trunc((v - left) / (right - left) * N + 1), 0, N + 1)``,
    ``v = p`` (or ``l`` without prediction-based bucketing), N = ``num_buckets``.
    The output is TFMA's: ``{key: [Bucket]}`` over the occupied buckets by id, which
    TFMA's confusion matrices and AUC then read unchanged."""

    def __init__(self, key: metric_types.PlotKey, reader: Reader, num_buckets: int, left: float,
                 right: float, fractional_labels: bool, prediction_based_bucketing: bool = True):
        self._key, self._reader = key, reader
        self._num_buckets, self._left, self._range = int(num_buckets), float(left), float(right - left)
        self._fractional = bool(fractional_labels)
        self._by_prediction = bool(prediction_based_bucketing)

    def _bins(self, y: np.ndarray, p: np.ndarray):
        if self._fractional:
            outside = (y < 0.0) | (y > 1.0) | np.isnan(y)
            if outside.any():
                raise ValueError(f"label must be within [0, 1]: label={y[outside][0]}, "
                                 f"prediction={p[outside][0]}")
            labels = np.concatenate([np.zeros_like(y), np.ones_like(y)])
            preds, weights = np.concatenate([p, p]), np.concatenate([1.0 - y, y])
            kept = weights != 0.0
            labels, preds, weights = labels[kept], preds[kept], weights[kept]
        else:
            labels, preds, weights = y, p, np.ones_like(y)
        v = preds if self._by_prediction else labels
        if np.isnan(v).any():
            raise ValueError(f"{'prediction' if self._by_prediction else 'label'} is NaN: "
                             "no calibration-histogram bucket")
        b = (v - self._left) / self._range * self._num_buckets + 1
        ids = np.clip(np.floor(b), 0, self._num_buckets + 1).astype(np.int64)  # TFMA's int() of b >= 0
        return _bucket_sums(ids, np.stack([labels * weights, preds * weights, weights], axis=1))

    def _flush(self, acc: Histogram) -> Histogram:
        if acc.num_pending:
            ids, sums = self._bins(*(np.concatenate(p).astype(np.float64) for p in acc.pending))
            acc.ids, acc.sums = _bucket_sums(np.concatenate([acc.ids, ids]), np.concatenate([acc.sums, sums]))
            acc.pending, acc.num_pending = [[], []], 0
        return acc

    def create_accumulator(self) -> Histogram:
        return Histogram()

    def add_input(self, acc: Histogram, element) -> Histogram:
        y, p = flat_rows(self._reader.label(element), self._reader.prediction(element))
        acc.pending[0].append(y)
        acc.pending[1].append(p)
        acc.num_pending += y.size
        if acc.num_pending >= _FLUSH_ROWS:
            self._flush(acc)
        return acc

    def merge_accumulators(self, accumulators: Iterable[Histogram]) -> Histogram:
        accs = [self._flush(a) for a in accumulators]
        out = Histogram()
        out.ids, out.sums = _bucket_sums(np.concatenate([a.ids for a in accs]),
                                         np.concatenate([a.sums for a in accs]))
        return out

    def compact(self, acc: Histogram) -> Histogram:
        return self._flush(acc)

    def extract_output(self, acc: Histogram):
        acc = self._flush(acc)
        return {self._key: [calibration_histogram.Bucket(int(i), float(wl), float(wp), float(we))
                            for i, (wl, wp, we) in zip(acc.ids.tolist(), acc.sums.tolist())]}
