"""Shared layer helpers: masked softmax / mean against hand-computed values."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.layers._utils import clone_initializer, masked_mean, masked_softmax, positive_int, positive_ints, trim_padding


def test_clone_initializer_gives_independent_draws():
    init = keras.initializers.GlorotUniform()
    a, b = clone_initializer(init)((4, 4)), clone_initializer(init)((4, 4))
    assert not np.allclose(a.numpy(), b.numpy())
    assert clone_initializer(init).get_config() == init.get_config()


def test_masked_softmax_hand_values():
    logits = tf.constant([[0.0, np.log(3.0), 5.0], [1.0, 1.0, 1.0]])
    mask = tf.constant([[True, True, False], [True, False, True]])
    w = masked_softmax(logits, mask).numpy()
    np.testing.assert_allclose(w, [[0.25, 0.75, 0.0], [0.5, 0.0, 0.5]], rtol=1e-6)


def test_masked_softmax_fully_masked_row_is_zero_with_finite_gradient():
    logits = tf.Variable([[3.0, -2.0], [1e30, 2.0]])
    mask = tf.constant([[0, 0], [1, 0]])  # 0/1 masks work too
    with tf.GradientTape() as tape:
        w = masked_softmax(logits, mask)
        loss = tf.reduce_sum(w * tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(w.numpy(), [[0.0, 0.0], [1.0, 0.0]])
    assert np.isfinite(tape.gradient(loss, logits).numpy()).all()
    empty = masked_softmax(tf.zeros([2, 0]), tf.zeros([2, 0], tf.bool))
    assert empty.shape == (2, 0)


def test_masked_softmax_broadcasts_the_mask():
    logits = tf.random.stateless_normal([2, 3, 4, 4], seed=[1, 2])
    mask = tf.constant(np.array([[1, 1, 0, 0], [1, 1, 1, 1]], bool))
    w = masked_softmax(logits, mask[:, None, None, :]).numpy()
    ref = np.exp(logits.numpy()) * mask.numpy()[:, None, None, :]
    np.testing.assert_allclose(w, ref / ref.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_masked_mean_hand_values_and_empty_row():
    values = tf.constant([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                          [[5.0, 6.0], [7.0, 8.0], [9.0, 10.0]],
                          [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]])
    mask = tf.constant([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(masked_mean(values, mask).numpy(), [[2.0, 3.0], [7.0, 8.0], [0.0, 0.0]])
    np.testing.assert_allclose(masked_mean(values[..., 0], mask > 0).numpy(), [2.0, 7.0, 0.0])


def test_trim_padding_keeps_the_positions_some_row_uses():
    values = tf.reshape(tf.range(2 * 4 * 3, dtype=tf.float32), [2, 4, 3])
    mask = tf.constant([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    v, m = trim_padding(values, mask)
    np.testing.assert_array_equal(v.numpy(), values.numpy()[:, :2])
    np.testing.assert_array_equal(m.numpy(), mask.numpy()[:, :2])
    v, m = trim_padding(values, tf.zeros([2, 4]))  # no row has an item: nothing is left
    assert v.shape == (2, 0, 3) and m.shape == (2, 0)
    v, m = trim_padding(values, tf.constant([[False, False, False, True], [False] * 4]))  # the last position counts
    assert v.shape == (2, 4, 3) and m.dtype == tf.bool


def test_positive_int_checks():
    assert positive_int("L", "n", np.int64(3)) == 3 and positive_int("L", "n", None, allow_none=True) is None
    for bad in (0, -1, 2.5, True, None, "3"):
        with pytest.raises(ValueError, match="L: n must be a positive int"):
            positive_int("L", "n", bad)
    assert positive_ints("L", "units", [4, 2]) == (4, 2)
    for bad in (8, [4, 0], [2.5]):
        with pytest.raises(ValueError, match="L: units"):
            positive_ints("L", "units", bad)
    with pytest.raises(ValueError, match="must not be empty"):
        positive_ints("L", "units", (), allow_empty=False)
