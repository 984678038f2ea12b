"""The verification gates and the automatic choice of the pruned fraction."""
from components.publisher import verification
from components.publisher.publish import candidate_fractions, choose_fraction
from pipeline import configs


def test_gates_name_what_failed_with_the_figures():
    ok = {"ne_loss": 0.0004, "auc_drop": 0.001, "xauc_drop": -0.01}
    assert verification.gate_failures(ok, 0.0005, 0.001, 0.001) == []
    bad = {"ne_loss": 0.0012, "auc_drop": 0.0005, "xauc_drop": 0.002}
    assert verification.gate_failures(bad, 0.0005, 0.001, 0.001) == [
        "NE loss 0.1200 % > bound 0.0500 %", "watch XAUC drop 0.00200 > bound 0.00100"]
    assert verification.gate_failures(dict(ok, ne_loss=float("nan")), 0.0005, 0.001, 0.001)  # NaN never passes
    trained = {"ne": 0.8, "auc": 0.74, "xauc": 0.68, "mae": 20.0}
    published = {"ne": 0.8004, "auc": 0.7395, "xauc": 0.68, "mae": 20.5}
    d = verification.compare(trained, published)
    assert abs(d["ne_loss"] - 0.0005) < 1e-12 and abs(d["auc_drop"] - 0.0005) < 1e-12 and d["mae_rise"] == 0.5



def test_auc_gate_refuses_only_a_drop_beyond_the_paired_noise():
    """make run-continuous's 88 verification rows: an int8 delta flipped 3 of 1,900 pairs,
    AUC drop 0.00158 > 0.001 at NE loss 0.041 %; the drop has to exceed auc_drop_z paired SEs too."""
    import numpy as np

    from models import features as F

    y = np.array([1] * 38 + [0] * 50, float)
    trained = np.linspace(0.01, 0.99, 88)[np.argsort(np.argsort(np.random.default_rng(0).random(88)))]
    swapped = trained.copy()
    order = np.argsort(trained)  # swap 3 adjacent (positive, negative) pairs into the wrong order
    flips = [(i, j) for i, j in zip(order[:-1], order[1:]) if y[i] == 0 and y[j] == 1][:3]
    for i, j in flips:
        swapped[i], swapped[j] = trained[j], trained[i]
    metrics = {"ne": 0.8, "xauc": 0.6, "mae": 1.0}
    t = dict(metrics, auc=float(_auc(y, trained)))
    p = dict(metrics, auc=float(_auc(y, swapped)))
    d = verification.compare(t, p, {F.LABEL_CLICK: y}, {"click_prob": trained}, {"click_prob": swapped})
    assert abs(d["auc_drop"] - 3 / 1900) < 1e-12 and 0 < d["auc_drop_se"] < d["auc_drop"]
    assert verification.gate_failures(d, 0.0005, 0.001, 0.001) == [  # the absolute bound alone refuses
        "click AUC drop 0.00158 > bound 0.00100"]
    assert verification.gate_failures(d, 0.0005, 0.001, 0.001, auc_drop_z=2.0) == []  # within 2 SE
    z = d["auc_drop"] / d["auc_drop_se"] * 0.9  # a drop beyond z SEs is refused, with both bounds named
    assert verification.gate_failures(d, 0.0005, 0.001, 0.001, auc_drop_z=z) == [
        f"click AUC drop 0.00158 > bound 0.00100 and {z:g} SE ({z * d['auc_drop_se']:.5f})"]
    assert verification.gate_failures(dict(d, auc_drop=0.0009), 0.0005, 0.001, 0.001, auc_drop_z=0.1) == []


def _auc(y, p):
    from models.evaluation import metrics

    return metrics.auc(y, p)

def test_auto_prunes_the_largest_fraction_that_passes():
    config = configs.publish_config(prune_fraction=0.5, criterion="opt_state", prune_auto=True)
    rows = [{"criterion": c, "fraction": f, "ne_loss": loss, "auc_drop": 0.0, "xauc_drop": 0.0}
            for c, f, loss in (("opt_state", 0.0, 0.0), ("opt_state", 0.25, 0.0002), ("opt_state", 0.5, 0.0009),
                               ("opt_state", 0.75, 0.0001), ("l2_norm", 0.5, 0.0))]
    assert choose_fraction(config, rows).prune_fraction == 0.25  # 0.5 fails, 0.75 > the configured max
    assert choose_fraction(config, rows[:1] + rows[2:3]).prune_fraction is None  # int8 only
    assert candidate_fractions(config.replace(prune_fraction=0.75), rows) == [0.75, 0.25, None]  # fallbacks
    other = {"allocation": "per_table", "criterion": "opt_state", "fraction": 0.5, "ne_loss": 0.0, "auc_drop": 0.0,
             "xauc_drop": 0.0}  # a passing row of another allocation does not count
    assert choose_fraction(config.replace(allocation="global"), rows + [other]).prune_fraction == 0.25


def test_compressed_rows_are_the_rows_in_every_slice():
    """The verification rows held compressed (verification.CompressedRows) read back as the
    list they were built from: slices across block edges, steps, negative and out-of-range
    bounds, single rows, empty."""
    import random

    import pytest

    rng = random.Random(0)
    rows = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(2_500)]
    held = verification.CompressedRows(iter(rows), block=100)
    assert len(held) == len(rows) and list(held) == rows
    for lo, hi in [(0, 10), (95, 205), (100, 200), (2_400, 3_000), (0, 2_500), (5, 5), (300, 200),
                   (-10, None), (None, -3), (2_499, None)]:
        assert held[lo:hi] == rows[lo:hi], (lo, hi)
    assert held[::7] == rows[::7] and held[-1] == rows[-1] and held[1_234] == rows[1_234]
    with pytest.raises(IndexError):
        held[2_500]
    assert not verification.CompressedRows([]) and verification.CompressedRows([])[:5] == []
