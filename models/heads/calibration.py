"""Platt scaling of the click logit (#37): served click probabilities that match the observed CTR.

The click head's logit s (models/heads/click.py) passes through `PlattCalibration` before
the sigmoid:

    p_click = σ(a·s + b),   a > 0,

with (a, b) = (1, 0) while training (the layer is non-trainable, so the loss sees σ(s)), then
fitted once after training on the VALIDATION split (never the eval days), by maximum
likelihood (Platt 1999, without his target smoothing; the validation day has ~10^4 rows):

    (a, b) = argmin  L(a, b) = −(1/n) Σ_i [ y_i log σ(a s_i + b) + (1 − y_i) log(1 − σ(a s_i + b)) ]

L is convex in (a, b) (a logistic regression on the one feature s), so Newton's method with
a backtracking line search finds the minimum:  θ ← θ − t H⁻¹ g,  g = Xᵀ(p − y)/n,
H = Xᵀ diag(p(1 − p)) X / n,  X = [s, 1],  t halved until L decreases. A fitted a ≤ 0
would reverse the ranking; then the layer stays the identity and the report says why.
With a > 0 the map is strictly increasing, so AUC (and any per-user ranking by p_click)
is unchanged; only the level and spread of the probabilities move.

The two numbers are weights of the Keras ranker, so the SavedModel, the Publisher's
rewrites and deltas, and serving carry them with no special case. A warm-started run
(models/training/warm_start.py restores every weight, these included) resets them to the
identity before training (`reset`) and fits them again afterwards: calibrations never stack.

    layer = PlattCalibration(name="click_calibration")   # [B, 1] -> [B, 1]
    report = fit_model(model, validation_dataset)        # sets (a, b); {"a", "b", "logloss_*", ...}
"""
import numpy as np
import tensorflow as tf
import tf_keras as keras

from models.heads.outputs import CLICK_OUTPUT

LAYER_NAME = "click_calibration"
_MAX_ITER = 100
_TOL = 1e-12  # stop when a Newton step lowers L by less than this


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class PlattCalibration(keras.layers.Layer):
    """y = a·x + b with scalars a, b (non-trainable; set by `fit_model`, identity at build).

    Input / output: the click logit [B, 1]."""

    def build(self, input_shape):
        self.scale = self.add_weight(name="scale", shape=(), initializer="ones", trainable=False)
        self.bias = self.add_weight(name="bias", shape=(), initializer="zeros", trainable=False)
        super().build(input_shape)

    def call(self, logit):
        return logit * tf.cast(self.scale, logit.dtype) + tf.cast(self.bias, logit.dtype)


def _sigmoid(z):
    """σ(z) without overflow: exp(−log(1 + e^{−z}))."""
    return np.exp(-np.logaddexp(0.0, -z))


def log_loss(logits, labels, a: float = 1.0, b: float = 0.0) -> float:
    """L(a, b) of the module docstring (float64, stable: log(1 + e^z) − y z)."""
    z = a * np.asarray(logits, np.float64) + b
    y = np.asarray(labels, np.float64)
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def fit_platt(logits, labels):
    """(a, b) minimising L(a, b) (module docstring), by damped Newton steps from (1, 0).
    ValueError when the labels hold one class only (no finite minimum)."""
    s = np.asarray(logits, np.float64).reshape(-1)
    y = np.asarray(labels, np.float64).reshape(-1)
    if s.shape != y.shape or s.size == 0:
        raise ValueError(f"fit_platt: {s.size} logits vs {y.size} labels")
    if not 0.0 < y.mean() < 1.0:
        raise ValueError(f"fit_platt: the labels are all {int(y[0])}: no finite calibration")
    x = np.stack([s, np.ones_like(s)], axis=1)
    theta = np.array([1.0, 0.0])
    loss = log_loss(s, y, *theta)
    for _ in range(_MAX_ITER):
        p = _sigmoid(x @ theta)
        grad = x.T @ (p - y) / s.size
        hess = (x * (p * (1.0 - p))[:, None]).T @ x / s.size + 1e-12 * np.eye(2)
        step, t = np.linalg.solve(hess, grad), 1.0
        while t > 1e-10:
            new_loss = log_loss(s, y, *(theta - t * step))
            if new_loss <= loss:
                break
            t /= 2.0
        else:
            break
        theta, improvement, loss = theta - t * step, loss - new_loss, new_loss
        if improvement < _TOL:
            break
    return float(theta[0]), float(theta[1])


def calibration_layer(model):
    """The model's `PlattCalibration` layer, or None (a model without a click head)."""
    try:
        return model.get_layer(LAYER_NAME)
    except ValueError:
        return None


def reset(model) -> None:
    """Sets the calibration to the identity (a, b) = (1, 0): before (warm-started) training."""
    layer = calibration_layer(model)
    if layer is not None:
        layer.scale.assign(1.0)
        layer.bias.assign(0.0)


def _click_labels(labels):
    return labels[CLICK_OUTPUT] if isinstance(labels, dict) else labels


def fit_model(model, dataset) -> dict:
    """Fits (a, b) on `dataset` ((features, labels) batches: the validation split) from the
    click logit the model computes BEFORE the layer, sets them, and returns
    {"a", "b", "examples", "logloss_before", "logloss_after", "calibration_before",
    "calibration_after"} (calibration = mean predicted / mean observed CTR on `dataset`);
    "skipped" (the reason) when the fit is refused, and then the layer stays the identity."""
    layer = calibration_layer(model)
    if layer is None:
        return {"skipped": "the model has no click_calibration layer"}
    reset(model)
    logit_model = keras.Model(model.inputs, layer.input)
    # one graph for every batch (as conformal.fit_model_levels): called eagerly, the model ran
    # op by op in Python, minutes on the 4M run's 371k-row validation split. Traced once for
    # the dataset's features (batch dimension None), not again for the last, shorter batch
    logit_of = tf.function(lambda features: logit_model(features, training=False),
                           input_signature=[dataset.element_spec[0]])
    logits, labels = [], []
    for features, batch_labels in dataset:
        logits.append(np.asarray(logit_of(features), np.float64).reshape(-1))
        labels.append(np.asarray(_click_labels(batch_labels), np.float64).reshape(-1))
    s, y = np.concatenate(logits), np.concatenate(labels)
    report = {"examples": int(s.size), "logloss_before": log_loss(s, y),
              "calibration_before": float(np.mean(_sigmoid(s)) / max(y.mean(), 1e-12))}
    try:
        a, b = fit_platt(s, y)
    except ValueError as e:
        return dict(report, skipped=str(e))
    if not a > 0:
        return dict(report, skipped=f"the fitted scale a = {a:.4g} <= 0 would reverse the click ranking")
    layer.scale.assign(a)
    layer.bias.assign(b)
    return dict(report, a=a, b=b, logloss_after=log_loss(s, y, a, b),
                calibration_after=float(np.mean(_sigmoid(a * s + b)) / max(y.mean(), 1e-12)))
