"""Keras' TensorBoard and progress logger, reporting per epoch, without their per-batch work.

Keras calls every callback's batch hooks once any callback needs them (the Trainer's
``_FirstStepLoss`` and ``TrainTimer`` do). Two of Keras' own then work at every batch for
nothing when they report per epoch:

- ``TensorBoard(update_freq="epoch")`` calls ``tf.summary.scalar("batch_<name>", ...)`` for
  every log of every batch, which records nothing: with ``update_freq="epoch"`` it sets no
  default writer (``_push_writer`` returns at once).
- ``ProgbarLogger`` at ``verbose=2`` (one line per epoch, its steps known) collects
  ``model.metrics`` at every batch, which walks every layer of the model, to update a bar
  it does not print.

Together ~14 % of the 1M-row run's Trainer (py-spy of ``bench_scale --node Trainer``,
session 45: 7.9 % in the scalar calls, 6.5 % in the bar's updates). The subclasses below
skip that work and keep the rest: TensorBoard still writes the train graph at the first
batch and traces when profiling is asked for; the logger still updates per batch at
``verbose=1`` or when the epoch's steps are unknown (``_call_batch_hooks``, Keras' own rule).
"""
import tf_keras as keras


class EpochTensorBoard(keras.callbacks.TensorBoard):
    """``keras.callbacks.TensorBoard(log_dir, update_freq="epoch", ...)`` without the
    per-batch scalar calls that record nothing."""

    def __init__(self, log_dir: str, **kwargs):
        super().__init__(log_dir=log_dir, update_freq="epoch", **kwargs)

    def on_train_batch_end(self, batch, logs=None):
        if self._should_write_train_graph or self._should_trace or self.write_steps_per_second:
            super().on_train_batch_end(batch, logs)


class EpochProgbarLogger(keras.callbacks.ProgbarLogger):
    """Keras' default progress logger (``count_mode="steps"``) that updates its bar per
    batch only when it shows it (Keras' ``_call_batch_hooks``)."""

    def __init__(self):
        super().__init__(count_mode="steps")

    def on_train_batch_end(self, batch, logs=None):
        if self._call_batch_hooks:
            super().on_train_batch_end(batch, logs)
