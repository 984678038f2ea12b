"""bench/bench_watchtime.py point_metrics: every record's XAUC split by the clicks of the pair."""
import numpy as np
import pytest

from bench.bench_watchtime import point_metrics
from models.evaluation import xauc_pairs


def test_point_metrics_split_xauc_by_the_clicks_of_the_pair():
    rng = np.random.default_rng(0)
    n = 400
    click = rng.integers(0, 2, n)
    y = np.where(click == 1, rng.exponential(30.0, n), rng.exponential(3.0, n))
    pred = y * rng.lognormal(0.0, 1.0, n)
    rec = point_metrics(y, pred, rng.integers(0, 20, n), click, rng.random(n))
    split = rec["xauc_click_pairs"]
    assert set(split) == {"within_click", "within_skip", "across"}
    full = xauc_pairs.xauc_by_label_pairs(y, pred, click)
    for name, kind in (("within_click", "within_positive"), ("within_skip", "within_negative"), ("across", "across")):
        assert split[name] == [round(full[kind]["share"], 4), round(full[kind]["xauc"], 5)]
    assert sum(s * x for s, x in split.values()) == pytest.approx(rec["xauc"], abs=1e-4)
