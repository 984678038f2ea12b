"""Median (τ-quantile) watch head: the log1p pinball loss by hand, and its minimiser."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import heads as H


def test_log1p_pinball_by_hand():
    y = tf.constant([[3.0], [0.0], [1.0]])
    pred = tf.constant([[1.0], [-5.0], [3.0]])  # a negative prediction counts as 0
    # u = log1p(y) - log1p(pred): log 2 (under-predicted), 0, -log 2 (over-predicted)
    np.testing.assert_allclose(H.log1p_pinball(0.5)(y, pred).numpy(), [0.5 * np.log(2), 0.0, 0.5 * np.log(2)],
                               rtol=1e-6)
    np.testing.assert_allclose(H.log1p_pinball(0.2)(y, pred).numpy(), [0.2 * np.log(2), 0.0, 0.8 * np.log(2)],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="tau"):
        H.log1p_pinball(1.0)


def test_seconds_pinball_by_hand():
    y = tf.constant([[3.0], [0.0], [1.0]])
    pred = tf.constant([[1.0], [0.0], [4.0]])  # u = 2, 0, -3
    np.testing.assert_allclose(H.seconds_pinball(0.5)(y, pred).numpy(), [1.0, 0.0, 1.5], rtol=1e-6)
    np.testing.assert_allclose(H.seconds_pinball(0.25)(y, pred).numpy(), [0.5, 0.0, 2.25], rtol=1e-6)
    assert H.WatchTimeQuantileHead(0.5, "seconds").losses()["watch_time_s"].__name__ == "seconds_pinball_0.5"
    with pytest.raises(ValueError, match="space"):
        H.WatchTimeQuantileHead(0.5, "log")


def test_log1p_pinball_is_minimised_at_the_sample_median():
    y = tf.constant([[0.0], [1.0], [4.0], [30.0], [200.0]])
    grid = np.linspace(0.0, 250.0, 2501).astype(np.float32)
    loss = [float(tf.reduce_mean(H.log1p_pinball(0.5)(y, tf.fill([5, 1], g)))) for g in grid]
    assert grid[int(np.argmin(loss))] == pytest.approx(4.0)  # the median, not the mean (47) or geometric mean


def test_median_head_is_expm1_of_softplus_and_trains_on_the_pinball_loss():
    z = keras.Input((4,), name="z")
    model = H.compile_ranker(z, z, [H.WatchTimeQuantileHead(0.5)])
    x = np.random.default_rng(3).normal(size=(6, 4)).astype(np.float32)
    w, b = model.get_layer("log1p_watch").get_weights()
    want = np.expm1(np.log1p(np.exp(x @ w + b)))
    np.testing.assert_allclose(model(x)["watch_time_s"].numpy(), want, rtol=1e-5)
    y = np.array([[0.0], [2.0], [7.0], [15.0], [60.0], [0.5]], np.float32)
    res = model.evaluate(x, {"watch_time_s": y}, verbose=0, return_dict=True)
    assert res["loss"] == pytest.approx(float(np.mean(0.5 * np.abs(np.log1p(y) - np.log1p(want)))), rel=1e-4)
    assert res["mae"] == pytest.approx(float(np.mean(np.abs(y - want))), rel=1e-4)
    assert H.WatchTimeQuantileHead().labels() == {"watch_time_s": "watch_time_s"}


def test_median_head_tower_feeds_the_output_layer():
    z = keras.Input((4,), name="z")
    model = H.compile_ranker(z, z, [H.WatchTimeQuantileHead(0.5, tower_units=(3,))])
    x = np.random.default_rng(5).normal(size=(5, 4)).astype(np.float32)
    w0, b0 = model.get_layer("watch_tower_0").get_weights()
    w, b = model.get_layer("log1p_watch").get_weights()
    h = np.maximum(x @ w0 + b0, 0.0)
    np.testing.assert_allclose(model(x)["watch_time_s"].numpy(), np.expm1(np.log1p(np.exp(h @ w + b))), rtol=1e-5)
    with pytest.raises(ValueError, match="tower_units"):
        H.WatchTimeQuantileHead(tower_units=(0,))
