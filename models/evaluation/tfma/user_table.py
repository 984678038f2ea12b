"""One table of eval rows per slice, shared by every per-user metric that names it.

GAUC, request GAUC, XGAUC, nDCG and the model's ECS are computed per user, so each
needs a slice's rows: (user, label, prediction), plus the time for requests and the
item for ECS. Kept by a combiner per metric, the Evaluator held the same user ids,
labels and predictions once per metric (19 columns per eval row and slice with the
pipeline's metrics, where 8 are distinct), and Beam encodes, groups and merges every
one of them (the Evaluator's memory above its model grew with the eval rows, ~2.3 KB
per row at 4M impressions, bench/results/scale_trainer_evaluator.json).

Here a per-user metric is two TFMA computations:

- a ``MetricComputation`` whose :class:`UserTableCombiner` keeps the table: the rows of
  a list of columns (:func:`column`: ``feature:NAME``, ``prediction:OUTPUT`` or
  ``label:OUTPUT``) with the user column first, exact up to ``max_rows`` rows, then the
  bottom-k hash sample *by user* of `models.evaluation.tfma.sampling` (a kept user is
  complete, so every per-user value is exact on the kept users). Its key is private
  (``_user_table:...``: TFMA drops names starting with ``_`` from the results) and names
  the columns, ``max_rows`` and the seed, so metrics configured with the same
  ``table_columns`` build identical computations and TFMA keeps one (it de-duplicates
  computations by combiner class, keys and preprocessors);
- a ``DerivedMetricComputation`` (:class:`UserMetric`) that reads its columns from the
  slice's :class:`Table` and calls the pure function of `models.evaluation.metrics`.

`models.evaluation.tfma.specs.metrics_specs` gives every per-user metric the union of
the columns they read, so one table per (model, slice) serves all of them. A metric
configured alone keeps a table of its own columns. XAUC is not per user (its sample is
by (label, prediction) group, which its error bound needs) and keeps its own combiner.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from tensorflow_model_analysis.metrics import metric_types
from tensorflow_model_analysis.metrics import metric_util

from models.evaluation import metrics as M
from models.evaluation import request_metrics as RM
from models.evaluation.tfma.inputs import Reader, flat_rows
from models.evaluation.tfma.sampling import RowsCombiner, stable_hash, widen

KINDS = ("feature", "prediction", "label")


def column(kind: str, name: str) -> str:
    """Column spec ``"{kind}:{name}"``: a feature, a model output's prediction or the
    label ModelSpec.label_keys gives that output."""
    if kind not in KINDS or not name:
        raise ValueError(f"column kind must be one of {KINDS} with a name, got {kind!r}:{name!r}")
    return f"{kind}:{name}"


def _split(spec: str):
    kind, _, name = spec.partition(":")
    if kind not in KINDS or not name:
        raise ValueError(f"column {spec!r}: expected 'feature:NAME', 'prediction:OUTPUT' or 'label:OUTPUT'")
    return kind, name


def table_columns(user_key: str, columns: Sequence[str]) -> List[str]:
    """The user column first, then the others sorted and without repeats."""
    user = column("feature", user_key)
    for spec in columns:
        _split(spec)
    return [user] + sorted(set(columns) - {user})


def features(columns: Sequence[str]) -> List[str]:
    """Feature names the columns read (for TFMA's FeaturePreprocessor)."""
    return [name for kind, name in map(_split, columns) if kind == "feature"]


def table_key(model_name: str, columns: Sequence[str], max_rows: int,
              sample_seed: int) -> metric_types.MetricKey:
    """Private (``_``) key of the table; equal arguments give equal keys."""
    name = metric_util.generate_private_name_from_arguments(
        "_user_table", columns=",".join(columns), max_rows=int(max_rows), sample_seed=int(sample_seed))
    return metric_types.MetricKey(name=name, model_name=model_name, example_weighted=False)


class Table:
    """A slice's kept rows: narrowed columns by spec; ``sampled_out`` rows left out.
    ``columns`` is None when the slice had no rows."""

    __slots__ = ("columns", "sampled_out")

    def __init__(self, columns: Optional[Dict[str, np.ndarray]], sampled_out: int):
        self.columns, self.sampled_out = columns, sampled_out

    def get(self, specs: Sequence[str]) -> Optional[List[np.ndarray]]:
        """The columns ``specs`` as float64 / int64 arrays, or None if no rows."""
        if self.columns is None:
            return None
        return widen([self.columns[s] for s in specs])


class UserTableCombiner(RowsCombiner):
    """Rows of ``columns`` (user first), sampled by user; the output is one
    :class:`Table` under the table's key."""

    def __init__(self, key: metric_types.MetricKey, columns: Sequence[str], max_rows: int,
                 sample_seed: int):
        super().__init__([key], None, max_rows, sample_seed)
        self._specs = list(columns)
        self.num_columns = len(self._specs)
        self._columns = [(kind, name, Reader(metric_types.MetricKey(
            name="", model_name=key.model_name, output_name=name), None, None))
            for kind, name in map(_split, self._specs)]

    def _rows(self, element):
        return flat_rows(*(Reader.feature(element, name) if kind == "feature" else
                           reader.prediction(element) if kind == "prediction" else reader.label(element)
                           for kind, name, reader in self._columns))

    def _group_hash(self, columns):
        return stable_hash(columns[0], self._seed)

    def _output(self, columns, dropped):
        table = None if columns is None else dict(zip(self._specs, columns))
        return {self._keys[0]: Table(table, dropped)}


class UserMetric:
    """DerivedMetricComputation result: ``fn(*columns)`` returns {key suffix: value}
    ("" for the metric itself), reported as ``{name}{suffix}`` with
    ``{name}_rows_sampled_out``; NaN for every key when the slice had no rows."""

    def __init__(self, table: metric_types.MetricKey, keys: List[metric_types.MetricKey],
                 specs: Sequence[str], fn: Callable[..., Dict[str, float]]):
        self._table, self._keys, self._specs, self._fn = table, keys, list(specs), fn

    def __call__(self, metrics: Dict[metric_types.MetricKey, object]) -> Dict[metric_types.MetricKey, float]:
        table: Table = metrics[self._table]
        columns = table.get(self._specs)
        name = self._keys[0].name
        values = {name + suffix: v for suffix, v in (
            self._fn(*columns) if columns is not None and columns[0].size else {}).items()}
        values[f"{name}_rows_sampled_out"] = float(table.sampled_out)
        return {k: float(values.get(k.name, float("nan"))) for k in self._keys}


# per-user metrics: (user, ...) columns -> {key suffix: value}; module-level, so picklable


def _users(result: Dict[str, float], value: str) -> Dict[str, float]:
    return {"": result[value], "_num_users_used": result["num_users_used"],
            "_num_users_skipped": result["num_users_skipped"]}


def gauc(user, click, p):
    return _users(M.gauc(user, click, p), "gauc")


def xgauc(user, y, p):
    return _users(M.xgauc(user, y, p), "xgauc")


def ndcg(user, gain, score, k):
    return _users(M.ndcg_at_k(user, gain, score, k=k), "ndcg")


def request_gauc(user, time_ms, click, p, window_s):
    r = RM.request_gauc(user, time_ms, click, p, window_s=window_s)
    return {"": r["request_gauc"], "_num_requests_used": r["num_requests_used"],
            "_num_requests_skipped": r["num_requests_skipped"]}


def model_ecs(user, item, score, k, discount):
    return {"": M.model_ecs(user, item, score, k, discount)}


def computations(keys: List[metric_types.MetricKey], specs: Sequence[str], user_key: str,
                 shared: Sequence[str], max_rows: int, sample_seed: int,
                 fn: Callable[..., Dict[str, float]]) -> metric_types.MetricComputations:
    """The table over ``shared`` + ``specs`` (with the user column) and the metric
    ``keys`` computed from columns ``specs`` by ``fn``."""
    columns = table_columns(user_key, [*shared, *specs])
    key = table_key(keys[0].model_name, columns, max_rows, sample_seed)
    names = features(columns)
    preprocessors = [metric_types.FeaturePreprocessor(feature_keys=names)] if names else None
    return [metric_types.MetricComputation(keys=[key], preprocessors=preprocessors,
                                           combiner=UserTableCombiner(key, columns, max_rows, sample_seed)),
            metric_types.DerivedMetricComputation(keys=keys, result=UserMetric(key, keys, specs, fn))]
