"""Partial (delta) publish: the rows of each table that changed most, plus the dense weights.

Version N (the base, what the server holds) and the new training, published under the
SAME pruning plan and vocabularies (the Publisher rewrites the new model with the base's
plans: models/publishing/rewrite.py, pruning.py, quantization.py, so every row is
exactly what a full publish would hold), are both read as checkpoints {key: array}.
For each table t with K_t compact rows of width D_t (int8 rows x̂ = q·scale + bias):

    p_t   = row_priority(kind, current_t, published_t)       models/publishing/priority.py
              opt_state_change: |s_r − s_r^pub|   (s_r: mean optimizer 2nd moment of row r,
                                                   QuickUpdate §5), row_change: ‖x̂_r − x̂_r^pub‖₂,
              touch_count: lookups since the row's last publish, random (ablation)
    S_t   = top_rows(p_t, f)     the ⌈f·K_t⌉ highest priorities (f = delta_row_fraction)

and the delta holds, per table, S_t (uint16 when K_t ≤ 65536, else int32), q[S_t]
(uint8) and scale_bias[S_t] (fp16 [k_t, 2]) — or the fp32 rows for tables left unquantized —
(delta_rows "values"), or their exact bit differences from the served rows, deflated
("code_delta": models/publishing/row_delta.py), and every dense (non-table) variable whose
value changed, in fp32 or fp16 (delta_dense; non-float variables as they are), or coded as
its difference from the served value (delta_dense "int<b>_delta": int8 codes in [−L, L] +
one float32 step per tensor; "fp16_delta": fp16 differences; models/publishing/dense_delta.py),
or none (send_dense False: the Publisher's dense schedule, PublishConfig.dense_every). Bytes:

    B = Σ_t k_t·(i_t + D_t + 4)   [int8 tables]   + Σ_t k_t·(i_t + 4·D_t)   [fp32 tables]
      + Σ_dense n_v·(4 | 2)       [fp32 | fp16]   or deflate(Σ_dense n_v·(1 | 2) + 4)  [coded]
      (+ npz framing, ~300 B per array; manifest ~1 KB; code_delta rows: row_delta.py's bytes)

with k_t = |S_t| and i_t = 2 or 4 the index width; a full version is Σ_t (remap + K_t·(D_t+4))
+ the dense weights in fp32 (+ graph, assets).

A table of a TableBatch (models/publishing/table_batch.py: the int8 tables of one width in
one variable) has the batch's values / scale_bias / remap keys and its own `extent` key,
[v_t, V_t, k_t, K_t]: its rows are values[k_t : k_t + K_t], its remap remap[v_t : v_t + V_t].
Rows are chosen and sent as indices into the table's own K_t rows and written at k_t + r.

Layout (`<serving base>/deltas/<version>/`, written to a temp dir, fsynced, renamed):
`manifest.json` (format, base_version, version, per table: checkpoint keys, rows total /
sent, dim, quantized, coding, file, bytes, sha256; dense: dtype, file, bytes, sha256, and per
checkpoint key its entry, coding (value | int<b>_delta | fp16_delta), dtype and shape;
total_bytes), `tables/<table>.npz` (rows, values[, scale_bias]; code_delta: row_gaps,
values_delta[, scale_bias_delta], deflated) and `dense.npz` (coded: `<entry>` the codes,
`<entry>_scale` the step; deflated). `read_delta` verifies every checksum; `apply_delta`
decodes coded rows against the base's and adds a coded variable to the base's value.
Written like a version: temp dir, fsync, one rename (models/publishing/atomic_files.py).
"""
import dataclasses
import hashlib
import io
import json
import os
import shutil
import time
from typing import Dict, Optional, Tuple

import numpy as np

from models.publishing import priority as priority_lib
from models.publishing.atomic_files import atomic_rename, temp_dir_for
from models.publishing import dense_delta, pruning, quantization, row_delta

MANIFEST = "manifest.json"
DELTAS_DIR = "deltas"
DENSE_FILE = "dense.npz"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
TABLE_PARTS = ("values", "scale_bias", "remap", "extent")
DENSE_DTYPES = ("fp32", "fp16") + dense_delta.CODINGS
# 5: table rows may be coded against the base (row_delta.py); 4: dense variables too (dense_delta.py); 3: a batched
# table's rows are local to its slice of the batch (`extent`); 2: one scale_bias [K, 2] part; 1: scale and bias [K, 1]
FORMAT = 5


class DeltaError(ValueError):
    """A delta that cannot be applied; the message names the file or checkpoint key."""


class DeltaChecksumError(DeltaError):
    """A payload file's sha256 or size differs from the manifest (corrupt / truncated)."""


class DeltaMismatchError(DeltaError):
    """Keys, dtypes, shapes, plan or base version of the delta and the base disagree."""


@dataclasses.dataclass
class Delta:
    """tables: {name: {"rows", "values"[, "scale_bias"]}}; dense: {checkpoint key: array, or
    dense_delta.Coded for a coded float variable}; keys: {table: {part: checkpoint key}};
    stats: per-table rows_total / dim / quantized."""
    tables: Dict[str, Dict[str, np.ndarray]]
    dense: Dict[str, np.ndarray]
    keys: Dict[str, Dict[str, str]]
    stats: Dict[str, dict]
    dense_dtype: str
    dense_unchanged: int = 0
    rows_coding: str = "values"


# ---------------------------------------------------------------- checkpoints
def checkpoint_prefix(saved_model_dir: str) -> str:
    return os.path.join(saved_model_dir, "variables", "variables")


def read_checkpoint(saved_model_dir: str) -> Dict[str, np.ndarray]:
    """Every tensor of a SavedModel's variables/ ({key: array}; the object graph as bytes)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(checkpoint_prefix(saved_model_dir))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()}


def table_keys(object_graph: bytes, names=None) -> Dict[str, Dict[str, str]]:
    """{table: {part: checkpoint key}} from the checkpoint's object graph: a table is a
    child named `name` (default: every child named emb_* / linear_*) whose object has a
    `values` variable; parts are its values / scale_bias / remap variables."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(object_graph)

    def var_key(node_id):
        keys = [a.checkpoint_key for a in graph.nodes[node_id].attributes if a.name == "VARIABLE_VALUE"]
        return keys[0] if keys else None

    found: Dict[str, int] = {}
    for node in graph.nodes:
        for child in node.children:
            name = child.local_name
            wanted = name in names if names is not None else name.startswith(("emb_", "linear_"))
            parts = {c.local_name: c.node_id for c in graph.nodes[child.node_id].children}
            if not wanted or "values" not in parts:
                continue
            if found.get(name, child.node_id) != child.node_id:
                raise DeltaMismatchError(f"table {name!r} names two different objects in the checkpoint")
            found[name] = child.node_id
    out = {}
    for name, node_id in sorted(found.items()):
        parts = {c.local_name: c.node_id for c in graph.nodes[node_id].children}
        out[name] = {p: var_key(parts[p]) for p in TABLE_PARTS if p in parts and var_key(parts[p])}
    missing = sorted(set(names or ()) - set(out))
    if missing:
        raise DeltaMismatchError(f"tables {missing} not found in the checkpoint's object graph")
    return out


def table_extent(variables: Dict[str, np.ndarray], keys: Dict[str, str]) -> Optional[Tuple[int, int, int, int]]:
    """(v_t, V_t, k_t, K_t) of a table in a TableBatch (its remap slice starts at v_t, its
    rows at k_t; models/publishing/table_batch.py), or None for a table of its own."""
    if "extent" not in keys:
        return None
    v0, v_rows, k0, k_rows = (int(x) for x in np.asarray(variables[keys["extent"]]).reshape(-1))
    return v0, v_rows, k0, k_rows


def _part(variables: Dict[str, np.ndarray], keys: Dict[str, str], part: str) -> np.ndarray:
    """The table's slice of `part` (values / scale_bias: its rows; remap: its vocabulary)."""
    array = np.asarray(variables[keys[part]])
    extent = table_extent(variables, keys)
    if extent is None:
        return array
    v0, v_rows, k0, k_rows = extent
    return array[v0:v0 + v_rows] if part == "remap" else array[k0:k0 + k_rows]


def table_row_count(variables: Dict[str, np.ndarray], keys: Dict[str, str]) -> int:
    """K_t: the table's compact rows."""
    return int(_part(variables, keys, "values").shape[0])


def table_rows(variables: Dict[str, np.ndarray], keys: Dict[str, str]) -> np.ndarray:
    """The rows the server computes for a table: dequantized int8, or the fp32 rows."""
    if "scale_bias" in keys:  # [K, 2]: scale, bias (published_table.py)
        scale_bias = _part(variables, keys, "scale_bias")
        return quantization.dequantize_rows(_part(variables, keys, "values"), scale_bias[:, 0], scale_bias[:, 1])
    return np.asarray(_part(variables, keys, "values"), np.float32)


def check_same_layout(base: Dict[str, np.ndarray], new: Dict[str, np.ndarray], what: str = "new model") -> None:
    """Identical checkpoint keys, dtypes and shapes (else DeltaMismatchError naming the key)."""
    if set(base) != set(new):
        extra, missing = sorted(set(new) - set(base)), sorted(set(base) - set(new))
        raise DeltaMismatchError(f"{what}: checkpoint keys differ from the base (extra {extra[:5]}, "
                                 f"missing {missing[:5]})")
    for k in sorted(base):
        if k == OBJECT_GRAPH_KEY:
            continue
        a, b = np.asarray(base[k]), np.asarray(new[k])
        if a.dtype != b.dtype or a.shape != b.shape:
            raise DeltaMismatchError(f"{what}: variable {k} is {b.dtype}{list(b.shape)}, "
                                     f"the base has {a.dtype}{list(a.shape)}")


# ---------------------------------------------------------------- compute
def compute_delta(base: Dict[str, np.ndarray], new: Dict[str, np.ndarray], keys: Dict[str, Dict[str, str]],
                  fraction: float, priority: str, current: Optional[Dict[str, dict]] = None,
                  published: Optional[Dict[str, dict]] = None, dense_dtype: str = "fp32",
                  seed: int = 0, send_dense: bool = True, rows_coding: str = "values") -> Delta:
    """The delta from checkpoint `base` to checkpoint `new` (module docstring).

    current[t]: {"opt_state": [K_t], "touch_count": [K_t]} of this training per compact row
    (the rows are added here); published[t]: {"opt_state": [K_t]} at each row's last publish
    (the rows the server holds are read from `base`); a table absent from `published` (or
    published None) ranks every row +inf: the ⌈f·K_t⌉ lowest indices (fraction 1: all rows).
    send_dense False: no dense variable (the server keeps the base's). rows_coding: row_delta.CODINGS."""
    if dense_dtype not in DENSE_DTYPES or rows_coding not in row_delta.CODINGS:
        raise ValueError(f"compute_delta: dense_dtype must be one of {DENSE_DTYPES}, rows_coding one of "
                         f"{row_delta.CODINGS}; got {dense_dtype!r}, {rows_coding!r}")
    check_same_layout(base, new)
    tables, stats, table_vars = {}, {}, set()
    for name, parts in keys.items():
        table_vars.update(parts.values())
        if "extent" in parts and not np.array_equal(base[parts["extent"]], new[parts["extent"]]):
            raise DeltaMismatchError(f"table {name}: its place in the table batch ({parts['extent']}) differs "
                                     "from the base")
        if "remap" in parts and not np.array_equal(_part(base, parts, "remap"), _part(new, parts, "remap")):
            raise DeltaMismatchError(f"table {name}: the pruning plan (remap {parts['remap']}) differs from the base")
        rows_now = table_rows(new, parts)
        k_rows, dim = rows_now.shape
        cur = {"rows": rows_now}
        cur.update({c: np.asarray(v, np.float64) for c, v in ((current or {}).get(name) or {}).items()})
        pub = None
        if published is not None and name in published:
            pub = {"rows": table_rows(base, parts)}
            pub.update({c: np.asarray(v, np.float64) for c, v in published[name].items()})
        chosen = priority_lib.top_rows(priority_lib.row_priority(priority, cur, pub, seed=seed), fraction)
        rows_parts, entry = [p for p in row_delta.PARTS if p in parts], {"rows": chosen.astype(pruning.remap_dtype(k_rows))}
        if rows_coding == "code_delta":  # "rows" stays in memory (the Publisher's state), the file has "row_gaps"
            entry.update(row_delta.encode({p: _part(base, parts, p) for p in rows_parts},
                                          {p: _part(new, parts, p) for p in rows_parts}, chosen, entry["rows"].dtype))
        else:
            entry.update({p: _part(new, parts, p)[chosen] for p in rows_parts})
        tables[name] = entry
        stats[name] = {"rows_total": int(k_rows), "dim": int(dim), "quantized": "scale_bias" in parts,
                       "rows_sent": int(len(chosen)), "coding": rows_coding}
    dense, unchanged = {}, 0
    for k in sorted(new) if send_dense else ():
        if k == OBJECT_GRAPH_KEY or k in table_vars:
            continue
        value = np.asarray(new[k])
        if value.tobytes() == np.asarray(base[k]).tobytes():
            unchanged += 1
            continue
        if dense_dtype in dense_delta.CODINGS and value.dtype == np.float32:
            value = dense_delta.encode(base[k], value, dense_dtype)
        elif dense_dtype == "fp16" and value.dtype == np.float32:
            value = value.astype(np.float16)
        dense[k] = value
    return Delta(tables, dense, keys, stats, dense_dtype, unchanged, rows_coding)


# ---------------------------------------------------------------- write / read
def _npz_bytes(arrays: Dict[str, np.ndarray], compress: bool = False) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **arrays)
    return buf.getvalue()


def _dense_arrays(dense: Dict[str, object]) -> Tuple[Dict[str, np.ndarray], Dict[str, dict]]:
    """The dense file's arrays and the manifest's per-key entries (module docstring)."""
    arrays, variables = {}, {}
    for i, key in enumerate(sorted(dense)):
        entry, value = f"d{i}", dense[key]
        if isinstance(value, dense_delta.Coded):
            arrays[entry] = value.q
            if value.scale is not None:
                arrays[f"{entry}_scale"] = np.asarray(value.scale, np.float32)
            coding, sent = value.coding, value.q
        else:
            arrays[entry], coding, sent = value, "value", value
        variables[key] = {"entry": entry, "coding": coding, "sent_dtype": sent.dtype.name, "shape": list(sent.shape)}
    return arrays, variables


def write_delta(delta: Delta, out_dir: str, base_version: int, version: int) -> dict:
    """Writes `delta` to `out_dir` atomically (module docstring); returns the manifest."""
    os.makedirs(os.path.dirname(os.path.abspath(out_dir)), exist_ok=True)
    temp = temp_dir_for(out_dir)
    os.makedirs(os.path.join(temp, "tables"))
    try:
        manifest = {"format": FORMAT, "base_version": int(base_version), "version": int(version),
                    "created": time.time(), "tables": {}, "dense": {}}
        for name, arrays in delta.tables.items():
            coded = delta.stats[name].get("coding") == "code_delta"
            arrays = {k: v for k, v in arrays.items() if not (coded and k == "rows")}  # code_delta: row_gaps instead
            data = _npz_bytes(arrays, compress=coded)
            rel = f"tables/{name}.npz"
            with open(os.path.join(temp, rel), "wb") as f:
                f.write(data)
            manifest["tables"][name] = dict(delta.stats[name], keys=delta.keys[name], file=rel, bytes=len(data),
                                            payload_bytes=int(sum(a.nbytes for a in arrays.values())),
                                            sha256=hashlib.sha256(data).hexdigest())
        arrays, variables = _dense_arrays(delta.dense)
        data = _npz_bytes(arrays, compress=delta.dense_dtype in dense_delta.CODINGS)
        with open(os.path.join(temp, DENSE_FILE), "wb") as f:
            f.write(data)
        manifest["dense"] = {"dtype": delta.dense_dtype, "file": DENSE_FILE, "bytes": len(data),
                             "payload_bytes": int(sum(a.nbytes for a in arrays.values())),
                             "sha256": hashlib.sha256(data).hexdigest(), "unchanged": delta.dense_unchanged,
                             "variables": variables}
        manifest["rows_sent"] = int(sum(t["rows_sent"] for t in manifest["tables"].values()))
        manifest["total_bytes"] = int(sum(t["bytes"] for t in manifest["tables"].values()) + len(data))
        with open(os.path.join(temp, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
        atomic_rename(temp, out_dir)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return manifest


def read_manifest(delta_dir: str) -> dict:
    path = os.path.join(delta_dir, MANIFEST)
    if not os.path.exists(path):
        raise DeltaError(f"{path}: no manifest (not a delta, or a delta still being written)")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except ValueError as e:
        raise DeltaChecksumError(f"{path}: unreadable manifest ({e})") from None
    if manifest.get("format") != FORMAT:
        raise DeltaError(f"{path}: unknown delta format {manifest.get('format')!r}")
    return manifest


def _read_verified(delta_dir: str, entry: dict) -> Dict[str, np.ndarray]:
    path = os.path.join(delta_dir, entry["file"])
    if not os.path.exists(path):
        raise DeltaChecksumError(f"{path}: missing payload file")
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise DeltaChecksumError(f"{path}: sha256/size differ from the manifest ({len(data)} bytes, "
                                 f"expected {entry['bytes']}): corrupt or truncated delta")
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def read_delta(delta_dir: str) -> Tuple[dict, Dict[str, Dict[str, np.ndarray]], Dict[str, np.ndarray]]:
    """(manifest, tables, dense {checkpoint key: array}); every checksum verified first."""
    manifest = read_manifest(delta_dir)
    tables = {name: _read_verified(delta_dir, entry) for name, entry in manifest["tables"].items()}
    dense_npz = _read_verified(delta_dir, manifest["dense"])
    dense = {}
    for key, v in manifest["dense"]["variables"].items():
        coding = v.get("coding", "value")
        if v["entry"] not in dense_npz:
            raise DeltaMismatchError(f"dense variable {key}: entry {v['entry']} missing from {manifest['dense']['file']}")
        if coding == "value":
            dense[key] = dense_npz[v["entry"]]
        elif coding in dense_delta.CODINGS:
            dense[key] = dense_delta.Coded(coding, dense_npz[v["entry"]], dense_npz.get(f"{v['entry']}_scale"))
        else:
            raise DeltaMismatchError(f"dense variable {key}: unknown coding {coding!r}")
    return manifest, tables, dense


def _decode_rows(name: str, base: Dict[str, np.ndarray], keys: Dict[str, str], arrays: Dict[str, np.ndarray]):
    """A code_delta table's {"rows", parts}, decoded against the base's rows (row_delta.decode)."""
    missing = [keys[p] for p in ("extent",) + row_delta.PARTS if p in keys and keys[p] not in base]
    if missing:
        raise DeltaMismatchError(f"table {name}: checkpoint keys {missing} are not in the base")
    try:
        rows, parts = row_delta.decode({p: _part(base, keys, p) for p in row_delta.PARTS if p in keys}, arrays)
    except row_delta.RowDeltaError as e:
        raise DeltaMismatchError(f"table {name}: {e}") from None
    return dict(parts, rows=rows)


def apply_delta(base: Dict[str, np.ndarray], manifest: dict, tables: Dict[str, Dict[str, np.ndarray]],
                dense: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The new checkpoint {key: array}: base with the delta's rows and dense variables, keys,
    dtypes and shapes unchanged (fp16 dense cast back to the variable's dtype; a coded one
    added to the base's value, dense_delta.apply)."""
    out, copied = dict(base), set()
    for name, entry in manifest["tables"].items():
        arrays, keys = tables[name], entry["keys"]
        if entry.get("coding", "values") not in row_delta.CODINGS:
            raise DeltaMismatchError(f"table {name}: unknown row coding {entry.get('coding')!r}")
        if entry.get("coding") == "code_delta":
            arrays = _decode_rows(name, base, keys, arrays)
        rows = np.asarray(arrays["rows"]).astype(np.int64)
        if "extent" in keys and keys["extent"] not in base:
            raise DeltaMismatchError(f"table {name}: checkpoint key {keys['extent']} (extent) is not in the base")
        extent = table_extent(base, keys)
        for part in ("values", "scale_bias"):
            if part not in keys:
                continue
            key = keys[part]
            if key not in base:
                raise DeltaMismatchError(f"table {name}: checkpoint key {key} ({part}) is not in the base")
            if key not in copied:  # the tables of one batch write into one variable
                out[key] = np.array(base[key], copy=True)
                copied.add(key)
            target = out[key]
            first, count = (0, target.shape[0]) if extent is None else (extent[2], extent[3])
            sent = arrays.get(part)
            if sent is None or sent.dtype != target.dtype or sent.shape[1:] != target.shape[1:] \
                    or len(sent) != len(rows):
                raise DeltaMismatchError(f"table {name}: {part} rows do not fit {key} "
                                         f"({None if sent is None else (sent.dtype, sent.shape)} vs "
                                         f"{target.dtype}{list(target.shape)})")
            if rows.size and (rows.min() < 0 or rows.max() >= count):
                raise DeltaMismatchError(f"table {name}: row index outside [0, {count}) for {key}")
            target[first + rows] = sent
    for key, value in dense.items():
        if key not in base:
            raise DeltaMismatchError(f"dense variable {key} is not in the base checkpoint")
        target = np.asarray(base[key])
        shape = value.q.shape if isinstance(value, dense_delta.Coded) else value.shape
        if tuple(shape) != target.shape:
            raise DeltaMismatchError(f"dense variable {key}: shape {list(shape)} vs base {list(target.shape)}")
        if isinstance(value, dense_delta.Coded):
            try:
                out[key] = dense_delta.apply_checked(target, value)
            except ValueError as e:
                raise DeltaMismatchError(f"dense variable {key}: {e}") from None
            continue
        if value.dtype != target.dtype and not (value.dtype == np.float16 and target.dtype == np.float32):
            raise DeltaMismatchError(f"dense variable {key}: dtype {value.dtype} vs base {target.dtype}")
        out[key] = value.astype(target.dtype)
    return out
