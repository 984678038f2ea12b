"""bench/gbdt_reference.py: the design matrix of a transformed split."""
import numpy as np

from bench.gbdt_reference import CATEGORICAL, design
from models import features as F
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes


def test_design_columns_and_history_means_by_hand():
    x, _ = random_transformed(6, 5, small_vocab_sizes(), seed=1)
    matrix, names, is_cat = design(x)
    assert matrix.shape == (6, len(F.NUMERIC_FEATURES) + 1 + len(CATEGORICAL) + 2)
    assert names[:len(F.NUMERIC_FEATURES)] == F.NUMERIC_FEATURES
    assert [n for n, c in zip(names, is_cat) if c] == CATEGORICAL
    np.testing.assert_array_equal(matrix[:, names.index("tab")], x["tab_xf"])
    mask = x["hist_mask_xf"]
    want = [(x["hist_is_click_xf"][r] * mask[r]).sum() / max(mask[r].sum(), 1) for r in range(6)]
    np.testing.assert_allclose(matrix[:, names.index("hist_is_click_mean")], want, rtol=1e-6)
    assert matrix[0, names.index("hist_is_click_mean")] == 0.0  # row 0: empty history


def test_click_reference_scores_gauc_and_frozen_gauc_of_its_own_predictions():
    """Per-user GAUC of the predictions on x, frozen GAUC of the predictions on x_frozen."""
    from bench.gbdt_reference import click_reference
    from models.evaluation import metrics

    vocab = small_vocab_sizes()
    rng = np.random.default_rng(2)
    data = {}
    for i, split in enumerate(("train", "validation", "eval")):
        x, _ = random_transformed(400, 5, vocab, seed=10 + i)
        matrix = design(x)[0]
        y = (matrix[:, 0] + rng.normal(scale=0.5, size=400) > 0).astype(np.float32)
        x_frozen, _ = random_transformed(400, 5, vocab, seed=20 + i)  # another user state
        meta = {"user": rng.integers(0, 20, 400), "x_frozen": x_frozen}
        data[split] = (matrix, {"click_prob": y}, meta)
    params = dict(max_iter=20, min_samples_leaf=5, early_stopping=False, random_state=0)
    result = click_reference(data, params)
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(**dict(params, max_iter=result["trees_chosen_on_validation"])).fit(
        data["train"][0], data["train"][1]["click_prob"])
    for split in ("validation", "eval"):
        matrix, y, meta = data[split]
        p = model.predict_proba(matrix)[:, 1]
        p_frozen = model.predict_proba(design(meta["x_frozen"])[0])[:, 1]
        assert result[split]["gauc"] == round(metrics.gauc(meta["user"], y["click_prob"], p)["gauc"], 5)
        assert result[split]["frozen_gauc"] == round(metrics.gauc(meta["user"], y["click_prob"], p_frozen)["gauc"], 5)
        assert result[split]["frozen_gauc"] != result[split]["gauc"]


def _synthetic_splits(n=600, seed=3):
    """train / validation / eval design matrices with a learnable click and a few users."""
    vocab = small_vocab_sizes()
    rng = np.random.default_rng(seed)
    data = {}
    for i, split in enumerate(("train", "validation", "eval")):
        x, _ = random_transformed(n, 5, vocab, seed=30 + i)
        matrix = design(x)[0]
        y = (matrix[:, 0] + 0.5 * (matrix[:, CATEGORICAL.index("tab") - len(CATEGORICAL)] % 2)
             + rng.normal(scale=0.7, size=n) > 0).astype(np.float32)
        x_frozen, _ = random_transformed(n, 5, vocab, seed=40 + i)
        data[split] = (matrix, {"click_prob": y}, {"user": rng.integers(0, 20, n), "x_frozen": x_frozen})
    return data


def test_lightgbm_trees_chosen_on_validation_and_eval_scored_with_them():
    """Early stopping on validation AUC only: the chosen trees are the validation argmax,
    the eval labels play no part in the fit, the scores are the chosen booster's."""
    from sklearn.metrics import roc_auc_score

    from bench import gbdt_lightgbm as L
    from models.evaluation import metrics

    data = _synthetic_splits()
    is_cat = np.array([n in CATEGORICAL for n in design(random_transformed(2, 5, small_vocab_sizes())[0])[1]])
    params = dict(L.BASE_PARAMS, learning_rate=0.1, min_data_in_leaf=20, min_data_per_group=10, num_threads=1)
    kw = dict(max_trees=60, patience=10)
    result = L.click_reference(data, params, is_cat, seed=1, **kw)
    xy = {s: (m, y["click_prob"]) for s, (m, y, _) in data.items()}
    booster, trees, curve = L.fit(params, xy["train"], xy["validation"], is_cat, 1, **kw)
    assert result["trees_chosen_on_validation"] == trees == int(np.argmax(curve)) + 1
    for split in ("validation", "eval"):
        p = booster.predict(xy[split][0], num_iteration=trees)
        assert result[split]["auc"] == round(float(roc_auc_score(xy[split][1], p)), 5)
        assert result[split]["gauc"] == round(metrics.gauc(data[split][2]["user"], xy[split][1], p)["gauc"], 5)
        assert "frozen_gauc" in result[split]
    assert result["eval"]["auc"] > 0.6  # it learns the synthetic click
    shuffled = dict(data, eval=(data["eval"][0], {"click_prob": data["eval"][1]["click_prob"][::-1]}, data["eval"][2]))
    again = L.click_reference(shuffled, params, is_cat, seed=1, **kw)
    assert again["trees_chosen_on_validation"] == trees and again["validation"] == result["validation"]


def test_lightgbm_tuning_keeps_the_best_validation_auc_and_seeds_average():
    from bench import gbdt_lightgbm as L
    from bench.gbdt_reference import over_seeds

    data = _synthetic_splits()
    xy = {s: (m, y["click_prob"]) for s, (m, y, _) in data.items()}
    is_cat = np.zeros(xy["train"][0].shape[1], dtype=bool)
    base = dict(L.BASE_PARAMS, learning_rate=0.1, num_threads=1)
    chosen, trials = L.tune(xy["train"], xy["validation"], is_cat, 0, grid={"min_data_in_leaf": [5, 50, 400]},
                            base=base, max_trees=40, patience=10)
    assert [t["params"]["min_data_in_leaf"] for t in trials] == [5, 50, 400]
    best = max(trials, key=lambda t: t["validation_auc"])
    assert chosen == dict(base, min_data_in_leaf=best["params"]["min_data_in_leaf"])
    record = over_seeds(lambda s: L.click_reference(data, chosen, is_cat, s, max_trees=40, patience=10), [0, 1, 2])
    aucs = [record["per_seed"][str(s)]["eval"]["auc"] for s in (0, 1, 2)]
    assert record["mean"]["eval"]["auc"] == round(float(np.mean(aucs)), 5)
    assert record["std"]["eval"]["auc"] == round(float(np.std(aucs)), 5)
    assert len(set(aucs)) > 1  # bagging and feature sampling follow the seed
