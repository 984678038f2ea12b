"""Rankers: train a few steps, export with run_fn's serving signatures, reload, same numbers."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import features as F
from models.layers.feature_layer import FeatureLayer, model_inputs
from models import heads as H
from models.watch_time.cqe import interpolate_quantile, quantile_levels
from models.rankers import RANKERS, build_ranker
from models.rankers.din import HISTORY_SCENE_INPUT
from models.training.export import export_serving_model
from models.training.input import vocab_sizes
from models.training.run_fn import ead_thresholds_from_transform_output, fit_ranker
from pipeline import configs
from tests.conftest import SMALL_L
from tests.helpers.ranker_utils import (random_transformed, raw_batch, raw_rows, serialize_rows,
                                        small_vocab_sizes, trainer_config)

L = 5
# every ranker, plus BST with relative positions
VARIANTS = [("lr", {}), ("baseline", {}), ("xdeepfm", {"cin_layer_sizes": [8, 6]}),
            ("din", {"attention_hidden_units": [8], "mlp_hidden_units": [16, 8]}),
            ("bst", {"mlp_hidden_units": [16]}),
            ("bst", {"mlp_hidden_units": [16], "relative_positions": True, "max_relative_position": 2}),
            ("dcn", {"deep_hidden_units": [16], "num_cross_layers": 2, "projection_dim": 4}),
            ("din", {"attention_hidden_units": [8], "mlp_hidden_units": [8], "attention_scoring": "scaled_dot"}),
            ("din", {"attention_hidden_units": [8], "mlp_hidden_units": [8], "dual_attention": True,
                     "dual_attention_hidden_units": [4]}),
            ("xdeepfm", {"cin_layer_sizes": [8, 6], "cin_rank": 1}),
            ("din", {"attention_hidden_units": [8], "mlp_hidden_units": [8], "long_memory": "titans",
                     "long_memory_params": {"chunk_size": 2}})]
IDS = ["lr", "baseline", "xdeepfm", "din", "bst", "bst_relative", "dcn", "din_scaled", "din_dual",
       "xdeepfm_rank1", "din_titans"]
# Exported with the default heads; DIN and BST are exported with CREAD + CQE below (the
# same export and serving_rank checks, one export each); relative BST, DIN options,
# xDeepFM's rank-1 CIN (the pipeline's default, pipeline/configs/training.py): padding test only.
_DEFAULT_HEADS = [i for i, name in enumerate(IDS) if name in ("lr", "baseline", "xdeepfm", "dcn")]
EXPORTED = [VARIANTS[i] for i in _DEFAULT_HEADS]
EXPORTED_IDS = [IDS[i] for i in _DEFAULT_HEADS]


@pytest.fixture(scope="module")
def transform_output(small_transform_output):
    assert L == SMALL_L
    out, _ = small_transform_output
    return out, raw_rows(12, L, seed=2)  # serving rows: also unseen ids (OOV bucket)


def _train(model_type, params, sizes, steps=4, seed=0, hp=None, thresholds=None):
    """Builds `model_type` with the heads of `hp` (default: click + regression) and
    trains `steps` batches on random transformed data (fit_ranker: the Trainer's fit)."""
    tf.random.set_seed(seed)
    model = build_ranker(trainer_config(model_type, L, ranker_params=params, **(hp or {})), sizes,
                         ead_thresholds=thresholds)
    if steps:
        x, y = random_transformed(32 * steps, L, sizes, seed=seed)
        y = H.training_labels(model.output_names, y["click_prob"], y["watch_time_s"])
        fit_ranker(model, x, 1, y=y, batch_size=32, verbose=0)
    return model


@pytest.mark.parametrize("model_type,params", EXPORTED, ids=EXPORTED_IDS)
def test_train_export_reload_same_predictions(model_type, params, transform_output, tmp_path):
    tft_output, rows = transform_output
    model = _train(model_type, params, vocab_sizes(tft_output))
    raw = raw_batch(rows, L)
    transformed = tft_output.transform_features_layer()({k: tf.constant(v) for k, v in raw.items()})
    before = model({k: transformed[k] for k in model.input_names}, training=False)
    assert np.all((before["click_prob"].numpy() > 0) & (before["click_prob"].numpy() < 1))
    assert np.all(np.isfinite(before["watch_time_s"].numpy()))
    assert np.std(before["click_prob"].numpy()) > 0  # not a constant model

    export_dir = str(tmp_path / "export")
    export_serving_model(model, tft_output, L, export_dir)
    loaded = tf.saved_model.load(export_dir)  # no custom objects
    after = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in raw.items()})
    from_examples = loaded.signatures["serving_examples"](examples=tf.constant(serialize_rows(rows)))
    for name in ("click_prob", "watch_time_s"):
        assert after[name].shape == (len(rows), 1)
        np.testing.assert_allclose(after[name].numpy(), before[name].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(from_examples[name].numpy(), before[name].numpy(), rtol=1e-5, atol=1e-6)
    _check_serving_rank(loaded, L)


def _check_serving_rank(loaded, history_length):
    """serving_rank (one user's context with batch 1, N candidates) equals serving_default
    on the same rows with that user side repeated (models/training/export.py)."""
    rank = loaded.signatures["serving_rank"]
    _, spec = rank.structured_input_signature
    assert all(spec[k].shape[0] == 1 for k in F.USER_CONTEXT_FEATURES)
    assert all(spec[k].shape[0] is None for k in F.CANDIDATE_FEATURES)
    rows = raw_rows(7, history_length, seed=5)
    new_user = dict(hist_len=0, hist_video_id=[-1] * history_length, hist_author_id=[-1] * history_length,
                    hist_tab=[-1] * history_length, hist_is_click=[0] * history_length,
                    hist_watch_time_s=[0.0] * history_length, hist_time_gap_s=[0.0] * history_length)
    # a user with history, then a new user (no history: the one-user attention scores
    # no item; it used to abort the process in oneDNN)
    for user in (rows[2], dict(rows[2], **new_user)):
        for r in rows:  # the same user on every row: what serving_rank broadcasts
            r.update({k: user[k] for k in F.USER_CONTEXT_FEATURES})
        raw = raw_batch(rows, history_length)
        want = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in raw.items()})
        got = rank(**{k: tf.constant(v[:1] if k in F.USER_CONTEXT_FEATURES else v) for k, v in raw.items()})
        assert set(got) == set(want)
        for name in want:
            assert got[name].shape == want[name].shape and want[name].shape[0] == 7, name
            np.testing.assert_allclose(got[name].numpy(), want[name].numpy(), rtol=1e-6, atol=1e-7)
        assert np.std(want["click_prob"].numpy()) > 0  # candidates differ: not a constant


NUM_Q = 9
# CREAD and CQE together on the two sequence rankers (and DIN with the Titans memory), each
# alone on the baseline (the heads sit on the ranker's last hidden layer, the same code path
# for every ranker).
_WITH_HEADS = [i for i, name in enumerate(IDS) if name in ("din", "bst", "din_titans")]
WATCH_VARIANTS = ([(VARIANTS[i][0], VARIANTS[i][1], "cread+cqe") for i in _WITH_HEADS]
                  + [("baseline", {}, "cread"), ("baseline", {}, "cqe")])
WATCH_IDS = [f"{IDS[i]}-cread+cqe" for i in _WITH_HEADS] + ["baseline-cread", "baseline-cqe"]


@pytest.mark.parametrize("model_type,params,watch_head", WATCH_VARIANTS, ids=WATCH_IDS)
def test_watch_heads_train_export_reload_same_predictions(model_type, params, watch_head,
                                                          transform_output, tmp_path):
    """Each watch head on each ranker: trains, exports with run_fn's signatures, reloads
    (no custom objects) with identical outputs; stable output names; CQE quantiles
    monotone in the served model; serving_dqc with the default k = serving_default;
    serving_rank = serving_default on one user's rows."""
    tft_output, rows = transform_output
    thresholds = ead_thresholds_from_transform_output(tft_output)
    hp = {"watch_head": watch_head, "cqe": dict(configs.CQE, num_quantiles=NUM_Q), "ranking_score": "click_prob * watch_time_s"}
    model = _train(model_type, params, vocab_sizes(tft_output), hp=hp, thresholds=thresholds)
    raw = raw_batch(rows, L)
    transformed = tft_output.transform_features_layer()({k: tf.constant(v) for k, v in raw.items()})
    before = model({k: transformed[k] for k in model.input_names}, training=False)

    export_dir = str(tmp_path / "export")
    export_serving_model(model, tft_output, L, export_dir)
    loaded = tf.saved_model.load(export_dir)
    request = {k: tf.constant(v) for k, v in raw.items()}
    after = loaded.signatures["serving_default"](**request)
    from_examples = loaded.signatures["serving_examples"](examples=tf.constant(serialize_rows(rows)))
    cqe = "cqe" in watch_head
    expected = {"click_prob", "watch_time_s", "ranking_score"} | (
        {"quantiles", "cse", "dqc", "cde"} if cqe else set())
    assert set(after) == expected and set(from_examples) == expected  # no training-only outputs
    assert ("serving_dqc" in loaded.signatures) == cqe
    n = len(rows)
    for name in expected:
        assert after[name].shape == ((n, NUM_Q) if name == "quantiles" else (n, 1)), name
        np.testing.assert_allclose(after[name].numpy(), before[name].numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(from_examples[name].numpy(), before[name].numpy(), rtol=1e-5, atol=1e-5)
    watch = after["watch_time_s"].numpy()
    assert np.all(np.isfinite(watch)) and np.all(watch >= 0)
    if "cread" in watch_head:  # restoration of φ ∈ (0, 1): 0 < ŷ < T_max
        assert np.all(watch < thresholds[-1])
    np.testing.assert_allclose(after["ranking_score"].numpy(),
                               after["click_prob"].numpy() * watch, rtol=1e-5, atol=1e-6)
    if cqe:
        q = after["quantiles"].numpy()
        assert np.all(np.diff(q, axis=1) >= 0) and np.all(q >= 0)
        if watch_head == "cqe":
            np.testing.assert_allclose(watch, after["cde"].numpy(), rtol=1e-6)
        dqc = loaded.signatures["serving_dqc"](dqc_k=tf.fill([n], 0.5), **request)
        for name in expected:
            np.testing.assert_allclose(dqc[name].numpy(), after[name].numpy(), rtol=1e-5, atol=1e-5)
    _check_serving_rank(loaded, L)


def test_serving_dqc_honours_k_and_ranking_score_follows(transform_output, tmp_path):
    """dqc = k·t_0.25 + (1 − k)·t_0.7 per request; a ranking score using dqc follows k."""
    tft_output, rows = transform_output
    hp = {"watch_head": "cqe", "cqe": dict(configs.CQE, num_quantiles=NUM_Q), "ranking_score": "click_prob * dqc"}
    model = _train("baseline", {}, vocab_sizes(tft_output), hp=hp)
    export_dir = str(tmp_path / "export")
    export_serving_model(model, tft_output, L, export_dir)
    serve = tf.saved_model.load(export_dir).signatures["serving_dqc"]
    request = {k: tf.constant(v) for k, v in raw_batch(rows, L).items()}
    k = np.linspace(0.0, 1.0, len(rows)).astype(np.float32)
    out = serve(dqc_k=tf.constant(k), **request)
    q = out["quantiles"].numpy().astype(np.float64)
    taus = quantile_levels(NUM_Q)
    t_low, t_high = interpolate_quantile(q, 0.25, taus), interpolate_quantile(q, 0.7, taus)
    np.testing.assert_allclose(out["cse"].numpy()[:, 0], t_low, rtol=1e-5)
    np.testing.assert_allclose(out["dqc"].numpy()[:, 0], k * t_low + (1 - k) * t_high, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["ranking_score"].numpy(), out["click_prob"].numpy() * out["dqc"].numpy(),
                               rtol=1e-5, atol=1e-7)
    assert np.all(t_high > t_low)  # k really matters


@pytest.mark.parametrize("model_type,params", VARIANTS, ids=IDS)
def test_padding_never_changes_predictions(model_type, params):
    sizes = small_vocab_sizes()
    model = _train(model_type, params, sizes, steps=0)  # structure, not training, is under test
    x, _ = random_transformed(16, L, sizes, seed=5)
    pad = x["hist_mask_xf"] == 0
    assert pad.any()
    rng = np.random.default_rng(9)
    if HISTORY_SCENE_INPUT in model.input_names:  # DIN dual attention: scenes 0 at padding
        x[HISTORY_SCENE_INPUT] = np.where(pad, 0, rng.integers(1, 4, pad.shape)).astype(np.int64)
    noisy = dict(x)
    if HISTORY_SCENE_INPUT in model.input_names:
        noisy[HISTORY_SCENE_INPUT] = np.where(pad, x["tab_xf"][:, None], x[HISTORY_SCENE_INPUT])
    for k in F.HISTORY_ID_FEATURES:
        name = F.transformed_name(k)
        noisy[name] = np.where(pad, rng.integers(1, 10, pad.shape), x[name]).astype(np.int64)
    for k in F.HISTORY_VALUE_FEATURES:
        name = F.transformed_name(k)
        noisy[name] = np.where(pad, rng.normal(3.0, 1.0, pad.shape), x[name]).astype(np.float32)
    a, b = model(x, training=False), model(noisy, training=False)
    for name in a:
        np.testing.assert_allclose(a[name].numpy(), b[name].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model_type,params", VARIANTS, ids=IDS)
def test_a_row_scores_the_same_alone_and_in_any_batch(model_type, params):
    """DIN scores only the valid (row, item) pairs of a batch and BST drops the history
    positions that are padding in every row (models/layers/_utils.py trim_padding): what a
    batch computes depends on its rows' history lengths, a row's scores must not. Each row
    alone (its own length, 0 for row 0) equals the same row in the batch (up to L)."""
    sizes = small_vocab_sizes()
    model = _train(model_type, params, sizes, steps=0)  # structure, not training, is under test
    x, _ = random_transformed(16, L, sizes, seed=6)
    assert x["hist_len_xf"][0] == 0 and x["hist_len_xf"].max() == L
    if HISTORY_SCENE_INPUT in model.input_names:
        x[HISTORY_SCENE_INPUT] = (np.random.default_rng(3).integers(1, 4, (16, L)) * x["hist_mask_xf"]).astype(np.int64)
    x = {k: v for k, v in x.items() if k in model.input_names}
    batch = model(x, training=False)
    for r in range(16):
        alone = model({k: v[r:r + 1] for k, v in x.items()}, training=False)
        for name in batch:
            np.testing.assert_allclose(alone[name].numpy()[0], batch[name].numpy()[r], rtol=1e-5, atol=1e-6)


def test_rankers_learn_a_simple_signal():
    """A few epochs on 'click iff even video id' must beat chance clearly (DIN + LR)."""
    sizes = small_vocab_sizes()
    x, y = random_transformed(512, L, sizes, seed=3)
    for model_type in ("lr", "din"):
        tf.random.set_seed(0)
        model = build_ranker(trainer_config(model_type, L, learning_rate=0.02), sizes)
        fit_ranker(model, x, 6, y=y, batch_size=64, verbose=0)
        p = model.predict(x, verbose=0)["click_prob"].reshape(-1)
        assert keras.metrics.AUC()(y["click_prob"], p).numpy() > 0.8, model_type


def test_unknown_model_type_and_bad_params_raise():
    with pytest.raises(ValueError, match="unknown model_type 'deepfm'"):
        build_ranker(trainer_config("deepfm", L), small_vocab_sizes())
    with pytest.raises(ValueError, match="bad ranker_params"):
        build_ranker(trainer_config("din", L, ranker_params={"cin_layer_sizes": [4]}), small_vocab_sizes())
    assert set(RANKERS) == {"lr", "baseline", "xdeepfm", "din", "bst", "dcn"}
    with pytest.raises(ValueError, match="structure"):
        build_ranker(trainer_config("dcn", L, ranker_params={"structure": "mixed"}), small_vocab_sizes())


def test_din_dual_attention_reads_the_history_scenes():
    """The scene of each history item decides which stage sees it: moving items between
    the current and the other scenes changes the prediction; trains a few steps."""
    sizes = small_vocab_sizes()
    model = _train("din", VARIANTS[8][1], sizes, steps=0)
    x, y = random_transformed(64, L, sizes, seed=6)
    rng = np.random.default_rng(1)
    mask = x["hist_mask_xf"] > 0
    x[HISTORY_SCENE_INPUT] = np.where(mask, rng.integers(1, 4, mask.shape), 0).astype(np.int64)
    fit_ranker(model, x, 1, y=y, batch_size=32, verbose=0)
    same = dict(x, **{HISTORY_SCENE_INPUT: np.where(mask, x["tab_xf"][:, None], 0)})
    a, b = model(x, training=False)["click_prob"].numpy(), model(same, training=False)["click_prob"].numpy()
    assert np.all(np.isfinite(a)) and np.abs(a - b).max() > 1e-6


def test_feature_layer_shares_tables_and_initialises_small():
    sizes = small_vocab_sizes()
    layer = FeatureLayer(sizes, embedding_dim=4, linear=True)
    inputs = model_inputs(L)
    x, _ = random_transformed(8, L, sizes, seed=4)
    out = layer(x)
    names = sorted(w.name for w in layer.weights)
    # one table per entity: no separate history tables
    assert not [n for n in names if "hist_" in n], names
    video = layer.tables["video_id"].numpy()
    author = layer.tables["author_id"].numpy()
    np.testing.assert_allclose(out["target_item"].numpy(),
                               np.concatenate([video[x["video_id_xf"]], author[x["author_id_xf"]]], -1))
    # history item = [video emb, author emb] + outcome projection, zero at padding
    mask = x["hist_mask_xf"]
    outcomes = np.stack([x[F.transformed_name(k)] for k in F.HISTORY_OUTCOME_FEATURES], -1)
    expected = (np.concatenate([video[x["hist_video_id_xf"]], author[x["hist_author_id_xf"]]], -1)
                + outcomes @ layer.outcome_kernel.numpy() + layer.outcome_bias.numpy()) * mask[..., None]
    np.testing.assert_allclose(out["history"].numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["history_gap_s"].numpy(), np.expm1(x["hist_time_gap_s_xf"]) * mask, rtol=1e-5)
    assert out["fields"].shape == (8, len(F.ID_FEATURES + F.STRING_FEATURES), 4)
    # explicit small initialisation (DESIGN §6): embeddings ~0.01, first-order ~1e-4
    big = FeatureLayer({k: 5000 for k in sizes}, embedding_dim=8, linear=True)
    big(model_inputs(L))
    assert 0.007 < np.std(big.tables["video_id"].numpy()) < 0.013
    assert 0.7e-4 < np.std(big.linear_tables["video_id"].numpy()) < 1.3e-4
    assert np.std(big.linear_numeric.numpy()) < 1e-3
    del inputs


def test_din_user_side_regularisation():
    """user_field_dropout drops whole user-field embeddings per row (scaled 1/(1-p)) in
    training only; user_embedding_l2 adds λ·mean_b ||E_user[u_b]||² (gathered rows only)."""
    from models.rankers.din import USER_FIELDS

    sizes = small_vocab_sizes()
    base = {"attention_hidden_units": [8], "mlp_hidden_units": [8]}
    plain = _train("din", base, sizes, steps=0)
    reg = _train("din", dict(base, user_field_dropout=0.5, user_embedding_l2=0.1), sizes, steps=0)
    reg.set_weights(plain.get_weights())  # Dropout / the L2 term add no variables
    x, _ = random_transformed(256, L, sizes, seed=7)
    np.testing.assert_allclose(reg(x, training=False)["click_prob"].numpy(),
                               plain(x, training=False)["click_prob"].numpy(), rtol=1e-6, atol=1e-7)
    feats = reg.get_layer("features")
    table = feats.tables["user_id"].numpy()
    want = 0.1 * np.mean(np.sum(table[x["user_id_xf"].reshape(-1)] ** 2, axis=-1))
    reg(x, training=True)
    np.testing.assert_allclose(float(sum(reg.losses)), want, rtol=1e-5)

    probe = keras.Model(reg.inputs, [reg.get_layer("fields_user_side").output,
                                     feats.output["fields_flat"]])
    dropped, full = (t.numpy() for t in probe(x, training=True))
    start = {}
    for k in F.ID_FEATURES + F.STRING_FEATURES:  # fields_flat layout (CATEGORICAL order)
        start[k] = sum(feats.dims[j] for j in start)
    for k in ("user_id", "onehot_feat3", "video_id"):
        a, b = (t[:, start[k]:start[k] + feats.dims[k]] for t in (dropped, full))
        zero = np.all(a == 0, axis=-1)
        if k in USER_FIELDS:
            np.testing.assert_allclose(a[~zero], 2.0 * b[~zero], rtol=1e-6)
            assert 0.3 < zero.mean() < 0.7, k  # about half of the rows lose the field
        else:
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="user_field_dropout"):
        _train("din", dict(base, user_field_dropout=1.0), sizes, steps=0)
