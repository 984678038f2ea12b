"""Periodic embeddings of numeric features (PLR).

Gorishniy, Rubachev, Babenko, "On Embeddings for Numerical Features in Tabular Deep
Learning", NeurIPS 2022, §3.3 (Periodic) with the Linear + ReLU on top ("PLR").
"""
import math

import tf_keras as keras
import tensorflow as tf

from models.layers._utils import positive_int


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class PeriodicEmbedding(keras.layers.Layer):
    r"""One embedding per numeric feature, a learned periodic basis then Linear + ReLU (PLR).

    .. math::

        v_j &= [\sin(2\pi c_j x_j), \cos(2\pi c_j x_j)] \in R^{2k},
               \qquad c_j \in R^k,\ c_{j,i} \sim N(0, \sigma^2) \text{ at init, trained} \\
        e_j &= \mathrm{ReLU}(W_j v_j + b_j) \in R^D, \qquad W_j \in R^{D \times 2k}

    for every feature j of the ``[B, N]`` input (z-scored numerics), each with its own
    frequencies c_j and its own W_j, b_j. An MLP fed with x_j sees one straight line per
    feature at its first layer; e_j lets it see a step-like function of x_j (what a tree's
    split on x_j gives), which is why the paper's MLP-PLR closes most of an MLP's gap to
    gradient boosting on numeric-heavy data. σ sets the scale of the functions learnt at
    the start (the paper's most important hyperparameter; inputs here are z-scores).

    Args:
        output_dim: D, the width of each feature's embedding.
        frequencies: k, the number of frequencies per feature.
        sigma: σ, the standard deviation of the initial frequencies (> 0).

    Input shape: ``[B, N]`` float. Output shape: ``[B, N * D]`` (the N embeddings
    concatenated, feature-major).

    Example:

    >>> emb = PeriodicEmbedding(output_dim=8, frequencies=16, sigma=0.3)
    >>> e = emb(tf.zeros([4, 40]))   # [4, 320]
    """

    def __init__(self, output_dim=8, frequencies=16, sigma=0.3, **kwargs):
        super().__init__(**kwargs)
        self.output_dim = positive_int("PeriodicEmbedding", "output_dim", output_dim)
        self.frequencies = positive_int("PeriodicEmbedding", "frequencies", frequencies)
        if not (isinstance(sigma, (int, float)) and not isinstance(sigma, bool) and math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"PeriodicEmbedding: sigma must be a finite number > 0, got {sigma!r}.")
        self.sigma = float(sigma)

    def build(self, input_shape):
        n = input_shape[-1]
        if n is None:
            raise ValueError("PeriodicEmbedding: the number of features (last input dim) must be known.")
        k, d = self.frequencies, self.output_dim
        self.c = self.add_weight(name="frequencies", shape=(n, k),
                                 initializer=keras.initializers.RandomNormal(stddev=self.sigma))
        # W_j as the Dense default (Glorot uniform over 2k inputs, D outputs) per feature
        limit = math.sqrt(6.0 / (2 * k + d))
        self.w = self.add_weight(name="kernel", shape=(n, 2 * k, d),
                                 initializer=keras.initializers.RandomUniform(-limit, limit))
        self.b = self.add_weight(name="bias", shape=(n, d), initializer="zeros")
        super().build(input_shape)

    def call(self, x):
        x = tf.cast(x, self.compute_dtype)
        angle = (2.0 * math.pi) * x[..., tf.newaxis] * self.c            # [B, N, k]
        v = tf.concat([tf.sin(angle), tf.cos(angle)], axis=-1)           # [B, N, 2k]
        e = tf.nn.relu(tf.einsum("bnf,nfd->bnd", v, self.w) + self.b)   # [B, N, D]
        return tf.reshape(e, [-1, e.shape[1] * self.output_dim])

    def compute_output_shape(self, input_shape):
        return tf.TensorShape([input_shape[0], input_shape[-1] * self.output_dim])

    def get_config(self):
        return dict(super().get_config(), output_dim=self.output_dim, frequencies=self.frequencies,
                    sigma=self.sigma)
