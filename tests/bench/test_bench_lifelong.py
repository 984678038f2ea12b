"""bench/bench_lifelong.py: train/serve parity of the titans writer and of the one-user
serving path, on a tiny lifelong simulation."""
import numpy as np
import pytest
import tensorflow as tf

from bench.bench_lifelong import RECENT, LifelongRanker, _slice_se
from data.simulator.lifelong import LifelongParams, simulate_lifelong

PARAMS = LifelongParams(num_videos=200, num_topics=20, history_length=130, candidates=5, phase_mean=30.0)


@pytest.fixture(scope="module")
def data():
    return simulate_lifelong(4, seed=1, params=PARAMS)


@pytest.mark.parametrize("method", ["titans", "twin_lite"])
def test_one_user_serving_equals_the_training_graph(data, method):
    tf.keras.utils.set_random_seed(0)
    model = LifelongRanker(method, data.video_topic, dim=4, chunk_size=16)
    hist, cand = tf.constant(data.history), tf.constant(data.candidates)
    trained = model.forward(hist, cand, training=False).numpy()
    writer = tf.function(model.user_side)
    for u in range(2):
        h = hist[u:u + 1]
        if method == "titans":  # the writer's state is the request feature; only the last 50 events are sent
            state = writer(h)
            served = model.score(state, h[:, -RECENT:], cand[u:u + 1], False)
        else:
            served = model.score(None, h, cand[u:u + 1], False)
        np.testing.assert_allclose(served.numpy()[0], trained[u], rtol=1e-5, atol=1e-5)
    if method == "titans":  # a state from another user changes the scores: the state is really read
        other = model.score(writer(hist[1:2]), hist[:1, -RECENT:], cand[:1], False).numpy()[0]
        assert np.abs(other - trained[0]).max() > 1e-6


def test_slice_se_is_zero_without_variation_and_positive_with_it():
    labels = np.tile([[1.0, 0.0, 1.0, 0.0]], (20, 1))
    rng = np.random.default_rng(0)
    perfect = labels.copy()
    mask = np.ones_like(labels, bool)
    assert _slice_se(labels, perfect, mask, rng, reps=20) == 0.0
    noisy = labels + rng.normal(0, 1.0, labels.shape)
    assert _slice_se(labels, noisy, mask, rng, reps=50) > 0.01


def test_histories_read_back_through_log_example_gen(data, tmp_path):
    from bench.bench_lifelong import histories_via_log_example_gen

    got, figures = histories_via_log_example_gen(data, str(tmp_path), seed=1)
    assert np.array_equal(got.history, data.history) and np.array_equal(got.candidates, data.candidates)
    assert figures["log_rows"] == int(data.history_length.sum()) + data.candidates.size
    assert 0 < figures["user_events_bytes"] < figures["examples_bytes"]
