"""Dual attention: two-stage target attention for cross-scene intent.

KuaiRand logs the scene (``tab``) of every impression. A user's behaviour in the
*other* scenes says what they are after now; that intent then selects among their
behaviour in the *current* scene (the seed's dual attention; stage units are DIN's
activation unit, Zhou et al. KDD 2018 eq. 3, models/layers/target_attention.py).
"""
import tf_keras as keras
import tensorflow as tf

from models.layers._utils import clone_initializer
from models.layers.target_attention import TargetAttention


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class DualAttention(keras.layers.Layer):
    r"""Two-stage target attention over a history split by scene.

    .. math::

        q_1 = W_1 [U, C] + b_1, \qquad
        f_i = a_1(F_i, q_1), \quad i:\ m_i = 1,\ s_i \ne c     \text{(other scenes)}

        V_{intent} = \sum_i f_i F_i

        q_2 = W_2 [V_{intent}, t] + b_2, \qquad
        g_j = a_2(I_j, q_2), \quad j:\ m_j = 1,\ s_j = c          \text{(current scene)}

        V = \sum_j g_j I_j

    ``U`` is the user profile and ``C`` the context (current scene, hour) embedding,
    ``t`` the target item, ``F_i`` / ``I_j`` the history items of the other / current
    scene (one history tensor, split by ``s_i`` = scene of item i vs ``c`` = current
    scene), ``a_1``, ``a_2`` two DIN activation units
    (:class:`~models.layers.target_attention.TargetAttention`, masked softmax by
    default, so the weights of each stage sum to 1 over its items; a stage without
    items gives 0).

    Args:
        hidden_units, activation, use_softmax, dice_momentum: of both activation units
            (``use_softmax`` default True).
        kernel_initializer, kernel_regularizer: of the query projections W_1, W_2 and
            the units.

    Call:
        ``layer(target, history, history_scene, scene, profile, mask=None,
        training=None, return_attention_scores=False)``

        - ``target`` t ``[B, D]``; ``history`` ``[B, L, D]``;
        - ``history_scene`` s ``[B, L]`` int, ``scene`` c ``[B]`` int (same id space);
        - ``profile`` ``[B, P]``: user profile and context [U, C] (concatenated);
        - ``mask`` ``[B, L]`` bool or 0/1, 1 = real item (None = all real).

    Output: ``[B, 2D]`` = ``[V, V_intent]``; with ``return_attention_scores=True`` a
    tuple ``(output, f, g)`` of the two ``[B, L]`` weight maps (0 outside each stage).

    Example:

    >>> dual = DualAttention(hidden_units=(32,))
    >>> out = dual(t, h, hist_tab, tab, tf.concat([e_user, e_tab, e_hour], -1), mask=m)
    >>> out.shape     # [B, 2 * D]
    """

    def __init__(self, hidden_units=(80, 40), activation="dice", use_softmax=True,
                 dice_momentum=0.99, kernel_initializer="glorot_uniform",
                 kernel_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.activation = activation
        self.use_softmax = bool(use_softmax)
        self.dice_momentum = dice_momentum
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        unit = dict(hidden_units=hidden_units, activation=activation, use_softmax=use_softmax,
                    dice_momentum=dice_momentum, kernel_regularizer=self.kernel_regularizer)
        self.intent_attention = TargetAttention(
            kernel_initializer=clone_initializer(self.kernel_initializer), name="intent", **unit)
        self.current_attention = TargetAttention(
            kernel_initializer=clone_initializer(self.kernel_initializer), name="current", **unit)
        self.hidden_units = self.intent_attention.hidden_units  # validated there

    def build(self, input_shape):  # input_shape: the target's [B, D]
        dim = input_shape[-1]
        if dim is None:
            raise ValueError("DualAttention: the item dim D must be known.")
        self.dim = int(dim)
        dense = lambda name: keras.layers.Dense(  # noqa: E731
            self.dim, kernel_initializer=clone_initializer(self.kernel_initializer),
            kernel_regularizer=self.kernel_regularizer, name=name)
        self.intent_query = dense("intent_query")
        self.current_query = dense("current_query")
        super().build(input_shape)

    def call(self, target, history, history_scene, scene, profile, mask=None, training=None,
             return_attention_scores=False):
        target = tf.convert_to_tensor(target)
        history = tf.convert_to_tensor(history, dtype=target.dtype)
        profile = tf.cast(profile, target.dtype)
        if target.shape.rank != 2 or history.shape.rank != 3 or profile.shape.rank != 2:
            raise ValueError("DualAttention: expected target [B, D], history [B, L, D], profile "
                             f"[B, P]; got {target.shape}, {history.shape}, {profile.shape}.")
        if history.shape[-1] is not None and history.shape[-1] != target.shape[-1]:
            raise ValueError(f"DualAttention: target dim {target.shape[-1]} != history dim "
                             f"{history.shape[-1]}.")
        valid = (tf.ones(tf.shape(history)[:2], tf.bool) if mask is None
                 else tf.cast(mask, tf.bool))
        same = tf.equal(tf.cast(history_scene, tf.int64),
                        tf.reshape(tf.cast(scene, tf.int64), [-1, 1]))
        other_mask = valid & ~same
        current_mask = valid & same
        intent, f = self.intent_attention(self.intent_query(profile), history, mask=other_mask,
                                          training=training, return_attention_scores=True)
        q2 = self.current_query(tf.concat([intent, target], axis=-1))
        value, g = self.current_attention(q2, history, mask=current_mask, training=training,
                                          return_attention_scores=True)
        out = tf.concat([value, intent], axis=-1)
        return (out, f, g) if return_attention_scores else out

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_units": list(self.hidden_units),
            "activation": self.activation,
            "use_softmax": self.use_softmax,
            "dice_momentum": self.dice_momentum,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
        })
        return config
