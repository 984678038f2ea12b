"""Row-wise twins of TFMA built-ins, for the Evaluator's per-slice batches.

TFMA 0.47's MeanLabel, MeanPrediction, Calibration and MeanAbsoluteError loop over an
input's (label, prediction) values in Python, one value at a time (about 70 % of the
Evaluator's metric time once inputs are batches, bench/bench_evaluator.py). ``RowMean``
has the same unweighted definitions and keys, summed with NumPy
(`models.evaluation.tfma.combiners.MeanCombiner`):

=====================  ======================  ====================================
``statistic``          default key             value
=====================  ======================  ====================================
``label``              ``mean_label``          ``sum y / n``
``prediction``         ``mean_prediction``     ``sum p / n``
``calibration``        ``calibration``         ``sum p / sum y``
``absolute_error``     ``mean_absolute_error`` ``sum |y - p| / n``
=====================  ======================  ====================================

`models.evaluation.tfma.specs.metrics_specs` (``batched=True``) uses them instead of
the built-ins; TFMA imports :data:`MODULE` for them.
"""
from __future__ import annotations

from typing import Optional

from tensorflow_model_analysis.metrics import metric_types

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


ROW_METRICS = ("RowMean",)
