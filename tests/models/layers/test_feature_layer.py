"""FeatureLayer: item/history/pool and the first-order logit against NumPy, config."""
import numpy as np
import pytest
import tensorflow as tf

from models import features as F
from models.layers.feature_layer import CATEGORICAL, FeatureLayer
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes
from tests.models.layers.round_trip import assert_config_round_trip

L, N = 4, 6


def _inputs(seed=0):
    x, _ = random_transformed(N, L, small_vocab_sizes(), seed=seed)
    return {k: tf.constant(v) for k, v in x.items()}


def test_history_and_pool_match_numpy():
    x = _inputs()
    layer = FeatureLayer(small_vocab_sizes(), embedding_dim=3, embedding_init_std=0.5)
    out = layer(x)
    tables = {k: layer.tables[k].numpy() for k in CATEGORICAL}
    ids = lambda key: x[F.transformed_name(key)].numpy()  # noqa: E731
    mask = ids("hist_mask")
    target = np.concatenate([tables[k][ids(k)] for k in F.ITEM_ENTITIES], -1)
    items = np.concatenate([tables[k][ids(F.HISTORY_ITEM_FEATURES[k])] for k in F.ITEM_ENTITIES], -1)
    outcomes = np.stack([ids(k) for k in F.HISTORY_OUTCOME_FEATURES], -1)
    history = (items + outcomes @ layer.outcome_kernel.numpy() + layer.outcome_bias.numpy()) * mask[..., None]
    pooled = np.stack([history[b][mask[b] > 0].mean(0) if mask[b].any() else np.zeros(6) for b in range(N)])
    np.testing.assert_allclose(out["target_item"].numpy(), target, rtol=1e-6)
    np.testing.assert_allclose(out["history"].numpy(), history, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["history_pooled"].numpy(), pooled, rtol=1e-5, atol=1e-6)
    assert mask[0].sum() == 0 and np.all(out["history_pooled"].numpy()[0] == 0.0)  # empty history
    assert out["fields"].shape == (N, len(CATEGORICAL), 3) and out["numerics"].shape == (N, len(F.NUMERIC_FEATURES) + 1)


def test_linear_logit_is_the_sum_of_first_order_terms():
    x = _inputs(1)
    layer = FeatureLayer(small_vocab_sizes(), linear=True, embeddings=False, linear_init_std=0.3)
    out = layer(x)
    ids = lambda key: x[F.transformed_name(key)].numpy()  # noqa: E731
    mask = ids("hist_mask")
    terms = [layer.linear_tables[k].numpy()[ids(k)] for k in CATEGORICAL]
    for k in F.ITEM_ENTITIES:  # history bags: masked mean of the item weights
        w = layer.linear_tables[k].numpy()[ids(F.HISTORY_ITEM_FEATURES[k])][..., 0]
        terms.append(((w * mask).sum(1) / np.maximum(mask.sum(1), 1.0))[:, None])
    terms = np.concatenate(terms, -1)
    logit = terms.sum(-1, keepdims=True) + out["numerics"].numpy() @ layer.linear_numeric.numpy()
    np.testing.assert_allclose(out["linear_terms"].numpy(), terms, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out["linear_logit"].numpy(), logit, rtol=1e-5, atol=1e-6)
    assert "history" not in out


@pytest.mark.parametrize("kwargs", [
    {"vocab_sizes": {"video_id": 3}}, {"embedding_dim": 0}, {"embedding_dim": 2.5}, {"oov_buckets": -1},
    {"embedding_init_std": 0.0}, {"linear_init_std": -1.0}, {"linear": False, "embeddings": False},
])
def test_invalid_arguments(kwargs):
    args = {"vocab_sizes": small_vocab_sizes()}
    args.update(kwargs)
    with pytest.raises(ValueError, match="FeatureLayer"):
        FeatureLayer(**args)


@pytest.mark.parametrize("linear", [False, True])
def test_config_round_trip_gives_same_outputs(linear):
    x = _inputs(2)
    layer = FeatureLayer(small_vocab_sizes(), embedding_dim=2, oov_buckets=1, linear=linear, name="features")
    assert_config_round_trip(layer, lambda lyr: lyr(x))
