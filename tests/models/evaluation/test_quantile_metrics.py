"""models/evaluation/quantile_metrics.py: coverage, pinball loss and the randomized
coverage for labels with an atom at 0, by hand and on a simulated truth."""
import numpy as np
import pytest

from models.evaluation import quantile_metrics


def test_coverage_pinball_hand_values():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    taus = np.array([0.25, 0.5])
    q = np.array([[0.5, 2.0], [2.0, 2.0], [2.0, 3.5], [5.0, 6.0]])
    # y <= t: col 0 -> (F, T, F, T) = .5 ; col 1 -> (T, T, T, T) = 1
    np.testing.assert_allclose(quantile_metrics.quantile_coverage(y, q, taus), [0.5, 1.0])
    assert quantile_metrics.mean_coverage_error(y, q, taus) == pytest.approx((0.25 + 0.5) / 2)
    # u = y - t: row0 (.5, -1) -> .125 + .5 ; row1 (0, 0) -> 0 ; row2 (1, -.5) -> .25 + .25 ;
    # row3 (-1, -2) -> .75 + 1
    assert quantile_metrics.pinball_loss(y, q, taus) == pytest.approx((0.625 + 0 + 0.5 + 1.75) / 4)
    with pytest.raises(ValueError):
        quantile_metrics.pinball_loss(y, q[:, :1], taus)


def test_zero_cdf_and_randomized_coverage_hand_values():
    grid = np.array([0.2, 0.4, 0.6, 0.8])
    q = np.array([[0.0, 0.0, 1.0, 2.0],   # F0 = 0.4
                  [0.0, 1.0, 2.0, 3.0],   # F0 = 0.2
                  [0.5, 1.0, 2.0, 3.0]])  # F0 = 0
    np.testing.assert_allclose(quantile_metrics.zero_cdf(q, grid), [0.4, 0.2, 0.0])
    y = np.array([0.0, 0.0, 0.0])
    # tau = 0.2: row 0 ties at 0 -> 0.2 / 0.4; row 1 ties -> 0.2 / 0.2 = 1; row 2 t > 0 -> 1
    # tau = 0.4: row 0 ties -> 1; rows 1, 2 have t > 0 -> 1
    cov = quantile_metrics.randomized_coverage(y, q[:, :2], grid[:2], quantile_metrics.zero_cdf(q, grid))
    np.testing.assert_allclose(cov, [(0.5 + 1 + 1) / 3, 1.0])
    # positive labels are counted as quantile_coverage does
    y = np.array([0.5, 1.0, 4.0])
    np.testing.assert_allclose(quantile_metrics.randomized_coverage(y, q, grid, quantile_metrics.zero_cdf(q, grid)),
                               quantile_metrics.quantile_coverage(y, q, grid))


def test_randomized_coverage_of_the_true_zero_inflated_quantiles_is_tau():
    """Watch time with an atom at 0 (P(y = 0 | x) = 0.05 or 0.3): the true conditional
    quantiles over-cover the low levels in 1(y <= t) (the atom's share), the randomized
    PIT coverage is tau within sampling error."""
    rng = np.random.default_rng(0)
    n, grid = 200_000, np.arange(1, 101) / 101.0
    p0 = np.where(rng.random(n) < 0.5, 0.05, 0.3)
    mu = rng.normal(1.5, 0.5, n)
    y = np.where(rng.random(n) < p0, 0.0, np.exp(mu + rng.normal(size=n)))
    from scipy.stats import norm

    # true quantile: 0 below the atom, the log-normal's (tau - p0) / (1 - p0) quantile above it
    z = norm.ppf(np.clip((grid[None, :] - p0[:, None]) / (1 - p0[:, None]), 1e-12, 1 - 1e-12))
    q = np.where(grid[None, :] <= p0[:, None], 0.0, np.exp(mu[:, None] + z))
    taus = grid[[9, 19, 29, 49, 79]]
    plain = quantile_metrics.quantile_coverage(y, q[:, [9, 19, 29, 49, 79]], taus)
    rand = quantile_metrics.randomized_coverage(y, q[:, [9, 19, 29, 49, 79]], taus, quantile_metrics.zero_cdf(q, grid))
    assert plain[0] > taus[0] + 0.05  # the atom: E[max(tau, p0)] = 0.5 * 0.099 + 0.5 * 0.3
    np.testing.assert_allclose(plain[0], 0.5 * taus[0] + 0.5 * 0.3, atol=0.005)
    # the grid's F0 is the last level <= p0: at most 1/101 below the truth, so ties count slightly more
    np.testing.assert_allclose(rand, taus, atol=0.006)
