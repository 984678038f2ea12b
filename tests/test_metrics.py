"""Metrics vs brute force (pair counts, manual loops) and hand values."""
import numpy as np
import pytest

from models import metrics


def _brute_xauc(y, p):
    num = den = 0.0
    for i in range(len(y)):
        for j in range(len(y)):
            if y[i] < y[j]:
                den += 1
                num += 1.0 if p[i] < p[j] else 0.5 if p[i] == p[j] else 0.0
    return num / den


def _brute_auc(y, p):
    pos, neg = p[y == 1], p[y == 0]
    return np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))


def _brute_inversions(a):
    return sum(1 for i in range(len(a)) for j in range(i + 1, len(a)) if a[i] > a[j])


def test_inversions_vs_brute_force():
    rng = np.random.default_rng(0)
    for n, k in [(1, 3), (2, 2), (7, 3), (50, 5), (200, 1000), (300, 2)]:
        a = rng.integers(0, k, n).astype(float)
        assert metrics.count_strict_inversions(a) == _brute_inversions(a)


def test_xauc_vs_brute_force_with_ties():
    rng = np.random.default_rng(1)
    for n, ky, kp in [(2, 2, 2), (30, 3, 4), (200, 10, 7), (300, 1000, 50), (250, 4, 1000)]:
        y = rng.integers(0, ky, n).astype(float)
        p = np.round(0.3 * y + rng.normal(size=n), 1) if kp == 7 else rng.integers(0, kp, n) / 3
        if np.unique(y).size < 2:
            y[0], y[1] = 0, 1
        assert metrics.xauc(y, p) == pytest.approx(_brute_xauc(y, p), abs=1e-12)


def test_xauc_hand_values():
    assert metrics.xauc([1, 2, 3], [10, 20, 30]) == 1.0
    assert metrics.xauc([1, 2, 3], [30, 20, 10]) == 0.0
    assert metrics.xauc([1, 2, 3], [5, 5, 5]) == 0.5  # prediction ties count 1/2
    # pairs (1,2): concordant, (1,3): tie -> 1/2, (2,3): discordant; (2,2) excluded
    assert metrics.xauc([1, 2, 3, 2], [1, 5, 1, 5]) == pytest.approx((1 + .5 + 0 + 1 + 0) / 5)
    assert np.isnan(metrics.xauc([2, 2], [1, 2]))


def test_auc_vs_brute_force_and_xauc():
    rng = np.random.default_rng(2)
    for n in (5, 100, 400):
        y = rng.integers(0, 2, n).astype(float)
        y[:2] = [0, 1]
        p = rng.integers(0, 10, n) / 10.0
        assert metrics.auc(y, p) == pytest.approx(_brute_auc(y, p), abs=1e-12)
        assert metrics.xauc(y, p) == pytest.approx(metrics.auc(y, p), abs=1e-12)
    assert np.isnan(metrics.auc([1, 1], [0.2, 0.4]))
    with pytest.raises(ValueError):
        metrics.auc([0, 2], [0.1, 0.2])


def test_gauc_vs_manual_loop():
    rng = np.random.default_rng(3)
    n = 600
    users = rng.integers(0, 40, n) * 7 + 3  # arbitrary ids
    y = rng.integers(0, 2, n).astype(float)
    p = rng.integers(0, 6, n) / 5.0  # many ties within users
    single = users == users[0]
    y[single] = 1.0  # a user with one class
    users[-1] = 10 ** 9  # a user with a single impression
    num = den = 0.0
    used = skipped = 0
    for u in np.unique(users):
        m = users == u
        if np.unique(y[m]).size < 2:
            skipped += 1
            continue
        used += 1
        num += m.sum() * _brute_auc(y[m], p[m])
        den += m.sum()
    g = metrics.gauc(users, y, p)
    assert g["gauc"] == pytest.approx(num / den, abs=1e-12)
    assert (g["num_users_used"], g["num_users_skipped"], g["num_impressions_used"]) == (
        used, skipped, den)
    assert skipped >= 2
    assert np.isnan(metrics.gauc([1, 1, 2], [1, 1, 0], [.1, .2, .3])["gauc"])


def test_coverage_pinball_mae_logloss_hand_values():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    taus = np.array([0.25, 0.5])
    q = np.array([[0.5, 2.0], [2.0, 2.0], [2.0, 3.5], [5.0, 6.0]])
    # y <= t: col 0 -> (F, T, F, T) = .5 ; col 1 -> (T, T, T, T) = 1
    np.testing.assert_allclose(metrics.quantile_coverage(y, q, taus), [0.5, 1.0])
    assert metrics.mean_coverage_error(y, q, taus) == pytest.approx((0.25 + 0.5) / 2)
    # u = y - t: row0 (.5, -1) -> .125 + .5 ; row1 (0, 0) -> 0 ; row2 (1, -.5) -> .25 + .25 ;
    # row3 (-1, -2) -> .75 + 1
    assert metrics.pinball_loss(y, q, taus) == pytest.approx((0.625 + 0 + 0.5 + 1.75) / 4)
    assert metrics.mae([1, 2, 3], [2, 2, 5]) == pytest.approx(1.0)
    assert metrics.logloss([1, 0], [0.8, 0.4]) == pytest.approx(-(np.log(.8) + np.log(.6)) / 2)
    with pytest.raises(ValueError):
        metrics.pinball_loss(y, q[:, :1], taus)
