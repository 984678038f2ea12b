"""Training throughput as Keras measures nothing of it: whole epochs and the steady state.

For each epoch e, with (b_k, t_k) the batch index and the time at the end of the k-th
train-function call (k = 1..K_e; Keras fires batch callbacks once per
``steps_per_execution``) and W the warm-up calls (tracing and the first batches)::

    steady examples/s = sum_e (b_{K_e-1} - b_W) * B  /  sum_e (t_{K_e-1} - t_W)

over the epochs with more than W + 1 calls (B: the global batch size; the last call is left
out: its batch may be partial). ``seconds`` is the wall time of whole epochs, tracing and
the first batches included, without the per-epoch validation. The callback reads no logs
(``_supports_tf_logs``: Keras then copies no step's logs to Python for it).
"""
import time

import tf_keras as keras


class TrainTimer(keras.callbacks.Callback):
    """``model.fit(..., callbacks=[TrainTimer(batch_size)])``; then ``summary()``."""

    WARMUP_CALLS = 3

    def __init__(self, batch_size: int):
        super().__init__()
        self._supports_tf_logs = True
        self.batch_size = batch_size
        self.seconds, self.epochs = 0.0, 0
        self.steady_seconds, self.steady_examples = 0.0, 0
        self._t0, self._calls = None, []

    def on_epoch_begin(self, epoch, logs=None):
        self._t0, self._calls = time.perf_counter(), []

    def on_train_batch_end(self, batch, logs=None):
        self._calls.append((batch, time.perf_counter()))

    def on_test_begin(self, logs=None):  # the epoch's validation starts: its training ended
        self._end_epoch()

    def on_epoch_end(self, epoch, logs=None):  # no validation
        self._end_epoch()

    def _end_epoch(self):
        if self._t0 is None:
            return
        self.seconds += time.perf_counter() - self._t0
        self.epochs += 1
        if len(self._calls) > self.WARMUP_CALLS + 1:
            (b0, t0), (b1, t1) = self._calls[self.WARMUP_CALLS - 1], self._calls[-2]
            self.steady_seconds += t1 - t0
            self.steady_examples += (b1 - b0) * self.batch_size
        self._t0 = None

    def steady_examples_per_sec(self) -> float:
        return self.steady_examples / self.steady_seconds if self.steady_seconds > 0 else 0.0

    def summary(self) -> dict:
        return {"epochs": self.epochs, "seconds": round(self.seconds, 3), "batch_size": self.batch_size,
                "steady_examples": self.steady_examples, "steady_seconds": round(self.steady_seconds, 3),
                "steady_examples_per_sec": round(self.steady_examples_per_sec(), 1)}
