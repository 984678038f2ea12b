"""A published embedding table: remap -> row gather -> dequantize, with standard TF ops only.

(With PublishConfig.batch_tables, the default, the embedding tables go into TableBatches
instead, models/publishing/table_batch.py; this class then holds only first-order tables
that cannot ride in their features' batch, and every table with batch_tables=False.)

Variables (non-trainable) of one table with V vocabulary rows, K compact rows, width D:

    remap       uint16|int32 [V]   (optional: absent when nothing is pruned)
    values      uint8 [K, D]  (quantized)  or  float32/float16 [K, D]
    scale_bias  float16 [K, 2]     (quantized only: column 0 the row's scale, 1 its bias,
                                    FBGEMM's SBHalf pair)

Lookup of ids (any shape S):

    c      = Cast(ResourceGather(remap, ids), int32)                          S
    s, b   = Split(Cast(ResourceGather(scale_bias, c), f32), 2, axis=-1)       S × 1 each
    e      = Cast(ResourceGather(values, c), f32) · s + b                      S × D

(ResourceGather, Cast, Split, Mul, AddV2: the stock TF Serving 2.16 binary loads it; no
custom ops, no qint8 / Dequantize.) s and b broadcast against the [.., D] rows with no
reshape op: an int8 lookup behind a remap runs 9 ops (7 when the remap is shared)
against the trained table's one gather.

Sequence ids of more than one row (rank ≥ 2, e.g. a history [B, L]; not [1, L], where
there is nothing to share) are looked up once per distinct id:

    u, idx = Unique(Reshape(ids, [-1]));   e = Reshape(GatherV2(lookup(u), idx), S × D)

A serving request is one user's candidates, so its B history rows are the same L ids:
the dequantize (a Cast and two broadcasting elementwise ops over S × D) then runs over
≤ L rows instead of B·L, and the one full-size op left is the fp32 gather the trained
table also does. (A micro-benchmark of the bench DIN's 8 field and 2 [100, 50] history
lookups, 1 thread: fp32 340 µs, int8 665 µs before, 475–517 µs with this and the one
scale_bias gather; the history dequantize was most of the difference.)

Tables over one vocabulary (a feature's embedding and first-order tables) share one
`Remap`: one variable (stored once in the SavedModel, the same checkpoint key under
both tables) and, in a traced graph, one `c` per ids tensor: the first lookup of `ids`
gathers it, the other tables' lookups of the same `ids` tensor in the same graph reuse
it (Grappler does not merge two gathers of a variable); likewise the Unique of a sequence.

`tf.nn.embedding_lookup(table, ids)` dispatches here for a PublishedTable, so a layer
that looks its tables up with `tf.nn.embedding_lookup` (models/layers/feature_layer.py)
serves published tables unchanged. Registering the dispatcher is a side effect of
importing this module; a loaded SavedModel needs nothing of it (the graph holds the ops).
"""
from typing import Optional, Union

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import embedding_ops
from tensorflow.python.util import dispatch


class PerGraph:
    """fn() cached per (traced graph, key); eagerly: computed every call.

    The tables that look up the same ids tensor share the ops through this cache, keyed by
    the ids' `ref()` (Grappler does not merge two gathers of a variable). Also the
    TableBatch's per-request lookups (models/publishing/table_batch.py)."""

    def __init__(self):
        self._traced = {}  # (id(graph), key) -> (graph, value); the entry keeps graph alive

    def get(self, key, fn):
        if tf.executing_eagerly():
            return fn()
        graph = tf.compat.v1.get_default_graph()
        hit = self._traced.get((id(graph), key))
        if hit is None or hit[0] is not graph:  # id(graph) is not reused while the entry holds graph
            hit = (graph, fn())
            self._traced[(id(graph), key)] = hit
        return hit[1]


def _flat_unique(ids):
    """(u, idx) of the flattened ids."""
    return tf.unique(tf.reshape(ids, [-1]))


class Remap:
    """remap [V] (vocabulary id -> compact row), shareable by the tables of one vocabulary
    (module docstring). Not a tf.Module: each table tracks `variable` as its own `remap`
    child, so the object graph and the checkpoint hold it once, under both tables.

    Args:
        remap: [V] non-negative ints (uint16 / int32, pruning.remap_dtype).
    """

    def __init__(self, remap):
        remap = np.asarray(remap)
        if remap.ndim != 1 or remap.size == 0 or remap.min() < 0:
            raise ValueError(f"Remap: remap must be a non-empty [V] of indices >= 0, got shape {remap.shape}")
        self.max_index = int(remap.max())
        self.variable = tf.Variable(remap, trainable=False, name="remap")
        self._cache = PerGraph()

    def __call__(self, ids):
        """c = Cast(ResourceGather(remap, ids), int32); once per ids tensor per traced graph."""
        return self._cache.get(("compact", ids.ref()), lambda: tf.cast(tf.gather(self.variable, ids), tf.int32))

    def unique(self, ids):
        """A sequence's Unique, shared by the vocabulary's tables."""
        return self._cache.get(("unique", ids.ref()), lambda: _flat_unique(ids))


class PublishedTable(tf.Module):
    """One pruned and/or quantized embedding table (module docstring).

    Args:
        values: [K, D] compact rows (uint8 when `scale`/`bias` are given, else float).
        scale, bias: [K] float16 row-wise dequantization parameters (stored as one [K, 2]
            `scale_bias`), or None.
        remap: [V] int vocabulary id -> compact row, a `Remap` shared with other tables of
            the same vocabulary, or None (ids index `values` directly).
        name: the table's name (the trained variable's, e.g. "emb_video_id").
    """

    def __init__(self, values, scale=None, bias=None, remap: Optional[Union[np.ndarray, Remap]] = None, name=None):
        super().__init__(name=name)
        values = np.asarray(values)
        if values.ndim != 2:
            raise ValueError(f"PublishedTable {name}: values must be [rows, dim], got {values.shape}")
        if (scale is None) != (bias is None):
            raise ValueError(f"PublishedTable {name}: give both scale and bias, or neither")
        self.quantized = scale is not None
        if self.quantized:
            if values.dtype != np.uint8:
                raise ValueError(f"PublishedTable {name}: quantized values must be uint8, got {values.dtype}")
            for part, arr in (("scale", scale), ("bias", bias)):
                if np.shape(arr) != (values.shape[0],):
                    raise ValueError(f"PublishedTable {name}: {part} must be [{values.shape[0]}]")
            self.scale_bias = tf.Variable(np.stack([np.asarray(scale, np.float16), np.asarray(bias, np.float16)], 1),
                                          trainable=False, name="scale_bias")
        self.values = tf.Variable(values, trainable=False, name="values")
        self.remap, self._remap = None, None
        if remap is not None:
            self._remap = remap if isinstance(remap, Remap) else Remap(remap)
            if self._remap.max_index >= values.shape[0]:
                raise ValueError(f"PublishedTable {name}: remap must be [V] with entries in [0, {values.shape[0]})")
            self.remap = self._remap.variable
        if self._remap is not None:
            self._unique = self._remap.unique
        else:
            own = PerGraph()
            self._unique = lambda ids: own.get(ids.ref(), lambda: _flat_unique(ids))
        self.dim = int(values.shape[1])

    def lookup(self, ids):
        """Rows of `ids` as float32 [..., D] (module docstring)."""
        ids = tf.convert_to_tensor(ids)
        if ids.shape.rank is None or ids.shape.rank < 2 or ids.shape[0] == 1:
            return self._rows(ids)
        unique, index = self._unique(ids)
        return tf.reshape(tf.gather(self._rows(unique), index), tf.concat([tf.shape(ids), [self.dim]], 0))

    def _rows(self, ids):
        if self._remap is not None:
            ids = self._remap(ids)
        rows = tf.gather(self.values, ids)
        if not self.quantized:
            return tf.cast(rows, tf.float32)
        scale, bias = tf.split(tf.cast(tf.gather(self.scale_bias, ids), tf.float32), 2, axis=-1)  # S × 1 each
        return tf.cast(rows, tf.float32) * scale + bias

    def num_bytes(self, remap: bool = True) -> int:
        """Bytes of the table's variables (what the SavedModel stores); `remap=False`
        leaves the remap out (a shared remap is counted once, with its first table)."""
        return int(sum(v.shape.num_elements() * v.dtype.size for v in self.variables
                       if remap or v is not self.remap))


@dispatch.dispatch_for_types(embedding_ops.embedding_lookup_v2, PublishedTable)
def _published_embedding_lookup(params, ids, max_norm=None, name=None):
    if max_norm is not None:
        raise ValueError("PublishedTable: max_norm is not supported")
    return params.lookup(ids)
