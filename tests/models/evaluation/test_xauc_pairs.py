"""models/evaluation/xauc_pairs.py vs brute-force pair counts and hand values."""
import numpy as np
import pytest

from models.evaluation import metrics, xauc_pairs


def test_xauc_by_label_pairs_vs_brute_force():
    rng = np.random.default_rng(3)
    for n, ky in [(40, 4), (150, 12), (200, 1000)]:
        c = rng.integers(0, 2, n)
        y = rng.integers(0, ky, n).astype(float) + 5 * c  # positives mostly longer, with ties
        p = np.round(rng.normal(size=n) + c, 1)
        d = xauc_pairs.xauc_by_label_pairs(y, p, c)
        kinds = {"within_positive": lambda i, j: c[i] == c[j] == 1, "within_negative": lambda i, j: c[i] == c[j] == 0,
                 "across": lambda i, j: c[i] != c[j]}
        pairs = [(i, j) for i in range(n) for j in range(n) if y[i] < y[j]]
        for kind, inside in kinds.items():
            mine = [(i, j) for i, j in pairs if inside(i, j)]
            conc = sum(1.0 if p[i] < p[j] else 0.5 if p[i] == p[j] else 0.0 for i, j in mine)
            assert d[kind]["share"] == pytest.approx(len(mine) / len(pairs), abs=1e-12)
            assert d[kind]["xauc"] == pytest.approx(conc / len(mine), abs=1e-12)
        longer = sum(1 for i, j in pairs if c[j] == 1 and c[i] == 0)
        assert d["across"]["positive_longer"] == pytest.approx(longer / sum(1 for i, j in pairs if c[i] != c[j]))
        assert d["xauc"] == pytest.approx(metrics.xauc(y, p), abs=1e-12)
        assert sum(d[k]["share"] * d[k]["xauc"] for k in kinds) == pytest.approx(d["xauc"], abs=1e-12)


def test_xauc_by_label_pairs_hand_values():
    # y = [1, 2, 10, 20], click = [0, 0, 1, 1]; p orders the clicks first but inverts within them
    d = xauc_pairs.xauc_by_label_pairs([1, 2, 10, 20], [0, 0, 5, 4], [0, 0, 1, 1])
    assert d["within_negative"] == {"share": 1 / 6, "xauc": 0.5}   # the one pair is a tie in p
    assert d["within_positive"] == {"share": 1 / 6, "xauc": 0.0}
    assert d["across"] == {"share": 4 / 6, "xauc": 1.0, "positive_longer": 1.0}
    assert d["xauc"] == pytest.approx((0.5 + 0 + 4) / 6)
    # no positive pair with different labels: that kind has no share and xauc nan
    d = xauc_pairs.xauc_by_label_pairs([1, 2, 3], [1, 2, 3], [0, 0, 1])
    assert d["within_positive"]["share"] == 0.0 and np.isnan(d["within_positive"]["xauc"])
    assert d["xauc"] == 1.0
