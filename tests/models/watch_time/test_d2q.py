"""D2Q (models/watch_time/d2q.py) against hand values and a brute-force mid-rank percentile."""
import numpy as np
import pytest

from models.watch_time.d2q import D2Q


def test_equal_frequency_groups_by_hand():
    d = np.arange(1, 101, dtype=float)
    model = D2Q(d, d, num_groups=4)
    np.testing.assert_array_equal(model.edges, [25, 50, 75])  # inverted-CDF quantiles: observed values
    np.testing.assert_array_equal(model.group([1, 24, 25, 49, 50, 75, 100, 1e6]), [0, 0, 1, 1, 2, 3, 3, 3])
    assert [s.size for s in model.sorted_watch] == [24, 25, 25, 26]


def test_percentile_is_the_brute_force_mid_rank_in_the_group():
    rng = np.random.default_rng(0)
    d = rng.integers(5, 300, 400).astype(float)
    y = np.round(rng.exponential(20.0, 400))  # many ties
    model = D2Q(d, y, num_groups=7)
    got = model.percentile(d, y)
    g = model.group(d)
    for i in range(d.size):
        peers = y[g == g[i]]
        want = (np.sum(peers < y[i]) + 0.5 * np.sum(peers == y[i])) / peers.size
        assert got[i] == pytest.approx(want)
    assert np.all((got > 0) & (got < 1))


def test_quantile_function_inverts_the_percentile_and_is_monotone():
    rng = np.random.default_rng(1)
    d = rng.lognormal(4.0, 1.0, 500)
    y = np.round(rng.exponential(15.0, 500), 1)
    model = D2Q(d, y, num_groups=10)
    np.testing.assert_allclose(model.watch_time(d, model.percentile(d, y)), y, rtol=0, atol=1e-9)
    p = np.linspace(0, 1, 101)
    t = model.watch_time(np.full(p.size, np.median(d)), p)
    assert np.all(np.diff(t) >= 0)
    s = model.sorted_watch[model.group([np.median(d)])[0]]
    assert t[0] == s[0] and t[-1] == s[-1]  # clamped at the group's extremes


def test_group_without_train_rows_uses_every_row_and_bad_input_raises():
    model = D2Q([5.0] * 6, [1, 2, 3, 4, 5, 6], num_groups=4)
    np.testing.assert_array_equal(model.edges, [5.0])
    assert model.group([1.0])[0] == 0 and model.sorted_watch[0].size == 6  # d < 5: no train rows
    assert model.watch_time([1.0], [0.5])[0] == pytest.approx(3.5)
    with pytest.raises(ValueError, match="equally many"):
        D2Q([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="num_groups"):
        D2Q([1.0], [1.0], num_groups=0)
