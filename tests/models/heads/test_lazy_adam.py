"""LazyAdam (models/heads/lazy_adam.py) against its equations in numpy: the rows of a sparse
gradient get Adam's update, the other rows keep weights and moments; dense weights get
tf-keras Adam's update exactly."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.heads.lazy_adam import OPTIMIZERS, LazyAdam, make_optimizer
from models.publishing import row_importance
from models.training.config import OPTIMIZERS as CONFIG_OPTIMIZERS

LR, B1, B2, EPS = 0.01, 0.9, 0.999, 1e-7


def _reference(theta, m, v, steps):
    """numpy: per step t, the summed gradient of each row present in the batch (β as the
    float32 constants the optimizer computes with)."""
    b1, b2 = float(np.float32(B1)), float(np.float32(B2))
    theta, m, v = theta.copy(), m.copy(), v.copy()
    for t, (rows, values) in enumerate(steps, start=1):
        g = {}
        for r, val in zip(rows, values):
            g[r] = g.get(r, 0.0) + val
        alpha = LR * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for r, gr in g.items():
            m[r] = b1 * m[r] + (1 - b1) * gr
            v[r] = b2 * v[r] + (1 - b2) * gr ** 2
            theta[r] -= alpha * m[r] / (np.sqrt(v[r]) + EPS)
    return theta, m, v


@pytest.mark.parametrize("jit_compile", [False, True])
def test_sparse_rows_follow_adam_and_absent_rows_stay(jit_compile):
    rng = np.random.default_rng(0)
    theta0 = rng.normal(size=(7, 3)).astype(np.float32)
    table = tf.Variable(theta0)
    opt = LazyAdam(LR, beta_1=B1, beta_2=B2, epsilon=EPS, jit_compile=jit_compile)
    steps = [([1, 4, 1], rng.normal(size=(3, 3))), ([4, 6], rng.normal(size=(2, 3))), ([2], rng.normal(size=(1, 3)))]
    for rows, values in steps:  # duplicated rows (1 twice) are summed, as a lookup's gradient is
        grad = tf.IndexedSlices(tf.constant(values, tf.float32), tf.constant(rows, tf.int64), tf.constant([7, 3]))
        opt.apply_gradients([(grad, table)])
    theta, m, v = _reference(theta0.astype(np.float64), np.zeros((7, 3)), np.zeros((7, 3)), steps)
    np.testing.assert_allclose(table.numpy(), theta, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(opt._momentums[0].numpy(), m, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(opt._velocities[0].numpy(), v, rtol=1e-5, atol=1e-9)
    for row in (0, 3, 5):  # never in a batch: weights and moments untouched
        np.testing.assert_array_equal(table.numpy()[row], theta0[row])
        assert not opt._momentums[0].numpy()[row].any() and not opt._velocities[0].numpy()[row].any()


def test_dense_gradients_are_tf_keras_adam():
    rng = np.random.default_rng(1)
    w0 = rng.normal(size=(4, 2)).astype(np.float32)
    lazy_w, adam_w = tf.Variable(w0), tf.Variable(w0)
    lazy, adam = LazyAdam(LR), keras.optimizers.Adam(LR)
    for _ in range(3):
        g = tf.constant(rng.normal(size=(4, 2)), tf.float32)
        lazy.apply_gradients([(g, lazy_w)])
        adam.apply_gradients([(g, adam_w)])
    np.testing.assert_array_equal(lazy_w.numpy(), adam_w.numpy())


def test_a_model_trains_and_the_names_match_the_config():
    ids = keras.Input((2,), dtype="int64")
    out = keras.layers.Dense(1)(keras.layers.Flatten()(keras.layers.Embedding(50, 4)(ids)))
    model = keras.Model(ids, out)
    model.compile(optimizer=make_optimizer("lazy_adam", 0.05), loss="mse")
    x = np.random.default_rng(2).integers(0, 50, (64, 2))
    y = x.sum(1, keepdims=True).astype(np.float32) / 50
    first = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=20, verbose=0)
    assert model.evaluate(x, y, verbose=0) < first / 2
    assert tuple(sorted(OPTIMIZERS)) == tuple(sorted(CONFIG_OPTIMIZERS))
    assert row_importance.optimizer_kind(model.optimizer) == "LazyAdam:v"  # the Publisher reads its v
    assert row_importance.second_moment_slot(model.optimizer, model.layers[1].embeddings) is not None
    with pytest.raises(ValueError, match="unknown optimizer"):
        make_optimizer("sgd", 0.1)
