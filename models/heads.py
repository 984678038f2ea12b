"""Pluggable output heads: any ranker body -> named outputs, losses and metrics.

A ranker computes a representation z [B, K] (and optionally a first-order click
logit, e.g. xDeepFM's linear part); heads turn it into outputs:

    ClickHead:            p_click = σ(w_c·z + b_c [+ linear_logit])       "click_prob"
                          loss: binary cross-entropy; metric AUC
    WatchTimeRegressionHead:
                          ŵ = expm1(softplus(w_w·z + b_w))                "watch_time_s"
                          loss: (log1p(y) - log1p(ŵ))²; metric MAE (seconds)

`compile_ranker(inputs, z, heads, ...)` builds and compiles the keras.Model whose
outputs are {head.output_name: tensor}. The watch-time issue adds CREAD and CQE heads
with the same interface (`outputs`, `losses`, `metrics`) and passes them here.
"""
import tf_keras as keras
import tensorflow as tf

CLICK_OUTPUT = "click_prob"
WATCH_OUTPUT = "watch_time_s"


def log1p_mse(y_true, y_pred):
    """Squared error in log1p space: (log1p(y) - log1p(ŷ))²."""
    y_true = tf.cast(y_true, tf.float32)
    return tf.reduce_mean(tf.square(tf.math.log1p(y_true) - tf.math.log1p(tf.maximum(y_pred, 0.0))), axis=-1)


class ClickHead:
    """Click probability from z (plus an optional first-order logit, eq. 15 of xDeepFM)."""

    output_name = CLICK_OUTPUT

    def outputs(self, z, linear_logit=None):
        logit = keras.layers.Dense(1, name="click_logit")(z)
        if linear_logit is not None:
            logit = keras.layers.Add(name="click_logit_plus_linear")([logit, linear_logit])
        return {CLICK_OUTPUT: keras.layers.Activation("sigmoid", name=CLICK_OUTPUT)(logit)}

    def losses(self):
        return {CLICK_OUTPUT: keras.losses.BinaryCrossentropy()}

    def metrics(self):
        return {CLICK_OUTPUT: [keras.metrics.AUC(name="auc")]}


class WatchTimeRegressionHead:
    """Watch time in seconds, trained as a regression on log1p(seconds)."""

    output_name = WATCH_OUTPUT

    def outputs(self, z, linear_logit=None):
        log_watch = keras.layers.Dense(1, activation="softplus", name="log1p_watch")(z)
        watch = keras.layers.Lambda(lambda t: tf.math.expm1(t), name=WATCH_OUTPUT)(log_watch)
        return {WATCH_OUTPUT: watch}

    def losses(self):
        return {WATCH_OUTPUT: log1p_mse}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]}


def default_heads():
    return [ClickHead(), WatchTimeRegressionHead()]


def compile_ranker(inputs, representation, heads=None, linear_logit=None, learning_rate=1e-3,
                   loss_weights=None, name="ranker") -> keras.Model:
    """keras.Model(inputs -> {output: tensor}) with every head's loss and metrics, compiled.

    `linear_logit` (optional, [B, 1]) is added to the click logit only.
    """
    heads = list(heads) if heads is not None else default_heads()
    names = [h.output_name for h in heads]
    if len(set(names)) != len(names):
        raise ValueError(f"compile_ranker: duplicate head outputs {names}")
    outputs, losses, metrics = {}, {}, {}
    for head in heads:
        outputs.update(head.outputs(representation, linear_logit=linear_logit))
        losses.update(head.losses())
        metrics.update(head.metrics())
    loss_weights = {k: float(v) for k, v in (loss_weights or {}).items() if k in outputs}
    model = keras.Model(inputs=inputs, outputs=outputs, name=name)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=losses,
                  loss_weights={k: loss_weights.get(k, 1.0) for k in outputs}, metrics=metrics)
    return model
