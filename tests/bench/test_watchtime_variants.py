"""bench/watchtime_variants.py: the validation-fitted median calibration and the additive
CQR comparison, by hand."""
import numpy as np

from bench.watchtime_variants import additive_cqr, median_calibration


def test_additive_cqr_offsets_clip_and_running_max_by_hand():
    # 4 validation rows, levels (0.2, 0.6): k = ceil(5 tau) = 1, 3
    val_y = np.array([0.0, 2.0, 4.0, 10.0])
    val_q = np.array([[1.0, 3.0], [1.0, 3.0], [1.0, 3.0], [1.0, 3.0]])
    # scores y - t: level 0.2 (-1, 1, 3, 9) -> 1st = -1; level 0.6 (-3, -1, 1, 7) -> 3rd = 1
    out = additive_cqr(val_y, val_q, np.array([[0.5, 0.6], [3.0, 4.0]]), [0.2, 0.6])
    # row 0: (max(0.5 - 1, 0), 0.6 + 1) = (0, 1.6); row 1: (2, 5)
    np.testing.assert_allclose(out, [[0.0, 1.6], [2.0, 5.0]])
    # decreasing offsets: the running max keeps the quantiles monotone
    out = additive_cqr(np.array([5.0, 5.0]), np.array([[0.0, 10.0], [0.0, 10.0]]), np.array([[0.0, 1.0]]), [0.3, 0.6])
    np.testing.assert_allclose(out, [[5.0, 5.0]])  # offsets (5, -5): (5, max(5, -4 -> 0))


def test_median_calibration_maps_bin_medians_and_stays_monotone():
    pred = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 12.0])
    y = np.array([0.0, 5.0, 6.0, 1.0, 2.0, 40.0])  # bin 2's median (2) is below bin 1's (5)
    fn = median_calibration(pred, y, num_bins=2)
    # bins: {1, 2, 3} -> (2, 5); {10, 11, 12} -> (11, max(2, 5) = 5): running max of the label medians
    np.testing.assert_allclose(fn([2.0, 11.0, 6.5, 0.0, 50.0]), [5.0, 5.0, 5.0, 5.0, 5.0])
    fn = median_calibration(pred, np.array([0.0, 1.0, 2.0, 20.0, 30.0, 40.0]), num_bins=2)
    np.testing.assert_allclose(fn([2.0, 11.0, 6.5, 0.0, 50.0]), [1.0, 30.0, 15.5, 1.0, 30.0])
