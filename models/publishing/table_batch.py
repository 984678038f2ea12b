"""Table-batched embeddings (FBGEMM's TBE layout): the int8 tables of one width in one
variable, so the fields of a request are looked up with one gather (and the tables left in
fp32, the small ones, in another: `values` float32, no `scale_bias`, no dequantize).

Tables t = 0..T−1 (vocabulary V_t, compact rows K_t, width D, remap r_t: [V_t] → [0, K_t),
or none when the table is not pruned) at offsets v_t = Σ_{s<t} V_s and k_t = Σ_{s<t} K_s:

    values       uint8 [ΣK, D]        table t's rows at k_t .. k_t + K_t
    scale_bias   float16 [ΣK, 2]      FBGEMM's SBHalf pair per row (scale, bias)
    remap        uint16|int32 [ΣV]    remap[v_t + i] = k_t + r_t[i]   (absent when no table
                                      is pruned: then v_t = k_t and the row is v_t + i)
    first_order  float32 [ΣK, 1]      (optional) the tables' first-order weights (xDeepFM's
                                      linear_<f>, pruned with the same plan), same rows

Lookup of n tables of the batch at ids x_0 .. x_{n−1} of one shape S (`lookup_stacked`;
the FeatureLayer's fields, S = [B], and its two histories, S = [B, L]):

    c    = Cast(ResourceGather(remap, Pack(x, axis=-1) + v), int32)          S × n
    s, b = Split(Cast(ResourceGather(scale_bias, c), f32), 2, axis=-1)      S × n × 1 each
    e    = Cast(ResourceGather(values, c), f32) · s + b                      S × n × D

An fp32 batch is e = ResourceGather(values, Pack(x) + v) (no remap: its tables are not
pruned). In an int8 batch, when S = [B, L] with B > 1 (one user's history on every row of
a request), the rows are deduplicated first, u, idx = UniqueV2(Pack(x), axis=0), and
e = GatherV2(e_{u + v}, idx): the dequantize runs over the distinct rows only (a ranking
request's B history rows are one; UniqueV2 over rows costs ~40 % less than Unique over
the B·L·n ids). On the serving bench's DIN (30 fields, two 50-item histories) the
published graph runs 7 ResourceGathers where the trained one runs 32 (bench/README.md,
Publisher).

Each table is a `BatchedTable` view: a tf.Module whose `values` / `scale_bias` / `remap`
children are the batch's variables (tracked under every view, stored once in the
checkpoint) and whose `extent` variable, int32 [v_t, V_t, k_t, K_t], tells the partial
updates (models/publishing/delta.py) which slice is the table's. `tf.nn.embedding_lookup`
dispatches to a view (one table, any shape); models/layers/feature_layer.py
`lookup_tables` groups the views of one batch (their `table_batch`) into one
`lookup_stacked`. Standard ops only (ResourceGather, Pack, AddV2, Cast, Split, Mul,
UniqueV2, GatherV2, Reshape): stock TF Serving loads it.
"""
import dataclasses
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import embedding_ops
from tensorflow.python.util import dispatch

from models.publishing import pruning
from models.publishing.published_table import PerGraph


@dataclasses.dataclass
class BatchEntry:
    """One table going into a batch: int8 rows with their scale / bias (or fp32 rows and
    None, None), the remap (None: not pruned, ids index the rows) and optionally the
    first-order weights [K, 1] of the same rows with their table's name (its view's)."""
    name: str
    values: np.ndarray
    scale: Optional[np.ndarray] = None
    bias: Optional[np.ndarray] = None
    remap: Optional[np.ndarray] = None
    first_order: Optional[np.ndarray] = None
    first_order_name: Optional[str] = None


class TableBatch:
    """The batch's variables and offsets (module docstring); `views` {name: BatchedTable}
    for every entry (and for its first-order table when given). Not a tf.Module: the views
    track the variables, so the object graph reaches them through the tables' names."""

    def __init__(self, entries: Sequence[BatchEntry], name: str = "int8_tables"):
        if not entries:
            raise ValueError("TableBatch: no tables")
        dims = {int(np.shape(e.values)[1]) for e in entries}
        if len(dims) != 1:
            raise ValueError(f"TableBatch: tables of one batch share a width, got {sorted(dims)}")
        with_first = [e.first_order is not None for e in entries]
        if any(with_first) and not all(with_first):
            raise ValueError("TableBatch: give first-order weights for every table or none")
        kinds = {(e.scale is not None, e.bias is not None) for e in entries}
        if kinds not in ({(True, True)}, {(False, False)}):
            raise ValueError("TableBatch: every table int8 with scale and bias, or every table fp32")
        self.quantized = kinds.pop()[0]
        self.dim = dims.pop()
        self.name = name
        k_rows = [int(np.shape(e.values)[0]) for e in entries]
        v_rows = [int(np.shape(e.remap)[0]) if e.remap is not None else k for e, k in zip(entries, k_rows)]
        self.k_offsets = np.concatenate([[0], np.cumsum(k_rows)[:-1]]).astype(np.int64)
        self.v_offsets = np.concatenate([[0], np.cumsum(v_rows)[:-1]]).astype(np.int64)
        for e, k in zip(entries, k_rows):
            if self.quantized and (np.asarray(e.values).dtype != np.uint8 or np.shape(e.scale) != (k,)
                                   or np.shape(e.bias) != (k,)):
                raise ValueError(f"TableBatch {e.name}: values must be uint8 [K, D] with scale and bias [K]")
            if e.remap is not None and (np.min(e.remap) < 0 or np.max(e.remap) >= k):
                raise ValueError(f"TableBatch {e.name}: remap entries must be in [0, {k})")
            if e.first_order is not None and (np.shape(e.first_order) != (k, 1) or not e.first_order_name):
                raise ValueError(f"TableBatch {e.name}: first_order must be [{k}, 1], with its first_order_name")
        self.values = tf.Variable(np.concatenate([np.asarray(e.values, None if self.quantized else np.float32)
                                                  for e in entries]), trainable=False, name="values")
        self.scale_bias = None
        if self.quantized:
            self.scale_bias = tf.Variable(np.concatenate(
                [np.stack([np.asarray(e.scale, np.float16), np.asarray(e.bias, np.float16)], 1) for e in entries]),
                trainable=False, name="scale_bias")
        self.remap = None
        if any(e.remap is not None for e in entries):
            total = int(sum(k_rows))
            parts = [off + (np.asarray(e.remap, np.int64) if e.remap is not None else np.arange(k))
                     for e, k, off in zip(entries, k_rows, self.k_offsets)]
            self.remap = tf.Variable(np.concatenate(parts).astype(pruning.remap_dtype(total)), trainable=False,
                                     name="remap")
        self.first_order = None
        if all(with_first):
            self.first_order = tf.Variable(np.concatenate([np.asarray(e.first_order, np.float32) for e in entries]),
                                           trainable=False, name="first_order")
        self._cache = PerGraph()
        self.views = {}
        for t, e in enumerate(entries):
            self.views[e.name] = BatchedTable(self, t, v_rows[t], k_rows[t], first_order=False, name=e.name)
            if self.first_order is not None:
                self.views[e.first_order_name] = BatchedTable(self, t, v_rows[t], k_rows[t], first_order=True,
                                                              name=e.first_order_name)

    # --- the ops
    def _compact(self, global_ids):
        """c: the batch rows of already-offset ids (the ids themselves when nothing is pruned)."""
        if self.remap is None:
            return global_ids
        return tf.cast(tf.gather(self.remap, global_ids), tf.int32)

    def _rows(self, c, first_order: bool):
        if first_order:
            return tf.gather(self.first_order, c)
        if not self.quantized:
            return tf.gather(self.values, c)
        scale, bias = tf.split(tf.cast(tf.gather(self.scale_bias, c), tf.float32), 2, axis=-1)
        return tf.cast(tf.gather(self.values, c), tf.float32) * scale + bias

    def lookup_many(self, views: Sequence["BatchedTable"], ids: Sequence) -> List[tf.Tensor]:
        """[rows of views[i] at ids[i]] (module docstring): one gather for all of them when
        the ids share a shape, else one lookup per view."""
        stacked = self.lookup_stacked(views, ids)
        if stacked is None:
            return [v.lookup(i) for v, i in zip(views, ids)]
        return tf.unstack(stacked, axis=-2)

    def lookup_stacked(self, views: Sequence["BatchedTable"], ids: Sequence) -> Optional[tf.Tensor]:
        """The rows of views[i] at ids[i] (each of shape S) as one S × n × D tensor: one
        remap gather, one values gather, no Unstack (the FeatureLayer's `fields` [B, n, D]
        and its two histories [B, L, 2, D]). In an int8 batch, ids of rank ≥ 2 with B ≠ 1 (a
        request's history rows) are looked up once per distinct row (UniqueV2 on axis 0).
        None when the ids differ in static shape or dtype, or the views mix the embedding
        and first-order columns."""
        ids = [tf.convert_to_tensor(i) for i in ids]
        if any(v.table_batch is not self for v in views):
            raise ValueError("TableBatch.lookup_stacked: a view of another batch")
        shapes = {tuple(i.shape.as_list()) if i.shape.rank is not None else None for i in ids}
        first = {v.first_order for v in views}
        if not views or len(shapes) != 1 or None in shapes or len({i.dtype for i in ids}) != 1 or len(first) != 1:
            return None
        shape, first = next(iter(shapes)), first.pop()
        tables = tuple(v.index for v in views)
        key = (tables, tuple(i.ref() for i in ids))
        flat = self.quantized and len(shape) >= 2 and shape[0] != 1  # fp32 rows: nothing to save

        offsets = self.v_offsets[list(tables)]

        def global_ids(x):  # S × n, each table's ids at its offset
            return x + tf.constant(offsets, dtype=x.dtype) if offsets.any() else x

        if not flat:
            c = self._cache.get(("many",) + key, lambda: self._compact(global_ids(tf.stack(ids, axis=-1))))
            return self._rows(c, first)

        def distinct_rows():  # UniqueV2 over the B rows (before the offsets): [U, ..., n], idx [B]
            x = tf.stack(ids, axis=-1)
            inner = x.shape.as_list()[1:]
            known = None not in inner
            flat_shape = [-1, int(np.prod(inner))] if known else tf.concat([tf.shape(x)[:1], [-1]], 0)
            unique, index = tf.raw_ops.UniqueV2(x=tf.reshape(x, flat_shape), axis=tf.constant([0], tf.int64))
            unique = tf.reshape(unique, tf.concat([[-1], inner if known else tf.shape(x)[1:]], 0))
            return self._compact(global_ids(unique)), index

        c, index = self._cache.get(("rows",) + key, distinct_rows)
        return tf.gather(self._rows(c, first), index)

    def lookup_one(self, view: "BatchedTable", ids) -> tf.Tensor:
        """Rows of one table at ids of any (known) rank: `lookup_stacked` of the one view."""
        ids = tf.convert_to_tensor(ids)
        rows = self.lookup_stacked([view], [ids])
        if rows is None:
            raise ValueError(f"BatchedTable {view.name}: ids of unknown rank")
        return tf.squeeze(rows, axis=-2)


class BatchedTable(tf.Module):
    """One table of a TableBatch (module docstring): looks like a PublishedTable to the
    layer (`tf.nn.embedding_lookup`, `num_bytes`) and to the checkpoint readers (children
    values / scale_bias / remap, plus `extent` = [v_t, V_t, k_t, K_t])."""

    def __init__(self, batch: TableBatch, index: int, vocab_rows: int, rows: int, first_order: bool, name: str):
        super().__init__(name=name)
        self.table_batch = batch
        self.index = int(index)
        self.first_order = bool(first_order)
        self.rows = int(rows)
        self.vocab_rows = int(vocab_rows)
        self.quantized = batch.quantized and not first_order
        self.values = batch.first_order if first_order else batch.values
        if self.quantized:
            self.scale_bias = batch.scale_bias
        self.remap = batch.remap
        self.extent = tf.Variable(np.array([batch.v_offsets[index], vocab_rows, batch.k_offsets[index], rows],
                                           np.int32), trainable=False, name="extent")
        self.dim = 1 if first_order else batch.dim

    def lookup(self, ids):
        """Rows of `ids` as float32 [..., D]."""
        return self.table_batch.lookup_one(self, ids)

    def num_bytes(self, remap: bool = True) -> int:
        """Bytes of this table's share of the batch: its rows (values + scale_bias, or the
        first-order weights), its remap slice (`remap=False` leaves it out: counted with
        the embedding view when the first-order view shares it) and its extent."""
        row = self.dim + 4 if self.quantized else 4 * self.dim
        out = self.rows * row + 16  # + the int32 [4] extent
        if remap and self.remap is not None:
            out += self.vocab_rows * self.remap.dtype.size
        return int(out)


@dispatch.dispatch_for_types(embedding_ops.embedding_lookup_v2, BatchedTable)
def _batched_embedding_lookup(params, ids, max_norm=None, name=None):
    if max_norm is not None:
        raise ValueError("BatchedTable: max_norm is not supported")
    return params.lookup(ids)
