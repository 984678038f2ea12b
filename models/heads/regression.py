"""Watch-time regression head: ŵ = expm1(softplus(w_w·z + b_w)), loss (log1p y − log1p ŵ)²."""
import tensorflow as tf
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import WATCH_OUTPUT


def log1p_mse(y_true, y_pred):
    """Squared error in log1p space: (log1p(y) - log1p(ŷ))²."""
    y_true = tf.cast(y_true, tf.float32)
    return tf.reduce_mean(tf.square(tf.math.log1p(y_true) - tf.math.log1p(tf.maximum(y_pred, 0.0))), axis=-1)


class WatchTimeRegressionHead(Head):
    """Watch time in seconds, trained as a regression on log1p(seconds).

    Output "watch_time_s" [B, 1] (>= 0); loss `log1p_mse`; metric MAE (seconds).
    """

    name = WATCH_OUTPUT
    output_names = (WATCH_OUTPUT,)

    def build(self, representation, linear_logit=None, outputs=None):
        log_watch = keras.layers.Dense(1, activation="softplus", name="log1p_watch")(representation)
        watch = keras.layers.Lambda(lambda t: tf.math.expm1(t), name=WATCH_OUTPUT)(log_watch)
        return {WATCH_OUTPUT: watch}

    def losses(self):
        return {WATCH_OUTPUT: log1p_mse}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]}
