"""EAD (CREAD, Sun et al. AAAI 2024): CDF, gamma family, objective, search.
The TF Transform analyzer and its asset reader: test_ead_analyzer.py."""
import json

import numpy as np
import pytest

from models.watch_time import ead


class TruncExp:
    """Psi(t) = (1 - e^{-r t}) / (1 - e^{-r}) on [0, 1] (the paper's example, r = 5)."""

    t_max = 1.0

    def __init__(self, r=5.0):
        self.r = r

    def __call__(self, t):
        t = np.clip(np.asarray(t, dtype=np.float64), 0.0, 1.0)
        return np.expm1(-self.r * t) / np.expm1(-self.r)

    def inverse(self, u):
        u = np.clip(np.asarray(u, dtype=np.float64), 0.0, 1.0)
        return -np.log1p(u * np.expm1(-self.r)) / self.r


# ------------------------------------------------------------------ CDF
def test_piecewise_cdf_and_generalised_inverse_with_point_mass():
    # point mass 0.5 at 0, then linear to (1, .75), (2, 1)
    c = ead.PiecewiseLinearCdf([0, 0, 1, 2], [0, 0.5, 0.75, 1])
    np.testing.assert_allclose(c([-0.1, 0, 0.5, 1, 1.5, 2, 3]), [0, 0.5, 0.625, 0.75, 0.875, 1, 1])
    np.testing.assert_allclose(c.inverse([0, 0.2, 0.5, 0.6, 0.75, 0.9, 1]), [0, 0, 0, 0.4, 1, 1.6, 2])


def test_cdf_from_boundaries_truncates_and_renormalises():
    b = np.arange(1, 100, dtype=np.float64)  # quantile k/100 at value k -> uniform on [0, 100]
    c = ead.cdf_from_boundaries(b, t_max_quantile=0.9)
    assert c.t_max == pytest.approx(90.0)
    np.testing.assert_allclose(c([0, 45, 90, 95]), [0, 0.5, 1, 1])
    np.testing.assert_allclose(c.inverse([0.25, 1.0]), [22.5, 90.0])
    with pytest.raises(ValueError):
        ead.cdf_from_boundaries(np.zeros(9))  # all mass at 0: T_max = 0


# ---------------------------------------------------------------- gamma
def test_gamma_limits_and_stability():
    z = np.linspace(0, 1, 11)
    np.testing.assert_array_equal(ead.gamma(z, 0.0), z)
    for a in (1e-12, 1e-9, 1.01e-8, 1e-6):  # both sides of the series switch at 1e-8
        np.testing.assert_allclose(ead.gamma(z, a), z + a * z * (1 - z) / 2, atol=1e-12)
    np.testing.assert_allclose(ead.gamma(0.5, 2.0), (1 - np.exp(-1)) / (1 - np.exp(-2)), rtol=1e-14)
    np.testing.assert_allclose(ead.gamma(z, -2.0), 1 - ead.gamma(1 - z, 2.0), atol=1e-15)
    for a in (-1000.0, 1000.0):
        g = ead.gamma(z, a)
        assert np.all(np.isfinite(g)) and g[0] == 0 and g[-1] == 1 and np.all(np.diff(g) >= 0)


def test_alpha_to_zero_is_equal_frequency():
    x = np.random.default_rng(1).exponential(10.0, 5000)
    c = ead.cdf_from_boundaries(ead.boundaries_from_samples(x, 1000), t_max_quantile=0.99)
    for a in (0.0, 1e-10, 1e-7):
        t = ead.candidate_thresholds(c, 10, a)
        # each bucket holds 1/10 of the (truncated) mass
        np.testing.assert_allclose(np.diff(np.concatenate([[0], c(t)])), 0.1, atol=1e-6)
    # and matches the sample quantiles of x | x <= T_max (up to the 1000-bucket grid)
    t = ead.candidate_thresholds(c, 10, 0.0)
    xs = x[x <= c.t_max]
    np.testing.assert_allclose(t[:-1], np.quantile(xs, np.arange(1, 10) / 10), rtol=0.02)


# ------------------------------------------------------------ objective
def test_objective_matches_hand_computation():
    c = ead.PiecewiseLinearCdf([0, 1, 2, 4], [0, 0.5, 0.75, 1])
    # dPsi = (.5, .25, .25), dt = (1, 1, 2); sum dPsi^2 = .375
    # A_w = .375 * (1/.5 + 1/.25 + 4/.25) = .375 * 22 ; A_b = .375 * 6
    r = ead.ead_objective([1, 2, 4], c, beta=2.0)
    assert r["A_w"] == pytest.approx(8.25) and r["A_b"] == pytest.approx(2.25)
    assert r["J"] == pytest.approx(8.25 + 2 * 2.25) and r["n_empty_buckets"] == 0


def test_objective_discrete_cdf_skips_empty_bucket():
    # point masses .2 at 0, .5 at 1, .3 at 3; Psi(t_0) := 0 so the mass at 0 is in bucket 1
    c = ead.PiecewiseLinearCdf([0, 0, 1, 1, 3, 3], [0, .2, .2, .7, .7, 1])
    r = ead.ead_objective([1, 2, 3], c, beta=10.0)  # dPsi = (.7, 0, .3), dt = (1, 1, 1)
    s2 = .7 ** 2 + .3 ** 2
    assert r["A_w"] == pytest.approx(s2 * (1 / .7 + 1 / .3))
    assert r["A_b"] == pytest.approx(s2 * 3)
    assert r["J"] == pytest.approx(s2 * (1 / .7 + 1 / .3) + 10 * s2 * 3)
    assert r["n_empty_buckets"] == 1


# --------------------------------------------------------------- search
@pytest.mark.parametrize("beta", [50.0, 100.0, 200.0])
def test_truncated_exponential_best_gamma_beats_both_extremes(beta):
    c = TruncExp(5.0)
    res = ead.search_thresholds(c, 10, beta)
    by = {k["name"]: k for k in res.candidates}
    best = min(k["J"] for k in res.candidates)
    assert res.chosen not in ("alpha=0", ead.EQUAL_WIDTH)
    assert best < by["alpha=0"]["J"] - 1e-3 and best < by[ead.EQUAL_WIDTH]["J"] - 1e-3
    assert by[res.chosen]["J"] == best and res.thresholds == by[res.chosen]["thresholds"]
    # Psi^{-1}(gamma(z; 5)) = z for this Psi: alpha = 5 is exactly equal width
    np.testing.assert_allclose(by["alpha=5"]["thresholds"], by[ead.EQUAL_WIDTH]["thresholds"], atol=1e-6)
    # independent recomputation of J for every candidate
    for k in res.candidates:
        t = np.concatenate([[0], k["thresholds"]])
        dp, dt = np.diff(c(t)), np.diff(t)
        ref = np.sum(dp ** 2) * (np.sum(dt ** 2 / dp) + beta * np.sum(dt ** 2))
        assert k["J"] == pytest.approx(ref, rel=1e-9)
    back = json.loads(res.to_json())
    assert back["chosen"] == res.chosen and len(back["candidates"]) == len(ead.DEFAULT_ALPHAS) + 1
    assert ead.EadResult.from_json(res.to_json()) == res


def test_point_mass_thresholds_strictly_increasing_and_merged():
    c = ead.PiecewiseLinearCdf([0, 0, 1, 1, 3, 3], [0, .2, .2, .7, .7, 1])
    # equal frequency, M = 5: Psi^{-1}(.2, .4, .6, .8, 1) = (0, 1, 1, 3, 3) -> (1, 3)
    np.testing.assert_array_equal(ead.candidate_thresholds(c, 5, 0.0), [1.0, 3.0])
    res = ead.search_thresholds(c, 5, beta=1.0, alphas=(-3.0, 0.0, 1.0, 5.0))
    for k in res.candidates:
        t = np.asarray(k["thresholds"])
        assert t[0] > 0 and np.all(np.diff(t) > 0) and np.all(np.diff(t.astype(np.float32)) > 0)
        assert k["M_eff"] == t.size and t[-1] == 3.0
    assert res.M == 5 and res.M_eff == len(res.thresholds)


def test_many_zeros_from_samples():
    rng = np.random.default_rng(2)
    x = np.concatenate([np.zeros(4000), rng.exponential(5.0, 6000), np.full(500, 7.0)])
    res = ead.search_thresholds(ead.boundaries_from_samples(x, 1000), 50, 100.0, t_max_quantile=0.99)
    for k in res.candidates:
        t = np.asarray(k["thresholds"], dtype=np.float32)
        assert t[0] > 0 and np.all(np.diff(t) > 0)
        if k["alpha"] is not None:  # inverse-CDF candidates never have empty buckets
            assert k["n_empty_buckets"] == 0
    assert res.candidates[0]["M_eff"] < 50  # 40 % zeros: equal frequency merges ~20 levels


def test_validation_errors():
    with pytest.raises(ValueError):
        ead.search_thresholds(np.arange(1.0, 10.0), 0, 1.0)
    with pytest.raises(ValueError):
        ead.search_thresholds(np.arange(1.0, 10.0), 5, -1.0)
    with pytest.raises(ValueError):
        ead.PiecewiseLinearCdf([0, 2, 1], [0, .5, 1])
