"""Per-row importance of every embedding table, from the optimizer state after fitting.

For a table E ∈ R^{V×D} and its optimizer's second-moment slot S ∈ R^{V×D} (Adam `v`,
the Adagrad `accumulator`, RMSprop `rms`), per row r:

    opt_state_r   = mean_j S_{r,j}       QuickUpdate's row state (prune rows with ≈ 0,
                                         prioritise partial updates by its change)
    touch_count_r = Σ_batches #{lookups of id r}   (target ids + history ids, this run)
    l2_norm_r     = ‖E_r‖₂               FBGEMM's pruning criterion

Written beside the SavedModel in the Model artifact (`<model uri>/row_importance/`):
`row_importance.npz` (arrays `<table>/opt_state`, `<table>/touch_count`,
`<table>/l2_norm`) and `row_importance.json` (optimizer, slot, tables and rows). Tables
are the FeatureLayer's (`emb_<feature>`, `linear_<feature>`, see
models/layers/feature_layer.py); the freshness work reads the same file.

Adam decays v of every row every step (tf-keras applies dense decay even on sparse
gradients), so a row's v ≈ 0 only when its gradients were ≈ 0 for long; Adagrad's
accumulator only grows on touched rows, and LazyAdam's v (models/heads/lazy_adam.py, the
pipeline's default) changes only when the row is in a batch: it is the row's state when
last seen, 0 for a row never seen.

Example:

>>> write_row_importance(model, transformed_dataset, model_artifact_uri)
>>> imp = read_row_importance(model_artifact_uri)      # {table: {"opt_state": [V], ...}}
"""
import io
import json
import os
from typing import Dict, Iterable, Optional

import numpy as np
import tensorflow as tf

from models import features as F
from models.layers.feature_layer import CATEGORICAL, FeatureLayer

DIR_NAME = "row_importance"
NPZ_NAME = "row_importance.npz"
JSON_NAME = "row_importance.json"
CRITERIA = ("opt_state", "l2_norm", "touch_count")
# second-moment slot names: legacy `get_slot` names; new tf-keras optimizers keep lists
SLOT_NAMES = ("v", "accumulator", "rms")
SLOT_LISTS = ("_velocities", "_accumulators")


def feature_layer(model) -> FeatureLayer:
    """The ranker's one FeatureLayer (its embedding tables)."""
    found = [layer for layer in model._flatten_layers(include_self=False) if isinstance(layer, FeatureLayer)]
    if len(found) != 1:
        raise ValueError(f"expected one FeatureLayer in the model, found {len(found)}")
    return found[0]


def embedding_tables(layer: FeatureLayer) -> Dict[str, tf.Variable]:
    """{table name: variable} of the layer's embedding and first-order tables."""
    tables = {f"emb_{k}": v for k, v in getattr(layer, "tables", {}).items()}
    tables.update({f"linear_{k}": v for k, v in getattr(layer, "linear_tables", {}).items()})
    return tables


def table_feature(name: str) -> str:
    """'emb_video_id' -> 'video_id'."""
    return name.split("_", 1)[1]


def second_moment_slot(optimizer, variable) -> Optional[tf.Variable]:
    """The optimizer's second-moment state of `variable` (module docstring), or None."""
    key_fn = getattr(optimizer, "_var_key", None)
    index = getattr(optimizer, "_index_dict", None)
    if key_fn is not None and index is not None:  # tf-keras optimizer (the default since TF 2.11)
        try:
            key = key_fn(variable)
        except (AttributeError, TypeError, ValueError):  # e.g. a sharded variable: no per-table slot
            key = None
        for attr in SLOT_LISTS:
            slots = getattr(optimizer, attr, None)
            if slots and key is not None and key in index:
                return slots[index[key]]
    if hasattr(optimizer, "get_slot"):  # legacy optimizers
        for name in SLOT_NAMES:
            try:
                return optimizer.get_slot(variable, name)
            except (KeyError, ValueError, AttributeError):
                continue
    return None


def optimizer_kind(optimizer) -> str:
    """'Adam' / 'Adagrad' / ... and which slot is read."""
    kind = type(optimizer).__name__
    slot = {"Adam": "v", "LazyAdam": "v", "Adagrad": "accumulator", "RMSprop": "rms"}.get(kind, "?")
    return f"{kind}:{slot}"


def touch_counts(dataset: Iterable, num_rows: Dict[str, int]) -> Dict[str, np.ndarray]:
    """Lookups per row of every table over `dataset` ((features, labels) or features
    batches of transformed tensors): target ids + history ids (history padding masked)."""
    counts = {name: np.zeros(rows, dtype=np.int64) for name, rows in num_rows.items()}
    history_of = {target: hist for target, hist in F.HISTORY_ITEM_FEATURES.items()}
    for batch in dataset:
        features = batch[0] if isinstance(batch, tuple) else batch
        for name, c in counts.items():
            key = table_feature(name)
            ids = [np.asarray(features[F.transformed_name(key)]).reshape(-1)]
            if key in history_of:
                hist = np.asarray(features[F.transformed_name(history_of[key])])
                mask = np.asarray(features[F.transformed_name("hist_mask")]) > 0
                ids.append(hist[mask])
            all_ids = np.concatenate(ids).astype(np.int64)
            c += np.bincount(np.clip(all_ids, 0, len(c) - 1), minlength=len(c))
    return counts


def compute_row_importance(model, dataset: Optional[Iterable] = None) -> dict:
    """{"optimizer": str, "tables": {name: {"opt_state", "touch_count", "l2_norm"}}}."""
    tables = embedding_tables(feature_layer(model))
    optimizer = getattr(model, "optimizer", None)
    out = {}
    for name, var in tables.items():
        values = np.asarray(tf.convert_to_tensor(var).numpy(), dtype=np.float64)
        slot = second_moment_slot(optimizer, var) if optimizer is not None else None
        out[name] = {
            "opt_state": (np.asarray(slot.numpy(), np.float64).mean(axis=1) if slot is not None
                          else np.full(values.shape[0], np.nan)),
            "l2_norm": np.linalg.norm(values, axis=1),
        }
    if dataset is not None:
        counts = touch_counts(dataset, {n: int(t.shape[0]) for n, t in tables.items()})
        for name, c in counts.items():
            out[name]["touch_count"] = c
    return {"optimizer": optimizer_kind(optimizer) if optimizer is not None else "none", "tables": out}


def write_row_importance(model, dataset: Optional[Iterable], model_artifact_dir: str) -> str:
    """Computes and writes `<model_artifact_dir>/row_importance/` (module docstring)."""
    result = compute_row_importance(model, dataset)
    out_dir = os.path.join(model_artifact_dir, DIR_NAME)
    tf.io.gfile.makedirs(out_dir)
    arrays = {f"{t}/{k}": v for t, cols in result["tables"].items() for k, v in cols.items()}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with tf.io.gfile.GFile(os.path.join(out_dir, NPZ_NAME), "wb") as f:
        f.write(buf.getvalue())
    meta = {"optimizer": result["optimizer"], "criteria": sorted({k for c in result["tables"].values() for k in c}),
            "tables": {t: int(len(c["l2_norm"])) for t, c in result["tables"].items()},
            "categorical_features": list(CATEGORICAL)}
    with tf.io.gfile.GFile(os.path.join(out_dir, JSON_NAME), "w") as f:
        json.dump(meta, f, indent=1)
    return out_dir


def read_row_importance(model_artifact_dir: str) -> Optional[Dict[str, Dict[str, np.ndarray]]]:
    """{table: {criterion: [V]}} from `<model_artifact_dir>/row_importance/`, or None."""
    path = os.path.join(model_artifact_dir, DIR_NAME, NPZ_NAME)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "rb") as f:
        data = np.load(io.BytesIO(f.read()))
        out: Dict[str, Dict[str, np.ndarray]] = {}
        for key in data.files:
            table, criterion = key.rsplit("/", 1)
            out.setdefault(table, {})[criterion] = data[key]
    return out
