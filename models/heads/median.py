"""Watch-time quantile head: ŵ = expm1(softplus(w·z + b)), pinball loss on log1p (or seconds).

MAE is minimised by the conditional median, and the heads before it target something
else (log1p MSE: the geometric mean, CREAD: E[y], CQE's CSE: t_0.25). At τ = 0.5 the
pinball loss is half the L1 error in log1p space; log1p is increasing, so its minimiser
is the conditional median of y itself (quantiles commute with monotone maps). The two
spaces share the minimiser only for a model that can reach it; otherwise log1p weighs every
row's error alike in log space, seconds (``space="seconds"``: the L1 error MAE measures at
τ = 0.5) weighs the long watches more.
"""
import tensorflow as tf
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import WATCH_OUTPUT


SPACES = ("log1p", "seconds")


def seconds_pinball(tau: float = 0.5):
    """Loss fn(y, ŷ) = ρ_τ(y − ŷ) in seconds, mean over the last axis ([B, 1] -> [B])."""
    tau = float(tau)
    if not 0.0 < tau < 1.0:
        raise ValueError(f"seconds_pinball: tau must be in (0, 1), got {tau}")

    def loss(y_true, y_pred):
        y_pred = tf.convert_to_tensor(y_pred)
        u = tf.cast(y_true, y_pred.dtype) - y_pred
        return tf.reduce_mean(u * (tau - tf.cast(u < 0, u.dtype)), axis=-1)

    loss.__name__ = f"seconds_pinball_{tau:g}"
    return loss


def log1p_pinball(tau: float = 0.5):
    """Loss fn(y, ŷ) = ρ_τ(log1p(y) − log1p(max(ŷ, 0))), ρ_τ(u) = u (τ − 1(u < 0)),
    mean over the last axis ([B, 1] -> [B])."""
    tau = float(tau)
    if not 0.0 < tau < 1.0:
        raise ValueError(f"log1p_pinball: tau must be in (0, 1), got {tau}")

    def loss(y_true, y_pred):
        y_pred = tf.convert_to_tensor(y_pred)
        u = tf.math.log1p(tf.maximum(tf.cast(y_true, y_pred.dtype), 0.0)) - tf.math.log1p(tf.maximum(y_pred, 0.0))
        return tf.reduce_mean(u * (tau - tf.cast(u < 0, u.dtype)), axis=-1)

    loss.__name__ = f"log1p_pinball_{tau:g}"
    return loss


class WatchTimeQuantileHead(Head):
    """The τ-quantile of watch time in seconds ("watch_time_s" [B, 1], >= 0; τ = 0.5: the
    median), trained with `log1p_pinball(tau)` (`space="log1p"`) or `seconds_pinball(tau)`
    (`space="seconds"`); metric MAE (seconds). Same layers as `WatchTimeRegressionHead`
    (Dense "log1p_watch" with softplus, then expm1); `tower_units`: ReLU layers of the
    head's own before it ("watch_tower_<i>", on z itself: the loss still trains the body)."""

    name = WATCH_OUTPUT
    output_names = (WATCH_OUTPUT,)

    def __init__(self, tau: float = 0.5, space: str = "log1p", tower_units=()):
        if space not in SPACES:
            raise ValueError(f"WatchTimeQuantileHead: space must be one of {SPACES}, got {space!r}")
        self.tau, self.space = float(tau), space
        self.tower_units = tuple(int(u) for u in tower_units)
        if any(u < 1 for u in self.tower_units):
            raise ValueError(f"WatchTimeQuantileHead: tower_units must be >= 1, got {tower_units}")
        log1p_pinball(self.tau)  # validates

    def build(self, representation, linear_logit=None, outputs=None):
        h = representation
        for i, units in enumerate(self.tower_units):
            h = keras.layers.Dense(units, activation="relu", name=f"watch_tower_{i}")(h)
        log_watch = keras.layers.Dense(1, activation="softplus", name="log1p_watch")(h)
        watch = keras.layers.Lambda(lambda t: tf.math.expm1(t), name=WATCH_OUTPUT)(log_watch)
        return {WATCH_OUTPUT: watch}

    def losses(self):
        return {WATCH_OUTPUT: (log1p_pinball if self.space == "log1p" else seconds_pinball)(self.tau)}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]}
