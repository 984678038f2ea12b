"""BST's time-gap position: bucketing against NumPy, log-spaced boundaries, config."""
import numpy as np
import pytest
import tensorflow as tf

from models.layers.time_gap import SECONDS_PER_DAY, TimeGapBucketEmbedding, log_spaced_boundaries
from tests.models.layers.round_trip import assert_config_round_trip


def test_time_gap_buckets_match_numpy():
    boundaries = [1.0, 60.0, 3600.0, 86400.0]
    emb = TimeGapBucketEmbedding(output_dim=3, boundaries=boundaries)
    gaps = np.array([[0.0, 0.5, 1.0, 59.9, 60.0, 1e4, 86400.0, 1e7, -5.0]], np.float32)
    out = emb(gaps).numpy()
    buckets = np.searchsorted(boundaries, np.maximum(gaps, 0), side="right")
    np.testing.assert_array_equal(emb.bucketize(gaps).numpy(), buckets)
    np.testing.assert_array_equal(out, emb.embeddings.numpy()[buckets])
    assert out.shape == (1, 9, 3) and emb.num_buckets == 5


def test_default_boundaries_are_log_spaced():
    emb = TimeGapBucketEmbedding(output_dim=4, num_buckets=6, min_gap_s=1.0, max_gap_s=1e4)
    np.testing.assert_allclose(emb.boundaries, [1.0, 10.0, 100.0, 1e3, 1e4], rtol=1e-9)
    assert len(log_spaced_boundaries()) == 15
    assert emb(tf.constant([[3, 300]], tf.int64)).shape == (1, 2, 4)


@pytest.mark.parametrize("kwargs", [
    {"output_dim": 0}, {"output_dim": 4, "boundaries": [10.0, 5.0]},
    {"output_dim": 4, "boundaries": []}, {"output_dim": 4, "num_buckets": 1},
    {"output_dim": 4, "min_gap_s": 0.0}, {"output_dim": 4, "boundaries": [0.0, 5.0]},
    {"output_dim": 4, "boundaries": [1.0, float("inf")]}, {"output_dim": 2.0},
])
def test_time_gap_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        TimeGapBucketEmbedding(**kwargs)


def test_default_range_is_one_second_to_thirty_days():
    b = log_spaced_boundaries(16)
    assert b[0] == pytest.approx(1.0) and b[-1] == pytest.approx(30 * SECONDS_PER_DAY)
    np.testing.assert_allclose(np.diff(np.log(b)), np.log(30 * SECONDS_PER_DAY) / 14, rtol=1e-9)


def test_get_config_round_trips():
    emb = TimeGapBucketEmbedding(output_dim=8, boundaries=[1.0, 10.0], name="g")
    assert TimeGapBucketEmbedding.from_config(emb.get_config()).get_config() == emb.get_config()
    gaps = np.array([[0.0, 3.0, 50.0, np.nan]], np.float32)
    assert_config_round_trip(emb, lambda layer: layer(gaps))
    default = TimeGapBucketEmbedding(output_dim=2, num_buckets=5, max_gap_s=1e3)
    assert_config_round_trip(default, lambda layer: layer(tf.constant([[0, 7, 400, 5000]], tf.int64)))
