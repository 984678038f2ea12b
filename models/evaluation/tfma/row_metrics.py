"""Row-wise twins of TFMA built-ins, for the Evaluator's per-slice batches.

TFMA 0.47's MeanLabel, MeanPrediction, Calibration, MeanAbsoluteError and AUC (its
calibration histogram) loop over an input's (label, prediction) values in Python, one
value at a time (the means were about 70 % of the Evaluator's metric time once inputs
are batches, bench/bench_evaluator.py; the histogram 16 % of a 1M-row Evaluator's
samples). ``RowMean`` has the same unweighted definitions and keys, summed with NumPy
(`models.evaluation.tfma.combiners.MeanCombiner`):

=====================  ======================  ====================================
``statistic``          default key             value
=====================  ======================  ====================================
``label``              ``mean_label``          ``sum y / n``
``prediction``         ``mean_prediction``     ``sum p / n``
``calibration``        ``calibration``         ``sum p / sum y``
``absolute_error``     ``mean_absolute_error`` ``sum |y - p| / n``
=====================  ======================  ====================================

``RowAUC`` and ``RowCalibrationPlot`` are TFMA's AUC and CalibrationPlot with their
shared histogram binned by NumPy (`models.evaluation.tfma.combiners.HistogramCombiner`).
`models.evaluation.tfma.specs.metrics_specs` (``batched=True``) uses them instead of
the built-ins; TFMA imports :data:`MODULE` for them.
"""
from __future__ import annotations

from typing import Optional

from tensorflow_model_analysis.metrics import (calibration_histogram, calibration_plot, confusion_matrix_metrics,
                                               metric_types)

from models.evaluation.tfma import combiners as C
from models.evaluation.tfma.inputs import Reader
from models.evaluation.tfma.metrics import _computations

MODULE = __name__
DEFAULT_NAMES = {"label": "mean_label", "prediction": "mean_prediction", "calibration": "calibration",
                 "absolute_error": "mean_absolute_error"}


def _mean_computations(statistic="label", name=None, prediction_output=None, label_key=None,
                       model_names=None, output_names=None, example_weighted=False):
    return _computations(
        name or DEFAULT_NAMES[statistic], [], [label_key],
        lambda keys: C.MeanCombiner(keys, Reader(keys[0], prediction_output, label_key), statistic),
        model_names, output_names, example_weighted)


class RowMean(metric_types.Metric):
    """One of the means in the module docstring. Config: ``statistic`` ("label"),
    ``name`` (default by statistic), ``prediction_output``, ``label_key``."""

    def __init__(self, statistic: str = "label", name: Optional[str] = None,
                 prediction_output: Optional[str] = None, label_key: Optional[str] = None):
        if statistic not in DEFAULT_NAMES:
            raise ValueError(f"RowMean: statistic must be one of {sorted(DEFAULT_NAMES)}, got {statistic!r}")
        super().__init__(_mean_computations, statistic=statistic, name=name or DEFAULT_NAMES[statistic],
                         prediction_output=prediction_output, label_key=label_key)


def _row_histograms(computations: metric_types.MetricComputations) -> metric_types.MetricComputations:
    """``computations`` with each of TFMA's calibration-histogram combiners that reads
    plain rows (unweighted; no sub key, class weights or aggregation) replaced by
    :class:`~models.evaluation.tfma.combiners.HistogramCombiner`: same buckets, binned
    with NumPy. The computations derived from the histogram stay TFMA's."""
    out = []
    for c in computations:
        h = getattr(c, "combiner", None)  # DerivedMetricComputations have none
        if (isinstance(h, calibration_histogram._CalibrationHistogramCombiner) and not h._example_weighted
                and h._key.sub_key is None and not h._class_weights and h._aggregation_type is None):
            c = c._replace(combiner=C.HistogramCombiner(
                h._key, Reader(h._key, None, None), h._num_buckets, h._left, h._left + h._range,
                h._fractional_labels, h._prediction_based_bucketing))
        out.append(c)
    return out


class _RowHistograms:
    """A TFMA metric whose calibration histogram is binned from the rows with NumPy
    (:func:`_row_histograms`); its other computations, keys and values stay TFMA's."""

    def computations(self, *args, **kwargs) -> metric_types.MetricComputations:
        return _row_histograms(super().computations(*args, **kwargs))


class RowAUC(_RowHistograms, confusion_matrix_metrics.AUC):
    """TFMA's AUC (same config, name "auc" and value: its confusion matrices and
    summation over the same calibration histogram)."""


class RowCalibrationPlot(_RowHistograms, calibration_plot.CalibrationPlot):
    """TFMA's CalibrationPlot (same config, name and buckets, re-binned from the same
    histogram). TFMA computes a histogram once for all metrics only if their
    combiners are of one class, so AUC and the plot are twinned together."""


ROW_METRICS = ("RowMean", "RowAUC", "RowCalibrationPlot")
