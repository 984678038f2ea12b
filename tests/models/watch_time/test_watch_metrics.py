"""Watch-time estimate metrics of issue 13 (models/evaluation/metrics.py): mean
calibration by prediction decile against a brute-force loop and hand values."""
import numpy as np
import pytest

from models.evaluation import metrics


def _brute(y, p, num_bins):
    edges = [np.quantile(p, k / num_bins) for k in range(1, num_bins)]
    bins = [sum(e <= v for e in edges) for v in p]
    gap, out = 0.0, []
    for b in sorted(set(bins)):
        rows = [i for i in range(len(y)) if bins[i] == b]
        mp, my = np.mean(p[rows]), np.mean(y[rows])
        gap += len(rows) * abs(mp - my)
        out.append((len(rows), mp, my))
    return gap / len(y), out


def test_mean_calibration_by_bin_matches_brute_force_and_ignores_row_order():
    rng = np.random.default_rng(0)
    y = rng.exponential(20.0, 300)
    p = np.round(0.5 * y + rng.normal(0, 5, 300), 0)  # rounded: ties across bin edges
    got = metrics.mean_calibration_by_bin(y, p, 10)
    gap, bins = _brute(y, p, 10)
    assert got["mean_abs_gap"] == pytest.approx(gap)
    assert got["count"] == [b[0] for b in bins] and sum(got["count"]) == 300
    np.testing.assert_allclose(got["pred"], [b[1] for b in bins])
    np.testing.assert_allclose(got["label"], [b[2] for b in bins])
    perm = rng.permutation(300)
    assert metrics.mean_calibration_by_bin(y[perm], p[perm], 10)["mean_abs_gap"] == pytest.approx(gap)


def test_mean_calibration_hand_values():
    # constant prediction: one bin, gap = |mean p - mean y|
    got = metrics.mean_calibration_by_bin([0.0, 10.0, 20.0, 50.0], [5.0] * 4)
    assert got["count"] == [4] and got["mean_abs_gap"] == pytest.approx(15.0)
    assert got["relative_gap"] == pytest.approx(15.0 / 20.0)
    # a perfect E[y] per bin: zero gap, though the MAE is not zero
    got = metrics.mean_calibration_by_bin([0.0, 2.0, 10.0, 30.0], [1.0, 1.0, 20.0, 20.0], num_bins=2)
    assert got["count"] == [2, 2] and got["mean_abs_gap"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="num_bins"):
        metrics.mean_calibration_by_bin([1.0], [1.0], 0)
