"""Publisher state between runs (issue #14): what the server holds, for full-vs-delta.

Where: `<parent>/.<model>.publisher_state/` beside the serving base `<parent>/<model>/`
(hidden, outside the base: TF Serving and the embedded server never see it, and the
base holds only numeric versions and `deltas/`). Written only when full_every > 1.

    state.json   base_version       the version the server holds (the last published)
                 runs_since_full    publishes since the last full version (0 after a full)
                 fingerprints       config (pruning/quantization knobs), transform (the
                                    Transform output's files: vocabularies, analyzer
                                    constants, the graph the assembled versions reuse),
                                    graph (op counts, signatures and constants of the
                                    published graph: graph_fingerprint)
                 keys               {table: {values|scale_bias|remap: checkpoint key}}
                 source_model       the Model artifact URI base_version was published from
                                    (a delta only for a model that continues it: freshness.py)
                 history            the last runs: version, kind, bytes
    state.npz    <table>/kept, remap, zero_row, centroid_rows  the pruning plan of the
                                    last full version (deltas keep it)
                 <table>/opt_state  per compact row: the row's mean optimizer state when
                                    that row was last sent (QuickUpdate's reference)
                 <table>/touches    per compact row: lookups since the row was last sent

Both files are replaced atomically (temp file + rename; json last), so a killed
publish leaves the previous state. A missing or unreadable state means "publish full".
"""
import dataclasses
import hashlib
import io
import json
import os
from typing import Dict, List, Optional

import numpy as np

from models.publishing import pruning
from models.publishing.atomic_files import write_file_atomic

JSON_NAME = "state.json"
NPZ_NAME = "state.npz"
HISTORY = 50


def state_dir(serving_base: str) -> str:
    parent, name = os.path.split(os.path.normpath(os.path.abspath(serving_base)))
    return os.path.join(parent, f".{name}.publisher_state")


@dataclasses.dataclass
class PublisherState:
    base_version: int
    runs_since_full: int
    fingerprints: Dict[str, str]
    keys: Dict[str, Dict[str, str]]
    plans: Dict[str, pruning.PrunePlan]
    opt_state: Dict[str, np.ndarray]
    touches: Dict[str, np.ndarray]
    history: List[dict] = dataclasses.field(default_factory=list)
    source_model: Optional[str] = None


def save(serving_base: str, state: PublisherState) -> str:
    d = state_dir(serving_base)
    os.makedirs(d, exist_ok=True)
    arrays = {}
    for name, plan in state.plans.items():
        arrays.update({f"{name}/kept": plan.kept, f"{name}/remap": plan.remap,
                       f"{name}/zero_row": np.array(plan.zero_row), f"{name}/centroid_rows": np.array(plan.centroid_rows)})
    arrays.update({f"{n}/opt_state": v for n, v in state.opt_state.items()})
    arrays.update({f"{n}/touches": v for n, v in state.touches.items()})
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_file_atomic(os.path.join(d, NPZ_NAME), buf.getvalue())
    meta = {"base_version": int(state.base_version), "runs_since_full": int(state.runs_since_full),
            "fingerprints": state.fingerprints, "keys": state.keys, "history": state.history[-HISTORY:],
            "source_model": state.source_model,
            "npz_sha256": hashlib.sha256(buf.getvalue()).hexdigest()}
    write_file_atomic(os.path.join(d, JSON_NAME), json.dumps(meta, indent=1).encode())
    return d


def load(serving_base: str) -> Optional[PublisherState]:
    """The state, or None when absent or inconsistent (then the Publisher publishes full)."""
    d = state_dir(serving_base)
    try:
        with open(os.path.join(d, JSON_NAME)) as f:
            meta = json.load(f)
        with open(os.path.join(d, NPZ_NAME), "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != meta.get("npz_sha256"):
        return None
    plans, opt_state, touches = {}, {}, {}
    with np.load(io.BytesIO(data)) as npz:
        arrays = {k: npz[k] for k in npz.files}
    for key, value in arrays.items():
        table, what = key.rsplit("/", 1)
        if what == "kept":
            plans[table] = pruning.PrunePlan(kept=value, remap=arrays[f"{table}/remap"],
                                             zero_row=bool(arrays[f"{table}/zero_row"]),
                                             centroid_rows=int(arrays.get(f"{table}/centroid_rows", 0)))
        elif what == "opt_state":
            opt_state[table] = value
        elif what == "touches":
            touches[table] = value
    return PublisherState(int(meta["base_version"]), int(meta["runs_since_full"]), meta["fingerprints"],
                          meta["keys"], plans, opt_state, touches, meta.get("history", []), meta.get("source_model"))


def compact(values, plan: Optional[pruning.PrunePlan]) -> np.ndarray:
    """A per-vocabulary-row vector [V] in the table's compact row order [K]."""
    values = np.asarray(values, np.float64)
    return values if plan is None else pruning.compact_table(values, plan)


def file_fingerprint(root: str) -> str:
    """sha256 over the relative paths and bytes of every file under `root`."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            h.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def graph_fingerprint(saved_model_dir: str) -> str:
    """sha256 of the op-type counts of every function, the signatures' input/output specs
    and the set of distinct constants the top-level graph holds: equal for two exports of
    the same model code (function names differ). The top-level constants (the saver's
    object graph proto and scalars no top-level node reads) differ in number between exports
    of the same model (measured: the first export of a ranker in a process holds two float32
    1.0 constants, the next ones one), so they count by value, not by number."""
    from collections import Counter

    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    meta = sm.meta_graphs[0]
    ops = Counter(n.op for n in meta.graph_def.node if n.op != "Const")
    for fn in meta.graph_def.library.function:
        ops.update(n.op for n in fn.node_def)
    constants = sorted({hashlib.sha256(n.attr["value"].tensor.SerializeToString(deterministic=True)).hexdigest()
                        for n in meta.graph_def.node if n.op == "Const"})
    sigs = {}
    for name, sig in meta.signature_def.items():
        sigs[name] = {side: {k: [int(v.dtype), [d.size for d in v.tensor_shape.dim]]
                             for k, v in getattr(sig, side).items()} for side in ("inputs", "outputs")}
    return hashlib.sha256(json.dumps([sorted(ops.items()), sigs, constants], sort_keys=True).encode()).hexdigest()


def config_fingerprint(config) -> str:
    keys = ("prune_fraction", "prune_threshold", "criterion", "default_row", "quantize", "quantize_min_dim",
            "prune_auto")
    d = config.to_json_dict()
    return hashlib.sha256(json.dumps({k: d.get(k) for k in keys}, sort_keys=True).encode()).hexdigest()
