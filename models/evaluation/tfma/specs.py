"""MetricConfigs and MetricsSpecs of the model analysis (what the Evaluator runs).

:func:`metric_config` writes a custom metric as
``MetricConfig(class_name=..., module=MODULE, config=json)``; TFMA imports ``MODULE``
(`models.evaluation.tfma.metrics`, where the classes are defined) and instantiates the
class with the config. Example (what :func:`metrics_specs` builds)::

    tfma.MetricConfig(class_name="UserNDCG", module="models.evaluation.tfma.metrics",
                      config=json.dumps({"name": "ndcg_watch@10", "k": 10,
                                         "label_key": "watch_time_s"}))

Calibration (mean prediction / mean label), AUC and MAE are TFMA built-ins with the
same definitions as `models.evaluation.metrics`; :func:`metrics_specs` adds them. So are
the example count, the binary cross entropy and the means, unless ``batched``: then they
are ours (``RowCount``, ``RowBinaryCrossEntropy``, `models.evaluation.tfma.row_metrics`
``RowMean`` and ``RowAUC``: TFMA's definitions, per row, summed with NumPy), as TFMA
counts and averages the first two per ``add_input`` and loops over values for the means
and AUC's histogram, while
per-slice batches (`models.evaluation.tfma.extractors`) put many rows in one input.

TFMA 0.47 details relied on: a ``class_name`` that TFMA registers itself (``NDCG``,
``Calibration``, ...) resolves to the built-in even when ``module`` is set, so our
classes have distinct names; thresholds match the metric's ``name`` (its first key).
"""
from __future__ import annotations

import json
from typing import List, Mapping, Optional, Sequence

import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_specs as tfma_metric_specs
from tensorflow_model_analysis.metrics import metric_types

from models.evaluation.tfma import row_metrics, user_table
from models.evaluation.tfma.metrics import CUSTOM_METRICS, MODULE
from models.evaluation.tfma.sampling import DEFAULT_MAX_ROWS

# custom class name -> the module TFMA imports it from
CUSTOM_MODULES = {**{c: MODULE for c in CUSTOM_METRICS}, **{c: row_metrics.MODULE for c in row_metrics.ROW_METRICS}}


def metric_config(class_name: str, threshold: Optional[tfma.MetricThreshold] = None,
                  **config) -> tfma.MetricConfig:
    """MetricConfig for a custom metric (``module=MODULE``, the config as JSON) or, for
    any other ``class_name``, the TFMA built-in of that name.
    ``threshold`` gates the overall slice only (small slices report, never block)."""
    module = CUSTOM_MODULES.get(class_name, "")
    if not module and not metric_types.is_registered_metric(class_name):
        raise ValueError(f"{class_name!r} is neither a metric of {sorted(set(CUSTOM_MODULES.values()))} "
                         "nor a TFMA metric")
    mc = tfma.MetricConfig(class_name=class_name, module=module,
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
                  request_time_key: Optional[str] = "time_ms", request_window_s: float = 60.0,
                  ndcg_k: Sequence[int] = (10,), ecs_k: int = 10,
                  max_rows: int = DEFAULT_MAX_ROWS,
                  thresholds: Optional[Mapping[str, tfma.MetricThreshold]] = None,
                  batched: bool = False) -> List[tfma.MetricsSpec]:
    """The model-analysis metrics, one MetricsSpec per model output.

    The per-user metrics (gauc, request_gauc, xgauc, ndcg, ecs_model) share one table of
    rows per slice (`models.evaluation.tfma.user_table`) and read their labels from the
    ``click_label`` / ``watch_label`` features.

    - ``click_output``: example_count, auc, calibration, binary_crossentropy,
      mean_prediction, mean_label, normalized_entropy,
      gauc (+ users used/skipped), request_gauc (GAUC over a user's impressions within
      ``request_window_s`` seconds by the ``request_time_key`` feature; None = skipped).
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

    ``batched``: every metric is right on per-slice batches of rows (the Evaluator's
    `models.evaluation.tfma.extractors.custom_extractors`); same keys and values.
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
    count, bce = ("RowCount", "RowBinaryCrossEntropy") if batched else ("ExampleCount", "BinaryCrossEntropy")

    def mean(builtin, statistic):  # TFMA's built-in or its row-wise twin (row_metrics.RowMean)
        return cfg("RowMean", row_metrics.DEFAULT_NAMES[statistic], statistic=statistic) if batched else cfg(builtin)

    # the per-user metrics read one table per slice (models.evaluation.tfma.user_table):
    # every column any of them reads, labels as features
    table = [user_table.column("feature", f) for f in (user_key, item_key, click_label, watch_label)]
    table += [user_table.column("prediction", o) for o in (click_output, watch_output, ranking)]
    if request_time_key:
        table.append(user_table.column("feature", request_time_key))
    per_user = dict(user_key=user_key, table_columns=sorted(set(table)), max_rows=max_rows)

    click = [cfg(count), cfg("RowAUC" if batched else "AUC"), mean("Calibration", "calibration"), cfg(bce),
             mean("MeanPrediction", "prediction"), mean("MeanLabel", "label"), cfg("NormalizedEntropy"),
             cfg("GroupAUC", label_key=click_label, **per_user)]
    if request_time_key:
        click.append(cfg("RequestGAUC", label_key=click_label, time_key=request_time_key,
                         window_s=float(request_window_s), **per_user))
    watch = [mean("MeanAbsoluteError", "absolute_error"), cfg("RMSE"), mean("MeanPrediction", "prediction"),
             mean("MeanLabel", "label"),
             cfg("XAUC", max_rows=max_rows),
             cfg("XGAUC", label_key=watch_label, **per_user),
             cfg("ObservedECS", label_key=watch_label, item_key=item_key)]
    rank = [cfg("UserNDCG", f"ndcg_{gain}@{k}", k=int(k), label_key=label, **per_user)
            for k in ndcg_k for gain, label in (("watch", watch_label), ("click", click_label))]
    rank.append(cfg("ModelECS", f"ecs_model@{ecs_k}", k=int(ecs_k), item_key=item_key, **per_user))
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
