"""WLR (Covington et al. 2016 §4.2): loss by hand, its minimiser e^l = E[y] by brute force."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.watch_time import wlr


def test_loss_by_hand():
    y = tf.constant([[3.0], [0.0]])
    logit = tf.constant([[0.5], [-1.0]])
    softplus = lambda t: np.log1p(np.exp(t))  # noqa: E731
    want = [3.0 * softplus(-0.5) + softplus(0.5), softplus(-1.0)]
    np.testing.assert_allclose(wlr.wlr_loss(y, logit).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(wlr.wlr_loss(tf.constant([3.0, 0.0]), logit).numpy(), want, rtol=1e-6)


def test_minimiser_is_log_of_the_mean_watch_time():
    y = np.random.default_rng(0).exponential(12.0, 500).astype(np.float32)
    grid = np.linspace(0.0, 5.0, 2001).astype(np.float32)
    losses = [float(tf.reduce_mean(wlr.wlr_loss(y[:, None], tf.fill([y.size, 1], g)))) for g in grid]
    best = grid[int(np.argmin(losses))]
    assert np.exp(best) == pytest.approx(float(y.mean()), rel=5e-3)


def test_watch_time_is_the_clipped_exp_and_the_keras_loss_scales():
    np.testing.assert_allclose(wlr.wlr_watch_time(tf.constant([0.0, 1.0, 100.0])).numpy(),
                               [1.0, np.e, np.exp(12.0)], rtol=1e-6)
    y, logit = tf.constant([[3.0], [1.0]]), tf.constant([[0.5], [-1.0]])
    loss = wlr.WlrLoss(scale=4.0)
    assert float(loss(y, logit)) == pytest.approx(float(tf.reduce_mean(wlr.wlr_loss(y, logit))) / 4.0, rel=1e-6)
    clone = keras.losses.deserialize(keras.losses.serialize(loss))
    assert type(clone) is wlr.WlrLoss and clone.scale == 4.0
    with pytest.raises(ValueError, match="scale"):
        wlr.WlrLoss(scale=0.0)
