"""Linear decay of the learning rate over one training run (TrainerConfig.learning_rate_decay).

With η_0 the optimizer's rate when the run starts (TrainerConfig.learning_rate, or a
ranker's own ``learning_rate`` in its ranker_params) and T the run's training steps, the
s-th step of the run (s = 0, 1, ..., counted by the optimizer's ``iterations`` from ``start_step``: the step
count when the run began, after a warm start restored one, so the decay is not shortened; a
run that BackupAndRestore resumes after a preemption continues its decay where it was) uses::

    η_s = η_0 · max(0, 1 − s / T)            T = epochs · ⌈rows / global batch⌉

(or TrainArgs.num_steps when the run is capped). With Keras' ``steps_per_execution`` = k the
rate is set once per train-function call, so it holds for k steps. When the run ends the
optimizer's rate is η_0 again, the configured value.

One epoch of a CTR ranker is a few hundred to a few thousand Adam steps (the one-epoch
phenomenon, DESIGN.md §6). On the validation day a higher starting rate decaying to zero beat
every constant rate, and a decay from the old constant rate was worse than none (3 seeds each,
bench/README.md "A decaying learning rate"); why, e.g. how much the id embeddings move, was not
measured.
"""
import math
from typing import Optional

import tf_keras as keras


def total_train_steps(rows: Optional[int], batch_size: int, epochs: int,
                      train_steps: Optional[int] = None) -> int:
    """T: ``train_steps`` when set, else ``epochs · ⌈rows / batch_size⌉``."""
    if train_steps:
        return int(train_steps)
    if rows is None:
        raise ValueError("learning_rate_decay='linear' needs the train split's rows (LogExampleGen's "
                         "num_examples.json, models/training/split_counts.py) or TrainArgs.num_steps; "
                         "neither is known: set one, or learning_rate_decay='none'")
    if rows < 1:
        raise ValueError(f"learning_rate_decay='linear': the train split has {rows} rows")
    return int(epochs) * int(math.ceil(rows / int(batch_size)))


class LinearDecay(keras.callbacks.Callback):
    """``model.fit(..., callbacks=[LinearDecay(T)])``: η_s = η_0 · max(0, 1 − s / T) (module doc)."""

    def __init__(self, total_steps: int, start_step: Optional[int] = None, peak: Optional[float] = None):
        """``start_step`` / ``peak``: the optimizer's ``iterations`` and rate at the run's first step
        (None: read when training begins, i.e. after any callback listed before this one restored a
        backup, whose rate is the decayed one it was saved with)."""
        super().__init__()
        if int(total_steps) < 1:
            raise ValueError(f"LinearDecay: total_steps must be >= 1, got {total_steps!r}")
        self._supports_tf_logs = True  # reads no logs: Keras copies none to Python for it
        self.total_steps = int(total_steps)
        self.start_step = None if start_step is None else int(start_step)
        self.peak = None if peak is None else float(peak)
        self._start = None

    def rate(self, step: int) -> float:
        """η at the run's step ``step`` (0-based)."""
        return self.peak * max(0.0, 1.0 - step / self.total_steps)

    def on_train_begin(self, logs=None):
        optimizer = self.model.optimizer
        if self.peak is None:
            self.peak = float(keras.backend.get_value(optimizer.learning_rate))
        self._start = (int(keras.backend.get_value(optimizer.iterations)) if self.start_step is None
                       else self.start_step)

    def on_train_batch_begin(self, batch, logs=None):
        optimizer = self.model.optimizer
        step = int(keras.backend.get_value(optimizer.iterations)) - self._start
        optimizer.learning_rate = self.rate(step)

    def on_train_end(self, logs=None):
        self.model.optimizer.learning_rate = self.peak


def decay_callbacks(config, rows: Optional[int], epochs: int, batch_size: Optional[int] = None,
                    train_steps: Optional[int] = None, optimizer=None) -> list:
    """``[LinearDecay(T)]`` when the TrainerConfig ``config`` decays its rate, else ``[]``; T from
    ``rows`` at ``batch_size`` (default: the config's) or ``train_steps``. With ``optimizer``, its
    step count and rate now are the run's start (run_fn: after a warm start, before a backup's restore)."""
    if config.learning_rate_decay != "linear":
        return []
    start = peak = None
    if optimizer is not None:
        start = int(keras.backend.get_value(optimizer.iterations))
        peak = float(keras.backend.get_value(optimizer.learning_rate))
    return [LinearDecay(total_train_steps(rows, batch_size or config.batch_size, epochs, train_steps), start, peak)]
