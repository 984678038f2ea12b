"""Periodic (PLR) numeric embeddings: against a NumPy loop, shapes, config, bad arguments."""
import math

import numpy as np
import pytest
import tensorflow as tf

from models.layers.numeric_embedding import PeriodicEmbedding
from tests.models.layers.round_trip import assert_config_round_trip


def test_periodic_embedding_matches_a_loop_over_features():
    emb = PeriodicEmbedding(output_dim=3, frequencies=4, sigma=0.5)
    x = np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32)
    x[0, 0], x[1, 1] = 0.0, 40.0  # zero and a value far in the tail
    emb.build(x.shape)
    emb.b.assign(np.random.default_rng(1).normal(size=emb.b.shape))  # a non-zero bias too
    out = emb(x).numpy()
    c, w, b = (v.numpy().astype(np.float64) for v in (emb.c, emb.w, emb.b))
    expected = np.zeros((5, 6, 3))
    for i in range(5):
        for j in range(6):
            v = np.concatenate([np.sin(2 * math.pi * c[j] * x[i, j]), np.cos(2 * math.pi * c[j] * x[i, j])])
            expected[i, j] = np.maximum(v @ w[j] + b[j], 0.0)
    assert out.shape == (5, 18)
    np.testing.assert_allclose(out, expected.reshape(5, 18), rtol=1e-4, atol=1e-5)


def test_initial_frequencies_have_the_given_scale_and_are_trained():
    emb = PeriodicEmbedding(output_dim=2, frequencies=64, sigma=0.3)
    emb.build((None, 50))
    assert abs(float(np.std(emb.c.numpy())) - 0.3) < 0.03
    assert {v.name.split("/")[-1].split(":")[0] for v in emb.trainable_variables} == {"frequencies", "kernel", "bias"}
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(emb(tf.ones([2, 50])))
    assert all(g is not None and np.any(g.numpy() != 0) for g in tape.gradient(loss, emb.trainable_variables))


def test_rows_are_embedded_independently():  # serving_rank's one-row user side
    emb = PeriodicEmbedding(output_dim=4, frequencies=3)
    x = tf.constant(np.random.default_rng(2).normal(size=(7, 5)), tf.float32)
    np.testing.assert_allclose(emb(x[2:3]).numpy(), emb(x).numpy()[2:3], rtol=1e-6, atol=1e-6)
    assert emb.compute_output_shape(tf.TensorShape([None, 5])).as_list() == [None, 20]


def test_config_round_trip():
    assert_config_round_trip(PeriodicEmbedding(output_dim=2, frequencies=3, sigma=1.5),
                             lambda layer: layer(tf.constant([[0.1, -2.0], [3.0, 0.0]])))


@pytest.mark.parametrize("kwargs", [
    {"output_dim": 0}, {"frequencies": 0}, {"sigma": 0.0}, {"sigma": -1.0}, {"sigma": float("nan")},
    {"sigma": True}, {"output_dim": 2.0}, {"sigma": "0.3"},
])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        PeriodicEmbedding(**kwargs)


def test_unknown_feature_count_is_refused():
    with pytest.raises(ValueError, match="number of features"):
        PeriodicEmbedding().build(tf.TensorShape([None, None]))
