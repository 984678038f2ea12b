"""compile_ranker (models/heads/model.py): Keras execution knobs, compiled once."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import heads as H
from models.rankers import build_ranker
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes, trainer_config

L = 5


def _fit(model, seed=0):
    x, y = random_transformed(64, L, small_vocab_sizes(), seed=seed)
    tf.random.set_seed(0)
    return model.fit({k: x[k] for k in model.input_names}, y, batch_size=16, epochs=1, shuffle=False, verbose=0)


def test_steps_per_execution_applies_every_batch_and_xla_is_set_in_one_compile(monkeypatch):
    calls = []
    compile_ = keras.Model.compile
    monkeypatch.setattr(keras.Model, "compile", lambda self, *a, **k: calls.append(k) or compile_(self, *a, **k))
    model = build_ranker(trainer_config("lr", L, steps_per_execution=4, jit_compile=True), small_vocab_sizes())
    assert int(model._steps_per_execution.numpy()) == 4 and model._jit_compile
    assert len(calls) == 1 and calls[0]["steps_per_execution"] == 4 and calls[0]["jit_compile"] is True
    model = build_ranker(trainer_config("lr", L, steps_per_execution=3), small_vocab_sizes())
    assert len(calls) == 2
    history = _fit(model)  # 4 batches in calls of 3 + 1
    assert int(model.optimizer.iterations.numpy()) == 4 and np.isfinite(history.history["loss"][0])
    assert set(model.compiled_loss._user_losses) == {"click_prob", "watch_time_s"}


def test_default_knobs_and_bad_steps():
    model = build_ranker(trainer_config("lr", L), small_vocab_sizes())
    assert int(model._steps_per_execution.numpy()) == 1 and not model._jit_compile
    z = keras.Input((3,))
    with pytest.raises(ValueError, match="steps_per_execution"):
        H.compile_ranker(z, z, [H.ClickHead()], steps_per_execution=0)
