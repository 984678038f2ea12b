"""CREAD head: watch time as M ordinal classifications plus a restoration.

Paper: Sun et al., "CREAD: A Classification-Restoration Framework with Error
Adaptive Discretization for Watch Time Prediction in Video Recommender Systems",
AAAI 2024.

Given thresholds ``0 = t_0 < t_1 < ... < t_M = T_max`` (from EAD, models/watch_time/ead.py),
the head predicts the survival probabilities ``phi_m = P(y > t_m)`` with labels
``y_m = 1(y > t_m)`` and restores the expected watch time::

    riemann   (eq. 4):  y_hat = sum_m phi_m (t_m - t_{m-1})
    trapezoid        :  y_hat = sum_m (phi_{m-1} + phi_m) / 2 (t_m - t_{m-1}),  phi_0 = P(y > 0)

Why these are estimates of E[y] and how far off they are. With S(t) = P(y > t)::

    E[y] = int_0^inf S(t) dt = int_0^T_max S(t) dt + E[(y - T_max)^+]

and S non-increasing gives on bucket m ``S(t_m) dt_m <= int S <= S(t_{m-1}) dt_m``, so

    0 <= E[y] - riemann    <= B + tail,   B = sum_m dt_m (S(t_{m-1}) - S(t_m)),
    |E[y] - tail - trapezoid| <= B / 2    (trapezoid = midpoint of the two sums),

with tail = E[(y - T_max)^+]. For S smooth the trapezoid error is O(dt^3 S'') per
bucket, much smaller than Riemann's O(dt^2 S').

phi_0 choice: the trapezoid rule needs S at t_0 = 0, which no classifier predicts.
We use a constant ``phi0`` (default 1.0: watch time of an impression is almost
always > 0; set it to the empirical P(y > 0) of the training data when there are
many exact zeros). Its effect is bounded: it only enters bucket 1 as
``(phi0 - S(0)) dt_1 / 2``.

Loss (mean over the batch)::

    L = lambda_ce      * sum_m BCE(phi_m, y_m)
      + lambda_restore * Huber_delta(y_hat - y)
      + lambda_ord     * sum_{m<M} max(phi_{m+1} - phi_m, 0)

The last term penalises survival probabilities that increase with t (they must be
non-increasing).
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

RESTORATION_RULES = ("riemann", "trapezoid")


def _check_rule(rule: str) -> None:
    if rule not in RESTORATION_RULES:
        raise ValueError(f"restoration rule must be one of {RESTORATION_RULES}, got {rule!r}")


def validate_thresholds(thresholds) -> np.ndarray:
    """1-d, finite, strictly increasing, all > 0 (t_0 = 0 is implicit)."""
    t = np.asarray(thresholds, dtype=np.float64)
    if t.ndim != 1 or t.size < 1:
        raise ValueError(f"thresholds must be a non-empty 1-d sequence, got shape {t.shape}")
    if not np.all(np.isfinite(t)) or t[0] <= 0 or np.any(np.diff(t) <= 0):
        raise ValueError("thresholds must be finite, > 0 and strictly increasing "
                         f"(t_0 = 0 is implicit), got {t.tolist()}")
    return t


def bucket_widths(thresholds) -> np.ndarray:
    """``dt_m = t_m - t_{m-1}`` with t_0 = 0."""
    t = validate_thresholds(thresholds)
    return np.diff(np.concatenate([[0.0], t]))


# ------------------------------------------------------------------- NumPy
def ordinal_labels(y, thresholds) -> np.ndarray:
    """``y_m = 1(y > t_m)``: shape ``y.shape + [M]``, float."""
    t = validate_thresholds(thresholds)
    return (np.asarray(y, dtype=np.float64)[..., None] > t).astype(np.float64)


def restore(phi, thresholds, rule: str = "trapezoid", phi0: float = 1.0) -> np.ndarray:
    """Expected watch time from survival probabilities ``phi[..., m] = P(y > t_m)``.

    riemann: ``sum_m phi_m dt_m`` (CREAD eq. 4); trapezoid:
    ``sum_m (phi_{m-1} + phi_m) / 2 dt_m`` with ``phi_0 = phi0``.
    """
    _check_rule(rule)
    dt = bucket_widths(thresholds)
    phi = np.asarray(phi, dtype=np.float64)
    if phi.shape[-1] != dt.size:
        raise ValueError(f"phi has {phi.shape[-1]} columns, thresholds {dt.size}")
    if rule == "riemann":
        return np.sum(phi * dt, axis=-1)
    prev = np.concatenate([np.full(phi.shape[:-1] + (1,), float(phi0)), phi[..., :-1]], axis=-1)
    return np.sum(0.5 * (prev + phi) * dt, axis=-1)


def riemann_error_bound(survival, thresholds, survival_at_0: float = 1.0) -> np.ndarray:
    """``B = sum_m dt_m (S(t_{m-1}) - S(t_m))``: ``0 <= int_0^T S - riemann <= B`` and
    ``|int_0^T S - trapezoid| <= B / 2`` for non-increasing S (module docstring)."""
    dt = bucket_widths(thresholds)
    s = np.asarray(survival, dtype=np.float64)
    prev = np.concatenate([np.full(s.shape[:-1] + (1,), float(survival_at_0)), s[..., :-1]], axis=-1)
    return np.sum(dt * (prev - s), axis=-1)


def restoration_bias(survival, thresholds, expected_watch_time,
                     survival_at_0: float = 1.0) -> Dict[str, Dict[str, float]]:
    """Bias of both restoration rules when fed the TRUE survival probabilities.

    ``survival[..., m] = S(t_m)`` and ``expected_watch_time[...] = E[y]`` per example
    (e.g. simulator ground truth). For each rule returns the mean signed error
    ``mean(y_hat - E[y])``, the mean absolute error and the RMSE; ``bound`` holds
    the mean Riemann bound B (tail beyond T_max not included). This isolates the
    restoration error from the learning error.
    """
    ey = np.asarray(expected_watch_time, dtype=np.float64)
    out: Dict[str, Dict[str, float]] = {}
    for rule in RESTORATION_RULES:
        err = restore(survival, thresholds, rule, phi0=survival_at_0) - ey
        out[rule] = {"mean_bias": float(np.mean(err)), "mean_abs_error": float(np.mean(np.abs(err))),
                     "rmse": float(np.sqrt(np.mean(err ** 2)))}
    out["bound"] = {"mean_riemann_bound": float(np.mean(
        riemann_error_bound(survival, thresholds, survival_at_0)))}
    return out


# ---------------------------------------------------------------------- TF
def restore_tf(phi, thresholds, rule: str = "trapezoid", phi0: float = 1.0):
    """TF version of :func:`restore`; ``phi`` is ``[..., M]``, returns ``[...]``."""
    _check_rule(rule)
    phi = tf.convert_to_tensor(phi)
    dt = tf.constant(bucket_widths(thresholds), dtype=phi.dtype)
    if rule == "riemann":
        return tf.reduce_sum(phi * dt, axis=-1)
    first = tf.fill(tf.concat([tf.shape(phi)[:-1], [1]], 0), tf.constant(phi0, phi.dtype))
    prev = tf.concat([first, phi[..., :-1]], axis=-1)
    return tf.reduce_sum(0.5 * (prev + phi) * dt, axis=-1)


def ordinal_penalty_tf(phi):
    """``sum_{m<M} max(phi_{m+1} - phi_m, 0)`` per example."""
    return tf.reduce_sum(tf.nn.relu(phi[..., 1:] - phi[..., :-1]), axis=-1)


def cread_loss_per_example(y_true, logits, thresholds, lambda_ce: float = 1.0,
                           lambda_restore: float = 1.0, lambda_ord: float = 1.0,
                           huber_delta: float = 1.0, restoration: str = "trapezoid",
                           phi0: float = 1.0, clip_restore_target: bool = False):
    """CREAD loss per example ``[batch]`` (module docstring). ``y_true`` is the watch
    time ``[batch]`` or ``[batch, 1]``; ``logits`` ``[batch, M]``. BCE uses logits
    (numerically stable). ``clip_restore_target`` compares y_hat with
    ``min(y, T_max)`` (y_hat <= T_max by construction); default compares with y."""
    _check_rule(restoration)
    t = validate_thresholds(thresholds)
    logits = tf.convert_to_tensor(logits)
    dtype = logits.dtype
    y = tf.reshape(tf.cast(y_true, dtype), [-1])
    labels = tf.cast(y[:, None] > tf.constant(t, dtype)[None, :], dtype)
    ce = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits), -1)
    phi = tf.sigmoid(logits)
    y_hat = restore_tf(phi, t, restoration, phi0)
    target = tf.minimum(y, tf.constant(t[-1], dtype)) if clip_restore_target else y
    err = tf.abs(y_hat - target)
    d = tf.constant(huber_delta, dtype)
    huber = tf.where(err <= d, 0.5 * tf.square(err), d * (err - 0.5 * d))
    return lambda_ce * ce + lambda_restore * huber + lambda_ord * ordinal_penalty_tf(phi)


def cread_loss(y_true, logits, thresholds, **kwargs):
    """Scalar CREAD loss: mean over the batch of :func:`cread_loss_per_example`.
    Use as a Keras loss via ``functools.partial(cread_loss, thresholds=...)`` or
    :class:`CreadLoss`."""
    return tf.reduce_mean(cread_loss_per_example(y_true, logits, thresholds, **kwargs))


# ------------------------------------------------------------------- Keras
@keras.saving.register_keras_serializable(package="watchtime_ranker")
class CreadLoss(keras.losses.Loss):
    """Keras loss wrapping :func:`cread_loss_per_example` (y_pred = CREAD logits
    ``[batch, M]``). Keras' default reduction averages over the batch."""

    def __init__(self, thresholds, lambda_ce=1.0, lambda_restore=1.0, lambda_ord=1.0,
                 huber_delta=1.0, restoration="trapezoid", phi0=1.0,
                 clip_restore_target=False, name="cread_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.thresholds = validate_thresholds(thresholds).tolist()
        _check_rule(restoration)
        if huber_delta <= 0:
            raise ValueError(f"huber_delta must be > 0, got {huber_delta}")
        self.kw = dict(lambda_ce=float(lambda_ce), lambda_restore=float(lambda_restore),
                       lambda_ord=float(lambda_ord), huber_delta=float(huber_delta),
                       restoration=restoration, phi0=float(phi0),
                       clip_restore_target=bool(clip_restore_target))

    def call(self, y_true, y_pred):
        return cread_loss_per_example(y_true, y_pred, self.thresholds, **self.kw)

    def get_config(self):
        return {**super().get_config(), "thresholds": self.thresholds, **self.kw}


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class CreadHead(keras.layers.Layer):
    """CREAD head: hidden vector -> M logits -> survival probs -> watch time.

    ``phi_m = sigmoid(w_m . h + b_m) = P(y > t_m)``; ``watch_time`` is the
    restoration (``'riemann'``: CREAD eq. 4, ``sum_m phi_m dt_m``;
    ``'trapezoid'``: ``sum_m (phi_{m-1} + phi_m) / 2 dt_m``, phi_0 = ``phi0``).
    Thresholds are a graph constant (not a weight: checkpoints, pruning and
    quantisation cannot touch them) and part of ``get_config``.

    Example::

        head = CreadHead(thresholds=[1.0, 3.0, 10.0, 60.0])
        out = head(tf.zeros([2, 16]))   # logits/phi [2, 4], watch_time [2]

    Input ``[batch, d]``; output dict ``logits`` ``[batch, M]``, ``phi``
    ``[batch, M]``, ``watch_time`` ``[batch]``.
    """

    def __init__(self, thresholds: Sequence[float], restoration: str = "trapezoid",
                 phi0: float = 1.0, kernel_initializer="glorot_uniform",
                 kernel_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.thresholds = validate_thresholds(thresholds).tolist()
        _check_rule(restoration)
        if not 0.0 <= phi0 <= 1.0:
            raise ValueError(f"phi0 must be a probability, got {phi0}")
        self.restoration = restoration
        self.phi0 = float(phi0)
        self.num_thresholds = len(self.thresholds)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.dense = keras.layers.Dense(
            self.num_thresholds, kernel_initializer=self.kernel_initializer,
            kernel_regularizer=self.kernel_regularizer, name="logits")

    def call(self, hidden):
        logits = self.dense(hidden)
        phi = tf.sigmoid(logits)
        wt = restore_tf(phi, self.thresholds, self.restoration, self.phi0)
        return {"logits": logits, "phi": phi, "watch_time": wt}

    def get_config(self):
        return {**super().get_config(), "thresholds": self.thresholds,
                "restoration": self.restoration, "phi0": self.phi0,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer)}
