"""Warm start: the next Trainer run continues from the previous model's weights AND optimizer state.

run_fn saves, beside the SavedModel in the Model artifact, ``<model uri>/warm_start/``:

- ``state.npz``: ``w/<i>`` = ``model.weights[i]`` (trainable and not, e.g. Dice/BN moving
  averages), ``s/<slot>/<t>`` = the optimizer slot ``<slot>`` (Adam ``_momentums`` /
  ``_velocities``, Adagrad ``_accumulators``) of ``model.trainable_variables[t]``, ``iterations``;
- ``state.json``: weight names and shapes, slot lists, optimizer class, and per embedding
  table (``emb_<f>`` / ``linear_<f>``, models/layers/feature_layer.py) its vocabulary name;
- ``vocab/<vocabulary name>``: the vocabulary files (one token a line) the tables were indexed with.

``restore(model, warm_dir, vocabularies, oov_buckets)`` (before ``fit``) copies every weight
whose name and shape match; an embedding table is remapped row by row **by vocabulary
token** (keras' ``warmstart_embedding_matrix`` idea), since a full run's new Transform may
reorder or grow the vocabularies. Table layout: row 0 = padding, rows ``1..V`` = the
vocabulary in file order, rows ``V+1..V+oov`` = OOV hash buckets, so::

    new[0] = old[0];  new[1 + i] = old[1 + j] if new_vocab[i] == old_vocab[j];
    new[1 + V_new + b] = old[1 + V_old + b]   (b < oov_buckets)
    a token new to the vocabulary keeps its fresh initial row (slots: zeros).

The optimizer's slots get the same mapping (the optimizer is built first), and its step
count is restored, so Adam's bias correction continues. Between full runs the vocabularies
do not change (the pipeline reuses the latest transform graph), every row maps to itself
and deltas stay addressable; new ids then fall into the OOV buckets until the next full run.

Lineage (#35): ``warm_start/origin.json`` = {"warm_started_from": the Model artifact URI this
model's weights continued from, or null when it trained cold (no base model, or the restore
was skipped)}. ``lineage(uri)`` follows it: [uri, its origin, the origin's origin, ...]. The
Publisher sends a delta only when the served version's model is in the trained model's
lineage (components/publisher/freshness.py); a cold model is unrelated to what serves.
"""
import io
import json
import os
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from models import features as F
from models.publishing.row_importance import embedding_tables, feature_layer, table_feature

DIR_NAME = "warm_start"
ORIGIN_FILE = "origin.json"
MAX_LINEAGE = 1000  # hops followed by lineage(): far more runs than any serving history keeps
SLOT_LISTS = ("_momentums", "_velocities", "_velocity_hats", "_accumulators")


def _slot_lists(optimizer) -> Dict[str, list]:
    return {name: getattr(optimizer, name) for name in SLOT_LISTS if getattr(optimizer, name, None)}


def _slot_of(optimizer, slots: list, variable):
    return slots[optimizer._index_dict[optimizer._var_key(variable)]]  # tf-keras optimizer layout


def _table_vocabs(model) -> Dict[str, str]:
    """{weight name: vocabulary name} of the embedding tables."""
    return {var.name: F.vocab_name(table_feature(name)) for name, var in embedding_tables(feature_layer(model)).items()
            if table_feature(name) in F.ID_FEATURES + F.STRING_FEATURES}


def read_vocabularies(tf_transform_output) -> Dict[str, List[bytes]]:
    """{vocabulary name: tokens in index order} of every categorical feature's vocabulary."""
    names = sorted({F.vocab_name(k) for k in F.ID_FEATURES + F.STRING_FEATURES})
    return {n: [t if isinstance(t, bytes) else str(t).encode() for t in
                tf_transform_output.vocabulary_by_name(n)] for n in names}


def save(model, vocabularies: Dict[str, List[bytes]], model_artifact_dir: str) -> str:
    """Writes ``<model_artifact_dir>/warm_start/`` (module doc); returns the directory."""
    out = os.path.join(model_artifact_dir, DIR_NAME)
    tf.io.gfile.makedirs(os.path.join(out, "vocab"))
    optimizer = model.optimizer
    arrays = {f"w/{i}": np.asarray(v.numpy()) for i, v in enumerate(model.weights)}
    slots = _slot_lists(optimizer)
    try:
        for slot_name, slot_vars in slots.items():
            for t, var in enumerate(model.trainable_variables):
                arrays[f"s/{slot_name}/{t}"] = np.asarray(_slot_of(optimizer, slot_vars, var).numpy())
    except (AttributeError, KeyError, TypeError, ValueError):  # e.g. sharded variables: weights only
        arrays = {k: v for k, v in arrays.items() if not k.startswith("s/")}
        slots = {}
    arrays["iterations"] = np.asarray(int(optimizer.iterations.numpy()))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with tf.io.gfile.GFile(os.path.join(out, "state.npz"), "wb") as f:
        f.write(buf.getvalue())
    meta = {"optimizer": type(optimizer).__name__, "slots": sorted(slots),
            "weights": [[v.name, list(v.shape)] for v in model.weights],
            "trainable": [v.name for v in model.trainable_variables], "tables": _table_vocabs(model)}
    with tf.io.gfile.GFile(os.path.join(out, "state.json"), "w") as f:
        json.dump(meta, f, indent=1)
    for name, tokens in vocabularies.items():
        with tf.io.gfile.GFile(os.path.join(out, "vocab", name), "wb") as f:
            f.write(b"".join(t + b"\n" for t in tokens))
    return out


def model_uri_of(base_model: Optional[str]) -> Optional[str]:
    """The Model artifact URI of a Trainer ``base_model`` (``<model uri>/Format-Serving``)."""
    return os.path.dirname(os.path.normpath(base_model)) if base_model else None


def record_origin(model_artifact_dir: str, warm_started_from: Optional[str]) -> None:
    """Writes ``<model_artifact_dir>/warm_start/origin.json`` (module doc, Lineage)."""
    out = os.path.join(model_artifact_dir, DIR_NAME)
    tf.io.gfile.makedirs(out)
    with tf.io.gfile.GFile(os.path.join(out, ORIGIN_FILE), "w") as f:
        json.dump({"warm_started_from": warm_started_from}, f)


def lineage(model_artifact_dir: str) -> List[str]:
    """[the model, the model it was warm-started from, that one's, ...] as normalized URIs,
    up to the first model without an origin record (trained cold, or before records existed)."""
    chain = [os.path.normpath(model_artifact_dir)]
    while len(chain) < MAX_LINEAGE:
        path = os.path.join(chain[-1], DIR_NAME, ORIGIN_FILE)
        try:
            with tf.io.gfile.GFile(path) as f:
                parent = json.load(f).get("warm_started_from")
        except (tf.errors.NotFoundError, ValueError, AttributeError):
            break
        if not parent or os.path.normpath(parent) in chain:
            break
        chain.append(os.path.normpath(parent))
    return chain


def warm_dir_of(base_model: Optional[str]) -> Optional[str]:
    """The warm-start directory of a Trainer ``base_model`` (``<model uri>/Format-Serving``), or
    None when there is no base model or it was trained before warm starts were saved."""
    if not base_model:
        return None
    d = os.path.join(model_uri_of(base_model), DIR_NAME)
    return d if tf.io.gfile.exists(os.path.join(d, "state.json")) else None


def row_map(old_tokens: List[bytes], new_tokens: List[bytes], oov_buckets: int) -> np.ndarray:
    """``src[r]`` = the old row new row r comes from, -1 = a new token (module doc)."""
    old_index = {t: j for j, t in enumerate(old_tokens)}
    src = np.full(1 + len(new_tokens) + oov_buckets, -1, dtype=np.int64)
    src[0] = 0
    for i, t in enumerate(new_tokens):
        j = old_index.get(t)
        if j is not None:
            src[1 + i] = 1 + j
    src[1 + len(new_tokens):] = 1 + len(old_tokens) + np.arange(oov_buckets)
    return src


def _remapped(old: np.ndarray, fresh: np.ndarray, src: np.ndarray) -> np.ndarray:
    out = fresh.copy()
    ok = src >= 0
    out[ok] = old[src[ok]]
    return out


def restore(model, warm_dir: str, vocabularies: Dict[str, List[bytes]], oov_buckets: int) -> dict:
    """Loads the state saved by ``save`` into ``model`` (compiled, not trained yet) and its
    optimizer; returns {"weights", "tables": {name: {"kept", "new"}}, "slots", "iterations"}.
    ValueError when a non-table weight's name or shape differs (another architecture)."""
    with tf.io.gfile.GFile(os.path.join(warm_dir, "state.json")) as f:
        meta = json.load(f)
    with tf.io.gfile.GFile(os.path.join(warm_dir, "state.npz"), "rb") as f:
        state = dict(np.load(io.BytesIO(f.read())))
    old_vocab = {}
    for name in set(meta["tables"].values()):
        with tf.io.gfile.GFile(os.path.join(warm_dir, "vocab", name), "rb") as f:
            old_vocab[name] = f.read().split(b"\n")[:-1]
    tables = _table_vocabs(model)
    if [n for n, _ in meta["weights"]] != [v.name for v in model.weights]:
        raise ValueError(f"warm start from {warm_dir}: the saved model has other weights "
                         f"({len(meta['weights'])} vs {len(model.weights)}): another model_type or config?")
    maps = {name: row_map(old_vocab[vocab], vocabularies[vocab], oov_buckets) for name, vocab in tables.items()}
    for i, var in enumerate(model.weights):  # check everything before assigning anything
        old = state[f"w/{i}"]
        if var.name in maps and (old.ndim != 2 or old.shape[1] != var.shape[1]
                                 or old.shape[0] != len(old_vocab[tables[var.name]]) + 1 + oov_buckets):
            raise ValueError(f"warm start from {warm_dir}: table {var.name} of shape {old.shape} does not "
                             f"match its vocabulary and the model's width {var.shape[1]}")
        if var.name not in maps and tuple(old.shape) != tuple(var.shape):
            raise ValueError(f"warm start from {warm_dir}: weight {var.name} has shape {old.shape}, "
                             f"the model {tuple(var.shape)}")
    report = {"tables": {}}
    for i, var in enumerate(model.weights):
        old = state[f"w/{i}"]
        if var.name in maps:
            src = maps[var.name]
            var.assign(_remapped(old, var.numpy(), src))
            report["tables"][var.name] = {"kept": int((src[1:] >= 0).sum()), "new": int((src < 0).sum())}
        else:
            var.assign(old)
    optimizer = model.optimizer
    optimizer.build(model.trainable_variables)
    slots = _slot_lists(optimizer)
    restored_slots = sorted(set(slots) & set(meta["slots"]))
    for slot_name in restored_slots:
        for t, var in enumerate(model.trainable_variables):
            slot, old = _slot_of(optimizer, slots[slot_name], var), state[f"s/{slot_name}/{t}"]
            if var.name in maps:
                slot.assign(_remapped(old, np.zeros(slot.shape, slot.dtype.as_numpy_dtype), maps[var.name]))
            else:
                slot.assign(old)
    optimizer.iterations.assign(int(state["iterations"]))
    report.update(weights=len(model.weights), slots=restored_slots, iterations=int(state["iterations"]))
    return report
