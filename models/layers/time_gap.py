"""Time-gap position of BST: the bucketed time between a history item and the impression.

Chen et al., "Behavior Sequence Transformer for E-commerce Recommendation in
Alibaba", DLP-KDD 2019 (BST), §2.2 "Positional embedding".
"""
import numpy as np
import tf_keras as keras
import tensorflow as tf

from models.layers._utils import positive_int

SECONDS_PER_DAY = 86400.0


def log_spaced_boundaries(num_buckets=16, min_gap_s=1.0, max_gap_s=30 * SECONDS_PER_DAY):
    """``num_buckets - 1`` geometric bucket boundaries in seconds from min to max."""
    return [float(b) for b in np.geomspace(min_gap_s, max_gap_s, num_buckets - 1)]


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class TimeGapBucketEmbedding(keras.layers.Layer):
    r"""Embedding of the bucketed time gap to the impression (BST §2.2 "position").

    BST's position feature for history item :math:`v_i` is
    :math:`pos(v_i) = t(v_t) - t(v_i)`, the time gap (here in seconds) between the
    impression and the earlier interaction, bucketed and embedded:

    .. math::

        b_i = \#\{\, \beta \in \mathrm{boundaries} : \beta \le gap_i \,\}, \qquad
        p_i = P[b_i] \in R^D

    so bucket 0 is ``gap < boundaries[0]`` (the target item, gap 0) and bucket
    ``len(boundaries)`` is ``gap >= boundaries[-1]``. The caller adds ``p_i`` to
    the item embeddings before the
    :class:`models.layers.transformer.TransformerEncoderBlock`. Negative or NaN gaps
    fall in bucket 0.

    Args:
        output_dim: embedding dim D (= the item embedding dim).
        boundaries: strictly increasing positive boundaries in seconds. Default
            ``log_spaced_boundaries(num_buckets, min_gap_s, max_gap_s)``.
        num_buckets: number of buckets when ``boundaries`` is None (>= 2).
        min_gap_s, max_gap_s: range of the default log-spaced boundaries.
        embeddings_initializer: initializer of the table (small, default
            truncated normal with stddev 0.02).

    Input shape: ``[...]`` time gaps in seconds (int or float).
    Output shape: ``[..., output_dim]``.

    Example:

    >>> gaps = TimeGapBucketEmbedding(output_dim=64)
    >>> p = gaps(tf.constant([[0.0, 35.0, 7200.0]]))   # [1, 3, 64]
    >>> seq = item_embeddings + p
    """

    def __init__(self, output_dim, boundaries=None, num_buckets=16, min_gap_s=1.0,
                 max_gap_s=30 * SECONDS_PER_DAY, embeddings_initializer=None, **kwargs):
        super().__init__(**kwargs)
        output_dim = positive_int("TimeGapBucketEmbedding", "output_dim", output_dim)
        if boundaries is None:
            if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)) or num_buckets < 2:
                raise ValueError(
                    f"TimeGapBucketEmbedding: num_buckets must be an int >= 2, got {num_buckets!r}.")
            if not 0 < min_gap_s < max_gap_s:
                raise ValueError(
                    "TimeGapBucketEmbedding: need 0 < min_gap_s < max_gap_s, got "
                    f"{min_gap_s!r}, {max_gap_s!r}.")
            boundaries = log_spaced_boundaries(int(num_buckets), min_gap_s, max_gap_s)
        else:
            boundaries = [float(b) for b in boundaries]
            if not boundaries:
                raise ValueError("TimeGapBucketEmbedding: boundaries must not be empty.")
            if any(not np.isfinite(b) for b in boundaries) or boundaries[0] <= 0 or any(
                    b >= c for b, c in zip(boundaries, boundaries[1:])):
                raise ValueError(
                    "TimeGapBucketEmbedding: boundaries must be finite, positive and strictly "
                    f"increasing (gap 0 is bucket 0), got {boundaries!r}.")
        self.output_dim = int(output_dim)
        self.boundaries = boundaries
        self.num_buckets = len(boundaries) + 1
        self.min_gap_s = float(min_gap_s)
        self.max_gap_s = float(max_gap_s)
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer or keras.initializers.TruncatedNormal(stddev=0.02))

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            "embeddings", (self.num_buckets, self.output_dim),
            initializer=self.embeddings_initializer)
        super().build(input_shape)

    def bucketize(self, gaps_s):
        """Bucket index of every gap, int32, same shape as the input."""
        gaps = tf.cast(gaps_s, tf.float32)
        gaps = tf.where(tf.math.is_nan(gaps), tf.zeros_like(gaps), gaps)
        return tf.raw_ops.Bucketize(input=gaps, boundaries=self.boundaries)

    def call(self, inputs):
        return tf.gather(self.embeddings, self.bucketize(inputs))

    def compute_output_shape(self, input_shape):
        return tf.TensorShape(input_shape).concatenate([self.output_dim])

    def get_config(self):
        config = super().get_config()
        config.update({
            "output_dim": self.output_dim,
            "boundaries": list(self.boundaries),
            "num_buckets": self.num_buckets,
            "min_gap_s": self.min_gap_s,
            "max_gap_s": self.max_gap_s,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        })
        return config
