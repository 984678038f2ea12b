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
