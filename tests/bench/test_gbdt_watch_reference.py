"""bench/gbdt_reference.py watch_reference: #13's gradient-boosting reference on a small
synthetic split where validation and eval are exchangeable."""
import numpy as np
import pytest

from bench.gbdt_reference import COVERAGE_TAUS, watch_reference
from models.evaluation import xauc_pairs

PARAMS = dict(learning_rate=0.1, max_iter=30, max_leaf_nodes=7, min_samples_leaf=20, l2_regularization=0.0,
              categorical_features=None, early_stopping=False, random_state=0)


def _split(rng, n):
    x = rng.normal(size=(n, 3))
    y = np.exp(1.5 + 0.8 * x[:, 0] + 0.5 * rng.normal(size=n))  # log-normal seconds, median exp(1.5 + 0.8 x0)
    click = (np.log(y) + rng.normal(size=n) > 2.0).astype(np.float32)  # the longer views are mostly clicks
    return x, {"watch_time_s": y.astype(np.float32), "click_prob": click}, {"user": rng.integers(0, 40, n)}


@pytest.fixture(scope="module")
def fitted():
    """(data, watch_reference's record) of one synthetic split, shared by the tests."""
    rng = np.random.default_rng(0)
    data = {"train": _split(rng, 3000), "validation": _split(rng, 2000), "eval": _split(rng, 2000)}
    return data, watch_reference(data, PARAMS)


def test_watch_reference_orders_and_covers_an_exchangeable_eval_split(fitted):
    data, rec = fitted
    assert set(rec["trees_chosen_on_validation"]) == ({"l1_seconds", "l2_log1p", "click"}
                                                      | {f"quantile_{t}" for t in COVERAGE_TAUS})
    assert all(1 <= t <= 30 for t in rec["trees_chosen_on_validation"].values())
    # the features carry the label's order: far better than chance, within and across users
    for head in ("l1_seconds", "l2_log1p"):
        assert rec[head]["eval"]["xauc"] > 0.75 and rec[head]["eval"]["xgauc"] > 0.7
    # the L1 model predicts the conditional median: its MAE beats the marginal median's
    y = data["eval"][1]["watch_time_s"].astype(np.float64)
    assert rec["l1_seconds"]["eval"]["mae"] < np.mean(np.abs(y - np.median(y)))
    q = rec["quantiles"]
    assert len(q["conformal_levels"]) == len(COVERAGE_TAUS) == len(q["eval"]["coverage_by_tau"])
    # conformal on an exchangeable validation day: every decile covered within a few sampling std
    # (the finite-sample bound itself is tested in tests/models/watch_time/test_conformal.py)
    cov = np.array(q["eval"]["coverage_by_tau"])
    assert np.all(np.abs(cov - np.array(COVERAGE_TAUS)) < 4 * np.sqrt(0.25 / 2000) + 1 / 2001)
    assert q["eval"]["coverage_error"] < 0.02


def test_watch_reference_splits_xauc_by_the_clicks_of_the_pair(fitted):
    data, rec = fitted
    y, click = (data["eval"][1][k].astype(np.float64) for k in ("watch_time_s", "click_prob"))
    for name in ("l2_log1p", "click_classifier", "l2_log1p_true_click_first"):
        split = rec[name]["eval"]["xauc_click_pairs"]
        assert sum(share for share, _ in split.values()) == pytest.approx(1.0, abs=1e-3)
        assert sum(share * x for share, x in split.values()) == pytest.approx(rec[name]["eval"]["xauc"], abs=1e-3)
    # the true click put first orders the across pairs as far as the labels allow
    bound = xauc_pairs.xauc_by_label_pairs(y, click, click)["across"]["positive_longer"]
    assert rec["l2_log1p_true_click_first"]["eval"]["xauc_click_pairs"]["across"][1] == pytest.approx(bound, abs=1e-5)
    # ... and keeps the log1p model's order within the click and within the skip pairs
    for kind in ("within_click", "within_skip"):
        assert (rec["l2_log1p_true_click_first"]["eval"]["xauc_click_pairs"][kind]
                == rec["l2_log1p"]["eval"]["xauc_click_pairs"][kind])


def test_watch_reference_without_the_deciles_keeps_the_point_models(fitted):
    data, rec = fitted
    short = watch_reference(data, PARAMS, quantiles=False)
    assert "quantiles" not in short
    assert set(short["trees_chosen_on_validation"]) == {"l1_seconds", "l2_log1p", "click"}
    for name in ("l1_seconds", "l2_log1p", "click_classifier"):
        assert short[name] == rec[name]  # the same models, the same figures
