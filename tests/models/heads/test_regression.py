"""Regression watch head: ŵ = expm1(softplus(w·z + b)) and the log1p squared error by hand."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import heads as H


def test_log1p_mse_by_hand():
    y = tf.constant([[3.0], [0.0]])
    pred = tf.constant([[1.0], [-5.0]])  # a negative prediction counts as 0
    np.testing.assert_allclose(H.log1p_mse(y, pred).numpy(), [np.log(2.0) ** 2, 0.0], rtol=1e-6)


def test_watch_time_is_expm1_of_softplus():
    z = keras.Input((4,), name="z")
    model = H.compile_ranker(z, z, [H.WatchTimeRegressionHead()])
    x = np.random.default_rng(2).normal(size=(6, 4)).astype(np.float32)
    w, b = model.get_layer("log1p_watch").get_weights()
    want = np.expm1(np.log1p(np.exp(x @ w + b)))
    got = model(x)["watch_time_s"].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert np.all(got >= 0)
    y = np.full((6, 1), 7.0, np.float32)
    res = model.evaluate(x, {"watch_time_s": y}, verbose=0, return_dict=True)
    assert res["loss"] == pytest.approx(float(np.mean((np.log1p(y) - np.log1p(want)) ** 2)), rel=1e-4)
    assert res["mae"] == pytest.approx(float(np.mean(np.abs(y - want))), rel=1e-4)
