"""Per-slice batches: the Evaluator's extractors without TFMA's per-example unbatching.

TFMA 0.47's default extractors predict on batches, then ``UnbatchExtractor`` splits them
into one extract per example and ``SliceKeyExtractor`` attaches that example's slice
keys; every metric combiner then runs ``add_input`` once per (example, slice): with 4
slicing specs and ~20 metrics that is ~80 Python calls per row, ~3 ms per row
(bench/bench_evaluator.py). :func:`custom_extractors` keeps the default extractors up
to and including the predictions and replaces those two stages with
:class:`SliceBatches` (stage name ``ExtractSliceKeys``, so TFMA's metrics evaluator
still runs after it): each predicted batch of B rows becomes one extract per slice it
touches, holding that slice's rows,

    batch -> {(slice key s, rows {i : s in slices(i)})},

with ``SLICE_KEY_TYPES_KEY = [s]``. Every row reaches every one of its slices exactly
once, as with per-example fan-out, so a combiner that treats its input as rows (all of
`models.evaluation.tfma.metrics`, and the built-ins :data:`BATCH_SAFE_BUILTINS`, which
loop over label/prediction values) computes the same value; the metric tests check
it against brute force through both paths.

Supported slicing: the overall slice and ``SlicingSpec(feature_keys=[...])`` with
optional ``feature_values`` on single-valued features; slice keys are built by TFMA's
own ``slicer.get_slices_for_features_dicts`` on each distinct value, so they are the
keys the default path writes. A config this does not support (SQL slices, cross
slicing, a built-in metric not known to be batch-safe, per-example transformed
features) gets TFMA's default extractors back, unchanged.

Used by the TFX Evaluator through ``module_file`` / ``module_path``: TFX calls
``custom_extractors(eval_shared_model, eval_config, tensor_adapter_config)``.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence

import apache_beam as beam
import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis import constants
from tensorflow_model_analysis.extractors import extractor as tfma_extractor
from tensorflow_model_analysis.extractors import slice_key_extractor, unbatch_extractor
from tensorflow_model_analysis.slicer import slicer_lib as slicer

from models.evaluation.tfma import predictions
from models.evaluation.tfma.specs import CUSTOM_MODULES
from models.tfrecord_crc import use_hardware_crc32c

use_hardware_crc32c()  # the Evaluator reads the examples through Beam's TFRecord reader (models/tfrecord_crc.py)

# Built-ins whose combiners sum over every (label, prediction) value of an input, so a
# batch of rows gives what its rows one by one give (TFMA 0.47: calibration.py,
# calibration_histogram.py via to_label_prediction_example_weight(flatten=True),
# mean_regression_error.py). Not ExampleCount (+1 per input) nor BinaryCrossEntropy
# (flatten=False: a mean per input): `models.evaluation.tfma.metrics` has row-wise ones.
BATCH_SAFE_BUILTINS = frozenset({
    "AUC", "Calibration", "CalibrationPlot", "MeanLabel", "MeanPrediction", "MeanAbsoluteError"})

_KEPT = (constants.FEATURES_KEY, constants.LABELS_KEY, constants.PREDICTIONS_KEY,
         constants.EXAMPLE_WEIGHTS_KEY)
SLICE_BATCHES_STAGE_NAME = slice_key_extractor.SLICE_KEY_EXTRACTOR_STAGE_NAME


def unsupported(eval_config: tfma.EvalConfig) -> List[str]:
    """Why :class:`SliceBatches` cannot serve this config (empty: it can)."""
    why = []
    if eval_config.cross_slicing_specs:
        why.append("cross_slicing_specs")
    for spec in eval_config.slicing_specs:
        if spec.slice_keys_sql:
            why.append(f"SQL slice {spec.slice_keys_sql!r}")
    options = eval_config.options
    default_metrics = not options.HasField("include_default_metrics") or options.include_default_metrics.value
    # TFMA 0.47 adds default metrics (a Keras model's compiled metrics, fed per example) only
    # for a tf_keras model; an unset model_type (or no ModelSpec) is found by loading the model
    model_types = {spec.model_type for spec in eval_config.model_specs} or {""}
    if default_metrics and model_types & {"", tfma.TF_KERAS}:
        why.append("include_default_metrics (a Keras model's compiled metrics, per example)")
    for spec in eval_config.metrics_specs:
        if spec.query_key:
            why.append(f"query_key {spec.query_key!r}")
        for mc in spec.metrics:
            if mc.class_name not in BATCH_SAFE_BUILTINS and not (
                    mc.module and CUSTOM_MODULES.get(mc.class_name) == mc.module):
                why.append(f"metric {mc.class_name!r}")
    return why


def _rows_of(value: Any, idx: np.ndarray, n: int) -> Any:
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: v for k, v in ((k, _rows_of(v, idx, n)) for k, v in value.items()) if v is not None}
    if isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == n:
        return value[idx]
    return None  # not row-aligned (ragged / sparse feature): left out


def _batch_size(extracts: Dict[str, Any]) -> int:
    for v in extracts[constants.PREDICTIONS_KEY].values() if isinstance(
            extracts[constants.PREDICTIONS_KEY], dict) else [extracts[constants.PREDICTIONS_KEY]]:
        if isinstance(v, dict):  # multi-model: {model: {output: array}}
            return _batch_size({constants.PREDICTIONS_KEY: v})
        return int(np.asarray(v).shape[0])
    raise ValueError("predictions are empty")


def _single_values(features: Dict[str, Any], key: str, n: int) -> np.ndarray:
    if key not in features:
        raise ValueError(f"slice feature {key!r} not in the eval examples (have {sorted(features)})")
    v = features[key]
    if not isinstance(v, np.ndarray) or v.shape[0] != n or v.size != n:
        raise ValueError(f"slice feature {key!r} must have exactly one value per example "
                         f"(got {type(v).__name__} of shape {getattr(v, 'shape', None)})")
    return v.reshape(n)


class _SliceBatchesFn(beam.DoFn):
    def __init__(self, specs: Sequence[tfma.SlicingSpec]):
        self._specs = list(specs)

    def setup(self):
        self._single = [slicer.SingleSliceSpec(spec=s) for s in self._specs]

    def process(self, extracts: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        n = _batch_size(extracts)
        base = {k: extracts[k] for k in _KEPT if k in extracts}
        features = extracts.get(constants.FEATURES_KEY) or {}
        seen = set()  # a slice key two specs produce holds the same rows: once, as TFMA dedups
        for spec, single in zip(self._specs, self._single):
            keys = list(spec.feature_keys) + sorted(spec.feature_values)
            if not keys:
                if () not in seen:
                    seen.add(())
                    yield self._emit(base, np.arange(n), n, ())
                continue
            cols = [_single_values(features, k, n) for k in keys]
            codes = []  # per column: index of each row's value among the column's distinct values
            for c in cols:
                uniq, inverse = np.unique(c, return_inverse=True)
                codes.append((uniq, inverse.reshape(-1)))
            combo_of_row = np.zeros(n, dtype=np.int64)
            for uniq, inverse in codes:
                combo_of_row = combo_of_row * uniq.size + inverse
            for combo in np.unique(combo_of_row):
                rows = np.flatnonzero(combo_of_row == combo)
                first = rows[0]
                one = {k: c[first:first + 1] for k, c in zip(keys, cols)}  # TFMA builds the key
                for slice_key in slicer.get_slices_for_features_dicts([], one, [single]):
                    if slice_key not in seen:
                        seen.add(slice_key)
                        yield self._emit(base, rows, n, slice_key)

    @staticmethod
    def _emit(base, idx, n, slice_key):
        out = {k: _rows_of(v, idx, n) for k, v in base.items()}
        out[constants.SLICE_KEY_TYPES_KEY] = slicer.slice_keys_to_numpy_array([slice_key])
        return out


def SliceBatches(eval_config: tfma.EvalConfig) -> tfma_extractor.Extractor:  # noqa: N802 (TFMA style)
    """Extractor: one extract per (predicted batch, slice), see the module docstring."""
    specs = list(eval_config.slicing_specs) or [tfma.SlicingSpec()]
    return tfma_extractor.Extractor(stage_name=SLICE_BATCHES_STAGE_NAME,
                                    ptransform=beam.ParDo(_SliceBatchesFn(specs)))


def custom_extractors(eval_shared_model, eval_config: tfma.EvalConfig,
                      tensor_adapter_config=None) -> Optional[List[tfma_extractor.Extractor]]:
    """The TFX Evaluator's ``custom_extractors`` hook: TFMA's default extractors with
    the unbatching and per-example slicing replaced by :func:`SliceBatches` (the defaults
    when :func:`unsupported` names a reason), and in both cases the predictions of
    ``predictions.PredictionsExtractor`` (signatures called by keyword)."""
    defaults = tfma.default_extractors(eval_shared_model=eval_shared_model, eval_config=eval_config,
                                       tensor_adapter_config=tensor_adapter_config)
    if eval_shared_model is not None:  # signatures called by keyword (predictions.py)
        defaults = [predictions.PredictionsExtractor(eval_config, eval_shared_model)
                    if x.stage_name == predictions.STAGE_NAME else x for x in defaults]
    if unsupported(eval_config):
        return defaults
    per_example = {unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME, SLICE_BATCHES_STAGE_NAME}
    return [x for x in defaults if x.stage_name not in per_example] + [SliceBatches(eval_config)]
