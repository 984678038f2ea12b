"""A published embedding table: remap -> row gather -> dequantize, with standard TF ops only.

Variables (non-trainable) of one table with V vocabulary rows, K compact rows, width D:

    remap  uint16|int32 [V]   (optional: absent when nothing is pruned)
    values uint8 [K, D]  (quantized)  or  float32/float16 [K, D]
    scale  float16 [K], bias float16 [K]   (quantized only)

Lookup of ids (any shape S):

    c = Cast(ResourceGather(remap, ids), int32)                        S
    e = Cast(ResourceGather(values, c), f32) · Cast(Gather(scale, c), f32)[..., None]
        + Cast(Gather(bias, c), f32)[..., None]                        S × D

(ResourceGather, Cast, Mul, AddV2: the stock TF Serving 2.16 binary loads it; no
custom ops, no qint8 / Dequantize.)

`tf.nn.embedding_lookup(table, ids)` dispatches here for a PublishedTable, so a layer
that looks its tables up with `tf.nn.embedding_lookup` (models/layers/feature_layer.py)
serves published tables unchanged. Registering the dispatcher is a side effect of
importing this module; a loaded SavedModel needs nothing of it (the graph holds the ops).
"""
from typing import Optional

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import embedding_ops
from tensorflow.python.util import dispatch


class PublishedTable(tf.Module):
    """One pruned and/or quantized embedding table (module docstring).

    Args:
        values: [K, D] compact rows (uint8 when `scale`/`bias` are given, else float).
        scale, bias: [K] float16 row-wise dequantization parameters, or None.
        remap: [V] int vocabulary id -> compact row, or None (ids index `values` directly).
        name: the table's name (the trained variable's, e.g. "emb_video_id").
    """

    def __init__(self, values, scale=None, bias=None, remap: Optional[np.ndarray] = None, name=None):
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
            self.scale = tf.Variable(np.asarray(scale, np.float16), trainable=False, name="scale")
            self.bias = tf.Variable(np.asarray(bias, np.float16), trainable=False, name="bias")
        self.values = tf.Variable(values, trainable=False, name="values")
        self.remap = None
        if remap is not None:
            remap = np.asarray(remap)
            if remap.ndim != 1 or remap.min() < 0 or remap.max() >= values.shape[0]:
                raise ValueError(f"PublishedTable {name}: remap must be [V] with entries in [0, {values.shape[0]})")
            self.remap = tf.Variable(remap, trainable=False, name="remap")
        self.dim = int(values.shape[1])

    def lookup(self, ids):
        """Rows of `ids` as float32 [..., D] (module docstring)."""
        ids = tf.convert_to_tensor(ids)
        if self.remap is not None:
            ids = tf.cast(tf.gather(self.remap, ids), tf.int32)
        rows = tf.gather(self.values, ids)
        if not self.quantized:
            return tf.cast(rows, tf.float32)
        scale = tf.cast(tf.gather(self.scale, ids), tf.float32)
        bias = tf.cast(tf.gather(self.bias, ids), tf.float32)
        return tf.cast(rows, tf.float32) * scale[..., tf.newaxis] + bias[..., tf.newaxis]

    def num_bytes(self) -> int:
        """Bytes of every variable of the table (what the SavedModel stores)."""
        return int(sum(v.shape.num_elements() * v.dtype.size for v in self.variables))


@dispatch.dispatch_for_types(embedding_ops.embedding_lookup_v2, PublishedTable)
def _published_embedding_lookup(params, ids, max_norm=None, name=None):
    if max_norm is not None:
        raise ValueError("PublishedTable: max_norm is not supported")
    return params.lookup(ids)
