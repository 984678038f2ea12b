"""configure_training (models/heads/model.py): Keras execution knobs on a compiled ranker."""
import numpy as np
import tensorflow as tf

from models import heads as H
from models.rankers import build_ranker
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes, trainer_config

L = 5


def _fit(model, seed=0):
    x, y = random_transformed(64, L, small_vocab_sizes(), seed=seed)
    tf.random.set_seed(0)
    return model.fit({k: x[k] for k in model.input_names}, y, batch_size=16, epochs=1, shuffle=False, verbose=0)


def test_steps_per_execution_applies_every_batch_and_xla_is_set():
    model = build_ranker(trainer_config("lr", L, steps_per_execution=4, jit_compile=True), small_vocab_sizes())
    assert int(model._steps_per_execution.numpy()) == 4 and model._jit_compile
    model = build_ranker(trainer_config("lr", L, steps_per_execution=3), small_vocab_sizes())
    history = _fit(model)  # 4 batches in calls of 3 + 1
    assert int(model.optimizer.iterations.numpy()) == 4 and np.isfinite(history.history["loss"][0])
    assert set(model.compiled_loss._user_losses) == set(model._ranker_compile_args["loss"])


def test_configure_training_without_knobs_is_a_no_op():
    model = build_ranker(trainer_config("lr", L), small_vocab_sizes())
    optimizer = model.optimizer
    assert H.configure_training(model) is model and model.optimizer is optimizer
    assert int(model._steps_per_execution.numpy()) == 1 and not model._jit_compile
