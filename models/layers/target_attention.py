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
        - ``keys`` and ``mask`` may have a static batch of 1 against ``batch`` queries
          (one user's history, N candidates; export's ``serving_rank``): only the
          history's valid items are scored, the first Dense as one MatMul over the
          targets (``_call_one_user``). Otherwise keys must have the query's rows.

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
        if mask is not None:
            mask = tf.cast(mask, tf.bool)
        # One user's history against B targets: keys (and mask) with a static batch of 1
        # (serving_rank pins it), chosen when tracing, so the N-row graph (training,
        # serving_default) has no branch and no broadcast.
        if keys.shape[0] == 1 and query.shape[0] != 1 and (mask is None or mask.shape[0] == 1):
            return self._call_one_user(query, keys[0], mask, dim, training, return_attention_scores)
        rows, length = tf.shape(keys)[0], tf.shape(keys)[1]
        all_valid = mask is None
        if all_valid:
            mask = tf.ones([rows, length], dtype=tf.bool)

        if self.scoring == "scaled_dot":
            query_w = tf.matmul(query, self.key_kernel)  # t^T W, [B, D]
            logits = tf.matmul(query_w[:, tf.newaxis, :], keys, transpose_b=True)[:, 0, :]
            weights = masked_softmax(logits / math.sqrt(dim), mask)
        else:
            if all_valid:  # every pair is scored: nothing to gather
                scores = self._mlp_scores(self._first_dense_concatenated(query, keys, dim), None,
                                          rows, length, training)
            else:
                scores = self._valid_pair_scores(query, keys, mask, rows, length, dim, training)
            if self.use_softmax:  # a row without valid items gets all-zero weights
                weights = masked_softmax(scores, mask)
            else:
                weights = tf.where(mask, scores, tf.zeros_like(scores))

        output = tf.matmul(weights[:, tf.newaxis, :], keys)[:, 0, :]  # Σ_i w_i h_i, [B, D]
        if return_attention_scores:
            return output, weights
        return output

    def _call_one_user(self, query, keys, mask, dim, training, return_attention_scores):
        """One user's history ``keys`` [L, D] (``mask`` [1, L] or None) against B targets.
        Only its K valid items are scored (padding gets weight 0 anyway), so the
        per-pair work is B·K, not B·L; the first Dense is one MatMul
        (``_first_dense_one_user``). Same values as the N-row path on tiled inputs.

        A zero item follows the K valid ones with its weight forced to 0, so no tensor
        is empty when K = 0 (a user with no history): oneDNN's fused MatMul aborts the
        whole process on a zero-size input (``dnnl::error``, uncatchable; TF 2.16)."""
        rows, length = tf.shape(query)[0], tf.shape(keys)[0]
        if mask is not None:
            valid = tf.cast(tf.where(tf.reshape(mask, [-1]))[:, 0], tf.int32)   # [K]
            keys = tf.gather(keys, valid)                                        # [K, D]
        k = tf.shape(keys)[0]
        keys = tf.pad(keys, [[0, 1], [0, 0]])                                   # [K + 1, D]
        real = tf.sequence_mask(k, k + 1)[tf.newaxis, :]                         # [1, K + 1]
        if self.scoring == "scaled_dot":
            logits = tf.matmul(tf.matmul(query, self.key_kernel), keys, transpose_b=True)
            weights = masked_softmax(logits / math.sqrt(dim), real)
        else:
            hidden = self._first_dense_one_user(query, keys, dim)
            flat_real = tf.reshape(tf.tile(real, [rows, 1]), [-1])  # Dice's batch statistics skip the zero item
            scores = self._mlp_scores(hidden, flat_real, rows, k + 1, training)
            weights = (masked_softmax(scores, real) if self.use_softmax
                       else scores * tf.cast(real, scores.dtype))
        output = tf.matmul(weights, keys)  # Σ_i w_i h_i, [B, D]; zeros when K = 0
        if not return_attention_scores:
            return output
        weights = weights[:, :k]
        if mask is not None:  # [B, K] -> [B, L], 0 at padding
            weights = tf.transpose(tf.scatter_nd(valid[:, tf.newaxis], tf.transpose(weights),
                                                 tf.stack([length, rows])))
        return output, weights

    def _valid_pair_scores(self, query, keys, mask, rows, length, dim, training):
        """MLP scores [B, L] of the valid (row, item) pairs, 0 at padding (whose weight is
        0 anyway): the activation unit runs on the K valid pairs only, gathered from the
        B·L. Histories are mostly padding (KuaiRand-Pure's train split: 8.8 % of the
        L = 50 slots are real), and scoring every pair was ~70 % of DIN's training step
        (#15, batch 1024: 133 -> 37 ms). Same values as scoring every pair: Dice's batch
        statistics skipped the padded pairs before too.

        A zero pair follows the K valid ones, kept out of Dice's statistics and dropped,
        so no tensor is empty when K = 0 (oneDNN's fused MatMul aborts the process on a
        zero-size input, ``_call_one_user``)."""
        valid = tf.cast(tf.where(tf.reshape(mask, [-1]))[:, 0], tf.int32)         # [K] in B·L
        k = tf.shape(valid)[0]
        items = tf.pad(tf.gather(tf.reshape(keys, [-1, dim]), valid), [[0, 1], [0, 0]])   # [K + 1, D]
        targets = tf.pad(tf.gather(query, valid // length), [[0, 1], [0, 0]])             # [K + 1, D]
        hidden = self._first_dense()(tf.concat([items, targets, items - targets, items * targets], axis=-1))
        scores = self._mlp_scores(hidden, tf.sequence_mask(k, k + 1), 1, k + 1, training)[0, :k]
        return tf.reshape(tf.scatter_nd(valid[:, tf.newaxis], scores, [rows * length]), [rows, length])

    def _first_dense(self):
        return self.hidden_layers[0] if self.hidden_layers else self.score_layer

    def _first_dense_concatenated(self, query, keys, dim):
        """The first Dense on [h, t, h - t, h ∘ t] for every (row, item) pair: [B·L, U]
        (keys with the query's B rows; the paper's form)."""
        queries = tf.broadcast_to(query[:, tf.newaxis, :], tf.shape(keys))
        features = tf.concat([keys, queries, keys - queries, keys * queries], axis=-1)
        return self._first_dense()(tf.reshape(features, [-1, 4 * dim]))

    def _first_dense_one_user(self, query, keys, dim):
        r"""The first Dense for one user's history ``keys`` [L, D] against B targets:
        [B·L, U], as one MatMul. With its kernel split by blocks W = [W_h; W_t; W_d; W_p]
        (rows of D each),

        .. math::

            W^\top [h, t, h - t, h \circ t] + b
            = \underbrace{(W_h + W_d)^\top h + b}_{c_i,\ \text{per item}}
            + \underbrace{(W_t - W_d)^\top t + W_p^\top (h \circ t)}_{t^\top M_i}, \qquad
            M_{d,(i,u)} = h_{i,d} W_{p,du} + (W_t - W_d)_{du}

        so the layer is ``t M + c`` with M [D, L·U] built once per request. Same variables
        as the concatenated form (tests compare both forms with them).
        """
        first = self._first_dense()
        if not first.built:  # the variables of the concatenated form: kernel [4D, U], bias [U]
            with tf.name_scope(first.name):
                first.build(tf.TensorShape([None, 4 * dim]))
        kernel = tf.convert_to_tensor(first.kernel)
        w_h, w_t, w_d, w_p = (kernel[i * dim:(i + 1) * dim] for i in range(4))
        m = tf.transpose(keys)[:, :, tf.newaxis] * w_p[:, tf.newaxis, :] + (w_t - w_d)[:, tf.newaxis, :]
        c = tf.reshape(tf.nn.bias_add(tf.matmul(keys, w_h + w_d), first.bias), [-1])    # [L·U]
        return tf.reshape(tf.nn.bias_add(tf.matmul(query, tf.reshape(m, [dim, -1])), c), [-1, first.units])

    def _mlp_scores(self, hidden, flat_mask, rows, length, training):
        """Scores [B, L] from the first Dense's output ``hidden`` [B·L, U]: the activations
        and the remaining Dense layers, every (row, item) pair as one flat batch so
        Dice/PReLU see [B·L, units] (Dice's batch statistics skip the padded items of
        ``flat_mask`` [B·L]; None = all valid)."""
        layers = self.hidden_layers + [self.score_layer]
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
