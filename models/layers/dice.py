"""Dice: the data-adaptive activation of DIN.

Zhou et al., "Deep Interest Network for Click-Through Rate Prediction", KDD 2018,
§4.3, eq. (4)–(5).
"""
import tf_keras as keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class Dice(keras.layers.Layer):
    r"""Data-adaptive activation function (DIN §4.3).

    .. math::

        f(s) = p(s) \cdot s + (1 - p(s)) \cdot \alpha \cdot s, \qquad
        p(s) = \sigma\!\left(\frac{s - E[s]}{\sqrt{Var[s] + \epsilon}}\right)

    ``E[s]`` and ``Var[s]`` are per channel (last axis). In training they are the
    mean and the (biased) variance of the current mini-batch, taken over every axis
    but the last; at inference the moving averages are used (folded into per-channel
    scale and shift, ``_inference``), which are updated in
    training as ``moving = momentum * moving + (1 - momentum) * batch``. ``alpha``
    is a learnable per-channel slope, initialised to 0 (so Dice starts as a
    "soft ReLU" gated by the normalised input). Dice generalises PReLU: the
    rectification point adapts to the input distribution instead of sitting at 0.

    An optional ``mask`` (shape = input shape without the last axis, bool or 0/1)
    keeps padded rows out of the batch statistics (their outputs are still
    computed); a batch with no valid row leaves the moving averages untouched.

    Args:
        momentum: moving-average momentum in [0, 1). Default 0.99.
        epsilon: variance floor (> 0). Default 1e-8 (DIN's code uses 1e-8/1e-9).
        alpha_initializer: initializer of ``alpha``. Default zeros (paper).

    Input shape: ``[..., C]`` with a known ``C`` (rank >= 2).
    Output shape: same as the input.

    Example:

    >>> dice = Dice()
    >>> y = dice(tf.random.normal([32, 80]), training=True)  # [32, 80]
    """

    def __init__(self, momentum=0.99, epsilon=1e-8, alpha_initializer="zeros",
                 **kwargs):
        super().__init__(**kwargs)
        if not isinstance(momentum, (int, float)) or not 0.0 <= momentum < 1.0:
            raise ValueError(f"Dice: momentum must be a float in [0, 1), got {momentum!r}.")
        if not isinstance(epsilon, (int, float)) or not epsilon > 0.0:
            raise ValueError(f"Dice: epsilon must be > 0, got {epsilon!r}.")
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.alpha_initializer = keras.initializers.get(alpha_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        input_shape = tf.TensorShape(input_shape)
        if input_shape.rank is not None and input_shape.rank < 2:
            raise ValueError(f"Dice: expected an input of rank >= 2 [..., C], got shape {input_shape}.")
        channels = input_shape[-1]
        if channels is None:
            raise ValueError(f"Dice: the last (channel) axis must be known, got shape {input_shape}.")
        self.alpha = self.add_weight(
            name="alpha", shape=(channels,), initializer=self.alpha_initializer,
            trainable=True)
        self.moving_mean = self.add_weight(
            name="moving_mean", shape=(channels,), initializer="zeros",
            trainable=False)
        self.moving_variance = self.add_weight(
            name="moving_variance", shape=(channels,), initializer="ones",
            trainable=False)
        super().build(input_shape)

    def _batch_moments(self, x, mask):
        """Per-channel mean/variance over all axes but the last (masked rows out)."""
        flat = tf.reshape(x, [-1, tf.shape(x)[-1]])
        if mask is None:
            weights = tf.ones_like(flat[:, :1])
        else:
            weights = tf.reshape(tf.cast(mask, x.dtype), [-1, 1])
        count = tf.reduce_sum(weights)
        mean = tf.math.divide_no_nan(tf.reduce_sum(flat * weights, axis=0), count)
        var = tf.math.divide_no_nan(
            tf.reduce_sum(tf.square(flat - mean) * weights, axis=0), count)
        return mean, var, count

    def call(self, inputs, training=None, mask=None):
        x = tf.convert_to_tensor(inputs)
        if training is None:
            training = keras.backend.learning_phase()

        def train_moments():
            mean, var, count = self._batch_moments(x, mask)
            has_rows = count > 0
            new_mean = tf.where(
                has_rows,
                self.momentum * self.moving_mean + (1.0 - self.momentum) * mean,
                self.moving_mean)
            new_var = tf.where(
                has_rows,
                self.momentum * self.moving_variance + (1.0 - self.momentum) * var,
                self.moving_variance)
            with tf.control_dependencies([self.moving_mean.assign(new_mean),
                                          self.moving_variance.assign(new_var)]):
                return tf.identity(mean), tf.identity(var)

        def inference_moments():
            return (tf.convert_to_tensor(self.moving_mean),
                    tf.convert_to_tensor(self.moving_variance))

        if isinstance(training, (bool, int)):
            if not training:
                return self._inference(x)
            mean, var = train_moments()
        else:
            mean, var = tf.cond(tf.cast(training, tf.bool), train_moments,
                                inference_moments)
        p = tf.sigmoid((x - mean) / tf.sqrt(var + self.epsilon))
        return p * x + (1.0 - p) * self.alpha * x

    def _inference(self, x):
        r"""Inference form with the moving statistics folded into per-channel vectors:
        :math:`f(s) = s\,(\alpha + (1 - \alpha)\,\sigma(a s - a\mu))`, :math:`a = 1/\sqrt{Var + \epsilon}`
        (the same function as the training form, 6 element-wise ops instead of 8)."""
        scale = tf.math.rsqrt(self.moving_variance + self.epsilon)
        p = tf.sigmoid(x * scale - self.moving_mean * scale)
        return x * (self.alpha + (1.0 - self.alpha) * p)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tf.TensorShape(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({
            "momentum": self.momentum,
            "epsilon": self.epsilon,
            "alpha_initializer": keras.initializers.serialize(self.alpha_initializer),
        })
        return config
