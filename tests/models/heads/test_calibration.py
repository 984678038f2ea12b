"""Platt calibration of the click logit (models/heads/calibration.py): the fit against a
numerical minimum, AUC unchanged, the exported SavedModel's click output, and a warm-started
model refits instead of stacking calibrations."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from scipy.optimize import minimize

from models.heads import calibration as C
from models.rankers.registry import build_ranker
from models.training import warm_start
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes, trainer_config

L = 3


def _logits_labels(n=4000, seed=0):
    """Labels drawn from σ(0.6 s − 0.4): an overconfident logit s, a = 0.6, b = -0.4 true."""
    rng = np.random.default_rng(seed)
    s = rng.normal(0.0, 2.0, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(0.6 * s - 0.4)))).astype(np.float64)
    return s, y


def _auc(score, y):
    """Brute force: P(score_pos > score_neg) + 0.5 P(tie) over all positive-negative pairs."""
    pos, neg = score[y == 1], score[y == 0]
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def test_fit_is_the_log_loss_minimum():
    s, y = _logits_labels()
    a, b = C.fit_platt(s, y)
    ref = minimize(lambda t: C.log_loss(s, y, t[0], t[1]), x0=[1.0, 0.0], method="Nelder-Mead",
                   options={"xatol": 1e-9, "fatol": 1e-14, "maxiter": 20000}).x
    assert a == pytest.approx(ref[0], abs=1e-5) and b == pytest.approx(ref[1], abs=1e-5)
    assert a == pytest.approx(0.6, abs=0.06) and b == pytest.approx(-0.4, abs=0.1)  # the generating values
    # the normal equations at the minimum: Σ(p − y) = 0 (mean prediction = CTR), Σ(p − y)s = 0
    p = 1.0 / (1.0 + np.exp(-(a * s + b)))
    assert abs(np.mean(p - y)) < 1e-9 and abs(np.mean((p - y) * s)) < 1e-9
    # L itself by hand on two rows: log(1 + e^z) − y z
    assert C.log_loss([0.0, 2.0], [1.0, 0.0], 1.0, 0.0) == pytest.approx((np.log(2) + np.log1p(np.exp(2))) / 2)
    with pytest.raises(ValueError, match="all 1"):
        C.fit_platt(s, np.ones_like(s))


def test_calibration_keeps_auc_and_matches_the_mean():
    s, y = _logits_labels(n=1500, seed=1)
    a, b = C.fit_platt(s, y)
    raw, calibrated = 1.0 / (1.0 + np.exp(-s)), 1.0 / (1.0 + np.exp(-(a * s + b)))
    assert _auc(calibrated, y) == _auc(raw, y) > 0.6
    assert calibrated.mean() / y.mean() == pytest.approx(1.0, abs=1e-8)
    assert abs(raw.mean() / y.mean() - 1.0) > 0.05  # it was off before
    assert C.log_loss(s, y, a, b) < C.log_loss(s, y)


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    return build_ranker(trainer_config("baseline", L, ranker_params={"hidden_units": [8]}), small_vocab_sizes())


def _data(seed=0, n=512):
    return random_transformed(n, L, small_vocab_sizes(), seed=seed)


def test_fit_model_sets_the_layer_from_the_logit_and_never_stacks(tmp_path):
    x, y = _data()
    model = _model()
    model.fit(x, y, batch_size=128, epochs=1, verbose=0)
    layer = C.calibration_layer(model)
    assert (float(layer.scale.numpy()), float(layer.bias.numpy())) == (1.0, 0.0)  # identity while training
    logit = keras.Model(model.inputs, layer.input)(x).numpy().reshape(-1)
    vx, vy = _data(seed=1)
    val = tf.data.Dataset.from_tensor_slices((vx, vy)).batch(100)
    v_logit = keras.Model(model.inputs, layer.input)(vx).numpy().reshape(-1)
    report = C.fit_model(model, val)
    a, b = C.fit_platt(v_logit, vy["click_prob"])
    assert (report["a"], report["b"]) == pytest.approx((a, b), abs=1e-6) and report["examples"] == 512
    assert report["calibration_after"] == pytest.approx(1.0, abs=1e-6)
    assert report["logloss_after"] <= report["logloss_before"]
    # the model's click output is σ(a·s + b)
    prob = model(x, training=False)["click_prob"].numpy().reshape(-1)
    np.testing.assert_allclose(prob, 1.0 / (1.0 + np.exp(-(a * logit + b))), rtol=1e-5, atol=1e-6)
    # fitting again (e.g. after a warm start restored this fit) gives the same (a, b), not a stack
    again = C.fit_model(model, val)
    assert (again["a"], again["b"]) == pytest.approx((a, b), abs=1e-6)
    # a warm start restores the fitted (a, b); run_fn resets it before training
    vocabs = {v: [f"t{i}".encode() for i in range(12)] for v in _vocab_names()}  # SMALL_VOCAB tokens
    warm_start.save(model, vocabs, str(tmp_path))
    warm = _model(seed=1)
    warm_start.restore(warm, warm_start.warm_dir_of(str(tmp_path / "Format-Serving")), vocabs, oov_buckets=1)
    wl = C.calibration_layer(warm)
    assert (float(wl.scale.numpy()), float(wl.bias.numpy())) == pytest.approx((a, b))
    C.reset(warm)
    assert (float(wl.scale.numpy()), float(wl.bias.numpy())) == (1.0, 0.0)


def _vocab_names():
    from models import features as F
    return sorted({F.vocab_name(k) for k in F.ID_FEATURES + F.STRING_FEATURES})


def test_a_reversed_logit_is_refused_and_the_layer_stays_the_identity():
    x, y = _data(n=256)
    model = _model()
    layer = C.calibration_layer(model)
    s = keras.Model(model.inputs, layer.input)(x).numpy().reshape(-1)
    flipped = dict(y, click_prob=(s < np.median(s)).astype(np.float32))  # clicks where the logit is low
    report = C.fit_model(model, tf.data.Dataset.from_tensor_slices((x, flipped)).batch(64))
    assert "reverse" in report["skipped"] and "a" not in report
    assert (float(layer.scale.numpy()), float(layer.bias.numpy())) == (1.0, 0.0)


def test_the_exported_model_serves_the_calibrated_probability(small_transform_output, tmp_path):
    from models import features as F
    from models.training.export import export_serving_model
    from models.training.input import vocab_sizes
    from tests.conftest import SMALL_L
    from tests.helpers.ranker_utils import raw_batch, raw_rows

    tft_output, _ = small_transform_output
    keras.utils.set_random_seed(0)
    model = build_ranker(trainer_config("baseline", SMALL_L, ranker_params={"hidden_units": [8]}),
                         vocab_sizes(tft_output))
    layer = C.calibration_layer(model)
    layer.scale.assign(0.7)
    layer.bias.assign(-0.3)
    export_serving_model(model, tft_output, SMALL_L, str(tmp_path / "export"))
    raw = raw_batch(raw_rows(9, SMALL_L, seed=5), SMALL_L)
    transformed = tft_output.transform_features_layer()({k: tf.constant(v) for k, v in raw.items()})
    logit = keras.Model(model.inputs, layer.input)({k: transformed[k] for k in model.input_names}).numpy()
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"](
        **{k: tf.constant(v) for k, v in raw.items() if k in F.SERVING_RAW_FEATURES})["click_prob"].numpy()
    np.testing.assert_allclose(served, 1.0 / (1.0 + np.exp(-(0.7 * logit - 0.3))), rtol=1e-5, atol=1e-6)
    # and the Publisher's reload (keras.models.load_model) keeps (a, b)
    reloaded = keras.models.load_model(str(tmp_path / "export"), compile=False)
    assert [float(w) for w in C.calibration_layer(reloaded).get_weights()] == pytest.approx([0.7, -0.3])
