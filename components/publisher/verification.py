"""Verification before publishing: the published model against the trained one.

Both SavedModels score the same raw eval examples through `serving_examples`:

    NE       = logloss(click, p) / H(p̄)           (He et al. 2014; models/evaluation/metrics.ne)
    NE loss  = (NE_pub − NE_trained) / NE_trained
    AUC drop = AUC_trained − AUC_pub   (click),   XAUC drop likewise (watch time)

The publish is refused when NE loss > max_ne_loss, or a drop > its bound; the reason
names the gate and the figures. The click AUC drop, paired on the same rows, also has to
exceed auc_drop_z standard errors of the difference (DeLong; metrics.auc_difference_se)
when both models' scores are at hand: few rows resolve AUC only to 1/(n_pos·n_neg).
Golden requests: raw JSON instances (as REST clients send them) replayed through
`serving_default` of both; max |Δ click_prob| is recorded.
"""
import collections.abc
import json
import zlib
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from models import features as F
from models.evaluation import metrics

BATCH = 512


class CompressedRows(collections.abc.Sequence):
    """Serialized rows held in memory zlib-compressed, in blocks of `block` rows.

    The verification rows of a 1M-row log (~180k eval rows of ~2.9 KB) are ~500 MB as
    bytes and 85 MB compressed (memray, #33). Every reader takes them in order, in slices of a batch
    (``rows[i:i + BATCH]``, ``len(rows)``), so a slice decompresses the blocks it spans
    and keeps the last one: a pass over the rows decompresses each block about once."""

    def __init__(self, rows: Iterable[bytes] = (), block: int = 1024):
        self._block, self._blocks, self._n, self._cached = int(block), [], 0, (None, None)
        pending = []
        for row in rows:
            pending.append(bytes(row))
            if len(pending) == self._block:
                self._add(pending)
                pending = []
        if pending:
            self._add(pending)

    def _add(self, rows: List[bytes]) -> None:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        self._blocks.append((zlib.compress(b"".join(rows), 1), np.concatenate([[0], np.cumsum(lengths)])))
        self._n += len(rows)

    def _rows_of_block(self, b: int) -> List[bytes]:
        if self._cached[0] != b:
            data, ends = self._blocks[b]
            raw = zlib.decompress(data)
            self._cached = (b, [raw[ends[k]:ends[k + 1]] for k in range(len(ends) - 1)])
        return self._cached[1]

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            out = []
            for b in range(start // self._block, (stop - 1) // self._block + 1 if stop > start else 0):
                lo, rows = b * self._block, self._rows_of_block(b)
                out.extend(rows[max(start - lo, 0):stop - lo])
            return out
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError(f"row {index} of {self._n}")
        return self._rows_of_block(i // self._block)[i % self._block]


def read_examples(files: List[str], limit: Optional[int] = None) -> CompressedRows:
    """Serialized raw tf.Examples (GZIP TFRecords, LogExampleGen's output) of a split, the
    first `limit`, held compressed (CompressedRows: a sequence of bytes)."""
    ds = tf.data.TFRecordDataset(files, compression_type="GZIP")
    if limit:
        ds = ds.take(int(limit))
    return CompressedRows(r for batch in ds.batch(1024).as_numpy_iterator() for r in batch)


def labels(serialized: Sequence[bytes]) -> Dict[str, np.ndarray]:
    spec = {F.LABEL_CLICK: tf.io.FixedLenFeature([], tf.int64),
            F.LABEL_WATCH: tf.io.FixedLenFeature([], tf.float32)}
    out = {F.LABEL_CLICK: [], F.LABEL_WATCH: []}
    for i in range(0, len(serialized), 4096):
        parsed = tf.io.parse_example(tf.constant(serialized[i:i + 4096]), spec)
        for k in out:
            out[k].append(parsed[k].numpy())
    return {k: np.concatenate(v).astype(np.float64) for k, v in out.items()}


def score(signatures, serialized: Sequence[bytes], outputs=("click_prob", "watch_time_s")) -> Dict[str, np.ndarray]:
    """`serving_examples` outputs of a loaded SavedModel over `serialized`, batched."""
    fn = signatures["serving_examples"]
    got = {k: [] for k in outputs}
    for i in range(0, len(serialized), BATCH):
        result = fn(examples=tf.constant(serialized[i:i + BATCH]))
        for k in outputs:
            got[k].append(result[k].numpy().reshape(-1))
    return {k: np.concatenate(v).astype(np.float64) for k, v in got.items()}


def model_metrics(y: Dict[str, np.ndarray], pred: Dict[str, np.ndarray]) -> Dict[str, float]:
    click, watch = y[F.LABEL_CLICK], y[F.LABEL_WATCH]
    return {"ne": metrics.ne(click, pred["click_prob"]), "auc": metrics.auc(click, pred["click_prob"]),
            "xauc": metrics.xauc(watch, pred["watch_time_s"]), "mae": metrics.mae(watch, pred["watch_time_s"]),
            "logloss": metrics.logloss(click, pred["click_prob"])}


def compare(trained: Dict[str, float], published: Dict[str, float], y: Optional[Dict[str, np.ndarray]] = None,
            trained_pred=None, published_pred=None) -> Dict[str, float]:
    """NE loss (relative) and the AUC / XAUC drops, MAE rise; with the labels and both
    models' predictions of the same rows also `auc_drop_se` (metrics.auc_difference_se)."""
    out = {"ne_loss": (published["ne"] - trained["ne"]) / trained["ne"],
           "auc_drop": trained["auc"] - published["auc"],
           "xauc_drop": trained["xauc"] - published["xauc"],
           "mae_rise": published["mae"] - trained["mae"]}
    if y is not None:
        out["auc_drop_se"] = metrics.auc_difference_se(y[F.LABEL_CLICK], trained_pred["click_prob"],
                                                       published_pred["click_prob"])
    return out


def gate_failures(deltas: Dict[str, float], max_ne_loss: float, max_auc_drop: float,
                  max_xauc_drop: float, auc_drop_z: float = 0.0) -> List[str]:
    """Why the publish is refused (empty: every gate passes). The AUC gate: drop ≤
    max_auc_drop, or, when deltas hold `auc_drop_se` (compare) and auc_drop_z > 0,
    drop ≤ auc_drop_z · se (PublishConfig.auc_drop_z)."""
    failures = []
    if not deltas["ne_loss"] <= max_ne_loss:
        failures.append(f"NE loss {100 * deltas['ne_loss']:.4f} % > bound {100 * max_ne_loss:.4f} %")
    se = deltas.get("auc_drop_se", float("nan"))
    within_noise = auc_drop_z > 0 and np.isfinite(se) and deltas["auc_drop"] <= auc_drop_z * se
    if not deltas["auc_drop"] <= max_auc_drop and not within_noise:
        noise = f" and {auc_drop_z:g} SE ({auc_drop_z * se:.5f})" if auc_drop_z > 0 and np.isfinite(se) else ""
        failures.append(f"click AUC drop {deltas['auc_drop']:.5f} > bound {max_auc_drop:.5f}{noise}")
    if not deltas["xauc_drop"] <= max_xauc_drop:
        failures.append(f"watch XAUC drop {deltas['xauc_drop']:.5f} > bound {max_xauc_drop:.5f}")
    return failures


def instances_to_tensors(signature, instances: List[dict]) -> Dict[str, tf.Tensor]:
    """JSON instances -> the signature's named input tensors (TF Serving's row format)."""
    specs = signature.structured_input_signature[1]
    out = {}
    for name, spec in specs.items():
        values = [inst[name] for inst in instances]
        if spec.dtype == tf.string:
            values = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
        out[name] = tf.constant(values, dtype=spec.dtype)
    return out


def golden_replay(trained_sigs, published_sigs, instances: List[dict]) -> Dict[str, float]:
    """max / mean |Δ click_prob| over raw JSON `instances` through `serving_default`."""
    if not instances:
        return {"golden_requests": 0, "golden_max_abs_delta_click_prob": None}
    instances = json.loads(json.dumps(instances))  # exactly what a REST client sends
    deltas = []
    for i in range(0, len(instances), BATCH):
        chunk = instances[i:i + BATCH]
        a = trained_sigs["serving_default"](**instances_to_tensors(trained_sigs["serving_default"], chunk))
        b = published_sigs["serving_default"](**instances_to_tensors(published_sigs["serving_default"], chunk))
        deltas.append(np.abs(a["click_prob"].numpy() - b["click_prob"].numpy()).reshape(-1))
    d = np.concatenate(deltas)
    return {"golden_requests": int(len(instances)), "golden_max_abs_delta_click_prob": float(d.max()),
            "golden_mean_abs_delta_click_prob": float(d.mean())}
