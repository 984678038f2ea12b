"""Warm start (models/training/warm_start.py): weights and optimizer state restored exactly,
first-step loss below a cold start's on the same data, and embedding rows (and their
optimizer slots) remapped by vocabulary token when a new Transform changed the vocabularies."""
import numpy as np
import pytest
import tensorflow as tf

from models import features as F
from models.publishing.row_importance import embedding_tables, feature_layer
from models.rankers.registry import build_ranker
from models.training import warm_start
from tests.helpers.ranker_utils import random_transformed, trainer_config

L, V = 3, 12


def _vocabs(size=V, offset=0):
    return {F.vocab_name(k): [f"{k}:{i + offset}".encode() for i in range(size)]
            for k in F.ID_FEATURES + F.STRING_FEATURES}


def _sizes(vocabs):
    return {k: len(vocabs[F.vocab_name(k)]) for k in F.ID_FEATURES + F.STRING_FEATURES}


def _model(vocabs, seed=0):
    tf.keras.utils.set_random_seed(seed)
    return build_ranker(trainer_config("baseline", L, ranker_params={"hidden_units": [8]}), _sizes(vocabs))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    vocabs = _vocabs()
    x, y = random_transformed(256, L, _sizes(vocabs), seed=0)
    model = _model(vocabs)
    model.fit(x, y, batch_size=64, epochs=2, verbose=0, shuffle=False)
    out = str(tmp_path_factory.mktemp("model"))
    warm_start.save(model, vocabs, out)
    return model, vocabs, out, (x, y)


def test_restores_weights_and_optimizer_state_and_lowers_the_first_step_loss(trained):
    model, vocabs, out, (x, y) = trained
    warm, cold = _model(vocabs, seed=1), _model(vocabs, seed=1)
    report = warm_start.restore(warm, warm_start.warm_dir_of(out + "/Format-Serving"), vocabs, oov_buckets=1)
    assert report["iterations"] == int(model.optimizer.iterations.numpy()) > 0
    assert report["slots"] == ["_momentums", "_velocities"]
    for a, b in zip(model.weights, warm.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(model.trainable_variables, warm.trainable_variables):
        for slots in ("_momentums", "_velocities"):
            np.testing.assert_array_equal(warm_start._slot_of(model.optimizer, getattr(model.optimizer, slots), a),
                                          warm_start._slot_of(warm.optimizer, getattr(warm.optimizer, slots), b))
    # one training step on the same batch: the warm start's loss is the lower one
    xb, yb = {k: v[:64] for k, v in x.items()}, {k: v[:64] for k, v in y.items()}
    warm_first = float(warm.train_on_batch(xb, yb, return_dict=True)["loss"])
    cold_first = float(cold.train_on_batch(xb, yb, return_dict=True)["loss"])
    assert warm_first < cold_first, (warm_first, cold_first)
    assert warm_start.warm_dir_of(None) is None and warm_start.warm_dir_of(out + "/nowhere/Format-Serving") is None


def test_rows_are_remapped_by_token_when_the_vocabulary_changes(trained):
    model, vocabs, out, _ = trained
    # new vocabularies: reversed order, 4 old tokens gone, 6 new ones
    new_vocabs = {n: list(reversed(t[4:])) + [n.encode() + b":new%d" % i for i in range(6)]
                  for n, t in vocabs.items()}
    warm = _model(new_vocabs, seed=2)
    fresh = {n: v.numpy().copy() for n, v in embedding_tables(feature_layer(warm)).items()}
    report = warm_start.restore(warm, out + "/warm_start", new_vocabs, oov_buckets=1)
    old_tables = embedding_tables(feature_layer(model))
    for name, var in embedding_tables(feature_layer(warm)).items():
        vocab = F.vocab_name(name.split("_", 1)[1])
        old_tokens, new_tokens = vocabs[vocab], new_vocabs[vocab]
        old, new = old_tables[name].numpy(), var.numpy()
        assert new.shape[0] == 1 + len(new_tokens) + 1
        np.testing.assert_array_equal(new[0], old[0])  # padding
        np.testing.assert_array_equal(new[-1], old[-1])  # the OOV bucket
        for i, t in enumerate(new_tokens):
            if t in old_tokens:
                np.testing.assert_array_equal(new[1 + i], old[1 + old_tokens.index(t)])
            else:
                np.testing.assert_array_equal(new[1 + i], fresh[name][1 + i])
        v_old = warm_start._slot_of(model.optimizer, model.optimizer._velocities, old_tables[name]).numpy()
        v_new = warm_start._slot_of(warm.optimizer, warm.optimizer._velocities, var).numpy()
        t0 = new_tokens[0]
        np.testing.assert_array_equal(v_new[1], v_old[1 + old_tokens.index(t0)])
        assert not v_new[1 + len(new_tokens) - 1].any()  # a new token starts with zero state
        assert report["tables"][var.name] == {"kept": len(new_tokens) - 6 + 1, "new": 6}  # + the OOV row
    with pytest.raises(ValueError, match="other weights"):
        other = build_ranker(trainer_config("lr", L), _sizes(vocabs))
        warm_start.restore(other, out + "/warm_start", vocabs, oov_buckets=1)


def test_lineage_follows_origin_records(tmp_path):
    """record_origin / lineage: a chain back to the first cold model; a missing record or a
    loop ends it (the Publisher's delta rule reads it, components/publisher/freshness.py)."""
    a, b, c, d = (str(tmp_path / n) for n in "abcd")
    warm_start.record_origin(a, None)  # trained cold
    warm_start.record_origin(b, a)
    warm_start.record_origin(c, b + "/")
    assert warm_start.lineage(c) == [c, b, a]
    assert warm_start.lineage(a) == [a] and warm_start.lineage(d) == [d]  # d: no record
    warm_start.record_origin(a, c)  # a loop (cannot happen in a pipeline) still ends
    assert warm_start.lineage(c) == [c, b, a]
    assert warm_start.model_uri_of(b + "/Format-Serving") == b and warm_start.model_uri_of(None) is None
