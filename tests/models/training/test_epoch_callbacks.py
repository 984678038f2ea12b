"""Keras' TensorBoard and progress logger without their per-batch work (epoch_callbacks.py):
the same epoch output as Keras' own, and no per-batch work where Keras' did it for nothing."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.training.epoch_callbacks import EpochProgbarLogger, EpochTensorBoard
from models.training.train_timer import TrainTimer


def _fit(callbacks, verbose=0, epochs=2):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    model.compile("sgd", "mse", metrics=["mae"])
    x, y = np.ones((80, 3), np.float32), np.zeros((80, 1), np.float32)
    # TrainTimer needs batch hooks, so Keras calls every callback's (as in the Trainer)
    model.fit(x, y, batch_size=8, epochs=epochs, verbose=verbose, callbacks=[TrainTimer(8)] + callbacks,
              validation_data=(x[:8], y[:8]))


def _events(log_dir):
    tags, graphs = set(), 0
    for path in tf.io.gfile.glob(f"{log_dir}/train/events.out.*") + tf.io.gfile.glob(f"{log_dir}/validation/events.out.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            graphs += bool(event.graph_def)
            tags |= {v.tag for v in event.summary.value}
    return tags, graphs


def test_tensorboard_writes_what_keras_writes_and_no_batch_scalars(tmp_path, monkeypatch):
    from tf_keras.src import callbacks as keras_callbacks  # the tf.summary Keras' TensorBoard calls

    calls = []
    summary = keras_callbacks.tf.summary
    scalar = summary.scalar
    monkeypatch.setattr(summary, "scalar", lambda name, *a, **k: calls.append(name) or scalar(name, *a, **k))
    _fit([keras.callbacks.TensorBoard(str(tmp_path / "keras"), update_freq="epoch")])
    keras_batch_calls = sum(n.startswith("batch_") for n in calls)
    calls.clear()
    _fit([EpochTensorBoard(str(tmp_path / "ours"))])
    assert keras_batch_calls >= 2 * 10 * 2  # Keras: loss and mae at each of 10 batches, 2 epochs
    assert sum(n.startswith("batch_") for n in calls) == 2  # ours: the first batch only (with the graph)
    assert _events(tmp_path / "ours") == _events(tmp_path / "keras")
    tags, graphs = _events(tmp_path / "ours")
    assert {"epoch_loss", "epoch_mae"} <= tags and graphs == 1


@pytest.mark.parametrize("verbose", [1, 2])
def test_progbar_prints_keras_epoch_lines_and_updates_per_batch_only_when_shown(verbose, capsys, monkeypatch):
    _fit([], verbose=verbose)
    theirs = capsys.readouterr().out
    logger = EpochProgbarLogger()
    updates = []
    update = logger._batch_update_progbar
    monkeypatch.setattr(logger, "_batch_update_progbar", lambda *a: updates.append(1) or update(*a))
    _fit([logger], verbose=verbose)
    ours = capsys.readouterr().out
    assert len(updates) == (20 if verbose == 1 else 0)  # 10 batches x 2 epochs, shown only at verbose=1

    def lines(text):  # the epoch lines without their timings
        import re
        return [re.sub(r"\d+(us|ms|s)/(step|epoch)|\d+(ms|s) ", "", ln) for ln in text.replace("\r", "\n").splitlines()
                if "loss" in ln and "val_loss" in ln]
    assert lines(ours) == lines(theirs) and len(lines(ours)) == 2
