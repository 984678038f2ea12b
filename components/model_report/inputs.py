"""Reads the report's inputs into plain Python data.

One concept: turning upstream artifacts into the small, plain structures the report
and the TensorBoard writer consume (so both are testable on synthetic data):

- :func:`load_evaluation`: the Evaluator's output directory (TFMA metrics, plots,
  validation result, eval config) -> :class:`Evaluation` (metrics per slice for the
  candidate and, with a baseline, the baseline and the change; click calibration
  buckets of TFMA's ``CalibrationPlot``; the blessing gates with their values);
- :func:`read_float_feature`: one float feature of a split of an Examples artifact
  (gzipped TFRecords of tf.Examples), e.g. watch time;
- :func:`load_ead_asset`: EAD thresholds JSON (``ead_thresholds.json``) from the
  transform graph's assets, when Transform wrote one.

TFMA and TF are imported inside the functions: the dataclasses are light.
"""
from __future__ import annotations

import dataclasses
import glob
import math
import os
import re
from typing import Dict, List, Optional, Sequence

import numpy as np

from models.watch_time import ead_analyzer

OVERALL = "Overall"
CANDIDATE_MODELS = ("", "candidate")  # TFX names the models when a baseline is given
BASELINE_MODEL = "baseline"


@dataclasses.dataclass
class SliceMetrics:
    """Metrics of one slice: ``{output: {metric: value}}`` (``""`` = no output name)."""
    name: str  # "Overall" or "column=value[,column=value]"
    columns: List[str]
    values: List[str]
    metrics: Dict[str, Dict[str, float]]
    baseline: Dict[str, Dict[str, float]] = dataclasses.field(default_factory=dict)
    change: Dict[str, Dict[str, float]] = dataclasses.field(default_factory=dict)

    @property
    def column(self) -> Optional[str]:
        return ",".join(self.columns) if self.columns else None

    @property
    def value(self) -> Optional[str]:
        return ",".join(self.values) if self.values else None


@dataclasses.dataclass
class CalibrationBucket:
    """One bucket of TFMA's calibration histogram (weighted sums)."""
    lower: float
    upper: float
    count: float
    label_sum: float
    prediction_sum: float


@dataclasses.dataclass
class Gate:
    """A blessing rule on one metric of one slice and whether the candidate met it.

    ``kind`` is "value" (``lower``/``upper`` absolute bounds on ``value``) or "change"
    (``max_change`` allowed against the baseline, ``change`` = candidate - baseline,
    ``direction`` "higher_is_better" / "lower_is_better").
    """
    slice: str
    output: str
    metric: str
    kind: str
    value: Optional[float]
    baseline: Optional[float] = None
    change: Optional[float] = None
    lower: Optional[float] = None
    upper: Optional[float] = None
    max_change: Optional[float] = None
    direction: Optional[str] = None
    passed: bool = True
    message: str = ""

    def rule(self) -> str:
        """Human-readable rule, e.g. ``>= 0.55`` or ``change >= -0.01``."""
        if self.kind == "value":
            parts = []
            if self.lower is not None:
                parts.append(f">= {self.lower:g}")
            if self.upper is not None:
                parts.append(f"<= {self.upper:g}")
            return " and ".join(parts) or "(none)"
        if self.direction == "higher_is_better":
            return f"change vs baseline >= {self.max_change:g}"
        return f"change vs baseline <= {self.max_change:g}"


@dataclasses.dataclass
class Evaluation:
    """What the report needs from one Evaluator run."""
    slices: List[SliceMetrics]
    calibration: Dict[str, List[CalibrationBucket]]  # slice name -> click calibration buckets
    gates: List[Gate]
    validation_ok: bool
    has_baseline: bool

    def overall(self) -> Optional[SliceMetrics]:
        return next((s for s in self.slices if s.name == OVERALL), None)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------- TFMA output


def slice_name(columns: Sequence[str], values: Sequence[str]) -> str:
    if not columns:
        return OVERALL
    return ",".join(f"{c}={v}" for c, v in zip(columns, values))


def _slice_parts(slice_key_proto):
    columns, values = [], []
    for single in slice_key_proto.single_slice_keys:
        kind = single.WhichOneof("kind")
        value = getattr(single, kind) if kind else ""
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, float):
            value = f"{value:g}"
        columns.append(single.column)
        values.append(str(value))
    return columns, values


def _metric_name(key) -> str:
    """Metric key name, with its sub key (e.g. ``precision@1``) when it has one."""
    name = key.name
    if key.HasField("sub_key"):
        sub = key.sub_key
        if sub.HasField("top_k"):
            name = f"{name}/top_k:{sub.top_k.value}"
        elif sub.HasField("k"):
            name = f"{name}/k:{sub.k.value}"
        elif sub.HasField("class_id"):
            name = f"{name}/class_id:{sub.class_id.value}"
    return name


def _scalar(value_proto) -> Optional[float]:
    kind = value_proto.WhichOneof("type")
    if kind == "double_value":
        return float(value_proto.double_value.value)
    if kind == "bounded_value":
        return float(value_proto.bounded_value.value.value)
    return None  # arrays, confusion matrices, ...: not a scalar


def _metrics_by_slice(metrics_protos) -> List[SliceMetrics]:
    slices = []
    for m in metrics_protos:
        columns, values = _slice_parts(m.slice_key)
        out = SliceMetrics(slice_name(columns, values), columns, values, {})
        for kv in m.metric_keys_and_values:
            value = _scalar(kv.value)
            if value is None:
                continue
            key = kv.key
            name, output = _metric_name(key), key.output_name
            if key.model_name == BASELINE_MODEL:
                target = out.baseline
            elif key.model_name in CANDIDATE_MODELS:
                target = out.change if key.is_diff else out.metrics
            else:  # another model of a multi-model config: not part of this report
                continue
            target.setdefault(output, {})[name] = value
        slices.append(out)
    return sorted(slices, key=lambda s: (len(s.columns), s.columns, [value_order(v) for v in s.values]))


def value_order(text: str):
    """Sort key of a slice value: by its first number, ``<x`` before ``x..`` before ``>x``
    (so ``<15s``, ``15-30s``, ..., ``>=300s``), values without a number last by name."""
    match = re.search(r"-?\d+(?:\.\d+)?", text)
    if not match:
        return (1, math.inf, 1, text)
    rank = 0 if text.startswith("<") else 2 if text.startswith(">") else 1
    return (0, float(match.group()), rank, text)


def _calibration_by_slice(plots_protos, output: Optional[str] = None) -> Dict[str, List[CalibrationBucket]]:
    out = {}
    for p in plots_protos:
        columns, values = _slice_parts(p.slice_key)
        for kv in p.plot_keys_and_values:
            if kv.key.model_name not in CANDIDATE_MODELS or getattr(kv.key, "is_diff", False):
                continue
            if output is not None and kv.key.output_name != output:
                continue
            if not kv.value.HasField("calibration_histogram_buckets"):
                continue
            buckets = [CalibrationBucket(b.lower_threshold_inclusive, b.upper_threshold_exclusive,
                                         b.num_weighted_examples.value, b.total_weighted_label.value,
                                         b.total_weighted_refined_prediction.value)
                       for b in kv.value.calibration_histogram_buckets.buckets]
            out[slice_name(columns, values)] = buckets
    return out


def _slice_spec_name(spec) -> str:
    if spec is None or (not spec.feature_keys and not spec.feature_values):
        return OVERALL
    cols = list(spec.feature_keys) + list(spec.feature_values)
    vals = ["*"] * len(spec.feature_keys) + [spec.feature_values[k] for k in spec.feature_values]
    return slice_name(cols, vals)


def _gates(eval_config, slices: List[SliceMetrics], validation) -> List[Gate]:
    from tensorflow_model_analysis.metrics import metric_specs

    by_name = {s.name: s for s in slices}
    failures = []
    for per_slice in validation.metric_validations_per_slice:
        columns, values = _slice_parts(per_slice.slice_key)
        for f in per_slice.failures:
            failures.append((slice_name(columns, values), f.metric_key.output_name,
                             _metric_name(f.metric_key), f.metric_key.is_diff, f.message))
    gates = []
    thresholds = metric_specs.metric_thresholds_from_metrics_specs(eval_config.metrics_specs, eval_config)
    for key, slice_thresholds in thresholds.items():
        if key.model_name not in CANDIDATE_MODELS:
            continue
        for spec, threshold in slice_thresholds:
            sname = _slice_spec_name(spec)
            metrics = by_name.get(sname)
            output = key.output_name or ""
            name = key.name
            value = metrics.metrics.get(output, {}).get(name) if metrics else None
            gate = Gate(slice=sname, output=output, metric=name,
                        kind="change" if key.is_diff else "value", value=value)
            if metrics:
                gate.baseline = metrics.baseline.get(output, {}).get(name)
                gate.change = metrics.change.get(output, {}).get(name)
            if key.is_diff:
                gate.max_change = threshold.absolute.value if threshold.HasField("absolute") else None
                direction = threshold.direction
                gate.direction = "higher_is_better" if direction == 2 else "lower_is_better"  # MetricDirection
            else:
                if threshold.HasField("lower_bound"):
                    gate.lower = threshold.lower_bound.value
                if threshold.HasField("upper_bound"):
                    gate.upper = threshold.upper_bound.value
            failed = [f for f in failures if f[0] == sname and f[1] == output and f[2] == name
                      and f[3] == key.is_diff]
            gate.passed = not failed
            gate.message = "; ".join(f[4] for f in failed)
            gates.append(gate)
    gates.sort(key=lambda g: (g.slice != OVERALL, g.slice, g.output, g.metric, g.kind != "value"))
    return gates


def load_evaluation(evaluation_uri: str, calibration_output: Optional[str] = None) -> Evaluation:
    """Reads the Evaluator's output directory (TFMA metrics, plots, validation, config)."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.writers import eval_config_writer

    slices = _metrics_by_slice(tfma.load_metrics(evaluation_uri))
    try:
        plots = list(tfma.load_plots(evaluation_uri))
    except (IOError, ValueError):  # no plots file: no plot metric configured
        plots = []
    calibration = _calibration_by_slice(plots, calibration_output)
    eval_config = eval_config_writer.load_eval_run(evaluation_uri)[0]
    validation = tfma.load_validation_result(evaluation_uri)
    has_baseline = any(s.baseline for s in slices) or any(
        spec.is_baseline for spec in eval_config.model_specs)
    gates = _gates(eval_config, slices, validation)
    return Evaluation(slices=slices, calibration=calibration, gates=gates,
                      validation_ok=bool(validation.validation_ok), has_baseline=has_baseline)


def quantile_coverage(metrics: Dict[str, Dict[str, float]], prefix: str = "quantile_coverage@"
                      ) -> Dict[float, float]:
    """``{tau: empirical coverage}`` from metric names ``quantile_coverage@<tau>`` of any
    output (models.evaluation.tfma.metrics.QuantileCoverage); empty when there is no quantile head."""
    out = {}
    for by_metric in metrics.values():
        for name, value in by_metric.items():
            if name.startswith(prefix):
                try:
                    out[float(name[len(prefix):])] = float(value)
                except ValueError:
                    continue
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------- other artifacts


def blessed(blessing_artifact) -> bool:
    """The Evaluator's decision (custom property ``blessed``, else the marker file)."""
    try:
        return bool(blessing_artifact.get_int_custom_property("blessed"))
    except Exception:  # pylint: disable=broad-except
        return os.path.exists(os.path.join(blessing_artifact.uri, "BLESSED"))


def split_files(examples_uri: str, split: str) -> List[str]:
    return sorted(glob.glob(os.path.join(examples_uri, f"Split-{split}", "*")))


def read_float_feature(examples_uri: str, split: str, feature: str, max_rows: int = 200_000,
                       compression: str = "GZIP") -> np.ndarray:
    """Up to ``max_rows`` values of a scalar float feature of one split (file order)."""
    import tensorflow as tf

    files = split_files(examples_uri, split)
    if not files:
        raise FileNotFoundError(f"no files for split {split!r} under {examples_uri}")
    spec = {feature: tf.io.FixedLenFeature([], tf.float32, default_value=math.nan)}
    dataset = (tf.data.TFRecordDataset(files, compression_type=compression)
               .take(max_rows).batch(4096)
               .map(lambda s: tf.io.parse_example(s, spec)[feature]))
    chunks = [batch.numpy() for batch in dataset]
    values = np.concatenate(chunks).astype(np.float64) if chunks else np.zeros(0)
    return values[np.isfinite(values)]


def load_ead_asset(transform_graph_uri: Optional[str]) -> Optional[dict]:
    """The EAD thresholds Transform stored as an asset, or None.

    Accepts ``models.watch_time.ead.EadResult.to_json()`` (a dict with ``thresholds`` and maybe
    ``chosen``, ``beta``, ``candidates``) or a plain JSON list of thresholds.
    """
    if not transform_graph_uri:
        return None
    path = ead_analyzer.ead_asset_path(transform_graph_uri)
    if path is None:
        return None
    data = {k: v for k, v in ead_analyzer.read_ead_result(transform_graph_uri).to_dict().items() if v is not None}
    data["path"] = path
    return data
