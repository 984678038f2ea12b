"""Dice (DIN §4.3) against a NumPy computation of f(s) = p(s) s + (1 - p(s)) α s."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.layers.dice import Dice
from tests.models.layers.round_trip import assert_config_round_trip


def numpy_dice(x, mean, var, alpha, eps):
    p = 1.0 / (1.0 + np.exp(-(x - mean) / np.sqrt(var + eps)))
    return p * x + (1.0 - p) * alpha * x


def make_dice(channels=5, momentum=0.9, eps=1e-8, seed=0):
    dice = Dice(momentum=momentum, epsilon=eps)
    dice.build((None, channels))
    alpha = np.random.default_rng(seed).uniform(-0.5, 0.5, channels).astype(np.float32)
    dice.alpha.assign(alpha)  # non-zero so the (1 - p) α s term is exercised
    return dice, alpha


def test_training_uses_batch_statistics_and_updates_moving_averages():
    dice, alpha = make_dice(momentum=0.9)
    x = np.random.default_rng(1).normal(2.0, 3.0, (16, 5)).astype(np.float32)
    y = dice(x, training=True).numpy()
    mean, var = x.mean(axis=0), x.var(axis=0)
    np.testing.assert_allclose(y, numpy_dice(x, mean, var, alpha, 1e-8), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dice.moving_mean.numpy(), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dice.moving_variance.numpy(), 0.9 + 0.1 * var, rtol=1e-5)
    dice(x, training=True)  # second step: moving = 0.9 * moving + 0.1 * batch
    np.testing.assert_allclose(dice.moving_mean.numpy(), 0.9 * 0.1 * mean + 0.1 * mean,
                               rtol=1e-5, atol=1e-6)


def test_inference_uses_moving_averages():
    dice, alpha = make_dice()
    x = np.random.default_rng(2).normal(1.0, 2.0, (8, 5)).astype(np.float32)
    moving_mean = np.linspace(-1, 1, 5).astype(np.float32)
    moving_var = np.linspace(0.5, 2, 5).astype(np.float32)
    dice.moving_mean.assign(moving_mean)
    dice.moving_variance.assign(moving_var)
    y_inf = dice(x, training=False).numpy()
    np.testing.assert_allclose(y_inf, numpy_dice(x, moving_mean, moving_var, alpha, 1e-8),
                               rtol=1e-5, atol=1e-6)
    # inference leaves the moving statistics alone
    np.testing.assert_array_equal(dice.moving_mean.numpy(), moving_mean)
    y_train = dice(x, training=True).numpy()
    assert np.abs(y_train - y_inf).max() > 1e-3


def test_mask_keeps_padding_out_of_batch_statistics():
    dice, alpha = make_dice(channels=3)
    x = np.random.default_rng(3).normal(size=(4, 6, 3)).astype(np.float32)
    mask = np.zeros((4, 6), bool)
    mask[:, :3] = True
    x_padded = x.copy()
    x_padded[~mask] = 1e3  # garbage in padding must not change valid outputs
    y = dice(x_padded, training=True, mask=mask).numpy()
    valid = x[mask]
    expected = numpy_dice(valid, valid.mean(0), valid.var(0), alpha, 1e-8)
    np.testing.assert_allclose(y[mask], expected, rtol=1e-5, atol=1e-5)
    # a batch without any valid row leaves the moving averages untouched
    before = dice.moving_mean.numpy().copy()
    out = dice(x, training=True, mask=np.zeros((4, 6), bool)).numpy()
    np.testing.assert_array_equal(dice.moving_mean.numpy(), before)
    assert np.isfinite(out).all()


def test_alpha_starts_at_zero_and_is_trainable():
    dice = Dice()
    dice.build((None, 4))
    np.testing.assert_array_equal(dice.alpha.numpy(), np.zeros(4))
    assert [w.name.split("/")[-1] for w in dice.trainable_weights] == ["alpha:0"]
    assert len(dice.non_trainable_weights) == 2


@pytest.mark.parametrize("kwargs", [{"momentum": 1.0}, {"momentum": -0.1}, {"epsilon": 0.0}])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        Dice(**kwargs)


def test_get_config_round_trip():
    dice = Dice(momentum=0.95, epsilon=1e-9, name="d")
    clone = Dice.from_config(dice.get_config())
    assert clone.get_config() == dice.get_config()


def test_saved_model_round_trip(tmp_path):
    inputs = keras.Input((5,))
    model = keras.Model(inputs, Dice()(keras.layers.Dense(5)(inputs)))
    x = np.random.default_rng(4).normal(size=(6, 5)).astype(np.float32)
    model(x, training=True)  # move the statistics away from their initial values
    model.layers[-1].alpha.assign(np.full(5, 0.3, np.float32))
    expected = model(x, training=False).numpy()
    model.save(str(tmp_path / "m"), save_format="tf")
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    np.testing.assert_allclose(loaded(tf.constant(x), training=False).numpy(), expected,
                               rtol=1e-6, atol=1e-6)


def test_config_round_trip_gives_same_outputs():
    dice, _ = make_dice(channels=5)
    x = np.random.default_rng(5).normal(size=(6, 5)).astype(np.float32)
    dice(x, training=True)  # moving statistics away from their initial values
    assert_config_round_trip(dice, lambda layer: layer(x, training=False))


def test_folded_inference_equals_the_symbolic_training_flag():
    """training=False (folded scale/shift form) equals training=<tensor False> (the tf.cond
    form with the moving statistics), and the NumPy formula."""
    dice, alpha = make_dice(seed=3)
    dice.moving_mean.assign(np.linspace(-2, 1, 5).astype(np.float32))
    dice.moving_variance.assign(np.linspace(0.1, 3, 5).astype(np.float32))
    x = np.random.default_rng(4).normal(0.0, 3.0, (6, 5)).astype(np.float32)
    folded = dice(x, training=False).numpy()
    symbolic = tf.function(lambda v: dice(v, training=tf.constant(False)))(x).numpy()
    np.testing.assert_allclose(folded, symbolic, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(folded, numpy_dice(x, dice.moving_mean.numpy(), dice.moving_variance.numpy(),
                                                  alpha, 1e-8), rtol=1e-5, atol=1e-6)
