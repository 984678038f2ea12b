"""CQE head: conditional quantiles of watch time, monotone by construction.

Paper: Lin et al., "Conditional Quantile Estimation for Uncertain Watch Time in
Short-Video Recommendation", 2024.

Quantile levels ``tau_i = i / (N + 1)``, i = 1..N (default N = 100). From a hidden
vector h the head predicts a base and non-negative increments::

    b'  = softplus(w_b . h + c_b)                    (>= 0)
    d_j = softplus(g_j(h))  or  relu(g_j(h)),  j = 2..N   (>= 0)
    t_tau_1 = b',   t_tau_i = b' + sum_{j=2..i} d_j

so ``0 <= t_tau_1 <= ... <= t_tau_N`` for every input (no crossing quantiles).
(The first quantile is the base itself: a separate d_1 would be redundant with b'.)

Point estimates derived from the quantiles (CQE paper):

- CSE, conservative estimate: ``t_{tau_low}`` (linear interpolation in tau when
  tau_low is not a grid level).
- DQC, dynamic quantile combination: ``k t_{tau_low} + (1 - k) t_{tau_high}``, k
  per request (default ``default_k``), k in [0, 1].
- CDE, conditional expectation (eq. 8), the trapezoid rule on the quantile
  function with the end segments closed at the extreme quantiles::

      CDE = (sum_{i=1..N} t_tau_i + (t_tau_1 + t_tau_N) / 2) / (N + 1)

Loss: pinball (quantile) loss ``rho_tau(u) = u (tau - 1(u < 0))`` with
``u = y - t_tau``, summed over the N levels and averaged over the batch (``reduction
= "sum"``: summed over the batch, as the CQE authors' snippet). Its gradient w.r.t.
``t_tau`` is ``1(y < t_tau) - tau`` (at u = 0 we use ``-tau``). ``space = "log1p"``
scores ``u = log1p(y) - log1p(t_tau)`` instead: log1p is increasing, so the
tau-quantile of log1p(y) is log1p of the tau-quantile of y and the minimiser is the
same conditional quantile, while the head works on a scale of 0..6 instead of
0..300 s (one epoch of Adam at lr 1e-3 cannot move a linear layer to seconds).

Optional quantile tower (issue #13): ``h' = MLP(stop_gradient(h))`` when
``stop_gradient``, so the pinball loss trains only the tower and cannot pull the
shared layers away from the click head (its weight then only scales the tower's own
gradients, which Adam normalises away).

Split-conformal levels (models/watch_time/conformal.py): a non-trainable weight
``conformal_levels`` g [N], the grid ``tau_i`` until the Trainer fits it on the
validation split; served quantiles are the model's own quantile function read at
``g_i``, linear between the grid levels with ``t(0) = 0``, plus seconds past level 1::

    p_i = min(g_i, tau_N) (N + 1),  j_i = floor(p_i),  w_i = p_i - j_i
    q_i = (1 - w_i) T_{j_i} + w_i T_{j_i + 1} + max(g_i - 1, 0),   T = [0, t_tau_1, ..., t_tau_N]

(monotone and >= 0 because g is sorted and T is; the identity while g = tau) and
CSE / DQC / CDE are computed from q.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras

from models.layers._utils import clone_initializer

INCREMENTS = ("softplus", "relu")


def quantile_levels(num_quantiles: int = 100) -> np.ndarray:
    """``tau_i = i / (N + 1)``, i = 1..N."""
    if int(num_quantiles) != num_quantiles or num_quantiles < 2:
        raise ValueError(f"num_quantiles must be an integer >= 2, got {num_quantiles}")
    n = int(num_quantiles)
    return np.arange(1, n + 1, dtype=np.float64) / (n + 1)


def interpolation_weights(tau: float, taus: np.ndarray):
    """``(i, w)`` with ``t_tau = (1 - w) t[i] + w t[i + 1]`` (linear in tau)."""
    taus = np.asarray(taus, dtype=np.float64)
    if not taus[0] <= tau <= taus[-1]:
        raise ValueError(f"tau={tau} outside the quantile grid [{taus[0]:.4g}, {taus[-1]:.4g}]")
    i = int(np.clip(np.searchsorted(taus, tau, side="right") - 1, 0, taus.size - 2))
    w = (tau - taus[i]) / (taus[i + 1] - taus[i])
    return i, float(w)


def interpolate_quantile(quantiles, tau: float, taus):
    """``t_tau`` from ``quantiles[..., N]`` on grid ``taus`` (TF or NumPy input)."""
    i, w = interpolation_weights(tau, taus)
    return (1.0 - w) * quantiles[..., i] + w * quantiles[..., i + 1]


def conditional_expectation(quantiles):
    """CDE, CQE eq. 8: ``(sum_i t_i + (t_1 + t_N) / 2) / (N + 1)`` (TF or NumPy)."""
    n = quantiles.shape[-1]
    s = (tf.reduce_sum(quantiles, -1) if tf.is_tensor(quantiles)
         else np.sum(quantiles, axis=-1))
    return (s + 0.5 * (quantiles[..., 0] + quantiles[..., n - 1])) / (n + 1)


def pinball_loss_per_example(y_true, quantiles, taus):
    """``sum_i rho_{tau_i}(y - t_i)``, ``rho_tau(u) = u (tau - 1(u < 0))``; ``[batch]``.
    ``y_true`` ``[batch]`` or ``[batch, 1]``; ``quantiles`` ``[batch, N]``."""
    q = tf.convert_to_tensor(quantiles)
    y = tf.reshape(tf.cast(y_true, q.dtype), [-1, 1])
    tau = tf.constant(np.asarray(taus, dtype=np.float64), q.dtype)
    u = y - q
    return tf.reduce_sum(u * (tau - tf.cast(u < 0, q.dtype)), axis=-1)


def pinball_loss_log1p_per_example(y_true, quantiles, taus):
    """``sum_i rho_{tau_i}(log1p(y) - log1p(t_i))`` ``[batch]`` (same minimiser: log1p is
    increasing; quantiles clipped at 0 first)."""
    q = tf.convert_to_tensor(quantiles)
    y = tf.math.log1p(tf.maximum(tf.cast(y_true, q.dtype), 0.0))
    return pinball_loss_per_example(y, tf.math.log1p(tf.maximum(q, 0.0)), taus)


SPACES = ("seconds", "log1p")
REDUCTIONS = ("mean", "sum")


def pinball_loss(y_true, quantiles, taus):
    """Scalar pinball loss: mean over the batch of :func:`pinball_loss_per_example`."""
    return tf.reduce_mean(pinball_loss_per_example(y_true, quantiles, taus))


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class PinballLoss(keras.losses.Loss):
    """Keras pinball loss on ``y_pred = quantiles [batch, N]`` at ``tau_i = i/(N+1)``."""

    def __init__(self, num_quantiles: int = 100, space: str = "seconds", batch_reduction: str = "mean",
                 name: str = "pinball_loss", **kwargs):
        if space not in SPACES:
            raise ValueError(f"space must be one of {SPACES}, got {space!r}")
        if batch_reduction not in REDUCTIONS:
            raise ValueError(f"batch_reduction must be one of {REDUCTIONS}, got {batch_reduction!r}")
        if "reduction" not in kwargs and batch_reduction == "sum":
            kwargs["reduction"] = keras.losses.Reduction.SUM
        super().__init__(name=name, **kwargs)
        self.num_quantiles = int(num_quantiles)
        self.taus = quantile_levels(self.num_quantiles)
        self.space, self.batch_reduction = space, batch_reduction

    def call(self, y_true, y_pred):
        fn = pinball_loss_log1p_per_example if self.space == "log1p" else pinball_loss_per_example
        return fn(y_true, y_pred, self.taus)

    def get_config(self):
        config = {**super().get_config(), "num_quantiles": self.num_quantiles, "space": self.space,
                  "batch_reduction": self.batch_reduction}
        config.pop("reduction", None)  # implied by batch_reduction
        return config


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class CqeHead(keras.layers.Layer):
    """CQE head (Lin et al. 2024): hidden ``[batch, d]`` -> N monotone, non-negative
    quantiles of watch time and the CSE / DQC / CDE point estimates.

    ``t_tau_1 = softplus(base(h))``, ``t_tau_i = t_tau_1 + sum_{j=2..i} act(g(h))_j``
    with act = softplus (default) or relu; see the module docstring for the
    estimates.

    Example::

        head = CqeHead(num_quantiles=100)
        out = head(tf.zeros([2, 16]))           # default k
        out = head(tf.zeros([2, 16]), k=tf.constant([0.2, 0.8]))

    Outputs (dict): ``quantiles`` ``[batch, N]``, ``cse``, ``dqc``, ``cde`` ``[batch]``.
    """

    def __init__(self, num_quantiles: int = 100, increment: str = "softplus",
                 tau_low: float = 0.25, tau_high: float = 0.7, default_k: float = 0.5,
                 tower_units=(), stop_gradient: bool = False,
                 kernel_initializer="glorot_uniform", kernel_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.taus = quantile_levels(num_quantiles)
        self.num_quantiles = int(num_quantiles)
        if increment not in INCREMENTS:
            raise ValueError(f"increment must be one of {INCREMENTS}, got {increment!r}")
        if not tau_low < tau_high:
            raise ValueError(f"need tau_low < tau_high, got {tau_low} >= {tau_high}")
        if not 0.0 <= default_k <= 1.0:
            raise ValueError(f"default_k must be in [0, 1], got {default_k}")
        self._low = interpolation_weights(tau_low, self.taus)  # validates the range
        self._high = interpolation_weights(tau_high, self.taus)
        self.increment = increment
        self.tau_low, self.tau_high, self.default_k = float(tau_low), float(tau_high), float(default_k)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        # one fresh initializer per Dense: a reused unseeded one repeats its draws
        self.base = keras.layers.Dense(1, kernel_initializer=clone_initializer(self.kernel_initializer),
                                       kernel_regularizer=self.kernel_regularizer, name="base")
        self.increments = keras.layers.Dense(
            self.num_quantiles - 1, kernel_initializer=clone_initializer(self.kernel_initializer),
            kernel_regularizer=self.kernel_regularizer, name="increments")
        self.tower_units = [int(u) for u in tower_units]
        if any(u < 1 for u in self.tower_units):
            raise ValueError(f"tower_units must be positive, got {self.tower_units}")
        self.stop_gradient = bool(stop_gradient)
        self.tower = [keras.layers.Dense(u, activation="relu", name=f"tower_{i}",
                                         kernel_initializer=clone_initializer(self.kernel_initializer),
                                         kernel_regularizer=self.kernel_regularizer)
                      for i, u in enumerate(self.tower_units)]

    def build(self, input_shape):
        # split-conformal levels (conformal.py): set by the Trainer, never by gradients
        self.conformal_levels = self.add_weight(
            name="conformal_levels", shape=(self.num_quantiles,), trainable=False,
            initializer=keras.initializers.Constant(self.taus.astype(np.float32)))
        # record for the model report: coverage of each level on the calibration split
        # before (row 0) and after (row 1) the levels; not used in call
        self.conformal_coverage = self.add_weight(name="conformal_coverage", shape=(2, self.num_quantiles),
                                                  initializer="zeros", trainable=False)
        super().build(input_shape)

    def set_conformal_levels(self, levels, coverage_before=None, coverage_after=None):
        levels = np.asarray(levels, np.float32).reshape(-1)
        if (levels.shape != (self.num_quantiles,) or not np.all(np.isfinite(levels) & (levels >= 0))
                or np.any(np.diff(levels) < 0)):
            raise ValueError(f"need {self.num_quantiles} non-decreasing levels >= 0, got {levels}")
        self.conformal_levels.assign(levels)
        if coverage_before is not None:
            self.conformal_coverage.assign(np.stack([np.asarray(coverage_before, np.float32),
                                                     np.asarray(coverage_after, np.float32)]))

    def _interp(self, q, iw):
        i, w = iw
        return (1.0 - w) * q[:, i] + w * q[:, i + 1]

    def _at_levels(self, t):
        """The served quantiles: ``t`` [B, N] read at the conformal levels (docstring)."""
        n = self.num_quantiles
        table = tf.concat([tf.zeros_like(t[:, :1]), t], axis=-1)  # T [B, N + 1]
        levels = tf.cast(self.conformal_levels, t.dtype)
        pos = tf.minimum(levels * float(n + 1), float(n))
        # the slack keeps an integer position (the identity levels i / (N + 1)) on its own column
        j = tf.clip_by_value(tf.floor(pos + 1e-3), 0.0, float(n - 1))
        w = tf.clip_by_value(pos - j, 0.0, 1.0)
        j = tf.cast(j, tf.int32)
        past_grid = tf.nn.relu(levels - 1.0)  # seconds past the top quantile
        return (1.0 - w) * tf.gather(table, j, axis=1) + w * tf.gather(table, j + 1, axis=1) + past_grid

    def call(self, hidden, k=None):
        act = tf.nn.softplus if self.increment == "softplus" else tf.nn.relu
        if self.stop_gradient:
            hidden = tf.stop_gradient(hidden)
        for layer in self.tower:
            hidden = layer(hidden)
        base = tf.nn.softplus(self.base(hidden))  # [B, 1]
        d = act(self.increments(hidden))  # [B, N - 1]
        quantiles = self._at_levels(tf.concat([base, base + tf.cumsum(d, axis=-1)], axis=-1))
        t_low = self._interp(quantiles, self._low)
        t_high = self._interp(quantiles, self._high)
        if k is None:
            k = tf.fill(tf.shape(t_low), tf.constant(self.default_k, quantiles.dtype))
        else:
            k = tf.reshape(tf.cast(k, quantiles.dtype), [-1])
        return {"quantiles": quantiles, "cse": t_low,
                "dqc": k * t_low + (1.0 - k) * t_high,
                "cde": conditional_expectation(quantiles)}

    def get_config(self):
        return {**super().get_config(), "num_quantiles": self.num_quantiles,
                "increment": self.increment, "tau_low": self.tau_low, "tau_high": self.tau_high,
                "default_k": self.default_k, "tower_units": list(self.tower_units),
                "stop_gradient": self.stop_gradient,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer)}
