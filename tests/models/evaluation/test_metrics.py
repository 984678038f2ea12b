"""Metrics vs brute force (pair counts, manual loops) and hand values."""
import numpy as np
import pytest

from models.evaluation import metrics


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
    num, den, used, skipped = _brute_grouped(users, y, p, _brute_auc)
    g = metrics.gauc(users, y, p)
    assert g["gauc"] == pytest.approx(num / den, abs=1e-12)
    assert (g["num_users_used"], g["num_users_skipped"], g["num_impressions_used"]) == (
        used, skipped, den)
    assert skipped >= 2
    assert np.isnan(metrics.gauc([1, 1, 2], [1, 1, 0], [.1, .2, .3])["gauc"])


def test_mae_logloss_hand_values():
    assert metrics.mae([1, 2, 3], [2, 2, 5]) == pytest.approx(1.0)
    assert metrics.logloss([1, 0], [0.8, 0.4]) == pytest.approx(-(np.log(.8) + np.log(.6)) / 2)


# ---------------------------------------------------------------- issue 5 additions
import itertools  # noqa: E402


def _brute_tie_orders(scores):
    """Every ranking (list of row indices, best first) consistent with ``scores``."""
    groups = [list(np.flatnonzero(scores == s)) for s in sorted(set(scores), reverse=True)]
    for perms in itertools.product(*[itertools.permutations(g) for g in groups]):
        yield [i for p in perms for i in p]


def _brute_dcg_expected(gains, scores, k):
    """Mean DCG@k over all tie orders (linear gain, 1/log2(rank+1))."""
    vals = [sum(gains[i] / np.log2(r + 2) for r, i in enumerate(order[:k]))
            for order in _brute_tie_orders(scores)]
    return float(np.mean(vals))


def _brute_ndcg(users, gains, scores, k):
    vals, skipped = [], 0
    for u in np.unique(users):
        m = users == u
        g, s = gains[m], scores[m]
        ideal = sorted(g, reverse=True)
        idcg = sum(ideal[r] / np.log2(r + 2) for r in range(min(k, len(g))))
        if idcg == 0:
            skipped += 1
            continue
        vals.append(_brute_dcg_expected(g, s, k) / idcg)
    return np.mean(vals), len(vals), skipped


def _brute_ecs(items, weights):
    shares = {}
    for i, w in zip(items, weights):
        shares[i] = shares.get(i, 0.0) + w
    p = sorted((v / sum(weights) for v in shares.values()), reverse=True)
    return 2 * sum((i + 1) * pi for i, pi in enumerate(p)) - 1


def _brute_exposure(users, scores, k, discount):
    """Exposure per row, averaged over every tie order of each user's ranking."""
    d = (lambda r: 1 / np.log2(r + 2)) if discount == "log2" else (lambda r: 1.0)
    out = np.zeros(len(scores))
    for u in np.unique(users):
        rows = np.flatnonzero(users == u)
        orders = list(_brute_tie_orders(scores[rows]))
        for order in orders:
            for r, i in enumerate(order[:k]):
                out[rows[i]] += d(r) / len(orders)
    return out


def test_xgauc_vs_manual_loop():
    rng = np.random.default_rng(4)
    n = 400
    users = rng.integers(0, 25, n)
    y = rng.integers(0, 5, n).astype(float)
    p = rng.integers(0, 4, n) / 3.0
    y[users == users[0]] = 2.0  # a user with one label value
    users[-1] = 999  # single impression
    num, den, used, skipped = _brute_grouped(users, y, p, _brute_xauc)
    r = metrics.xgauc(users, y, p)
    assert r["xgauc"] == pytest.approx(num / den, abs=1e-12)
    assert (r["num_users_used"], r["num_users_skipped"], r["num_impressions_used"]) == (
        used, skipped, den)
    assert skipped >= 2


def test_ndcg_vs_tie_enumeration():
    rng = np.random.default_rng(5)
    n = 90
    users = rng.integers(0, 14, n)
    gains = np.where(rng.random(n) < 0.4, 0.0, rng.integers(0, 4, n).astype(float))
    scores = rng.integers(0, 3, n) / 2.0  # heavy ties
    gains[users == users[0]] = 0.0  # a user with IDCG = 0
    for u in np.unique(users):  # keep tie enumeration small: <= 8 rows per user
        idx = np.flatnonzero(users == u)[8:]
        users[idx] = 100 + np.arange(idx.size)
    for k in (1, 3, 10):
        want, used, skipped = _brute_ndcg(users, gains, scores, k)
        r = metrics.ndcg_at_k(users, gains, scores, k)
        assert r["ndcg"] == pytest.approx(want, abs=1e-12)
        assert (r["num_users_used"], r["num_users_skipped"]) == (used, skipped)
    # perfect ranking -> 1; reversed ranking of two items -> hand value
    assert metrics.ndcg_at_k([1, 1, 1], [3, 2, 1], [9, 5, 1])["ndcg"] == pytest.approx(1.0)
    assert metrics.ndcg_at_k([1, 1], [0, 1], [2, 1], k=2)["ndcg"] == pytest.approx(
        (1 / np.log2(3)) / 1.0)
    # tie: both items share ranks 1 and 2 -> each gets (1 + 1/log2 3) / 2
    assert metrics.ndcg_at_k([1, 1], [0, 1], [5, 5], k=2)["ndcg"] == pytest.approx(
        (1 + 1 / np.log2(3)) / 2)


def test_ecs_vs_definition_and_hand_values():
    rng = np.random.default_rng(6)
    items = rng.integers(0, 30, 300)
    w = rng.exponential(10.0, 300)
    w[:20] = 0.0
    assert metrics.ecs(items, w) == pytest.approx(_brute_ecs(items, w), abs=1e-10)
    assert metrics.ecs([1, 1, 1], [1, 2, 3]) == pytest.approx(1.0)  # one item has it all
    assert metrics.ecs([1, 2, 3, 4], [5, 5, 5, 5]) == pytest.approx(4.0)  # N equal items
    assert metrics.ecs([1, 2], [3, 1]) == pytest.approx(2 * (1 * .75 + 2 * .25) - 1)
    assert np.isnan(metrics.ecs([1, 2], [0, 0]))


def test_model_ecs_vs_tie_enumeration():
    rng = np.random.default_rng(7)
    n = 70
    users = rng.integers(0, 10, n)
    for u in np.unique(users):
        idx = np.flatnonzero(users == u)[7:]
        users[idx] = 50 + np.arange(idx.size)
    items = rng.integers(0, 12, n)
    scores = rng.integers(0, 3, n).astype(float)
    for k, discount in [(1, "log2"), (3, "log2"), (3, "uniform"), (20, "uniform")]:
        exp = _brute_exposure(users, scores, k, discount)
        np.testing.assert_allclose(metrics.ranking_exposure(users, scores, k, discount), exp,
                                   atol=1e-12)
        assert metrics.model_ecs(users, items, scores, k, discount) == pytest.approx(
            _brute_ecs(items, exp), abs=1e-10)
    with pytest.raises(ValueError):
        metrics.model_ecs(users, items, scores, 0)


def test_ne_rmse_calibration_hand_values():
    y = np.array([1, 0, 0, 1, 0])
    p = np.array([0.9, 0.2, 0.4, 0.6, 0.1])
    ll = -np.mean([np.log(.9), np.log(.8), np.log(.6), np.log(.6), np.log(.9)])
    base = -(0.4 * np.log(0.4) + 0.6 * np.log(0.6))
    assert metrics.ne(y, p) == pytest.approx(ll / base)
    assert metrics.ne(y, np.full(5, 0.4)) == pytest.approx(1.0)  # base-rate predictor
    assert np.isnan(metrics.ne([1, 1], [0.5, 0.6]))
    assert metrics.rmse([1, 2, 3], [1, 4, 3]) == pytest.approx(np.sqrt(4 / 3))
    assert metrics.calibration(y, p) == pytest.approx(2.2 / 2)
    assert metrics.binary_entropy(0.0) == 0.0


def _brute_grouped(users, y, p, per_user):
    """Impression-weighted per-user metric by a plain loop; single-class users skipped."""
    num = den = 0.0
    used = skipped = 0
    for u in np.unique(users):
        m = users == u
        if np.unique(y[m]).size < 2:
            skipped += 1
            continue
        used += 1
        num += m.sum() * per_user(y[m], p[m])
        den += m.sum()
    return num, den, used, skipped


def test_auc_difference_se_matches_brute_force_delong():
    rng = np.random.default_rng(3)
    y = (rng.random(60) < 0.4).astype(float)
    a = np.round(rng.random(60) + 0.5 * y, 1)  # rounded: ties within and across classes
    b = np.round(a + 0.2 * rng.standard_normal(60), 1)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)

    def components(p):  # ψ over every (positive, negative) pair
        psi = np.array([[1.0 if p[i] > p[j] else 0.5 if p[i] == p[j] else 0.0 for j in neg] for i in pos])
        return psi.mean(axis=1), psi.mean(axis=0)

    (a10, a01), (b10, b01) = components(a), components(b)
    assert a10.mean() == pytest.approx(metrics.auc(y, a), abs=1e-12)
    d10, d01 = a10 - b10, a01 - b01
    want = np.sqrt(d10.var(ddof=1) / len(pos) + d01.var(ddof=1) / len(neg))
    assert metrics.auc_difference_se(y, a, b) == pytest.approx(want, rel=1e-12)
    assert metrics.auc_difference_se(y, a, a) == 0.0  # the same scorer: no uncertainty in the difference
    assert np.isnan(metrics.auc_difference_se([1, 0, 0], [0.3, 0.2, 0.1], [0.1, 0.2, 0.3]))
