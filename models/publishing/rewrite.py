"""Rewrite a trained Keras ranker into the published one: pruned and/or int8 tables.

Every embedding table E_t [V_t, D_t] of the ranker's FeatureLayer is replaced by a
PublishedTable (models/publishing/published_table.py):

    plan_t  = per table or across tables, fraction | threshold       (allocation.py, pruning.py)
    C_t     = compact_table(E_t, plan_t)                             [K_t, D_t]
    values  = quantize_rows(C_t)  if quantize and D_t ≥ min_dim      (quantization.py)
              else C_t (fp32)

A table with fewer rows than min_table_share × the largest table's keeps every row in
fp32, as trained (no pruning, no int8: few bytes, and dequantizing costs more than the
gather of fp32 rows).

With batch_tables (the default) the `emb_*` tables of one width go into two TableBatches
(models/publishing/table_batch.py, FBGEMM's table-batched layout), the int8 ones and the
fp32 ones: the fields of a request are one gather per batch, where per-table int8
lookups cost 7–9 ops each; xDeepFM's first-order tables ride in their features' batch
(same rows, one remap).

Tables over one vocabulary (a feature's `emb_<f>` and `linear_<f>`, xDeepFM) get one
plan (vocabulary_groups; allocation.py ranks their rows by the summed score) and one
shared remap (published_table.Remap): stored and counted once, gathered once per ids.

The layer's call is unchanged (`tf.nn.embedding_lookup` dispatches to the published
table), every other weight stays as trained, and the model is exported with the
trainer's own `export_serving_model` (models/training/export.py), so the published
SavedModel has every signature the trained one has.

With no pruning and no quantization the published table is the fp32 table itself
behind the same gather: predictions are bit-identical (tests check it).

Example:

>>> model = load_trained_model(model_dir)
>>> tables = publish_tables(model, read_row_importance(artifact_dir), config)
>>> export_serving_model(model, tf_transform_output, history_length(model), out_dir)
"""
import os
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from models import features as F
from models.publishing import allocation, pruning, quantization
from models.publishing.config import PublishConfig
from models.publishing.published_table import PublishedTable, Remap
from models.publishing.table_batch import BatchEntry, TableBatch
from models.publishing.row_importance import embedding_tables, feature_layer, table_feature


def load_trained_model(saved_model_dir: str):
    """The trained ranker as a Keras model (custom layers revived from their classes)."""
    import tf_keras as keras

    import models.rankers.registry  # noqa: F401 - registers every custom layer class

    return drop_optimizer(keras.models.load_model(saved_model_dir, compile=False))


def drop_optimizer(model):
    """Detaches the optimizer from `model`, so a SavedModel written from it carries no
    optimizer slots (Adam's m and v are 2x the weights; the published model must not)."""
    model.optimizer = None
    try:
        model._delete_tracking("optimizer")
    except (KeyError, ValueError, AttributeError):
        pass
    return model


def history_length(model) -> int:
    """L, from the model's history input [B, L]."""
    name = F.transformed_name("hist_video_id")
    for x in model.inputs:
        if x.name.split(":")[0] == name or getattr(x, "_keras_history", None) and x.node.layer.name == name:
            return int(x.shape[1])
    raise ValueError(f"the model has no {name} input")


def _replace_table(layer, name: str, table: PublishedTable) -> None:
    attr = "tables" if name.startswith("emb_") else "linear_tables"
    key = table_feature(name)
    old = getattr(layer, attr)[key]
    getattr(layer, attr)[key] = table
    layer._trainable_weights = [w for w in layer._trainable_weights if w is not old]
    layer._non_trainable_weights = [w for w in layer._non_trainable_weights if w is not old]
    layer._track_trackable(table, name=name, overwrite=True)  # the fp32 table leaves the checkpoint


def snapshot_tables(model) -> dict:
    """The trained tables and the layer's weight lists, for restore_tables."""
    layer = feature_layer(model)
    return {"tables": embedding_tables(layer), "trainable": list(layer._trainable_weights),
            "non_trainable": list(layer._non_trainable_weights)}


def restore_tables(model, snapshot: dict) -> None:
    """Puts the trained tables back (snapshot_tables before publish_tables), so one loaded
    model can be rewritten several times (the sweep; a loaded model cannot be cloned)."""
    layer = feature_layer(model)
    for name, var in snapshot["tables"].items():
        getattr(layer, "tables" if name.startswith("emb_") else "linear_tables")[table_feature(name)] = var
        layer._track_trackable(var, name=name, overwrite=True)
    layer._trainable_weights = list(snapshot["trainable"])
    layer._non_trainable_weights = list(snapshot["non_trainable"])


def vocabulary_groups(names) -> Dict[str, List[str]]:
    """{feature: its tables} for every feature with more than one table among `names`
    (`emb_<f>` and `linear_<f>` index one vocabulary): they share one plan and one remap."""
    by_feature: Dict[str, List[str]] = {}
    for name in sorted(names):
        by_feature.setdefault(table_feature(name), []).append(name)
    return {f: ts for f, ts in by_feature.items() if len(ts) > 1}


def _plans(values: Dict[str, np.ndarray], importance, config: PublishConfig, oov: int) -> Dict[str, pruning.PrunePlan]:
    """The pruning plans of `values` ({table: [V, D]}) under `config` (allocation.py;
    a threshold applies to each vocabulary group's summed scores). The tables of one
    vocabulary group get the same PrunePlan object."""
    oov_rows = {name: list(range(len(v) - oov, len(v))) for name, v in values.items()}
    groups = vocabulary_groups(values)
    if config.prune_threshold is not None:
        out = {}
        for members in allocation.table_groups(list(values), groups).values():
            first = members[0]
            scores = sum(allocation.row_scores(values[t], (importance or {}).get(t), config.criterion,
                                               config.default_row, oov_rows[t]) for t in members)
            plan = pruning.prune_plan(scores, len(values[first]), threshold=config.prune_threshold,
                                      default_row=config.default_row if oov_rows[first] else "zeros",
                                      oov_rows=oov_rows[first])
            out.update({t: plan for t in members})
        return out
    row_bytes = {name: (v.shape[1] + 4 if config.quantize and v.shape[1] >= config.quantize_min_dim
                        else 4 * v.shape[1]) for name, v in values.items()}
    return allocation.allocate(values, importance, config.prune_fraction, config.criterion, config.allocation,
                               config.default_row, oov_rows, row_bytes, centroids=config.tail_centroids,
                               groups=groups)


def shared_remaps(plans: Dict[str, pruning.PrunePlan]) -> Dict[str, str]:
    """{table: the table whose remap it shares} for the tables of one vocabulary group
    with equal plans (the same object, or equal remaps: a delta's plans read back from
    the Publisher state); the first table of each group (by name) holds the remap."""
    out = {}
    for members in vocabulary_groups(plans).values():
        for t in members:
            for holder in members:
                if holder == t:
                    break
                if out.get(holder, holder) == holder and np.array_equal(plans[holder].remap, plans[t].remap):
                    out[t] = holder
                    break
    return out


def _batch_groups(names, dims, quantized, plans) -> List[Dict[str, Optional[str]]]:
    """The TableBatches to build: per (width, int8 or fp32), {emb table: its first-order
    table or None} over the `emb_*` tables; a batch carries the first-order tables (same
    plan, width 1, fp32) when every one of its features has one, else none of them."""
    by_kind: Dict[tuple, List[str]] = {}
    for name in sorted(names):
        if name.startswith("emb_"):
            by_kind.setdefault((dims[name], name in quantized), []).append(name)

    def same_plan(a, b):
        pa, pb = plans.get(a), plans.get(b)
        return (pa is None and pb is None) or (pa is not None and pb is not None and np.array_equal(pa.remap, pb.remap))

    groups = []
    for members in by_kind.values():
        linear = {m: "linear_" + table_feature(m) for m in members}
        with_first = all(lin in dims and lin not in quantized and dims[lin] == 1 and same_plan(m, lin)
                         for m, lin in linear.items())
        groups.append({m: (linear[m] if with_first else None) for m in members})
    return groups


def publish_tables(model, importance: Optional[Dict[str, Dict[str, np.ndarray]]], config: PublishConfig,
                   tables=None, plans: Optional[Dict[str, pruning.PrunePlan]] = None,
                   fixed_plans: bool = False) -> Dict[str, dict]:
    """Replaces the tables of `model` in place (module docstring); returns per table
    rows, rows kept, bytes before/after and quantization error (max and mean |x − x̂|).
    `plans` (a dict): a table's plan in it is used as is; the plans of the other tables
    are computed (allocation.py) and stored into it, unless `fixed_plans` (a delta
    publish keeps the base's plans: a table without one stays whole, as in the base)."""
    layer = feature_layer(model)
    oov = int(layer.oov_buckets)
    variables = {name: var for name, var in embedding_tables(layer).items() if tables is None or name in tables}
    values_of = {name: np.asarray(tf.convert_to_tensor(var).numpy(), np.float32) for name, var in variables.items()}
    given = dict(plans or {})
    largest = max(int(v.shape[0]) for v in embedding_tables(layer).values())
    small = {n for n, v in values_of.items() if len(v) < config.min_table_share * largest}  # not pruned
    computed = _plans({n: v for n, v in values_of.items() if n not in given and n not in small}, importance,
                      config, oov) \
        if config.prunes and not fixed_plans else {}
    if plans is not None:
        plans.update(computed)
    all_plans = {name: given.get(name) or computed.get(name) for name in values_of}
    all_plans = {name: plan for name, plan in all_plans.items() if plan is not None}
    dims = {name: int(v.shape[1]) for name, v in values_of.items()}
    quantized = {name for name in values_of
                 if config.quantize and dims[name] >= config.quantize_min_dim and name not in small}
    compact_of, report = {}, {}
    for name, values in values_of.items():
        plan = all_plans.get(name)
        if plan is not None and plan.num_rows != len(values):
            raise ValueError(f"table {name}: the given plan has {plan.num_rows} rows, the table {len(values)}")
        compact_of[name] = pruning.compact_table(values, plan) if plan is not None else values
        report[name] = {"rows": int(len(values)), "dim": dims[name], "rows_kept": int(len(compact_of[name])),
                        "bytes_fp32": int(values.nbytes), "quantized": False, "max_abs_error": 0.0,
                        "mean_abs_error": 0.0}

    def remap_of(name):
        plan = all_plans.get(name)
        return None if plan is None else plan.remap

    def quantize(name):
        q, scale, bias = quantization.quantize_rows(compact_of[name])
        err = np.abs(quantization.dequantize_rows(q, scale, bias) - compact_of[name])
        report[name].update(quantized=True, max_abs_error=float(err.max()), mean_abs_error=float(err.mean()))
        return q, scale, bias

    published: Dict[str, object] = {}
    groups = _batch_groups(values_of, dims, quantized, all_plans) if config.batch_tables else []
    for i, group in enumerate(groups):
        entries = []
        for name, first in group.items():
            rows = quantize(name) if name in quantized else (compact_of[name], None, None)
            entries.append(BatchEntry(name, *rows, remap=remap_of(name),
                                      first_order=None if first is None else compact_of[first],
                                      first_order_name=first))
        batch = TableBatch(entries, name=f"{'int8' if entries[0].scale is not None else 'fp32'}_tables_{i}")
        for name, view in batch.views.items():
            published[name] = view
            report[name]["batch"] = batch.name
            report[name]["bytes_published"] = view.num_bytes(remap=not view.first_order)
    rest = [name for name in values_of if name not in published]
    shared = shared_remaps({n: p for n, p in all_plans.items() if n in rest})
    remaps: Dict[str, Remap] = {}
    for name in rest:
        remap = None
        if name in all_plans:
            holder = shared.get(name, name)
            if holder not in remaps:
                plan = all_plans[name]
                remaps[holder] = Remap(plan.remap.astype(pruning.remap_dtype(plan.compact_rows)))
            remap = remaps[holder]
        if name in shared:
            report[name]["remap_shared_with"] = shared[name]
        if name in quantized:
            q, scale, bias = quantize(name)
            table = PublishedTable(q, scale, bias, remap=remap, name=name)
        else:
            table = PublishedTable(compact_of[name], remap=remap, name=name)
        report[name]["bytes_published"] = table.num_bytes(remap=name not in shared)  # a shared remap counts once
        published[name] = table
    for name in values_of:
        _replace_table(layer, name, published[name])
    return report


def tables_summary(report: Dict[str, dict]) -> dict:
    """Totals over tables: bytes before/after, their ratio, rows kept."""
    before = sum(t["bytes_fp32"] for t in report.values())
    after = sum(t["bytes_published"] for t in report.values())
    rows = sum(t["rows"] for t in report.values())
    kept = sum(t["rows_kept"] for t in report.values())
    return {"embedding_bytes_fp32": int(before), "embedding_bytes_published": int(after),
            "embedding_compression": float(before / after) if after else None,
            "rows": int(rows), "rows_kept": int(kept)}


def variables_bytes(saved_model_dir: str) -> int:
    """Bytes of a SavedModel's `variables/` (what TF Serving reads into memory)."""
    total = 0
    for path in tf.io.gfile.glob(os.path.join(saved_model_dir, "variables", "*")):
        total += tf.io.gfile.stat(path).length
    return int(total)
