"""Transformer encoder block of BST, with optional relative position representations.

- Chen et al., "Behavior Sequence Transformer for E-commerce Recommendation in
  Alibaba", DLP-KDD 2019 (BST), §2.2–2.3.
- Vaswani et al., "Attention Is All You Need", NeurIPS 2017, §3.2–3.3.
- Shaw et al., "Self-Attention with Relative Position Representations", NAACL 2018,
  §3, eq. (3)–(4).

BST's absolute position signal, the bucketed time gap to the impression, is its own
concept: models/layers/time_gap.py.
"""
import math

import tf_keras as keras
import tensorflow as tf

from models.layers._utils import clone_initializer, masked_softmax, positive_int

_FFN_ACTIVATIONS = ("leaky_relu", "gelu", "relu")


def _ffn_activation(name):
    if name == "leaky_relu":
        return lambda x: tf.nn.leaky_relu(x, alpha=0.2)
    if name == "gelu":
        return tf.nn.gelu
    return tf.nn.relu


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class TransformerEncoderBlock(keras.layers.Layer):
    r"""One post-LayerNorm Transformer encoder block (BST §2.3, Vaswani §3).

    With input :math:`E \in R^{S \times D}` and heads :math:`h = 1..H`
    (:math:`q = E W^Q_h`, :math:`k = E W^K_h`, :math:`v = E W^V_h`,
    :math:`d` = ``key_dim``):

    .. math::

        e_{ij} = \frac{q_i \cdot (k_j + a^K_{ij})}{\sqrt{d}}, \quad
        \alpha_{ij} = \mathrm{softmax}_{j:\,\mathrm{mask}_j}(e_{ij}), \quad
        z_i = \sum_j \alpha_{ij} (v_j + a^V_{ij})

        S' = \mathrm{LayerNorm}(E + \mathrm{Dropout}(\mathrm{Concat}_h(z) W^O))

        F = \mathrm{LayerNorm}(S' + \mathrm{Dropout}(\sigma(S' W^{(1)} + b^{(1)})
            W^{(2)} + b^{(2)}))

    :math:`a^K_{ij} = w^K_{\mathrm{clip}(j-i,-K,K)}`,
    :math:`a^V_{ij} = w^V_{\mathrm{clip}(j-i,-K,K)}` are learned edge vectors
    (Shaw et al. eq. 3–4, shared across heads) used only with
    ``relative_positions=True``; otherwise both are 0 (plain scaled dot-product
    attention). Padded keys (``mask_j`` False) get exactly zero attention weight,
    so padding never leaks into valid positions; a row with no valid key gets
    all-zero attention (finite output). Outputs at padded positions are finite but
    meaningless: pool them with the mask. BST's absolute position signal is the
    time gap to the impression: see
    :class:`models.layers.time_gap.TimeGapBucketEmbedding`, added to the item
    embeddings by the caller.

    Args:
        num_heads: number of heads H (>= 1).
        key_dim: per-head query/key size d (>= 1).
        value_dim: per-head value size, default ``key_dim``.
        ffn_units: hidden size of the position-wise FFN, default ``4 * D``.
        ffn_activation: ``"leaky_relu"`` (BST; slope 0.2), ``"gelu"`` or ``"relu"``.
        dropout_rate: dropout on the attention weights and both sub-layer outputs.
        relative_positions: add Shaw et al. relative position representations.
        max_relative_position: clipping distance K (>= 1) for relative positions.
        layer_norm_epsilon: LayerNorm epsilon.
        kernel_initializer: for the projections and the FFN.
        relative_initializer: for the edge vectors :math:`w^K, w^V`.

    Call: ``layer(inputs, mask=None, training=None, return_attention_scores=False)``

        - ``inputs``: ``[batch, S, D]`` (history items + the target item).
        - ``mask``: ``[batch, S]`` bool or 0/1, True = real position.

    Output: ``[batch, S, D]``; with ``return_attention_scores=True`` also the
    attention weights ``[batch, H, S, S]``.

    Example:

    >>> block = TransformerEncoderBlock(num_heads=8, key_dim=8, dropout_rate=0.1)
    >>> seq = tf.random.normal([32, 21, 64])     # 20 history items + target
    >>> mask = tf.sequence_mask(hist_len + 1, 21)  # (target placed last / first)
    >>> block(seq, mask=mask).shape
    TensorShape([32, 21, 64])
    """

    def __init__(self, num_heads, key_dim, value_dim=None, ffn_units=None,
                 ffn_activation="leaky_relu", dropout_rate=0.1,
                 relative_positions=False, max_relative_position=8,
                 layer_norm_epsilon=1e-6, kernel_initializer="glorot_uniform",
                 relative_initializer=None, **kwargs):
        super().__init__(**kwargs)
        owner = "TransformerEncoderBlock"
        self.num_heads = positive_int(owner, "num_heads", num_heads)
        self.key_dim = positive_int(owner, "key_dim", key_dim)
        self.value_dim = positive_int(owner, "value_dim", value_dim, allow_none=True) or self.key_dim
        self.ffn_units = positive_int(owner, "ffn_units", ffn_units, allow_none=True)
        if ffn_activation not in _FFN_ACTIVATIONS:
            raise ValueError(
                f"TransformerEncoderBlock: ffn_activation must be one of {_FFN_ACTIVATIONS}, "
                f"got {ffn_activation!r}.")
        if not isinstance(dropout_rate, (int, float)) or not 0.0 <= dropout_rate < 1.0:
            raise ValueError(
                f"TransformerEncoderBlock: dropout_rate must be in [0, 1), got {dropout_rate!r}.")
        self.ffn_activation = ffn_activation
        self.dropout_rate = float(dropout_rate)
        self.relative_positions = bool(relative_positions)
        self.max_relative_position = positive_int(owner, "max_relative_position", max_relative_position)
        if not layer_norm_epsilon > 0:
            raise ValueError(
                f"TransformerEncoderBlock: layer_norm_epsilon must be > 0, got {layer_norm_epsilon!r}.")
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.relative_initializer = keras.initializers.get(
            relative_initializer or keras.initializers.TruncatedNormal(stddev=0.02))

        self.attention_dropout = keras.layers.Dropout(self.dropout_rate)
        self.attention_output_dropout = keras.layers.Dropout(self.dropout_rate)
        self.ffn_dropout = keras.layers.Dropout(self.dropout_rate)
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name="attention_layer_norm")
        self.ffn_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name="ffn_layer_norm")

    def build(self, input_shape):
        input_shape = tf.TensorShape(input_shape)
        if input_shape.rank != 3 or input_shape[-1] is None:
            raise ValueError(
                "TransformerEncoderBlock: expected inputs [batch, S, D] with known D, "
                f"got {input_shape}.")
        dim = input_shape[-1]
        heads, dk, dv = self.num_heads, self.key_dim, self.value_dim
        ffn_units = self.ffn_units or 4 * dim
        init = lambda: clone_initializer(self.kernel_initializer)  # noqa: E731
        self.query_kernel = self.add_weight("query_kernel", (dim, heads, dk), initializer=init())
        self.query_bias = self.add_weight("query_bias", (heads, dk), initializer="zeros")
        self.key_kernel = self.add_weight("key_kernel", (dim, heads, dk), initializer=init())
        self.key_bias = self.add_weight("key_bias", (heads, dk), initializer="zeros")
        self.value_kernel = self.add_weight("value_kernel", (dim, heads, dv), initializer=init())
        self.value_bias = self.add_weight("value_bias", (heads, dv), initializer="zeros")
        self.output_kernel = self.add_weight("output_kernel", (heads, dv, dim), initializer=init())
        self.output_bias = self.add_weight("output_bias", (dim,), initializer="zeros")
        self.ffn_kernel_1 = self.add_weight("ffn_kernel_1", (dim, ffn_units), initializer=init())
        self.ffn_bias_1 = self.add_weight("ffn_bias_1", (ffn_units,), initializer="zeros")
        self.ffn_kernel_2 = self.add_weight("ffn_kernel_2", (ffn_units, dim), initializer=init())
        self.ffn_bias_2 = self.add_weight("ffn_bias_2", (dim,), initializer="zeros")
        for norm in (self.attention_layer_norm, self.ffn_layer_norm):
            with tf.name_scope(norm.name):
                norm.build(input_shape)
        if self.relative_positions:
            num_distances = 2 * self.max_relative_position + 1
            self.relative_key_embeddings = self.add_weight(
                "relative_key_embeddings", (num_distances, dk),
                initializer=clone_initializer(self.relative_initializer))
            self.relative_value_embeddings = self.add_weight(
                "relative_value_embeddings", (num_distances, dv),
                initializer=clone_initializer(self.relative_initializer))
        super().build(input_shape)

    def _relative_indices(self, length):
        """Index of clip(j - i, -K, K) + K for every (i, j), shape [S, S]."""
        positions = tf.range(length)
        distance = positions[None, :] - positions[:, None]
        k = self.max_relative_position
        return tf.clip_by_value(distance, -k, k) + k

    def _attention(self, x, mask, training):
        q = tf.einsum("bsd,dhk->bshk", x, self.query_kernel) + self.query_bias
        k = tf.einsum("bsd,dhk->bshk", x, self.key_kernel) + self.key_bias
        v = tf.einsum("bsd,dhk->bshk", x, self.value_kernel) + self.value_bias
        logits = tf.einsum("bihk,bjhk->bhij", q, k)
        if self.relative_positions:
            indices = self._relative_indices(tf.shape(x)[1])
            a_key = tf.gather(self.relative_key_embeddings, indices)      # [S, S, dk]
            a_value = tf.gather(self.relative_value_embeddings, indices)  # [S, S, dv]
            logits += tf.einsum("bihk,ijk->bhij", q, a_key)
        logits *= 1.0 / math.sqrt(float(self.key_dim))

        # Masked softmax over keys j: padded keys get weight exactly 0.
        weights = masked_softmax(logits, mask[:, None, None, :])          # mask [B, 1, 1, S]
        dropped = self.attention_dropout(weights, training=training)

        z = tf.einsum("bhij,bjhk->bihk", dropped, v)
        if self.relative_positions:
            z += tf.einsum("bhij,ijk->bihk", dropped, a_value)
        out = tf.einsum("bihk,hkd->bid", z, self.output_kernel) + self.output_bias
        return out, weights

    def call(self, inputs, mask=None, training=None, return_attention_scores=False):
        x = tf.convert_to_tensor(inputs)
        if mask is None:
            mask = tf.ones(tf.shape(x)[:2], dtype=tf.bool)
        else:
            mask = tf.cast(mask, tf.bool)
        attended, weights = self._attention(x, mask, training)
        x = self.attention_layer_norm(
            x + self.attention_output_dropout(attended, training=training))
        hidden = _ffn_activation(self.ffn_activation)(
            tf.einsum("bsd,du->bsu", x, self.ffn_kernel_1) + self.ffn_bias_1)
        ffn = tf.einsum("bsu,ud->bsd", hidden, self.ffn_kernel_2) + self.ffn_bias_2
        x = self.ffn_layer_norm(x + self.ffn_dropout(ffn, training=training))
        if return_attention_scores:
            return x, weights
        return x

    def compute_output_shape(self, input_shape):
        return tf.TensorShape(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "ffn_units": self.ffn_units,
            "ffn_activation": self.ffn_activation,
            "dropout_rate": self.dropout_rate,
            "relative_positions": self.relative_positions,
            "max_relative_position": self.max_relative_position,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "relative_initializer": keras.initializers.serialize(self.relative_initializer),
        })
        return config
