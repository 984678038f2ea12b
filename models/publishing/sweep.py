"""NE loss against pruned fraction: the trained ranker vs its published rewrites.

For each allocation a, criterion c and fraction f (allocation.py), the tables are
rewritten (rewrite.publish_tables, quantized as configured) in place on the trained
Keras ranker (then restored), and both score the same transformed rows:

    NE loss(a, c, f) = (NE_pub(a, c, f) − NE_trained) / NE_trained,
    AUC drop(a, c, f) = AUC_trained − AUC_pub(a, c, f)             (click)

In memory (no SavedModel round trip), so the Publisher's report and the benchmark can
draw the curve cheaply; the published version itself is verified from its SavedModel.
"""
import weakref
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from models import features as F
from models.evaluation import metrics
from models.publishing import rewrite
from models.publishing.config import PublishConfig

BATCH = 2048
TRACED_MIN_ROWS = 8 * BATCH  # predict traces the model from this many rows (predict's doc)
_TRANSFORM_FNS = weakref.WeakKeyDictionary()  # TFTransformOutput -> {history length: _transform_fn}


def _transform_fn(tf_transform_output, history_length: int):
    """One traced parse + transform function of a batch of serialized raw tf.Examples (the
    same ops, eagerly, cost ~4x: 7.4 vs 1.9 s for 40k rows at 0.25M simulated rows), one per
    (TFTransformOutput, history length): the sweep's rows and the eval check's share its trace."""
    by_length = _TRANSFORM_FNS.setdefault(tf_transform_output, {})
    if history_length in by_length:
        return by_length[history_length]
    spec = F.raw_feature_spec(history_length)
    layer = tf_transform_output.transform_features_layer()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def transform(batch):
        return layer(tf.io.parse_example(batch, {k: spec[k] for k in F.SERVING_RAW_FEATURES}))

    by_length[history_length] = transform
    return transform


def transformed_eval(tf_transform_output, serialized: Sequence[bytes], history_length: int, input_names) -> dict:
    """Raw serialized tf.Examples -> the model's transformed inputs (numpy), in batches of
    BATCH: for rows scored many times (the sweep's grid)."""
    transform = _transform_fn(tf_transform_output, history_length)
    parts = {k: [] for k in input_names}
    for i in range(0, len(serialized), BATCH):
        out = transform(tf.constant(serialized[i:i + BATCH]))
        for k in input_names:
            parts[k].append(out[k].numpy())
    return {k: np.concatenate(parts.pop(k)) for k in list(parts)}  # one feature's batches at a time in two copies


class TransformedRows:
    """The model's transformed inputs of serialized rows, transformed batch by batch each
    time they are read, never held whole: for rows scored once or twice (the Publisher's
    eval-split check of its candidates), where holding them costs more memory (~1.9 KB a
    row: 350 MB for the 180k eval rows of a 1M-row log) than transforming again costs time."""

    def __init__(self, tf_transform_output, serialized: Sequence[bytes], history_length: int, input_names):
        self._transform = _transform_fn(tf_transform_output, history_length)
        self._rows, self._names = serialized, list(input_names)

    def __len__(self) -> int:
        return len(self._rows)

    def batches(self) -> Iterator[dict]:
        for i in range(0, len(self._rows), BATCH):
            out = self._transform(tf.constant(self._rows[i:i + BATCH]))
            yield {k: out[k] for k in self._names}


def _num_rows(x) -> int:
    return len(x) if isinstance(x, TransformedRows) else len(next(iter(x.values())))


def _input_batches(x) -> Iterator[dict]:
    if isinstance(x, TransformedRows):
        yield from x.batches()
        return
    for i in range(0, _num_rows(x), BATCH):
        yield {k: v[i:i + BATCH] for k, v in x.items()}


def _signature(batch: dict) -> dict:
    """The TensorSpecs of a batch of inputs, any number of rows."""
    return {k: tf.TensorSpec([None, *v.shape[1:]], tf.as_dtype(v.dtype)) for k, v in batch.items()}


def predict(model, x, outputs=("click_prob", "watch_time_s")) -> Dict[str, np.ndarray]:
    """`model`'s outputs over `x`: a dict of transformed input arrays or TransformedRows.
    From TRACED_MIN_ROWS rows the model is called through one tf.function traced per call of
    predict, so it reads the tables the model holds now (the sweep rewrites them between
    calls); called eagerly, every op of every batch dispatches from Python. DIN of the 1M-row
    log: 40k rows 2.1-2.3 s eagerly, 1.56 s traced (trace included; the same outputs), its
    Pusher node 72.7 / 73.2 -> 63.2 / 63.5 s with the same report (bench_scale --node Pusher);
    but `make run`'s ~7k rows a call paid the trace for ~4 batches: Pusher 15.1 -> 17.9 s.
    From those figures a trace costs ~0.45 s and saves ~0.055 s a batch, hence eager below
    ~8 batches (an estimate; with the threshold `make run`'s Pusher took 16.3 s, as before)."""
    def score(batch):
        return model(batch, training=False)

    got = {k: [] for k in outputs}
    call = score if _num_rows(x) < TRACED_MIN_ROWS else None
    for batch in _input_batches(x):
        if call is None:
            call = tf.function(score, input_signature=[_signature(batch)])
        out = call(batch)
        for k in outputs:
            got[k].append(out[k].numpy().reshape(-1))
    return {k: np.concatenate(v).astype(np.float64) for k, v in got.items()}


def prune_sweep(model, importance, config: PublishConfig, x, click: np.ndarray, watch: np.ndarray,
                fractions: Sequence[float], criteria: Sequence[str], allocations: Sequence[str] = (),
                stop: Optional[Callable[[dict], bool]] = None,
                base: Optional[Dict[str, np.ndarray]] = None) -> List[dict]:
    """One row per (allocation, criterion, fraction): NE loss, AUC / XAUC drop, embedding
    bytes (allocations default to the config's), on `x` (transformed_eval's arrays or
    TransformedRows); with `stop`, the rows up to the first one
    for which stop(row) is true (the Publisher's eval-split check of its candidates).
    `base`: the trained model's scores of `x` when they are known (the Publisher's eval check:
    its trained SavedModel's, the reference its verification compares against), else predicted."""
    base = predict(model, x) if base is None else base
    ne0, auc0 = metrics.ne(click, base["click_prob"]), metrics.auc(click, base["click_prob"])
    xauc0 = metrics.xauc(watch, base["watch_time_s"])
    rows = []
    snapshot = rewrite.snapshot_tables(model)
    grid = [(a, c, f) for a in (allocations or [config.allocation]) for c in criteria for f in fractions]
    for allocation, criterion, fraction in grid:
        try:  # rewritten in place, then restored (a loaded model cannot be cloned)
            tables = rewrite.publish_tables(model, importance, config.replace(
                prune_fraction=float(fraction) or None, prune_threshold=None, criterion=criterion,
                allocation=allocation))
            pred = predict(model, x)
        finally:
            rewrite.restore_tables(model, snapshot)
        ne = metrics.ne(click, pred["click_prob"])
        rows.append({"allocation": allocation, "criterion": criterion, "default_row": config.default_row,
                     "fraction": float(fraction), "quantized": config.quantize,
                     "ne_loss": (ne - ne0) / ne0, "auc_drop": auc0 - metrics.auc(click, pred["click_prob"]),
                     "xauc_drop": xauc0 - metrics.xauc(watch, pred["watch_time_s"]),
                     "max_abs_delta_click_prob": float(np.abs(pred["click_prob"] - base["click_prob"]).max()),
                     **rewrite.tables_summary(tables)})
        if stop is not None and stop(rows[-1]):
            break
    return rows
