"""models/training/lr_schedule.py: η_s = η_0 · max(0, 1 − s / T), checked against hand values."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.training.config import TrainerConfig
from models.training.lr_schedule import LinearDecay, decay_callbacks, total_train_steps
from pipeline import configs


def test_total_train_steps():
    assert total_train_steps(1000, 256, 1) == 4  # ⌈1000 / 256⌉
    assert total_train_steps(1024, 256, 3) == 12
    assert total_train_steps(None, 256, 1, train_steps=7) == 7  # a capped run: TrainArgs.num_steps
    assert total_train_steps(1000, 256, 2, train_steps=5) == 5
    with pytest.raises(ValueError, match="num_examples.json"):
        total_train_steps(None, 256, 1)
    with pytest.raises(ValueError, match="0 rows"):
        total_train_steps(0, 256, 1)
    with pytest.raises(ValueError, match="total_steps"):
        LinearDecay(0)


def test_decay_callbacks_follow_the_config():
    linear = configs.trainer_config(batch_size=64, learning_rate_decay="linear")
    assert decay_callbacks(linear.replace(learning_rate_decay="none"), 1000, 1) == []
    (decay,) = decay_callbacks(linear, 1000, 2)
    assert decay.total_steps == 2 * 16  # ⌈1000 / 64⌉ per epoch
    assert decay_callbacks(linear, 1000, 1, batch_size=256)[0].total_steps == 4
    assert decay_callbacks(linear, None, 1, train_steps=9)[0].total_steps == 9


def test_the_pipeline_rate_scales_with_the_square_root_of_the_batch():
    assert configs.learning_rate_at(configs.BATCH_SIZE) == configs.LEARNING_RATE
    assert configs.learning_rate_at(4 * configs.BATCH_SIZE) == pytest.approx(2 * configs.LEARNING_RATE)


def test_the_config_names_its_decays():
    with pytest.raises(ValueError, match="learning_rate_decay"):
        configs.TRAINER.replace(learning_rate_decay="cosine")
    # an older custom_config, written before the field, still loads (no decay)
    old = configs.TRAINER.to_custom_config()
    del old["learning_rate_decay"]
    assert TrainerConfig.from_custom_config(old).learning_rate_decay == "none"


class _Rates(keras.callbacks.Callback):
    """The rate each train-function call starts with (after LinearDecay set it)."""

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(keras.backend.get_value(self.model.optimizer.learning_rate)))


def _sum_model(lr, steps_per_execution=1):
    """y = w · 1 with loss mean(y): every step's gradient is 1, so SGD gives w_T = −Σ_s η_s."""
    x = keras.Input((1,))
    model = keras.Model(x, keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")(x))
    model.compile(optimizer=keras.optimizers.SGD(lr), loss=lambda y, p: tf.reduce_mean(p),
                  steps_per_execution=steps_per_execution)
    return model


def _fit(model, callbacks, steps=4, epochs=1):
    x = np.ones((steps, 1), np.float32)
    model.fit(x, x, batch_size=1, epochs=epochs, shuffle=False, verbose=0, callbacks=callbacks)


def test_the_optimizer_steps_with_the_decayed_rates():
    model, rates = _sum_model(0.1), _Rates()
    _fit(model, [LinearDecay(4), rates])
    np.testing.assert_allclose(rates.rates, [0.1, 0.075, 0.05, 0.025], rtol=1e-6)
    # the weight moved by exactly the sum of the rates the optimizer was given
    np.testing.assert_allclose(model.get_weights()[0], [[-0.25]], rtol=1e-6)
    # the run ends with the configured rate again
    assert float(keras.backend.get_value(model.optimizer.learning_rate)) == pytest.approx(0.1)


def test_the_decay_spans_every_epoch_and_counts_from_the_run_start():
    model, rates = _sum_model(0.2), _Rates()
    model.optimizer.iterations.assign(1000)  # e.g. restored by a warm start: not part of this run
    _fit(model, [LinearDecay(4), rates], steps=2, epochs=2)
    np.testing.assert_allclose(rates.rates, [0.2, 0.15, 0.1, 0.05], rtol=1e-6)
    assert int(model.optimizer.iterations.numpy()) == 1004


def test_a_resumed_run_continues_its_decay():
    """BackupAndRestore restores a preempted run's step count and its decayed rate when training
    begins: with the run's start fixed before (decay_callbacks(optimizer=...), as run_fn), the
    rates continue from the configured one instead of starting over."""
    model, rates = _sum_model(0.1), _Rates()
    config = configs.trainer_config(learning_rate_decay="linear")
    (decay,) = decay_callbacks(config, None, 1, train_steps=4, optimizer=model.optimizer)
    assert (decay.start_step, decay.peak) == (0, pytest.approx(0.1))
    model.optimizer.iterations.assign(2)  # what a backup saved after 2 of the 4 steps ...
    model.optimizer.learning_rate = 0.075  # ... with the rate of its last step
    _fit(model, [decay, rates], steps=2)
    np.testing.assert_allclose(rates.rates, [0.05, 0.025], rtol=1e-6)
    assert float(keras.backend.get_value(model.optimizer.learning_rate)) == pytest.approx(0.1)


def test_steps_per_execution_holds_a_rate_for_its_steps():
    model, rates = _sum_model(0.1, steps_per_execution=2), _Rates()
    _fit(model, [LinearDecay(4), rates])
    np.testing.assert_allclose(rates.rates, [0.1, 0.05], rtol=1e-6)
    np.testing.assert_allclose(model.get_weights()[0], [[-0.3]], rtol=1e-6)  # 2 · 0.1 + 2 · 0.05


def test_past_its_steps_the_rate_is_zero():
    model, rates = _sum_model(0.1), _Rates()
    _fit(model, [LinearDecay(2), rates])
    np.testing.assert_allclose(rates.rates, [0.1, 0.05, 0.0, 0.0], rtol=1e-6)
