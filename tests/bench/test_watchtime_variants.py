"""bench/watchtime_variants.py: the validation-fitted median calibration, by hand."""
import numpy as np

from bench.watchtime_variants import median_calibration


def test_median_calibration_maps_bin_medians_and_stays_monotone():
    pred = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 12.0])
    y = np.array([0.0, 5.0, 6.0, 1.0, 2.0, 40.0])  # bin 2's median (2) is below bin 1's (5)
    fn = median_calibration(pred, y, num_bins=2)
    # bins: {1, 2, 3} -> (2, 5); {10, 11, 12} -> (11, max(2, 5) = 5): running max of the label medians
    np.testing.assert_allclose(fn([2.0, 11.0, 6.5, 0.0, 50.0]), [5.0, 5.0, 5.0, 5.0, 5.0])
    fn = median_calibration(pred, np.array([0.0, 1.0, 2.0, 20.0, 30.0, 40.0]), num_bins=2)
    np.testing.assert_allclose(fn([2.0, 11.0, 6.5, 0.0, 50.0]), [1.0, 30.0, 15.5, 1.0, 30.0])
