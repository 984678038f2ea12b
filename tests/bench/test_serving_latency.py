"""bench/serving_latency.py paired_ratio: the call-by-call comparison of two models."""
import numpy as np
import pytest

from bench.serving_latency import paired_ratio


def test_paired_ratio_is_the_median_of_per_round_ratios():
    # ratios 1.1, 1.0, 0.75: median 1.0 (pooled p50s would give 2.0 vs 2.0 here too, but
    # the ratio is what cancels a round's machine speed)
    out = paired_ratio([1.0, 2.0, 4.0], [1.1, 2.0, 3.0], resamples=500)
    assert out["median"] == pytest.approx(1.0)
    assert out["rounds"] == 3
    lo, hi = out["ci95"]
    assert 0.75 <= lo <= 1.0 <= hi <= 1.1


def test_paired_ratio_cancels_drift_that_pooled_percentiles_keep():
    rng = np.random.default_rng(1)
    speed = np.repeat([1.0, 1.5], 200)  # the machine slows down halfway
    base = 5.0 * speed * (1 + 0.01 * rng.standard_normal(400))
    other = 1.02 * 5.0 * speed * (1 + 0.01 * rng.standard_normal(400))  # 2 % slower, always
    out = paired_ratio(base, other)
    assert out["median"] == pytest.approx(1.02, abs=0.003)
    # the 2 % is resolved, though the drift (50 %) is 25x the effect: the interval is
    # as narrow as the 1 % per-call noise allows, not as wide as the drift
    assert 1.0 < out["ci95"][0] and out["ci95"][1] - out["ci95"][0] < 0.01


def test_constant_ratio_has_a_point_interval():
    out = paired_ratio([2.0, 3.0, 5.0, 7.0], [1.0, 1.5, 2.5, 3.5])
    assert out["median"] == pytest.approx(0.5)
    assert out["ci95"] == pytest.approx([0.5, 0.5])


@pytest.mark.parametrize("base, other", [([1.0, 2.0], [1.0]), ([], []), ([[1.0]], [[1.0]])])
def test_paired_ratio_refuses_unpaired_series(base, other):
    with pytest.raises(ValueError, match="equally long"):
        paired_ratio(base, other)
