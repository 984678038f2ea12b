"""Weighted logistic regression (WLR) for watch time.

Paper: Covington et al., "Deep Neural Networks for YouTube Recommendations", RecSys
2016, §4.2 "Modeling Expected Watch Time".

Every impression is a positive with weight y (its watch time, seconds) and a negative
with weight 1. With p = σ(l), the weighted cross-entropy per impression is

    L(y, l) = y·softplus(−l) + softplus(l)        (= −y log p − log(1 − p))

and its minimiser over l for a fixed x satisfies e^l = E[y | x]: the odds of the
learnt logit are the expected watch time, so the prediction is exp(l). (YouTube's
form counts clicks only, e^l ≈ E[T](1 + P); here every impression is a negative, so
the odds are E[y] exactly.)
"""
import tensorflow as tf
import tf_keras as keras

# exp(logit) is clipped to e^[-20, 12] (≈ 2e-9 s .. 45 h): an early, large logit must
# not overflow the MAE metric.
LOGIT_CLIP = (-20.0, 12.0)


def wlr_loss(y_true, logit):
    """Σ y·softplus(−l) + softplus(l): weighted BCE with a positive of weight y and a
    negative of weight 1 per impression; minimised at e^l = E[y | x]. `y_true` is
    reshaped to `logit`'s shape ([B, 1]); returns [B]."""
    y = tf.reshape(tf.cast(y_true, logit.dtype), tf.shape(logit))
    return tf.reduce_mean(y * tf.nn.softplus(-logit) + tf.nn.softplus(logit), axis=-1)


def wlr_watch_time(logit):
    """E[y | x] = exp(l), with l clipped to `LOGIT_CLIP`."""
    return tf.exp(tf.clip_by_value(logit, *LOGIT_CLIP))


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class WlrLoss(keras.losses.Loss):
    """Keras loss: `wlr_loss(y, logit) / scale`. `scale` (e.g. the mean train watch time)
    keeps a loss whose positive weights are seconds on the click loss's scale; it does
    not move the optimum."""

    def __init__(self, scale: float = 1.0, name: str = "wlr_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        if not scale > 0:
            raise ValueError(f"WlrLoss: scale must be > 0, got {scale!r}")
        self.scale = float(scale)

    def call(self, y_true, y_pred):
        return wlr_loss(y_true, y_pred) / self.scale

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}
