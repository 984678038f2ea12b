"""Lifelong histories (opt-in): shapes, determinism, the long-range marker, dormant interests."""
import numpy as np
import pytest

from data.simulator.lifelong import LifelongParams, long_range_marker, simulate_lifelong

PARAMS = LifelongParams(num_videos=400, num_topics=40, history_length=600, candidates=12, phase_mean=120.0)


@pytest.fixture(scope="module")
def data():
    return simulate_lifelong(60, seed=3, params=PARAMS)


def test_shapes_padding_and_determinism(data):
    assert data.history.shape == (60, 600) and data.candidates.shape == (60, 12)
    assert ((data.history_length >= 300) & (data.history_length <= 600)).all()
    for u in range(60):
        n = data.history_length[u]
        assert (data.history[u, :600 - n] == 0).all() and (data.history[u, 600 - n:] > 0).all()
    again = simulate_lifelong(60, seed=3, params=PARAMS)
    for field in ("history", "candidates", "labels", "long_range"):
        np.testing.assert_array_equal(getattr(again, field), getattr(data, field))
    other = simulate_lifelong(60, seed=4, params=PARAMS)
    assert not np.array_equal(other.history, data.history)
    assert data.video_topic[0] == 0 and data.video_topic.shape == (401,)


def test_long_range_marker_by_hand():
    topic = np.array([0, 0, 1, 2, 3])          # videos 1..4 -> topics 0..3
    history = np.array([[0, 1, 2, 3, 3]])      # one pad, then topics 0, 1, 2, 2
    got = long_range_marker(history, np.array([4]), np.array([[0, 1, 2, 3]]), topic, recent=2)
    np.testing.assert_array_equal(got, [[True, True, False, False]])  # 2 is recent, 3 never seen


def test_dormant_interests_come_back_and_drive_clicks(data):
    # most users have a topic engaged >= 30 times that is absent from the last 50 events
    dormant = 0
    for u in range(60):
        topics = data.video_topic[data.history[u, 600 - data.history_length[u]:]]
        counts = np.bincount(topics[:-50], minlength=40)
        dormant += bool(((counts >= 30) & ~np.isin(np.arange(40), topics[-50:])).any())
    assert dormant >= 30
    # on the long-range slice the true click probability still separates the candidates
    lr = data.long_range
    assert 0.2 < lr.mean() < 0.95
    assert data.p_click[lr].std() > 0.1
    assert np.corrcoef(data.p_click.ravel(), data.labels.ravel())[0, 1] > 0.2
