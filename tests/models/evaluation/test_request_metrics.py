"""Request-level GAUC and frozen-state rows vs brute-force loops and hand values."""
import numpy as np
import pytest

from models.evaluation import request_metrics as R


def _brute_auc(y, p):
    pos, neg = p[y == 1], p[y == 0]
    return np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))


def _brute_request_gauc(users, times, y, p, window_s):
    groups = {}
    for i, (u, t) in enumerate(zip(users, times)):
        groups.setdefault((u, int(t // (window_s * 1000))), []).append(i)
    num = den = 0.0
    used = skipped = 0
    for rows in groups.values():
        rows = np.array(rows)
        if len(set(y[rows])) < 2:
            skipped += 1
            continue
        used += 1
        num += len(rows) * _brute_auc(y[rows], p[rows])
        den += len(rows)
    return num / den, used, skipped


def test_request_gauc_vs_brute_force():
    rng = np.random.default_rng(0)
    for n, window in [(40, 60.0), (300, 60.0), (300, 5.0), (200, 3600.0)]:
        users = rng.integers(0, 6, n)
        times = rng.integers(0, 600_000, n)
        y = rng.integers(0, 2, n).astype(float)
        p = rng.integers(0, 5, n) / 4.0  # ties
        got = R.request_gauc(users, times, y, p, window_s=window)
        want, used, skipped = _brute_request_gauc(users, times, y, p, window)
        assert got["request_gauc"] == pytest.approx(want, abs=1e-12)
        assert (got["num_requests_used"], got["num_requests_skipped"]) == (used, skipped)


def test_request_gauc_hand_value():
    # user a: minute 0 has (1, .9), (0, .1) -> AUC 1; minute 1 has (1, .2), (0, .8) -> 0
    # per-user AUC over all four rows is 0.5; request GAUC is (2*1 + 2*0)/4 = 0.5 too,
    # but a drifted state shows: user b's minute 0 ranks right, minute 2 is one class.
    users = ["a", "a", "a", "a", "b", "b", "b"]
    times = [0, 59_999, 60_000, 119_000, 0, 10, 120_000]
    y = [1, 0, 1, 0, 0, 1, 1]
    p = [.9, .1, .2, .8, .3, .4, .0]
    got = R.request_gauc(users, times, y, p)
    assert got["request_gauc"] == pytest.approx((2 * 1 + 2 * 0 + 2 * 1) / 6)
    assert (got["num_requests_used"], got["num_requests_skipped"]) == (3, 1)
    assert got["num_impressions_used"] == 6


def test_request_ids_and_bad_input():
    ids = R.request_ids([1, 1, 2, 1], [0, 61_000, 0, 1_000])
    assert ids[0] == ids[3] and len({ids[0], ids[1], ids[2]}) == 3
    with pytest.raises(ValueError, match="window_s"):
        R.request_ids([1], [0], window_s=0)
    with pytest.raises(ValueError, match="rows"):
        R.request_ids([1, 2], [0])
    with pytest.raises(ValueError, match="empty"):
        R.request_gauc([], [], [], [])


def test_frozen_state_rows_vs_brute_force():
    rng = np.random.default_rng(1)
    n = 200
    users = rng.integers(0, 7, n)
    times = rng.integers(0, 300_000, n) // 1000 * 1000  # many equal times: ties by row
    for window in (None, 60.0):
        got = R.frozen_state_rows(users, times, window_s=window)
        for i in range(n):
            same = [j for j in range(n) if users[j] == users[i]
                    and (window is None or times[j] // 60_000 == times[i] // 60_000)]
            assert got[i] == min(same, key=lambda j: (times[j], j))


def test_frozen_state_gauc_of_a_constant_state_is_one_half_per_user():
    users = np.array([1, 1, 1, 2, 2])
    y = np.array([1, 0, 1, 0, 1])
    rows = R.frozen_state_rows(users, [5, 1, 3, 2, 0])
    assert rows.tolist() == [1, 1, 1, 4, 4]
    running_rate = np.array([.9, .1, .5, .2, .8])  # a pure user-state score ...
    g = R.frozen_state_gauc(users, y, running_rate[rows])  # ... frozen: no ranking left
    assert g["frozen_gauc"] == pytest.approx(0.5)
    assert g["num_users_used"] == 2
