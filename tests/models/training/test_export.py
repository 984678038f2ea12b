"""export.serving_rank: one user's context (batch 1) x N candidates equals serving_default
on the same rows (the user side repeated), for an untrained ranker on the shared small
transform graph (the concrete functions that export_serving_model saves)."""
import numpy as np
import tensorflow as tf

from models import features as F
from models.rankers import build_ranker
from models.training.export import serving_signatures
from models.training.input import vocab_sizes
from tests.conftest import SMALL_L
from tests.helpers.ranker_utils import raw_batch, raw_rows, trainer_config


def test_feature_sides_partition_the_serving_features():
    assert set(F.USER_CONTEXT_FEATURES) | set(F.CANDIDATE_FEATURES) == set(F.SERVING_RAW_FEATURES)
    assert not set(F.USER_CONTEXT_FEATURES) & set(F.CANDIDATE_FEATURES)
    assert {"video_id", "author_id", "duration_s"} <= set(F.CANDIDATE_FEATURES)
    assert set(F.HISTORY_FEATURES) <= set(F.USER_CONTEXT_FEATURES)


def test_serving_rank_equals_serving_default_on_the_same_rows(small_transform_output):
    tft_output, _ = small_transform_output
    tf.random.set_seed(3)
    model = build_ranker(trainer_config("lr", SMALL_L, ranker_params={}), vocab_sizes(tft_output))
    # the concrete functions export_serving_model saves (saving itself, with serving_rank,
    # is exercised by tests/models/rankers' export tests): no SavedModel write here
    sigs = serving_signatures(model, tft_output, SMALL_L)
    rank = sigs["serving_rank"]
    (spec,), _ = rank.structured_input_signature
    assert all(spec[k].shape[0] == 1 for k in F.USER_CONTEXT_FEATURES)
    assert all(spec[k].shape[0] is None for k in F.CANDIDATE_FEATURES)

    rows = raw_rows(7, SMALL_L, seed=5)
    user = rows[2]
    for r in rows:  # the same user on every row: what serving_rank broadcasts
        r.update({k: user[k] for k in F.USER_CONTEXT_FEATURES})
    raw = raw_batch(rows, SMALL_L)
    want = sigs["serving_default"]({k: tf.constant(v) for k, v in raw.items()})
    got = rank({k: tf.constant(v[:1] if k in F.USER_CONTEXT_FEATURES else v)
                for k, v in raw.items()})
    assert set(got) == set(want)
    for name in want:
        assert got[name].shape == want[name].shape == (7, 1)
        np.testing.assert_allclose(got[name].numpy(), want[name].numpy(), rtol=1e-6, atol=1e-7)
    assert np.std(want["click_prob"].numpy()) > 0  # candidates differ: not a constant
