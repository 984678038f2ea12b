"""Tests of data/simulator/interactions.py: click model, watch-time sampler vs exact truth."""
import dataclasses

import numpy as np
import pytest

from data.simulator import interactions, params
from models.evaluation import metrics

TRUTH_QUANTILE_COLUMNS = ["q10_s", "q25_s", "q50_s", "q75_s", "q90_s"]


def test_click_is_learnable_but_noisy(default_run):
    _, log, _, _, truth = default_run
    auc = metrics.auc(log["is_click"].to_numpy(), truth["p_click"].to_numpy())
    assert 0.70 <= auc <= 0.80


def test_autoplay_previews(default_run):
    _, log, _, _, _ = default_run
    no_click = log[log["is_click"] == 0]
    # Feed autoplay: most non-clicks still play, but only a short preview.
    assert (no_click["play_time_ms"] > 0).mean() > 0.7
    assert (no_click["play_time_ms"] < 7000).all()
    assert (log.loc[log["is_click"] == 1, "play_time_ms"] >= 7000).mean() > 0.85


def test_truth_means_match_realised_outcomes(default_run):
    _, log, _, _, truth = default_run
    watch_s = log["play_time_ms"].to_numpy() / 1000.0
    expected = truth["expected_watch_time_s"].to_numpy()
    assert watch_s.mean() == pytest.approx(expected.mean(), rel=0.08)
    assert log["is_click"].mean() == pytest.approx(truth["p_click"].mean(), abs=0.02)


def test_truth_quantiles_are_calibrated(default_run):
    _, log, _, _, truth = default_run
    watch_s = log["play_time_ms"].to_numpy() / 1000.0
    for level, col in zip(params.QUANTILE_LEVELS, TRUTH_QUANTILE_COLUMNS):
        q = truth[col].to_numpy()
        # Point masses (0 s, full duration) make P(W < q) <= level <= P(W <= q).
        assert (watch_s < q - 1e-3).mean() <= level + 0.02, col
        assert (watch_s <= q + 1e-3).mean() >= level - 0.02, col


def _one_pair(affinity, duration_s, sim_params, n=None):
    wp = interactions.WatchParams.from_affinity(np.array([affinity]), np.array([duration_s]),
                                                sim_params)
    if n is None:
        return wp
    return interactions.WatchParams(*(np.repeat(np.asarray(getattr(wp, f.name)), n)
                                      for f in dataclasses.fields(interactions.WatchParams)))


@pytest.mark.parametrize("affinity,duration_s", [(-1.5, 8.0), (0.0, 71.0), (1.5, 300.0),
                                                 (0.5, 12.0)])
def test_exact_truth_matches_monte_carlo_of_sampler(affinity, duration_s):
    sim_params = params.SimParams()
    wp = _one_pair(affinity, duration_s, sim_params)
    q = interactions.watch_time_quantiles(wp, sim_params)[0]
    mean = interactions.expected_watch_time(wp, sim_params)[0]
    n = 200_000
    clicks, draws = interactions.sample_watch_time(
        _one_pair(affinity, duration_s, sim_params, n), sim_params, np.random.default_rng(11))
    assert clicks.mean() == pytest.approx(wp.p_click[0], abs=0.005)
    assert draws.mean() == pytest.approx(mean, rel=0.02)
    empirical = np.quantile(draws, params.QUANTILE_LEVELS)
    np.testing.assert_allclose(empirical, q, rtol=0.03, atol=0.02)


def test_expected_watch_equals_integral_of_survival():
    """E[W] = int_0^inf (1 - F(x)) dx, checked by brute-force trapezoid integration."""
    sim_params = params.SimParams()
    for affinity, duration_s in [(-1.0, 20.0), (1.0, 150.0)]:
        wp = _one_pair(affinity, duration_s, sim_params)
        xs = np.linspace(0.0, duration_s * (1 + 30 * sim_params.loop_mean), 400_001)
        cdf = interactions.watch_time_cdf(xs[:, None], wp, sim_params)[:, 0]
        assert np.all(np.diff(cdf) >= -1e-12)
        integral = np.trapz(1.0 - cdf, xs)
        assert integral == pytest.approx(interactions.expected_watch_time(wp, sim_params)[0],
                                         rel=1e-3)
