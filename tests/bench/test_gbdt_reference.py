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
