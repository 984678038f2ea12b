"""Target attention: DIN's local activation unit over the user's behaviour history.

Zhou et al., "Deep Interest Network for Click-Through Rate Prediction", KDD 2018,
§4.3, eq. (3) and Fig. 2; ``scoring="scaled_dot"``: the scaled target attention of
the seed (keys transformed by a learned W, logits / sqrt(d), softmax).
"""
import math

import tf_keras as keras
import tensorflow as tf

from models.layers._utils import clone_initializer, masked_softmax, positive_ints
from models.layers.dice import Dice

_ACTIVATIONS = ("dice", "prelu", "sigmoid", "relu")
_SCORINGS = ("mlp", "scaled_dot")


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class TargetAttention(keras.layers.Layer):
    r"""DIN activation unit + weighted sum pooling of the history (DIN eq. 3).

    .. math::

        w_i = a(h_i, t) = \mathrm{MLP}([h_i,\; t,\; h_i - t,\; h_i \circ t])
              \in R, \qquad
        v_U(t) = \sum_{i=1}^{L} \mathrm{mask}_i \, w_i \, h_i

    The MLP has hidden layers ``hidden_units`` (each ``Dense`` + activation) and a
    linear scalar output. As in the paper the weights are **not** normalised
    ("the normalization with softmax is abandoned ... to reserve the intensity of
    user interests"); padded items get weight 0, so they never contribute. With
    ``use_softmax=True`` the weights are a masked softmax over the valid items
    (sum to 1; all zero when a row has no valid item).

    With ``scoring="scaled_dot"`` (the scaled target attention variant) the score is a
    scaled dot product of the target with the keys transformed by a learned
    ``W`` ``[D, D]``, always softmax-normalised over the valid items:

    .. math::

        w = \mathrm{softmax}_{i: m_i}\Big(\frac{t^\top W h_i}{\sqrt{D}}\Big), \qquad
        v_U(t) = \sum_i w_i h_i

    (the MLP arguments are then unused).

    Args:
        hidden_units: MLP hidden sizes, default ``(80, 40)`` (paper).
        activation: ``"dice"`` (the :class:`models.layers.dice.Dice` layer; padded items are
            kept out of its batch statistics), ``"prelu"``, ``"sigmoid"`` or
            ``"relu"``. Default ``"dice"``.
        use_softmax: masked softmax normalisation of the weights. Default False.
        dice_momentum, dice_epsilon: passed to ``Dice``.
        kernel_initializer, kernel_regularizer: for the MLP ``Dense`` layers (and W).
        scoring: ``"mlp"`` (DIN activation unit, default) or ``"scaled_dot"``.

    Call:
        ``layer(query, keys, mask=None, training=None,
        return_attention_scores=False)``

        - ``query``: target item embedding t, ``[batch, D]``.
        - ``keys``: history item embeddings h, ``[batch, L, D]`` (L may be 0).
        - ``mask``: ``[batch, L]`` bool or 0/1, True/1 = real item, False/0 =
          padding. ``None`` = all items valid.
        - ``keys`` and ``mask`` may have 1 row against ``batch`` queries (one user's
          history, N candidates): they are broadcast, and the per-item part of the
          first Dense is computed once (``_mlp_scores``).

    Output: ``[batch, D]``; with ``return_attention_scores=True`` a tuple
    ``(output, weights)`` with ``weights`` ``[batch, L]`` (0 at padding), e.g.
    for TensorBoard histograms.

    Example:

    >>> att = TargetAttention(hidden_units=(80, 40), activation="dice")
    >>> t = tf.random.normal([32, 16]); h = tf.random.normal([32, 50, 16])
    >>> mask = tf.sequence_mask(hist_len, 50)
    >>> user_interest, w = att(t, h, mask=mask, return_attention_scores=True)
    >>> user_interest.shape, w.shape
    (TensorShape([32, 16]), TensorShape([32, 50]))
    """

    def __init__(self, hidden_units=(80, 40), activation="dice", use_softmax=False,
                 dice_momentum=0.99, dice_epsilon=1e-8,
                 kernel_initializer="glorot_uniform", kernel_regularizer=None,
                 scoring="mlp", **kwargs):
        super().__init__(**kwargs)
        if scoring not in _SCORINGS:
            raise ValueError(f"TargetAttention: scoring must be one of {_SCORINGS}, got {scoring!r}.")
        self.scoring = scoring
        hidden_units = positive_ints("TargetAttention", "hidden_units", hidden_units)
        if not isinstance(activation, str) or activation.lower() not in _ACTIVATIONS:
            raise ValueError(
                f"TargetAttention: activation must be one of {_ACTIVATIONS}, got {activation!r}.")
        self.hidden_units = hidden_units
        self.activation = activation.lower()
        self.use_softmax = bool(use_softmax)
        self.dice_momentum = dice_momentum
        self.dice_epsilon = dice_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

        self.hidden_layers, self.activation_layers = [], []
        for n, units in enumerate(hidden_units if scoring == "mlp" else ()):
            self.hidden_layers.append(keras.layers.Dense(
                units, kernel_initializer=clone_initializer(self.kernel_initializer),
                kernel_regularizer=self.kernel_regularizer, name=f"dense_{n}"))
            if self.activation == "dice":
                act = Dice(momentum=dice_momentum, epsilon=dice_epsilon, name=f"dice_{n}")
            elif self.activation == "prelu":
                act = keras.layers.PReLU(name=f"prelu_{n}")
            else:
                act = keras.layers.Activation(self.activation, name=f"{self.activation}_{n}")
            self.activation_layers.append(act)
        self.score_layer = None if scoring != "mlp" else keras.layers.Dense(
            1, kernel_initializer=clone_initializer(self.kernel_initializer),
            kernel_regularizer=self.kernel_regularizer, name="score")

    def build(self, input_shape):
        if self.scoring == "scaled_dot":  # input_shape: the query's [B, D]
            dim = input_shape[-1]
            if dim is None:
                raise ValueError("TargetAttention: the embedding dim D must be known.")
            self.key_kernel = self.add_weight(
                name="key_kernel", shape=(int(dim), int(dim)),
                initializer=clone_initializer(self.kernel_initializer),
                regularizer=self.kernel_regularizer)
        super().build(input_shape)

    def call(self, query, keys, mask=None, training=None,
             return_attention_scores=False):
        query = tf.convert_to_tensor(query)
        keys = tf.convert_to_tensor(keys, dtype=query.dtype)
        if query.shape.rank != 2 or keys.shape.rank != 3:
            raise ValueError(
                "TargetAttention: expected query [batch, D] and keys [batch, L, D], got "
                f"{query.shape} and {keys.shape}.")
        if (query.shape[-1] is not None and keys.shape[-1] is not None
                and query.shape[-1] != keys.shape[-1]):
            raise ValueError(
                f"TargetAttention: query dim {query.shape[-1]} != keys dim {keys.shape[-1]}.")
        dim = query.shape[-1]
        if dim is None:
            raise ValueError("TargetAttention: the embedding dim D must be known.")
        # query rows B_q and key rows B_k are B or 1 (one user's history against B targets)
        rows = tf.maximum(tf.shape(query)[0], tf.shape(keys)[0])
        length = tf.shape(keys)[1]
        if mask is None:
            mask = tf.ones([rows, length], dtype=tf.bool)
        else:
            mask = tf.broadcast_to(tf.cast(mask, tf.bool), [rows, length])

        if self.scoring == "scaled_dot":
            query_w = tf.matmul(query, self.key_kernel)  # t^T W, [B_q, D]
            logits = tf.matmul(query_w[:, tf.newaxis, :], keys, transpose_b=True)[:, 0, :] / math.sqrt(dim)
            weights = masked_softmax(logits, mask)
        else:
            scores = self._mlp_scores(query, keys, mask, rows, length, dim, training)
            if self.use_softmax:  # a row without valid items gets all-zero weights
                weights = masked_softmax(scores, mask)
            else:
                weights = tf.where(mask, scores, tf.zeros_like(scores))

        output = tf.matmul(weights[:, tf.newaxis, :], keys)[:, 0, :]  # Σ_i w_i h_i, [B, D]
        if return_attention_scores:
            return output, weights
        return output

    def _mlp_scores(self, query, keys, mask, rows, length, dim, training):
        r"""Activation-unit scores [B, L]. The first Dense on [h, t, h - t, h ∘ t] is split
        by blocks of its kernel W = [W_h; W_t; W_d; W_p] (rows of D each):

        .. math::

            W^\top [h, t, h - t, h \circ t] + b
            = \underbrace{(W_h + W_d)^\top h}_{\text{per item}}
            + \underbrace{(W_t - W_d)^\top t + b}_{\text{per target}}
            + \underbrace{W_p^\top (h \circ t)}_{\text{per pair}}

        so only the D-wide product term is computed per (target, item) pair. When the keys
        have 1 row (one user's history, B targets) the per-item and per-pair parts are folded
        into one matrix per request, :math:`M_{d,(i,u)} = h_{i,d} W_{p,du} + (W_t - W_d)_{du}`,
        and the layer is one MatMul ``t M + c`` with :math:`c_{(i,u)} = ((W_h + W_d)^\top h_i + b)_u`.
        Same variables as the concatenated form (tests compare both forms with it).
        """
        layers = self.hidden_layers + [self.score_layer]
        first = layers[0]
        if not first.built:
            with tf.name_scope(first.name):
                first.build(tf.TensorShape([None, 4 * dim]))
        kernel = tf.convert_to_tensor(first.kernel)
        w_h, w_t, w_d, w_p = (kernel[i * dim:(i + 1) * dim] for i in range(4))
        item_w, target_w, units = w_h + w_d, w_t - w_d, first.units

        def per_pair():  # keys with B (or 1) rows
            item_part = tf.reshape(tf.matmul(tf.reshape(keys, [-1, dim]), item_w),
                                   [tf.shape(keys)[0], length, units])           # [B_k, L, U]
            target_part = tf.nn.bias_add(tf.matmul(query, target_w), first.bias)  # [B_q, U]
            pair = keys * query[:, tf.newaxis, :]                                 # [B, L, D]
            hidden = tf.reshape(tf.matmul(tf.reshape(pair, [-1, dim]), w_p), [rows, length, units])
            return tf.reshape(hidden + (item_part + target_part[:, tf.newaxis, :]), [-1, units])

        def one_user():  # keys with 1 row: the three parts as one MatMul [B, D] @ [D, L·U]
            h_t = tf.transpose(keys[0])                                           # [D, L]
            m = h_t[:, :, tf.newaxis] * w_p[:, tf.newaxis, :] + target_w[:, tf.newaxis, :]
            c = tf.reshape(tf.nn.bias_add(tf.matmul(keys[0], item_w), first.bias), [-1])
            return tf.reshape(tf.nn.bias_add(tf.matmul(query, tf.reshape(m, [dim, -1])), c), [-1, units])

        hidden = tf.cond(tf.equal(tf.shape(keys)[0], 1), one_user, per_pair)
        # Score every (row, item) pair as one flat batch so Dice/PReLU see [N, units].
        flat_mask = tf.reshape(mask, [-1])
        for n, dense in enumerate(layers):
            if n:
                hidden = dense(hidden)
            if n < len(self.activation_layers):
                act = self.activation_layers[n]
                if isinstance(act, Dice):
                    hidden = act(hidden, training=training, mask=flat_mask)
                else:
                    hidden = act(hidden)
        return tf.reshape(hidden, [rows, length])

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_units": list(self.hidden_units),
            "activation": self.activation,
            "use_softmax": self.use_softmax,
            "scoring": self.scoring,
            "dice_momentum": self.dice_momentum,
            "dice_epsilon": self.dice_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
        })
        return config
