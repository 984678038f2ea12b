"""The custom TFMA metrics: ``metric_types.Metric`` classes and their computations.

Each class is a ``tfma`` Metric whose ``*_computations`` function builds one
``MetricComputation`` per (model, output) with a combiner of
`models.evaluation.tfma.combiners` (per-user metrics: a table and a derived
computation, below); TFMA instantiates it from
``MetricConfig(class_name=..., module=MODULE, config=json)``, where :data:`MODULE`
is this module (see `models.evaluation.tfma.specs`).

Metrics (class name -> metric keys; ``{name}`` is the config's ``name``)
------------------------------------------------------------------------
=================  =======================================================  ==========
class              keys                                                     state
=================  =======================================================  ==========
XAUC               ``{name}``, ``{name}_rows_sampled_out``                  rows*
XGAUC              ``{name}``, ``{name}_num_users_used``,                   user table*
                   ``{name}_num_users_skipped``, ``{name}_rows_sampled_out``
GroupAUC           same four keys as XGAUC (GAUC of clicks)                 user table*
RequestGAUC        ``{name}``, ``{name}_num_requests_used``,                user table*
                   ``{name}_num_requests_skipped``, ``{name}_rows_sampled_out``
UserNDCG           same four keys (users with IDCG = 0 are skipped)         user table*
ModelECS           ``{name}``, ``{name}_rows_sampled_out``                  user table*
ObservedECS        ``{name}``                                               sum per item
NormalizedEntropy  ``{name}``                                               3 sums
RowCount           ``{name}`` ("example_count")                             1 sum
RowBinaryCrossEntropy ``{name}`` ("binary_crossentropy")                    2 sums
RMSE               ``{name}``                                               2 sums
QuantileCoverage   ``{name}`` (mean coverage error), ``pinball_loss``,      N+2 sums
                   ``quantile_coverage@{tau:.4f}`` per level
=================  =======================================================  ==========

``*``: exact up to ``max_rows`` rows per slice (default 2,000,000), then a
deterministic hash sample with the error bounds of `models.evaluation.tfma.sampling`.
The per-user metrics read one table of rows per slice
(`models.evaluation.tfma.user_table`): a private computation over ``table_columns``
(column specs ``feature:NAME`` / ``prediction:OUTPUT`` / ``label:OUTPUT``; default
none) plus the metric's own columns, which TFMA computes once for all metrics that
name the same columns, ``max_rows`` and ``sample_seed``, then one derived computation
per metric.

Config args (each where it applies): ``prediction_output`` (model output to score;
default the MetricsSpec output name), ``label_key`` (*feature* holding the label or
gain; default the label ``ModelSpec.label_keys`` gives that output), ``user_key`` /
``item_key`` (features with the user id and the item id; defaults ``user_id`` and
``video_id``); see `models.evaluation.tfma.inputs`. So ranking metrics evaluate one
ranking score with any gain: put them in the spec of the ranking output and name the
gain feature.

These metrics are impression-weighted by definition; a MetricsSpec with
``example_weights.weighted`` raises ``ValueError``.
"""
from __future__ import annotations

import functools
from typing import Callable, List, Optional, Sequence

import apache_beam as beam
from tensorflow_model_analysis.metrics import metric_types

from models.evaluation import grouped as G
from models.evaluation.tfma import combiners as C
from models.evaluation.tfma import user_table as UT
from models.evaluation.tfma.inputs import Reader
from models.evaluation.tfma.sampling import DEFAULT_MAX_ROWS
from models.watch_time.cqe import quantile_levels

MODULE = __name__  # the MetricConfig.module TFMA imports the classes below from

# ---------------------------------------------------------------------- computations


def _keys_per_output(name: str, extra_names: Sequence[str], model_names, output_names,
                     example_weighted):
    """(output name, the metric keys ``name`` + ``extra_names``) per model and output."""
    if example_weighted:
        raise ValueError(f"{name}: impression-weighted by definition; use "
                         "example_weights unweighted for this MetricsSpec")
    for model_name in model_names or [""]:
        for output_name in output_names or [""]:
            yield output_name, [metric_types.MetricKey(name=n, model_name=model_name,
                                                       output_name=output_name, example_weighted=False)
                                for n in [name, *extra_names]]


def _computations(name: str, extra_names: Sequence[str], features: Sequence[str],
                  make_combiner: Callable[[List[metric_types.MetricKey]], beam.CombineFn],
                  model_names, output_names, example_weighted) -> metric_types.MetricComputations:
    features = [f for f in dict.fromkeys(features) if f]
    preprocessors = [metric_types.FeaturePreprocessor(feature_keys=features)] if features else None
    return [metric_types.MetricComputation(keys=keys, preprocessors=preprocessors,
                                           combiner=make_combiner(keys))
            for _, keys in _keys_per_output(name, extra_names, model_names, output_names,
                                            example_weighted)]


def _xauc_computations(name="xauc", prediction_output=None, label_key=None,
                       max_rows=DEFAULT_MAX_ROWS, sample_seed=0, model_names=None,
                       output_names=None, example_weighted=False):
    return _computations(
        name, [name + "_rows_sampled_out"], [label_key],
        lambda keys: C.XAUCCombiner(keys, Reader(keys[0], prediction_output, label_key),
                                    max_rows, sample_seed),
        model_names, output_names, example_weighted)


def _user_computations(name, extra_names, specs, fn, user_key, table_columns, max_rows,
                       sample_seed, model_names, output_names, example_weighted):
    """A per-user metric: the shared table (`models.evaluation.tfma.user_table`) over
    ``table_columns`` + its columns ``specs`` ((kind, name) pairs; a None name stands for
    the MetricsSpec's output) and ``fn`` over those columns."""
    out = []
    for output_name, keys in _keys_per_output(name, extra_names, model_names, output_names,
                                              example_weighted):
        columns = [UT.column(kind, value or output_name) for kind, value in specs]
        out += UT.computations(keys, columns, user_key, table_columns or [], max_rows,
                               sample_seed, fn)
    return out


_USER_EXTRAS = ("_num_users_used", "_num_users_skipped", "_rows_sampled_out")


def _label(label_key):
    """Column of the label: the feature ``label_key``, else the output's own label."""
    return ("feature", label_key) if label_key else ("label", None)


def _per_user_label_prediction(name, fn, prediction_output, label_key, user_key, table_columns,
                               max_rows, sample_seed, model_names, output_names, example_weighted):
    """A per-user metric ``fn(user, label, prediction)`` with the users used / skipped keys."""
    return _user_computations(
        name, [name + s for s in _USER_EXTRAS],
        [("feature", user_key), _label(label_key), ("prediction", prediction_output)],
        fn, user_key, table_columns, max_rows, sample_seed, model_names, output_names,
        example_weighted)


def _gauc_computations(name="gauc", prediction_output=None, label_key=None,
                       user_key="user_id", table_columns=None, max_rows=DEFAULT_MAX_ROWS,
                       sample_seed=0, model_names=None, output_names=None,
                       example_weighted=False):
    return _per_user_label_prediction(name, UT.gauc, prediction_output, label_key, user_key,
                                      table_columns, max_rows, sample_seed, model_names,
                                      output_names, example_weighted)


def _request_gauc_computations(name="request_gauc", prediction_output=None, label_key=None,
                               user_key="user_id", time_key="time_ms", window_s=60.0,
                               table_columns=None, max_rows=DEFAULT_MAX_ROWS, sample_seed=0,
                               model_names=None, output_names=None, example_weighted=False):
    if not float(window_s) > 0:
        raise ValueError(f"RequestGAUC: window_s must be > 0, got {window_s!r}")
    return _user_computations(
        name, [name + s for s in ("_num_requests_used", "_num_requests_skipped", "_rows_sampled_out")],
        [("feature", user_key), ("feature", time_key), _label(label_key),
         ("prediction", prediction_output)],
        functools.partial(UT.request_gauc, window_s=float(window_s)), user_key, table_columns,
        max_rows, sample_seed, model_names, output_names, example_weighted)


def _xgauc_computations(name="xgauc", prediction_output=None, label_key=None,
                        user_key="user_id", table_columns=None, max_rows=DEFAULT_MAX_ROWS,
                        sample_seed=0, model_names=None, output_names=None,
                        example_weighted=False):
    return _per_user_label_prediction(name, UT.xgauc, prediction_output, label_key, user_key,
                                      table_columns, max_rows, sample_seed, model_names,
                                      output_names, example_weighted)


def _ndcg_computations(name=None, k=10, prediction_output=None, label_key=None,
                       user_key="user_id", table_columns=None, max_rows=DEFAULT_MAX_ROWS,
                       sample_seed=0, model_names=None, output_names=None,
                       example_weighted=False):
    return _per_user_label_prediction(name or f"ndcg@{k}", functools.partial(UT.ndcg, k=int(k)),
                                      prediction_output, label_key, user_key, table_columns,
                                      max_rows, sample_seed, model_names, output_names,
                                      example_weighted)


def _model_ecs_computations(name=None, k=10, discount="log2", prediction_output=None,
                            user_key="user_id", item_key="video_id", table_columns=None,
                            max_rows=DEFAULT_MAX_ROWS, sample_seed=0, model_names=None,
                            output_names=None, example_weighted=False):
    G.rank_discount(1, int(k), discount)  # validates k and discount early
    name = name or f"ecs_model@{k}"
    return _user_computations(
        name, [name + "_rows_sampled_out"],
        [("feature", user_key), ("feature", item_key), ("prediction", prediction_output)],
        functools.partial(UT.model_ecs, k=int(k), discount=discount), user_key, table_columns,
        max_rows, sample_seed, model_names, output_names, example_weighted)


def _observed_ecs_computations(name="ecs_observed", label_key=None, item_key="video_id",
                               model_names=None, output_names=None, example_weighted=False):
    return _computations(
        name, [], [label_key, item_key],
        lambda keys: C.ObservedECSCombiner(keys, Reader(keys[0], None, label_key), item_key),
        model_names, output_names, example_weighted)


def _row_computations(name, combiner, prediction_output=None, label_key=None, model_names=None,
                      output_names=None, example_weighted=False):
    """A combiner of `C` (by class name: NECombiner, BCECombiner, RMSECombiner, CountCombiner)
    over one output's rows, with no extra metrics: NE, binary cross entropy, RMSE, row count."""
    combiner_cls = getattr(C, combiner)
    return _computations(
        name, [], [label_key],
        lambda keys: combiner_cls(keys, Reader(keys[0], prediction_output, label_key)),
        model_names, output_names, example_weighted)


def _quantile_computations(name="mean_coverage_error", num_quantiles=100,
                           prediction_output=None, label_key=None, model_names=None,
                           output_names=None, example_weighted=False):
    taus = quantile_levels(num_quantiles)  # validates num_quantiles (integer >= 2)
    extras = [C.PINBALL_KEY] + [C.coverage_key(t) for t in taus]
    return _computations(
        name, extras, [label_key],
        lambda keys: C.QuantileCombiner(keys, Reader(keys[0], prediction_output, label_key),
                                        int(num_quantiles)),
        model_names, output_names, example_weighted)


# ---------------------------------------------------------------------- metric classes


class XAUC(metric_types.Metric):
    """XAUC of a watch-time prediction: concordant pairs / pairs with different labels,
    prediction ties count 1/2 (`models.evaluation.metrics.xauc`). Exact up to
    ``max_rows`` rows per slice, then a hash sample with the bound in
    `models.evaluation.tfma.sampling`.

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
    (`models.evaluation.metrics.xgauc`); also reports users used and skipped.

    Config: ``name`` ("xgauc"), ``prediction_output``, ``label_key``, ``user_key``
    ("user_id"), ``table_columns``, ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: str = "xgauc", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None, user_key: str = "user_id",
                 table_columns: Optional[Sequence[str]] = None,
                 max_rows: int = DEFAULT_MAX_ROWS, sample_seed: int = 0):
        super().__init__(_xgauc_computations, name=name, prediction_output=prediction_output,
                         label_key=label_key, user_key=user_key, table_columns=list(table_columns or []), max_rows=max_rows,
                         sample_seed=sample_seed)


class GroupAUC(metric_types.Metric):
    """GAUC = sum_u w_u AUC_u / sum_u w_u, w_u = impressions, single-class users skipped
    (`models.evaluation.metrics.gauc`); ``{name}_num_users_used`` / ``_skipped`` count
    them.

    Config: ``name`` ("gauc"), ``prediction_output``, ``label_key``, ``user_key``
    ("user_id"), ``table_columns``, ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: str = "gauc", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None, user_key: str = "user_id",
                 table_columns: Optional[Sequence[str]] = None,
                 max_rows: int = DEFAULT_MAX_ROWS, sample_seed: int = 0):
        super().__init__(_gauc_computations, name=name, prediction_output=prediction_output,
                         label_key=label_key, user_key=user_key, table_columns=list(table_columns or []), max_rows=max_rows,
                         sample_seed=sample_seed)


class RequestGAUC(metric_types.Metric):
    """GAUC over requests: a request is a user's impressions within the same window of
    ``window_s`` seconds, ``(user, floor(time_ms / 1000 W))``; requests with one click
    class are skipped (`models.evaluation.request_metrics.request_gauc`). The candidates
    of one request share one user state, so this is the within-request ranking quality
    that per-user GAUC blurs with the drift of running user statistics.

    Config: ``name`` ("request_gauc"), ``prediction_output``, ``label_key``,
    ``user_key`` ("user_id"), ``time_key`` ("time_ms"), ``window_s`` (60),
    ``table_columns``, ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: str = "request_gauc", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None, user_key: str = "user_id",
                 time_key: str = "time_ms", window_s: float = 60.0,
                 table_columns: Optional[Sequence[str]] = None,
                 max_rows: int = DEFAULT_MAX_ROWS, sample_seed: int = 0):
        super().__init__(_request_gauc_computations, name=name,
                         prediction_output=prediction_output, label_key=label_key,
                         user_key=user_key, time_key=time_key, window_s=window_s,
                         table_columns=list(table_columns or []), max_rows=max_rows, sample_seed=sample_seed)


class UserNDCG(metric_types.Metric):
    """nDCG@k per user, averaged over users with a positive ideal DCG
    (`models.evaluation.metrics.ndcg_at_k`: linear gain, tie-averaged discounts). The
    prediction is the ranking score; ``label_key`` names the gain feature (watch time
    or click).

    Config: ``name`` ("ndcg@{k}"), ``k`` (10), ``prediction_output``, ``label_key``,
    ``user_key`` ("user_id"), ``table_columns``, ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: Optional[str] = None, k: int = 10,
                 prediction_output: Optional[str] = None, label_key: Optional[str] = None,
                 user_key: str = "user_id", table_columns: Optional[Sequence[str]] = None,
                 max_rows: int = DEFAULT_MAX_ROWS,
                 sample_seed: int = 0):
        super().__init__(_ndcg_computations, name=name or f"ndcg@{k}", k=k,
                         prediction_output=prediction_output, label_key=label_key,
                         user_key=user_key, table_columns=list(table_columns or []), max_rows=max_rows, sample_seed=sample_seed)


class ModelECS(metric_types.Metric):
    """Effective catalog size of the model's top-k (`models.evaluation.metrics.model_ecs`).

    Each user's eval impressions are ranked by the prediction (the ranking score); the
    impression at rank r gets exposure ``1/log2(r+1)`` (``discount="log2"``) or 1
    (``"uniform"``) for r <= k, 0 beyond, ties averaged; ``p_i`` is item i's share of
    all exposure and ``ECS = 2 sum_i i p_i - 1`` over items sorted by share.

    Config: ``name`` ("ecs_model@{k}"), ``k`` (10), ``discount``, ``prediction_output``,
    ``user_key``, ``item_key`` ("video_id"), ``table_columns``, ``max_rows``, ``sample_seed``.
    """

    def __init__(self, name: Optional[str] = None, k: int = 10, discount: str = "log2",
                 prediction_output: Optional[str] = None, user_key: str = "user_id",
                 item_key: str = "video_id", table_columns: Optional[Sequence[str]] = None,
                 max_rows: int = DEFAULT_MAX_ROWS,
                 sample_seed: int = 0):
        super().__init__(_model_ecs_computations, name=name or f"ecs_model@{k}", k=k,
                         discount=discount, prediction_output=prediction_output,
                         user_key=user_key, item_key=item_key, table_columns=list(table_columns or []), max_rows=max_rows,
                         sample_seed=sample_seed)


class ObservedECS(metric_types.Metric):
    """Effective catalog size of the eval logs: ``p_i`` = item i's share of the label
    (watch time) summed over all impressions (`models.evaluation.metrics.ecs`).
    Independent of the model. Config: ``name`` ("ecs_observed"), ``label_key``,
    ``item_key``.
    """

    def __init__(self, name: str = "ecs_observed", label_key: Optional[str] = None,
                 item_key: str = "video_id"):
        super().__init__(_observed_ecs_computations, name=name, label_key=label_key,
                         item_key=item_key)


class NormalizedEntropy(metric_types.Metric):
    """NE = logloss / H(base click rate) (`models.evaluation.metrics.ne`); constant
    memory. Config: ``name`` ("normalized_entropy"), ``prediction_output``,
    ``label_key``."""

    def __init__(self, name: str = "normalized_entropy",
                 prediction_output: Optional[str] = None, label_key: Optional[str] = None):
        super().__init__(_row_computations, name=name, combiner="NECombiner",
                         prediction_output=prediction_output, label_key=label_key)


class RowCount(metric_types.Metric):
    """Rows (values of the output) in the slice: TFMA's unweighted ``ExampleCount``
    (``example_count``), counted per row, so it is right on per-slice batches
    (`models.evaluation.tfma.extractors`). Config: ``name``, ``prediction_output``."""

    def __init__(self, name: str = "example_count", prediction_output: Optional[str] = None):
        super().__init__(_row_computations, name=name, combiner="CountCombiner",
                         prediction_output=prediction_output)


class RowBinaryCrossEntropy(metric_types.Metric):
    """``mean -(y log p + (1 - y) log(1 - p))`` over rows, unclipped: TFMA's
    ``BinaryCrossEntropy`` (``binary_crossentropy``) averaged per row, so it is right on
    per-slice batches. Config: ``name``, ``prediction_output``, ``label_key``."""

    def __init__(self, name: str = "binary_crossentropy", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None):
        super().__init__(_row_computations, name=name, combiner="BCECombiner",
                         prediction_output=prediction_output, label_key=label_key)


class RMSE(metric_types.Metric):
    """sqrt(mean (y - y_hat)^2) of expected watch time (`models.evaluation.metrics.rmse`).
    Config: ``name`` ("rmse"), ``prediction_output``, ``label_key``."""

    def __init__(self, name: str = "rmse", prediction_output: Optional[str] = None,
                 label_key: Optional[str] = None):
        super().__init__(_row_computations, name=name, combiner="RMSECombiner",
                         prediction_output=prediction_output, label_key=label_key)


class QuantileCoverage(metric_types.Metric):
    """Coverage ``c_i = mean 1(y <= t_tau_i)`` per level tau_i = i/(N+1)
    (`models.watch_time.cqe.quantile_levels`), the mean coverage error
    ``mean_i |c_i - tau_i|`` and the pinball loss, for a ``[B, N]`` quantiles output
    (`models.evaluation.quantile_metrics.quantile_coverage` and friends).

    Keys: ``{name}`` = the mean coverage error (the key thresholds apply to),
    ``pinball_loss``, ``quantile_coverage@{tau:.4f}``. Config: ``name``
    ("mean_coverage_error"), ``num_quantiles`` (100, an integer >= 2 that must match
    the output), ``prediction_output``, ``label_key`` (usually "watch_time_s": the
    quantiles output has no label of its own).
    """

    def __init__(self, name: str = "mean_coverage_error", num_quantiles: int = 100,
                 prediction_output: Optional[str] = None, label_key: Optional[str] = None):
        super().__init__(_quantile_computations, name=name, num_quantiles=num_quantiles,
                         prediction_output=prediction_output, label_key=label_key)


CUSTOM_METRICS = ("XAUC", "XGAUC", "GroupAUC", "RequestGAUC", "UserNDCG", "ModelECS", "ObservedECS",
                  "NormalizedEntropy", "RMSE", "QuantileCoverage", "RowCount", "RowBinaryCrossEntropy")
