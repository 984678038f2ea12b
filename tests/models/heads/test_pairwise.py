"""Pairwise (RankNet) watch head: the loss against a brute force over pairs, and what it learns."""
import itertools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import heads as H


def brute_force(y, pred, weight):
    l, s = np.log1p(y), np.log1p(np.maximum(pred, 0.0))
    pairs = [(i, j) for i, j in itertools.permutations(range(len(y)), 2) if l[i] > l[j]]
    pair_term = np.mean([np.log1p(np.exp(-(s[i] - s[j]))) for i, j in pairs]) if pairs else 0.0
    return (l - s) ** 2 + weight * pair_term


def test_loss_equals_the_brute_force_over_ordered_pairs():
    y = np.array([0.0, 3.0, 3.0, 10.0, 1.0], np.float32)  # a tie (3, 3): no pair
    pred = np.array([2.0, 1.0, 5.0, 4.0, -1.0], np.float32)  # a negative prediction counts as 0
    got = H.log1p_mse_pairwise(0.7)(tf.constant(y[:, None]), tf.constant(pred[:, None])).numpy()
    np.testing.assert_allclose(got, brute_force(y, pred, 0.7), rtol=1e-5)
    # by hand for two rows: y = (1, 0), s = (0, log 2): one pair, softplus(log 2 − 0) = log 3
    got2 = H.log1p_mse_pairwise(1.0)(tf.constant([[1.0], [0.0]]), tf.constant([[0.0], [1.0]])).numpy()
    np.testing.assert_allclose(got2, [np.log(2) ** 2 + np.log(3), np.log(2) ** 2 + np.log(3)], rtol=1e-6)


def test_weight_zero_is_log1p_mse_and_all_ties_add_nothing():
    y, pred = tf.constant([[1.0], [4.0], [0.0]]), tf.constant([[2.0], [1.0], [3.0]])
    np.testing.assert_allclose(H.log1p_mse_pairwise(0.0)(y, pred).numpy(), H.log1p_mse(y, pred).numpy())
    tied = tf.constant([[2.0], [2.0], [2.0]])
    np.testing.assert_allclose(H.log1p_mse_pairwise(5.0)(tied, pred).numpy(), H.log1p_mse(tied, pred).numpy())
    with pytest.raises(ValueError, match="weight"):
        H.log1p_mse_pairwise(-1.0)


def test_pairwise_gradient_moves_a_misordered_pair_apart_by_the_logistic_weight():
    # y_0 > y_1 but s_0 < s_1: d/ds_0 softplus(s_1 − s_0) = −σ(s_1 − s_0), d/ds_1 = +σ(s_1 − s_0)
    log_true = tf.constant([2.0, 1.0])
    log_pred = tf.Variable([0.5, 1.5])
    with tf.GradientTape() as tape:
        loss = H.pairwise_logistic(log_true, log_pred)
    grad = tape.gradient(loss, log_pred).numpy()
    sig = 1.0 / (1.0 + np.exp(-1.0))
    np.testing.assert_allclose(grad, [-sig, sig], rtol=1e-6)
    assert float(H.pairwise_logistic(tf.constant([1.0, 1.0]), log_pred)) == 0.0  # no ordered pair


def test_head_is_the_regression_output_with_the_pairwise_loss():
    z = keras.Input((3,))
    head = H.WatchTimePairwiseHead(0.5)
    out = head.build(z)
    assert head.output_names == ("watch_time_s",) and set(out) == {"watch_time_s"}
    assert head.losses()["watch_time_s"].__name__ == "log1p_mse_pairwise_0.5"
    model = keras.Model(z, out)
    model.compile("adam", loss=head.losses())
    x = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    y = np.exp(x[:, :1]).astype(np.float32)
    model.fit(x, {"watch_time_s": y}, batch_size=32, epochs=1, verbose=0)
    # Keras reduces the per-row losses to the module's L (one batch of all 64 rows)
    pred = model.predict(x, verbose=0)["watch_time_s"]
    keras_loss = model.evaluate(x, {"watch_time_s": y}, batch_size=64, verbose=0)
    np.testing.assert_allclose(keras_loss, brute_force(y[:, 0], pred[:, 0], 0.5).mean(), rtol=1e-4)
