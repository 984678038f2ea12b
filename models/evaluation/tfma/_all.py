"""Custom TFMA metrics for the watch-time ranker: mergeable Beam combiners.

One concept: TFMA plumbing. The math lives in `models/metrics.py` (pure NumPy, tested
against brute force); each combiner here only gathers the rows or sufficient
statistics a metric needs, merges partial states, and calls the pure function.

Metrics (class name -> metric keys; ``{name}`` is the config's ``name``)
------------------------------------------------------------------------
=================  =======================================================  ==========
class              keys                                                     state
=================  =======================================================  ==========
XAUC               ``{name}``, ``{name}_rows_sampled_out``                  rows*
XGAUC              ``{name}``, ``{name}_num_users_used``,                   rows by user*
                   ``{name}_num_users_skipped``, ``{name}_rows_sampled_out``
GroupAUC           same four keys as XGAUC (GAUC of clicks)                 rows by user*
UserNDCG           same four keys (users with IDCG = 0 are skipped)         rows by user*
ModelECS           ``{name}``, ``{name}_rows_sampled_out``                  rows by user*
ObservedECS        ``{name}``                                               sum per item
NormalizedEntropy  ``{name}``                                               3 sums
RMSE               ``{name}``                                               2 sums
QuantileCoverage   ``{name}`` (mean coverage error), ``pinball_loss``,      N+2 sums
                   ``quantile_coverage@{tau:.4f}`` per level
=================  =======================================================  ==========

Calibration (mean prediction / mean label), AUC, MAE, example count and binary cross
entropy are TFMA built-ins with the same definitions as `models.metrics`;
:func:`metrics_specs` adds them.

Which prediction, label and feature a metric reads (multi-output models)
------------------------------------------------------------------------
Our models output a dict (``click_prob``, ``watch_time_s``, optional ``quantiles``,
``ranking_score``) and ``ModelSpec.label_keys`` maps outputs to label features. The
metrics here take these config args (each where it applies):

- ``prediction_output``: model output to score. Default: the MetricsSpec output name
  (``tfma.MetricsSpec(output_names=[...])``), so a metric in the ``click_prob`` spec
  reads ``click_prob``.
- ``label_key``: *feature* holding the label or gain (TFMA's own convention, as in
  ``MinLabelPosition``). Default: the label ModelSpec.label_keys gives that output.
  Needed when the output has no label of its own, e.g. nDCG of ``ranking_score`` with
  gain ``watch_time_s``, or ``quantiles`` against ``watch_time_s``.
- ``user_key`` / ``item_key``: features with the user id (per-user metrics) and the
  item id (ECS); defaults ``user_id`` and ``video_id``.

So ranking metrics evaluate one ranking score with any gain: put them in the spec of
the ranking output and name the gain feature. Features reach the combiners through a
``FeaturePreprocessor`` limited to the features a metric names.

Exactness and the size bound (rows*)
------------------------------------
XAUC and the per-user metrics are exact: the accumulator keeps the rows it needs
(2-3 numbers per impression), merges by concatenation, and computes the pure function
once at the end. Above ``max_rows`` rows per slice (default 2,000,000) it keeps a
deterministic hash sample, mergeable and independent of Beam's bundling:

- each row gets a group hash (SplitMix64 with ``sample_seed``): the user id for
  per-user metrics (so a sampled user keeps *all* its impressions and its per-user
  metric stays exact), the (label, prediction) pair for XAUC;
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

Example (what :func:`metrics_specs` builds)::

    tfma.MetricConfig(class_name="UserNDCG", module="models.tfma_metrics",
                      config=json.dumps({"name": "ndcg_watch@10", "k": 10,
                                         "label_key": "watch_time_s"}))

These metrics are impression-weighted by definition; a MetricsSpec with
``example_weights.weighted`` raises ``ValueError``.

TFMA 0.47 details this module relies on: a ``class_name`` that TFMA registers itself
(``NDCG``, ``Calibration``, ...) resolves to the built-in even when ``module`` is set, so
our classes have distinct names; combiners get one example per ``add_input`` (after
TFMA's unbatching) and see features only through a ``FeaturePreprocessor``;
``get_predictions(output)`` returns the whole dict when the output is missing, which
we turn into a ``ValueError`` naming the outputs; thresholds match the metric's
``name`` (its first key).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

import apache_beam as beam
import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_specs as tfma_metric_specs
from tensorflow_model_analysis.metrics import metric_types
from tensorflow_model_analysis.utils import util as tfma_util

from models.evaluation import metrics as M

MODULE = __name__
DEFAULT_MAX_ROWS = 2_000_000
_FLUSH_ROWS = 4096  # streaming combiners reduce buffered rows to sums this often
PINBALL_KEY = "pinball_loss"


def quantile_levels(num_quantiles: int) -> np.ndarray:
    """CQE levels ``tau_i = i / (N + 1)``, i = 1..N."""
    return np.arange(1, num_quantiles + 1) / (num_quantiles + 1.0)


def coverage_key(tau: float) -> str:
    """Metric key name of the coverage at level tau."""
    return f"quantile_coverage@{tau:.4f}"


# ---------------------------------------------------------------------- reading inputs


def _values(value: Any, what: str) -> np.ndarray:
    if value is None:
        raise ValueError(f"{what} is missing from the metric inputs")
    if isinstance(value, Mapping):
        raise ValueError(f"{what} is ambiguous: got a dict with keys {sorted(value)}; "
                         "name one (prediction_output / label_key / MetricsSpec.output_names)")
    return np.asarray(value)


class _Reader:
    """Reads prediction, label and features of one example for one metric key."""

    def __init__(self, key: metric_types.MetricKey, prediction_output: Optional[str],
                 label_key: Optional[str]):
        self.model_name = key.model_name or None
        self.output = prediction_output or key.output_name or None
        self.label_output = key.output_name or None
        self.label_key = label_key

    def prediction(self, element) -> np.ndarray:
        value = element.get_predictions(self.model_name, self.output)
        return _values(value, f"prediction output {self.output!r}").astype(np.float64)

    def label(self, element) -> np.ndarray:
        if self.label_key:
            return self.feature(element, self.label_key).astype(np.float64)
        value = element.get_labels(self.model_name, self.label_output)
        return _values(value, f"label of output {self.label_output!r} (or set label_key)"
                       ).astype(np.float64)

    @staticmethod
    def feature(element, name: str) -> np.ndarray:
        features = element.features
        if features is None or name not in features:
            have = sorted(features) if features is not None else []
            raise ValueError(f"feature {name!r} not in the eval examples (have {have})")
        return np.asarray(tfma_util.get_by_keys(features, [name]))


def _flat(*arrays: np.ndarray) -> List[np.ndarray]:
    """Flattens per-example values to equal-length 1-D rows (scalars broadcast)."""
    flat = [np.asarray(a).reshape(-1) for a in arrays]
    n = max(a.size for a in flat)
    out = []
    for a in flat:
        if a.size == n:
            out.append(a)
        elif a.size == 1:
            out.append(np.repeat(a, n))
        else:
            raise ValueError(f"per-example sizes differ: {[x.size for x in flat]}")
    return out


def _py(v: Any) -> Any:
    """A hashable Python scalar for an id (bytes stay bytes)."""
    return v.item() if isinstance(v, np.generic) else v


# ---------------------------------------------------------------------- hashing

_U = np.uint64


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x.astype(_U) + _U(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U(27))) * _U(0x94D049BB133111EB)
        return z ^ (z >> _U(31))


def _hash(values: np.ndarray, seed: int) -> np.ndarray:
    """Deterministic 63-bit hash (fits int64, so thresholds compare exactly)."""
    a = np.asarray(values).reshape(-1)
    if a.dtype.kind in "iub":
        bits = a.astype(np.int64).view(_U)
    elif a.dtype.kind == "f":
        bits = a.astype(np.float64).view(_U)
    else:
        bits = np.array([int.from_bytes(hashlib.blake2b(
            v if isinstance(v, bytes) else str(v).encode(), digest_size=8).digest(), "little")
            for v in a], dtype=_U)
    seed_mix = _splitmix64(np.array([seed & (2 ** 64 - 1)], dtype=_U))[0]
    return (_splitmix64(bits ^ seed_mix) >> _U(1)).astype(np.int64)


# ---------------------------------------------------------------------- row-keeping combiners


class _Rows:
    """Accumulator: kept rows as column arrays plus rows still being appended.

    ``threshold``: None while nothing was sampled out, else only groups with hash <=
    threshold are kept (-1 keeps none). ``sampled_out`` counts rows left out.
    """

    __slots__ = ("columns", "pending", "threshold", "sampled_out")

    def __init__(self, num_columns: int):
        self.columns: Optional[List[np.ndarray]] = None
        self.pending: List[list] = [[] for _ in range(num_columns)]
        self.threshold: Optional[int] = None
        self.sampled_out = 0

    def __getstate__(self):
        return (self.columns, self.pending, self.threshold, self.sampled_out)

    def __setstate__(self, state):
        self.columns, self.pending, self.threshold, self.sampled_out = state

    def size(self) -> int:
        kept = 0 if self.columns is None else self.columns[0].size
        return kept + len(self.pending[0])

    def flush(self) -> List[np.ndarray]:
        if self.pending[0]:
            new = [np.asarray(p) for p in self.pending]
            self.columns = new if self.columns is None else [
                np.concatenate([c, n]) for c, n in zip(self.columns, new)]
            self.pending = [[] for _ in self.pending]
        return self.columns


class _RowsCombiner(beam.CombineFn):
    """Keeps rows (columns defined by subclasses) with the bounded hash sample above."""

    num_columns = 0

    def __init__(self, keys: List[metric_types.MetricKey], reader: _Reader,
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

    def _shrink(self, acc: _Rows) -> None:
        columns = acc.flush()
        columns, acc.threshold, dropped = self._restrict(columns, acc.threshold, self._max_rows)
        acc.columns = columns
        acc.sampled_out += dropped

    # beam.CombineFn
    def create_accumulator(self) -> _Rows:
        return _Rows(self.num_columns)

    def add_input(self, acc: _Rows, element) -> _Rows:
        rows = self._rows(element)
        if acc.threshold is not None:
            keep = self._group_hash(rows) <= acc.threshold
            acc.sampled_out += int((~keep).sum())
            rows = [r[keep] for r in rows]
        for p, r in zip(acc.pending, rows):
            p.extend(r.tolist())
        if acc.size() > 2 * self._max_rows:  # hysteresis: shrink to max_rows, rarely
            self._shrink(acc)
        return acc

    def merge_accumulators(self, accumulators: Iterable[_Rows]) -> _Rows:
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

    def compact(self, acc: _Rows) -> _Rows:
        acc.flush()
        return acc

    def extract_output(self, acc: _Rows) -> Dict[metric_types.MetricKey, float]:
        columns = acc.flush()
        dropped = acc.sampled_out
        values: Dict[str, float] = {}
        if columns is not None and columns[0].size:
            columns, _, extra = self._restrict(columns, acc.threshold, self._max_rows)
            dropped += extra
            if columns[0].size:
                values = self._compute(columns)
        base = self._keys[0].name
        values[f"{base}_rows_sampled_out"] = float(dropped)
        return {k: float(values.get(k.name, float("nan"))) for k in self._keys}


class _XAUCCombiner(_RowsCombiner):
    num_columns = 2  # label, prediction

    def _rows(self, element):
        return _flat(self._reader.label(element), self._reader.prediction(element))

    def _group_hash(self, columns):
        y, p = columns[0], columns[1]
        return _hash(_hash(y, self._seed) ^ _hash(p, self._seed + 1), self._seed)

    def _compute(self, columns):
        y, p = columns
        return {self._keys[0].name: M.xauc(y, p)}


class _UserRowsCombiner(_RowsCombiner):
    """Rows (user, a, b); sampled by user so every kept user is complete."""

    num_columns = 3

    def __init__(self, keys, reader, max_rows, sample_seed, user_key: str):
        super().__init__(keys, reader, max_rows, sample_seed)
        self._user_key = user_key

    def _group_hash(self, columns):
        return _hash(columns[0], self._seed)

    def _rows(self, element):
        return _flat(self._reader.feature(element, self._user_key),
                     self._reader.label(element), self._reader.prediction(element))

    def _user_counts(self, result: Dict[str, float], value_key: str) -> Dict[str, float]:
        name = self._keys[0].name
        return {name: result[value_key],
                f"{name}_num_users_used": result["num_users_used"],
                f"{name}_num_users_skipped": result["num_users_skipped"]}


class _GAUCCombiner(_UserRowsCombiner):
    def _compute(self, columns):
        return self._user_counts(M.gauc(*columns), "gauc")


class _XGAUCCombiner(_UserRowsCombiner):
    def _compute(self, columns):
        return self._user_counts(M.xgauc(*columns), "xgauc")


class _NDCGCombiner(_UserRowsCombiner):
    def __init__(self, keys, reader, max_rows, sample_seed, user_key, k):
        super().__init__(keys, reader, max_rows, sample_seed, user_key)
        self._k = k

    def _compute(self, columns):
        return self._user_counts(M.ndcg_at_k(*columns, k=self._k), "ndcg")


class _ModelECSCombiner(_UserRowsCombiner):
    """Rows (user, item, score)."""

    def __init__(self, keys, reader, max_rows, sample_seed, user_key, item_key, k, discount):
        super().__init__(keys, reader, max_rows, sample_seed, user_key)
        self._item_key, self._k, self._discount = item_key, k, discount

    def _rows(self, element):
        return _flat(self._reader.feature(element, self._user_key),
                     self._reader.feature(element, self._item_key),
                     self._reader.prediction(element))

    def _compute(self, columns):
        user, item, score = columns
        return {self._keys[0].name: M.model_ecs(user, item, score, self._k, self._discount)}


# ---------------------------------------------------------------------- streaming combiners


class _Sums:
    """Accumulator: a vector of sums plus rows not yet reduced into it."""

    __slots__ = ("sums", "pending")

    def __init__(self, size: int, num_columns: int):
        self.sums = np.zeros(size)
        self.pending: List[list] = [[] for _ in range(num_columns)]

    def __getstate__(self):
        return (self.sums, self.pending)

    def __setstate__(self, state):
        self.sums, self.pending = state


class _SumsCombiner(beam.CombineFn):
    """Constant-memory metrics: rows are reduced to sums with the pure functions."""

    num_columns = 2
    size = 0

    def __init__(self, keys: List[metric_types.MetricKey], reader: _Reader):
        self._keys = keys
        self._reader = reader

    def _rows(self, element) -> List[np.ndarray]:
        return _flat(self._reader.label(element), self._reader.prediction(element))

    def _reduce(self, columns: List[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def _finish(self, sums: np.ndarray) -> Dict[str, float]:
        raise NotImplementedError

    def _flush(self, acc: _Sums) -> _Sums:
        if acc.pending[0]:
            acc.sums = acc.sums + self._reduce([np.asarray(p, dtype=np.float64)
                                                for p in acc.pending])
            acc.pending = [[] for _ in acc.pending]
        return acc

    def create_accumulator(self) -> _Sums:
        return _Sums(self.size, self.num_columns)

    def add_input(self, acc: _Sums, element) -> _Sums:
        for p, r in zip(acc.pending, self._rows(element)):
            p.extend(r.tolist())
        if len(acc.pending[0]) >= _FLUSH_ROWS:
            self._flush(acc)
        return acc

    def merge_accumulators(self, accumulators: Iterable[_Sums]) -> _Sums:
        out = self.create_accumulator()
        for a in accumulators:
            out.sums = out.sums + self._flush(a).sums
        return out

    def compact(self, acc: _Sums) -> _Sums:
        return self._flush(acc)

    def extract_output(self, acc: _Sums) -> Dict[metric_types.MetricKey, float]:
        sums = self._flush(acc).sums
        values = self._finish(sums) if sums[0] > 0 else {}
        return {k: float(values.get(k.name, float("nan"))) for k in self._keys}


class _NECombiner(_SumsCombiner):
    size = 3  # n, sum labels, sum logloss

    def _reduce(self, columns):
        y, p = columns
        return np.array([y.size, y.sum(), M.logloss(y, p) * y.size])

    def _finish(self, sums):
        n, pos, ll = sums
        h = M.binary_entropy(pos / n)
        return {self._keys[0].name: (ll / n) / h if h > 0 else float("nan")}


class _RMSECombiner(_SumsCombiner):
    size = 2  # n, sum squared error

    def _reduce(self, columns):
        y, p = columns
        return np.array([y.size, M.rmse(y, p) ** 2 * y.size])

    def _finish(self, sums):
        return {self._keys[0].name: float(np.sqrt(sums[1] / sums[0]))}


class _QuantileCombiner(_SumsCombiner):
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
        return np.concatenate([[y.size, M.pinball_loss(y, q, self._taus) * y.size],
                               M.quantile_coverage(y, q, self._taus) * y.size])

    def _finish(self, sums):
        n, pin, covered = sums[0], sums[1], sums[2:]
        cov = covered / n
        out = {coverage_key(t): c for t, c in zip(self._taus, cov)}
        out[self._keys[0].name] = float(np.mean(np.abs(cov - self._taus)))
        out[PINBALL_KEY] = pin / n
        return out


class _ObservedECSCombiner(beam.CombineFn):
    """Accumulator: {item id: summed label}; memory O(catalog)."""

    def __init__(self, keys, reader, item_key: str):
        self._keys, self._reader, self._item_key = keys, reader, item_key

    def create_accumulator(self) -> Dict[Any, float]:
        return {}

    def add_input(self, acc, element):
        items, w = _flat(self._reader.feature(element, self._item_key),
                         self._reader.label(element))
        for i, x in zip(items, w):
            i = _py(i)
            acc[i] = acc.get(i, 0.0) + float(x)
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


# ---------------------------------------------------------------------- computations


def _computations(name: str, extra_names: Sequence[str], features: Sequence[str],
                  make_combiner: Callable[[List[metric_types.MetricKey]], beam.CombineFn],
                  model_names, output_names, example_weighted) -> metric_types.MetricComputations:
    if example_weighted:
        raise ValueError(f"{name}: impression-weighted by definition; use "
                         "example_weights unweighted for this MetricsSpec")
    features = [f for f in dict.fromkeys(features) if f]
    preprocessors = [metric_types.FeaturePreprocessor(feature_keys=features)] if features else None
    out = []
    for model_name in model_names or [""]:
        for output_name in output_names or [""]:
            keys = [metric_types.MetricKey(name=n, model_name=model_name,
                                           output_name=output_name, example_weighted=False)
                    for n in [name, *extra_names]]
            out.append(metric_types.MetricComputation(
                keys=keys, preprocessors=preprocessors, combiner=make_combiner(keys)))
    return out


_USER_EXTRAS = ("_num_users_used", "_num_users_skipped", "_rows_sampled_out")


def _xauc_computations(name="xauc", prediction_output=None, label_key=None,
                       max_rows=DEFAULT_MAX_ROWS, sample_seed=0, model_names=None,
                       output_names=None, example_weighted=False):
    return _computations(
        name, [name + "_rows_sampled_out"], [label_key],
        lambda keys: _XAUCCombiner(keys, _Reader(keys[0], prediction_output, label_key),
                                   max_rows, sample_seed),
        model_names, output_names, example_weighted)


def _user_computations(combiner_cls, name, prediction_output, label_key, user_key,
                       max_rows, sample_seed, model_names, output_names, example_weighted,
                       **extra):
    return _computations(
        name, [name + s for s in _USER_EXTRAS], [label_key, user_key],
        lambda keys: combiner_cls(keys, _Reader(keys[0], prediction_output, label_key),
                                  max_rows, sample_seed, user_key, **extra),
        model_names, output_names, example_weighted)


def _gauc_computations(name="gauc", prediction_output=None, label_key=None,
                       user_key="user_id", max_rows=DEFAULT_MAX_ROWS, sample_seed=0,
                       model_names=None, output_names=None, example_weighted=False):
    return _user_computations(_GAUCCombiner, name, prediction_output, label_key, user_key,
                              max_rows, sample_seed, model_names, output_names,
                              example_weighted)


def _xgauc_computations(name="xgauc", prediction_output=None, label_key=None,
                        user_key="user_id", max_rows=DEFAULT_MAX_ROWS, sample_seed=0,
                        model_names=None, output_names=None, example_weighted=False):
    return _user_computations(_XGAUCCombiner, name, prediction_output, label_key, user_key,
                              max_rows, sample_seed, model_names, output_names,
                              example_weighted)


def _ndcg_computations(name=None, k=10, prediction_output=None, label_key=None,
                       user_key="user_id", max_rows=DEFAULT_MAX_ROWS, sample_seed=0,
                       model_names=None, output_names=None, example_weighted=False):
    return _user_computations(_NDCGCombiner, name or f"ndcg@{k}", prediction_output,
                              label_key, user_key, max_rows, sample_seed, model_names,
                              output_names, example_weighted, k=int(k))


def _model_ecs_computations(name=None, k=10, discount="log2", prediction_output=None,
                            user_key="user_id", item_key="video_id",
                            max_rows=DEFAULT_MAX_ROWS, sample_seed=0, model_names=None,
                            output_names=None, example_weighted=False):
    M._rank_discount(1, int(k), discount)  # validates k and discount early
    name = name or f"ecs_model@{k}"
    return _computations(
        name, [name + "_rows_sampled_out"], [user_key, item_key],
        lambda keys: _ModelECSCombiner(keys, _Reader(keys[0], prediction_output, None),
                                       max_rows, sample_seed, user_key, item_key, int(k),
                                       discount),
        model_names, output_names, example_weighted)


def _observed_ecs_computations(name="ecs_observed", label_key=None, item_key="video_id",
                               model_names=None, output_names=None, example_weighted=False):
    return _computations(
        name, [], [label_key, item_key],
        lambda keys: _ObservedECSCombiner(keys, _Reader(keys[0], None, label_key), item_key),
        model_names, output_names, example_weighted)


def _ne_computations(name="normalized_entropy", prediction_output=None, label_key=None,
                     model_names=None, output_names=None, example_weighted=False):
    return _computations(
        name, [], [label_key],
        lambda keys: _NECombiner(keys, _Reader(keys[0], prediction_output, label_key)),
        model_names, output_names, example_weighted)


def _rmse_computations(name="rmse", prediction_output=None, label_key=None,
                       model_names=None, output_names=None, example_weighted=False):
    return _computations(
        name, [], [label_key],
        lambda keys: _RMSECombiner(keys, _Reader(keys[0], prediction_output, label_key)),
        model_names, output_names, example_weighted)


def _quantile_computations(name="mean_coverage_error", num_quantiles=100,
                           prediction_output=None, label_key=None, model_names=None,
                           output_names=None, example_weighted=False):
    if int(num_quantiles) < 1:
        raise ValueError(f"num_quantiles must be >= 1, got {num_quantiles}")
    extras = [PINBALL_KEY] + [coverage_key(t) for t in quantile_levels(int(num_quantiles))]
    return _computations(
        name, extras, [label_key],
        lambda keys: _QuantileCombiner(keys, _Reader(keys[0], prediction_output, label_key),
                                       int(num_quantiles)),
        model_names, output_names, example_weighted)


# ---------------------------------------------------------------------- metric classes


class XAUC(metric_types.Metric):
    """XAUC of a watch-time prediction: concordant pairs / pairs with different labels,
    prediction ties count 1/2 (`models.metrics.xauc`). Exact up to ``max_rows`` rows per
    slice, then a hash sample with the bound in the module docstring.

    Config: ``name`` ("xauc"), ``prediction_output``, ``label_key``, ``max_rows``,
    ``sample_seed``.
    """

    def __init__(self, name: str = "xauc", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None, max_rows: int = DEFAULT_MAX_ROWS,
                 sample_seed: int = 0):
        super().__init__(_xauc_computations, name=name, prediction_output=prediction_output,
                         label_key=label_key, max_rows=max_rows, sample_seed=sample_seed)


class XGAUC(metric_types.Metric):
    """Per-user XAUC weighted by impressions, users with one label value skipped
    (`models.metrics.xgauc`); also reports users used and skipped.

    Config: ``name`` ("xgauc"), ``prediction_output``, ``label_key``, ``user_key``
    ("user_id"), ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: str = "xgauc", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None, user_key: str = "user_id",
                 max_rows: int = DEFAULT_MAX_ROWS, sample_seed: int = 0):
        super().__init__(_xgauc_computations, name=name, prediction_output=prediction_output,
                         label_key=label_key, user_key=user_key, max_rows=max_rows,
                         sample_seed=sample_seed)


class GroupAUC(metric_types.Metric):
    """GAUC = sum_u w_u AUC_u / sum_u w_u, w_u = impressions, single-class users skipped
    (`models.metrics.gauc`); ``{name}_num_users_used`` / ``_skipped`` count them.

    Config: ``name`` ("gauc"), ``prediction_output``, ``label_key``, ``user_key``
    ("user_id"), ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: str = "gauc", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None, user_key: str = "user_id",
                 max_rows: int = DEFAULT_MAX_ROWS, sample_seed: int = 0):
        super().__init__(_gauc_computations, name=name, prediction_output=prediction_output,
                         label_key=label_key, user_key=user_key, max_rows=max_rows,
                         sample_seed=sample_seed)


class UserNDCG(metric_types.Metric):
    """nDCG@k per user, averaged over users with a positive ideal DCG
    (`models.metrics.ndcg_at_k`: linear gain, tie-averaged discounts). The prediction
    is the ranking score; ``label_key`` names the gain feature (watch time or click).

    Config: ``name`` ("ndcg@{k}"), ``k`` (10), ``prediction_output``, ``label_key``,
    ``user_key`` ("user_id"), ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: Optional[str] = None, k: int = 10,
                 prediction_output: Optional[str] = None, label_key: Optional[str] = None,
                 user_key: str = "user_id", max_rows: int = DEFAULT_MAX_ROWS,
                 sample_seed: int = 0):
        super().__init__(_ndcg_computations, name=name or f"ndcg@{k}", k=k,
                         prediction_output=prediction_output, label_key=label_key,
                         user_key=user_key, max_rows=max_rows, sample_seed=sample_seed)


class ModelECS(metric_types.Metric):
    """Effective catalog size of the model's top-k (`models.metrics.model_ecs`).

    Each user's eval impressions are ranked by the prediction (the ranking score); the
    impression at rank r gets exposure ``1/log2(r+1)`` (``discount="log2"``) or 1
    (``"uniform"``) for r <= k, 0 beyond, ties averaged; ``p_i`` is item i's share of
    all exposure and ``ECS = 2 sum_i i p_i - 1`` over items sorted by share.

    Config: ``name`` ("ecs_model@{k}"), ``k`` (10), ``discount``, ``prediction_output``,
    ``user_key``, ``item_key`` ("video_id"), ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: Optional[str] = None, k: int = 10, discount: str = "log2",
                 prediction_output: Optional[str] = None, user_key: str = "user_id",
                 item_key: str = "video_id", max_rows: int = DEFAULT_MAX_ROWS,
                 sample_seed: int = 0):
        super().__init__(_model_ecs_computations, name=name or f"ecs_model@{k}", k=k,
                         discount=discount, prediction_output=prediction_output,
                         user_key=user_key, item_key=item_key, max_rows=max_rows,
                         sample_seed=sample_seed)


class ObservedECS(metric_types.Metric):
    """Effective catalog size of the eval logs: ``p_i`` = item i's share of the label
    (watch time) summed over all impressions (`models.metrics.ecs`). Independent of
    the model. Config: ``name`` ("ecs_observed"), ``label_key``, ``item_key``.
    """

    def __init__(self, name: str = "ecs_observed", label_key: Optional[str] = None,
                 item_key: str = "video_id"):
        super().__init__(_observed_ecs_computations, name=name, label_key=label_key,
                         item_key=item_key)


class NormalizedEntropy(metric_types.Metric):
    """NE = logloss / H(base click rate) (`models.metrics.ne`); constant memory.
    Config: ``name`` ("normalized_entropy"), ``prediction_output``, ``label_key``."""

    def __init__(self, name: str = "normalized_entropy",
                 prediction_output: Optional[str] = None, label_key: Optional[str] = None):
        super().__init__(_ne_computations, name=name, prediction_output=prediction_output,
                         label_key=label_key)


class RMSE(metric_types.Metric):
    """sqrt(mean (y - y_hat)^2) of expected watch time (`models.metrics.rmse`).
    Config: ``name`` ("rmse"), ``prediction_output``, ``label_key``."""

    def __init__(self, name: str = "rmse", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None):
        super().__init__(_rmse_computations, name=name, prediction_output=prediction_output,
                         label_key=label_key)


class QuantileCoverage(metric_types.Metric):
    """Coverage ``c_i = mean 1(y <= t_tau_i)`` per level tau_i = i/(N+1), the mean
    coverage error ``mean_i |c_i - tau_i|`` and the pinball loss, for a ``[B, N]``
    quantiles output (`models.metrics.quantile_coverage` and friends).

    Keys: ``{name}`` = the mean coverage error (the key thresholds apply to),
    ``pinball_loss``, ``quantile_coverage@{tau:.4f}``. Config: ``name``
    ("mean_coverage_error"), ``num_quantiles`` (100, must match the output),
    ``prediction_output``, ``label_key`` (usually "watch_time_s": the quantiles output has
    no label of its own).
    """

    def __init__(self, name: str = "mean_coverage_error", num_quantiles: int = 100,
                 prediction_output: Optional[str] = None, label_key: Optional[str] = None):
        super().__init__(_quantile_computations, name=name, num_quantiles=num_quantiles,
                         prediction_output=prediction_output, label_key=label_key)


# ---------------------------------------------------------------------- specs


_CUSTOM_METRICS = ("XAUC", "XGAUC", "GroupAUC", "UserNDCG", "ModelECS", "ObservedECS",
                   "NormalizedEntropy", "RMSE", "QuantileCoverage")


def metric_config(class_name: str, threshold: Optional[tfma.MetricThreshold] = None,
                  **config) -> tfma.MetricConfig:
    """MetricConfig for a metric of this module (``module="models.tfma_metrics"``, the
    config as JSON) or, for any other ``class_name``, the TFMA built-in of that name.
    ``threshold`` gates the overall slice only (small slices report, never block)."""
    custom = class_name in _CUSTOM_METRICS
    if not custom and not metric_types.is_registered_metric(class_name):
        raise ValueError(f"{class_name!r} is neither a metric of {MODULE} nor a TFMA metric")
    mc = tfma.MetricConfig(class_name=class_name, module=MODULE if custom else "",
                           config=json.dumps(config, sort_keys=True) if config else "")
    if threshold is not None:
        mc.per_slice_thresholds.append(tfma.PerSliceMetricThreshold(
            slicing_specs=[tfma.SlicingSpec()], threshold=threshold))
    return mc


def metrics_specs(click_output: str = "click_prob", watch_output: str = "watch_time_s",
                  ranking_output: Optional[str] = None,
                  quantiles_output: Optional[str] = None, num_quantiles: int = 100,
                  click_label: str = "is_click", watch_label: str = "watch_time_s",
                  user_key: str = "user_id", item_key: str = "video_id",
                  ndcg_k: Sequence[int] = (10,), ecs_k: int = 10,
                  max_rows: int = DEFAULT_MAX_ROWS,
                  thresholds: Optional[Mapping[str, tfma.MetricThreshold]] = None,
                  ) -> List[tfma.MetricsSpec]:
    """The model-analysis metrics, one MetricsSpec per model output.

    - ``click_output``: example_count, auc, calibration, binary_crossentropy (TFMA's
      native BinaryCrossEntropy), mean_prediction, mean_label, normalized_entropy,
      gauc (+ users used/skipped).
    - ``watch_output``: mean_absolute_error, rmse, mean_prediction, mean_label, xauc,
      xgauc, ecs_observed (of ``watch_label`` by ``item_key``).
    - ``ranking_output`` (default ``watch_output``): ndcg_watch@k and ndcg_click@k (gain
      features ``watch_label`` / ``click_label``) for each k in ``ndcg_k``, and
      ecs_model@``ecs_k``.
    - ``quantiles_output`` (None = no CQE head: skipped): mean_coverage_error,
      pinball_loss, quantile_coverage@tau for tau_i = i/(num_quantiles+1).

    ``thresholds`` maps a metric name (the key, e.g. "auc", "xauc",
    "mean_absolute_error") to a ``tfma.MetricThreshold`` on the overall slice. A name
    that is not among the metrics raises ``ValueError``.
    """
    thresholds = dict(thresholds or {})
    names = set()

    def cfg(class_name, name=None, **config):
        if name is not None:
            config["name"] = name
        mc = metric_config(class_name, **config)
        name = tfma_metric_specs.metric_instance(mc).name  # the key thresholds match
        names.add(name)
        return metric_config(class_name, thresholds.get(name), **config)

    ranking = ranking_output or watch_output
    click = [cfg("ExampleCount"), cfg("AUC"), cfg("Calibration"), cfg("BinaryCrossEntropy"),
             cfg("MeanPrediction"), cfg("MeanLabel"), cfg("NormalizedEntropy"),
             cfg("GroupAUC", user_key=user_key, max_rows=max_rows)]
    watch = [cfg("MeanAbsoluteError"), cfg("RMSE"), cfg("MeanPrediction"), cfg("MeanLabel"),
             cfg("XAUC", max_rows=max_rows),
             cfg("XGAUC", user_key=user_key, max_rows=max_rows),
             cfg("ObservedECS", label_key=watch_label, item_key=item_key)]
    rank = [cfg("UserNDCG", f"ndcg_{gain}@{k}", k=int(k), label_key=label, user_key=user_key,
                max_rows=max_rows)
            for k in ndcg_k for gain, label in (("watch", watch_label), ("click", click_label))]
    rank.append(cfg("ModelECS", f"ecs_model@{ecs_k}", k=int(ecs_k), user_key=user_key,
                    item_key=item_key, max_rows=max_rows))
    specs = [tfma.MetricsSpec(output_names=[click_output], metrics=click)]
    if ranking == watch_output:
        specs.append(tfma.MetricsSpec(output_names=[watch_output], metrics=watch + rank))
    else:
        specs.append(tfma.MetricsSpec(output_names=[watch_output], metrics=watch))
        specs.append(tfma.MetricsSpec(output_names=[ranking], metrics=rank))
    if quantiles_output:
        specs.append(tfma.MetricsSpec(output_names=[quantiles_output], metrics=[
            cfg("QuantileCoverage", num_quantiles=int(num_quantiles), label_key=watch_label)]))
    unknown = set(thresholds) - names
    if unknown:
        raise ValueError(f"thresholds for unknown metrics {sorted(unknown)}; "
                         f"known: {sorted(names)}")
    return specs
