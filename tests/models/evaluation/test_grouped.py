"""All-users kernels (models/evaluation/grouped.py) vs the per-user functions, one user
at a time, on random data with label/score ties, single-row users, constant users and
users above the pairwise size."""
import numpy as np
import pytest

from models.evaluation import grouped as G
from models.evaluation import metrics as M


def random_users(seed, n_users=60, big=(150,)):
    rng = np.random.default_rng(seed)
    sizes = np.concatenate([rng.integers(1, 12, n_users), big])
    uid = np.repeat(np.arange(sizes.size), sizes)
    rng.shuffle(uid)
    n = uid.size
    y = rng.integers(0, 4, n).astype(float)  # few values: label ties
    p = np.round(rng.random(n), 1)  # score ties
    y[uid == 3] = 2.0  # a constant user
    return uid, y, p, sizes.size


def naive_xauc_counts(y, p):
    lt = y[:, None] < y[None, :]
    conc = (p[:, None] < p[None, :]) + 0.5 * (p[:, None] == p[None, :])
    return np.sum(lt * conc), np.sum(lt)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_xauc_counts_by_user_equal_pairwise_counts(seed):
    uid, y, p, nu = random_users(seed)
    num, den = G.xauc_counts_by_user(uid, y, p, nu, M._xauc_num_den, max_pairwise=10)
    for u in range(nu):
        want = naive_xauc_counts(y[uid == u], p[uid == u])
        assert (num[u], den[u]) == pytest.approx(want, abs=1e-9), u
    assert den[3] == 0 and num[3] == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_discounts_and_ideal_dcg_by_user_equal_per_user(seed):
    uid, y, p, nu = random_users(seed)
    for k, disc in ((3, "log2"), (10, "uniform"), (1, "log2")):
        got = G.tie_averaged_discounts_by_user(uid, p, k, disc)
        for u in range(nu):
            m = uid == u
            np.testing.assert_allclose(got[m], M.tie_averaged_discounts(p[m], k, disc), atol=1e-12)
    idcg = G.ideal_dcg_by_user(uid, y, 3, nu)
    for u in range(nu):
        g = np.sort(y[uid == u])[::-1][:3]
        assert idcg[u] == pytest.approx(sum(v / np.log2(r + 2) for r, v in enumerate(g)), abs=1e-12)


def naive_xgauc(uid, y, p):
    num = den = used = skipped = 0
    for u in np.unique(uid):
        m = uid == u
        if len(set(y[m])) < 2:
            skipped += 1
            continue
        a, b = naive_xauc_counts(y[m], p[m])
        used += 1
        num += m.sum() * a / b
        den += m.sum()
    return num / den, used, skipped


def test_xgauc_and_ndcg_equal_brute_force():
    uid, y, p, nu = random_users(5)
    users = np.array([f"u{x}" for x in uid])  # string ids
    got = M.xgauc(users, y, p)
    want = naive_xgauc(uid, y, p)
    assert (got["xgauc"], got["num_users_used"], got["num_users_skipped"]) == pytest.approx(want, abs=1e-12)
    vals = []
    for u in range(nu):
        m = uid == u
        g = np.sort(y[m])[::-1][:4]
        idcg = sum(v / np.log2(r + 2) for r, v in enumerate(g))
        if idcg > 0:
            vals.append(np.sum(y[m] * M.tie_averaged_discounts(p[m], 4)) / idcg)
    got = M.ndcg_at_k(users, y, p, k=4)
    assert got["ndcg"] == pytest.approx(np.mean(vals), abs=1e-12)
    assert got["num_users_used"] == len(vals) and got["num_users_skipped"] == nu - len(vals)


def test_empty_and_single_rows():
    e = np.array([], dtype=float)
    num, den = G.xauc_counts_by_user(np.array([], dtype=int), e, e, 0, M._xauc_num_den)
    assert num.size == 0 and den.size == 0
    assert G.tie_averaged_discounts_by_user(np.array([0]), np.array([0.3]), 2).tolist() == [1.0]
    out = M.xgauc([1, 2], [1.0, 2.0], [0.1, 0.2])
    assert np.isnan(out["xgauc"]) and out["num_users_skipped"] == 2
