"""TensorBoard diagnostics Keras' TensorBoard callback does not write.

Keras' callback already logs, per epoch, the total loss and every head's loss and
metrics (`epoch_click_prob_loss`, `epoch_watch_time_s_mae`, `epoch_quantiles_loss`,
...) for train and validation. `TrainingDiagnostics` adds, at the end of every epoch,
computed on one fixed probe batch (the same rows every epoch, so curves compare):

- ``learning_rate`` (scalar): the optimizer's rate at its current step,
  ``lr(iterations)`` when it is a schedule. All heads train with the one optimizer of
  the model (models/heads/ compile_ranker), so this one rate is every head's rate.
- ``attention/<layer>/weights`` (histogram) for every attention layer of the model
  (DIN's TargetAttention ``w_j`` over the valid history items, BST's transformer
  ``alpha_ij`` over valid (query, key) pairs and heads; padded positions left out),
  and ``attention/<layer>/max_weight`` (scalar): the mean over rows of ``max_j w_j``,
  how peaked attention is (with softmax weights: 1/n when uniform over n items, 1
  when one item takes all).
- ``quantiles/spread`` (histogram) and ``quantiles/spread_mean`` (scalar) with a CQE
  head: ``t_{tau_high} - t_{tau_low}`` per probe row, the interquantile range between
  the levels nearest 0.9 and 0.1 (the width of the 80 % predictive interval), and
  ``quantiles/all`` (histogram of every predicted quantile, seconds).
- ``cread/survival`` (histogram) with a CREAD head: ``phi_m = sigmoid(logit_m) =
  P(y > t_m | x)`` over probe rows and buckets.

Example::

    cb = TrainingDiagnostics(log_dir, probe_features)   # a dict of [B, ...] arrays
    model.fit(data, callbacks=[keras.callbacks.TensorBoard(log_dir), cb])

Events go to ``<log_dir>/diagnostics`` with the epoch as step (Keras' `epoch_*`
scalars use the same step), so `tensorboard --logdir` shows them side by side.
"""
import os

import numpy as np
import tensorflow as tf
import tf_keras as keras

from models.heads import CREAD_LOGITS_OUTPUT, QUANTILES_OUTPUT
from models.layers.target_attention import TargetAttention
from models.layers.transformer import TransformerEncoderBlock

ATTENTION_LAYERS = (TargetAttention, TransformerEncoderBlock)
SPREAD_LEVELS = (0.1, 0.9)


def current_learning_rate(optimizer) -> float:
    """The optimizer's learning rate at its current step (schedules evaluated)."""
    # tf-keras' optimizers keep the schedule in `_learning_rate`; their `learning_rate`
    # property is the rate of the last applied step only.
    lr = getattr(optimizer, "_learning_rate", None)
    lr = optimizer.learning_rate if lr is None else lr
    if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
        lr = lr(optimizer.iterations)
    return float(keras.backend.get_value(lr))


def valid_attention_weights(weights: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Attention weights at valid positions, flattened. `weights` [B, L] (target
    attention; `mask` [B, L]) or [B, H, S, S] (self-attention; `mask` [B, S] marks both
    the querying and the attended position)."""
    mask = mask.astype(bool)
    if weights.ndim == 2:
        return weights[mask]
    if weights.ndim == 4:
        pair = mask[:, None, :, None] & mask[:, None, None, :]
        return weights[np.broadcast_to(pair, weights.shape)]
    raise ValueError(f"attention weights must be [B, L] or [B, H, S, S], got shape {weights.shape}")


def mean_max_weight(weights: np.ndarray, mask: np.ndarray) -> float:
    """Mean over rows with a valid position of the largest weight on a valid position
    (self-attention: over every valid query row of every head)."""
    mask = mask.astype(bool)
    if weights.ndim == 2:
        rows, valid = np.where(mask, weights, -np.inf).max(axis=-1), mask.any(axis=-1)
    else:
        masked = np.where(mask[:, None, None, :], weights, -np.inf).max(axis=-1)  # [B, H, S]
        rows, valid = masked, np.broadcast_to(mask[:, None, :], masked.shape)
    return float(rows[valid].mean()) if valid.any() else float("nan")


def quantile_spread(quantiles: np.ndarray, taus: np.ndarray, levels=SPREAD_LEVELS) -> np.ndarray:
    """t_hi - t_lo per row, at the CQE levels nearest `levels` (quantiles [B, N])."""
    lo, hi = (int(np.argmin(np.abs(taus - level))) for level in levels)
    return quantiles[:, hi] - quantiles[:, lo]


class _AttentionProbe:
    """Re-runs one attention layer of a functional model with return_attention_scores."""

    def __init__(self, model: keras.Model, layer):
        node = layer.inbound_nodes[0]
        self.layer = layer
        self.structure = (node.call_args, node.call_kwargs)
        flat = tf.nest.flatten(self.structure)
        self.tensor_slots = [i for i, x in enumerate(flat) if keras.backend.is_keras_tensor(x)]
        self.inputs_model = keras.Model(model.input, [flat[i] for i in self.tensor_slots])
        self.flat = flat

    def __call__(self, features):
        values = self.inputs_model(features, training=False)
        values = values if isinstance(values, (list, tuple)) else [values]
        flat = list(self.flat)
        for slot, value in zip(self.tensor_slots, values):
            flat[slot] = value
        args, kwargs = tf.nest.pack_sequence_as(self.structure, flat)
        kwargs = dict(kwargs, training=False, return_attention_scores=True)
        _, weights = self.layer(*args, **kwargs)
        mask = kwargs.get("mask")
        if mask is None:
            mask = np.ones(weights.shape[:2] if weights.shape.rank == 2 else
                           (weights.shape[0], weights.shape[-1]), dtype=bool)
        return weights.numpy(), np.asarray(mask)


class TrainingDiagnostics(keras.callbacks.Callback):
    """Writes learning rate, attention-weight and quantile-spread summaries per epoch
    (module docstring). `probe_features`: one batch of model inputs."""

    def __init__(self, log_dir: str, probe_features: dict):
        super().__init__()
        self.log_dir = os.path.join(log_dir, "diagnostics")
        self.probe_features = probe_features
        self._writer = None
        self._probes = []

    def set_model(self, model):
        super().set_model(model)
        self._probes = [_AttentionProbe(model, layer) for layer in model.layers
                        if isinstance(layer, ATTENTION_LAYERS)]

    def _taus(self, n):
        try:
            return np.asarray(self.model.get_layer("cqe").taus, dtype=np.float64)
        except ValueError:
            return np.arange(1, n + 1) / (n + 1.0)

    def write(self, step: int) -> list:
        """Writes every summary at `step`; returns the tags written."""
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        tags = []

        def scalar(tag, value):
            tf.summary.scalar(tag, value, step=step)
            tags.append(tag)

        def histogram(tag, values):
            if np.size(values):
                tf.summary.histogram(tag, values, step=step)
                tags.append(tag)

        with self._writer.as_default():
            scalar("learning_rate", current_learning_rate(self.model.optimizer))
            for probe in self._probes:
                weights, mask = probe(self.probe_features)
                histogram(f"attention/{probe.layer.name}/weights", valid_attention_weights(weights, mask))
                scalar(f"attention/{probe.layer.name}/max_weight", mean_max_weight(weights, mask))
            outputs = self.model(self.probe_features, training=False)
            if QUANTILES_OUTPUT in outputs:
                q = outputs[QUANTILES_OUTPUT].numpy()
                spread = quantile_spread(q, self._taus(q.shape[-1]))
                histogram("quantiles/spread", spread)
                scalar("quantiles/spread_mean", float(spread.mean()))
                histogram("quantiles/all", q)
            if CREAD_LOGITS_OUTPUT in outputs:
                histogram("cread/survival", tf.sigmoid(outputs[CREAD_LOGITS_OUTPUT]).numpy())
        self._writer.flush()
        return tags

    def on_epoch_end(self, epoch, logs=None):
        self.write(epoch)

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
