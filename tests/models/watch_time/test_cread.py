"""CREAD head (Sun et al., AAAI 2024): labels, restoration + error bound, loss, layer."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.watch_time import cread
from tests.models.layers.round_trip import assert_config_round_trip


def test_ordinal_labels():
    np.testing.assert_array_equal(
        cread.ordinal_labels([0.0, 1.0, 1.5, 5.0], [1.0, 2.0, 4.0]),
        [[0, 0, 0], [0, 0, 0], [1, 0, 0], [1, 1, 1]])


def test_restore_hand_values_numpy_and_tf():
    t = [1.0, 3.0, 4.0]  # dt = 1, 2, 1
    phi = np.array([[0.8, 0.5, 0.1]])
    assert cread.restore(phi, t, "riemann")[0] == pytest.approx(0.8 + 1.0 + 0.1)
    # trapezoid, phi_0 = 1: (1+.8)/2 + (.8+.5)/2*2 + (.5+.1)/2
    assert cread.restore(phi, t, "trapezoid")[0] == pytest.approx(0.9 + 1.3 + 0.3)
    assert cread.restore(phi, t, "trapezoid", phi0=0.6)[0] == pytest.approx(0.7 + 1.3 + 0.3)
    rng = np.random.default_rng(0)
    p = rng.uniform(size=(5, 3))
    for rule in cread.RESTORATION_RULES:
        np.testing.assert_allclose(cread.restore_tf(tf.constant(p), t, rule, 0.7).numpy(),
                                   cread.restore(p, t, rule, 0.7), rtol=1e-12)


def test_exponential_survival_within_bound_and_trapezoid_closer():
    lam = 0.2
    t = np.array([0.5, 1, 2, 3, 4, 6, 8, 11, 15, 20, 30])
    s = np.exp(-lam * t)
    ey, tail = 1 / lam, np.exp(-lam * t[-1]) / lam  # E[y], E[(y - T_max)^+]
    b = cread.riemann_error_bound(s, t)
    r, tr = cread.restore(s, t, "riemann"), cread.restore(s, t, "trapezoid")
    assert 0 <= ey - r <= b + tail
    assert abs(ey - tail - tr) <= b / 2
    assert abs(ey - tail - tr) < 0.2 * abs(ey - tail - r)  # smooth S: trapezoid far closer
    assert tr > ey - tail  # convex S: the chord lies above, trapezoid over-estimates
    # exact per-bucket integrals: int_{a}^{b} e^{-lam u} du
    exact = np.sum((np.exp(-lam * np.r_[0, t[:-1]]) - s) / lam)
    assert ey - tail == pytest.approx(exact)


def test_discrete_distribution_bound_is_tight():
    # y in {0, 1, 3, 6} w.p. (.1, .3, .4, .2): support on the thresholds, so S is flat
    # inside buckets, the left sum is exact and the Riemann error equals the bound.
    vals, probs = np.array([0, 1, 3, 6.0]), np.array([.1, .3, .4, .2])
    t = np.arange(1, 7, dtype=np.float64)
    s = np.array([probs[vals > tm].sum() for tm in t])  # brute-force S(t_m)
    s0 = probs[vals > 0].sum()
    ey = float(vals @ probs)
    b = cread.riemann_error_bound(s, t, survival_at_0=s0)
    assert ey - cread.restore(s, t, "riemann") == pytest.approx(b)
    bias = cread.restoration_bias(s[None], t, [ey], survival_at_0=s0)
    assert bias["riemann"]["mean_bias"] == pytest.approx(-b)
    assert bias["trapezoid"]["mean_bias"] == pytest.approx(-b / 2)
    assert bias["bound"]["mean_riemann_bound"] == pytest.approx(b)


def test_ordinal_penalty():
    assert cread.ordinal_penalty_tf(tf.constant([[0.9, 0.5, 0.5, 0.1]])).numpy()[0] == 0.0
    v = cread.ordinal_penalty_tf(tf.constant([[0.9, 0.5, 0.7, 0.2, 0.4]], tf.float64)).numpy()[0]
    assert v == pytest.approx(0.2 + 0.2)


def _np_loss(y, logits, t, lce, lr, lo, delta, rule, phi0, clip):
    p = 1 / (1 + np.exp(-logits))
    lab = (y[:, None] > t[None, :]).astype(float)
    ce = -(lab * np.log(p) + (1 - lab) * np.log(1 - p)).sum(1)
    dt = np.diff(np.r_[0.0, t])
    if rule == "riemann":
        yh = (p * dt).sum(1)
    else:
        prev = np.c_[np.full(len(y), phi0), p[:, :-1]]
        yh = ((prev + p) / 2 * dt).sum(1)
    e = np.abs(yh - (np.minimum(y, t[-1]) if clip else y))
    hub = np.where(e <= delta, 0.5 * e ** 2, delta * (e - 0.5 * delta))
    ordp = np.maximum(p[:, 1:] - p[:, :-1], 0).sum(1)
    return np.mean(lce * ce + lr * hub + lo * ordp)


@pytest.mark.parametrize("rule,clip", [("riemann", False), ("trapezoid", True)])
def test_loss_matches_numpy(rule, clip):
    rng = np.random.default_rng(1)
    t = np.array([0.5, 2.0, 5.0, 12.0, 30.0])
    y = np.array([0.0, 0.4, 3.0, 7.0, 31.0, 100.0])
    logits = rng.normal(0, 2, size=(6, 5))
    kw = dict(lambda_ce=0.7, lambda_restore=0.3, lambda_ord=2.0, huber_delta=2.5,
              restoration=rule, phi0=0.95, clip_restore_target=clip)
    ref = _np_loss(y, logits, t, 0.7, 0.3, 2.0, 2.5, rule, 0.95, clip)
    got = cread.cread_loss(tf.constant(y), tf.constant(logits), t, **kw).numpy()
    assert got == pytest.approx(ref, rel=1e-10)
    keras_loss = cread.CreadLoss(t, **kw)(tf.constant(y[:, None]), tf.constant(logits)).numpy()
    assert keras_loss == pytest.approx(ref, rel=1e-10)


def test_invalid_arguments():
    with pytest.raises(ValueError):
        cread.CreadHead([1.0, 1.0, 2.0])
    with pytest.raises(ValueError):
        cread.CreadHead([0.0, 1.0])
    with pytest.raises(ValueError):
        cread.CreadHead([1.0, 2.0], restoration="simpson")
    with pytest.raises(ValueError):
        cread.restore(np.ones((2, 3)), [1.0, 2.0])


def test_head_outputs_config_and_savedmodel_roundtrip(tmp_path):
    t = [1.0, 3.0, 10.0, 60.0]
    inp = keras.Input([8])
    out = cread.CreadHead(t, restoration="trapezoid", phi0=0.9, name="cread")(inp)
    model = keras.Model(inp, out)
    h = np.random.default_rng(2).normal(size=(3, 8)).astype(np.float32)
    res = model(h)
    assert res["logits"].shape == (3, 4) and res["watch_time"].shape == (3,)
    np.testing.assert_allclose(res["phi"].numpy(), tf.sigmoid(res["logits"]).numpy(), rtol=1e-6)
    np.testing.assert_allclose(res["watch_time"].numpy(),
                               cread.restore(res["phi"].numpy(), t, "trapezoid", 0.9), rtol=1e-5)
    head = model.get_layer("cread")
    clone = cread.CreadHead.from_config(head.get_config())
    assert clone.thresholds == t and clone.restoration == "trapezoid" and clone.phi0 == 0.9
    assert len(head.non_trainable_weights) == 0  # thresholds are constants, not weights

    path = str(tmp_path / "m")
    model.save(path, save_format="tf")
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(h)["watch_time"].numpy(), res["watch_time"].numpy(), rtol=1e-6)
    assert loaded.get_layer("cread").thresholds == t
    raw = tf.saved_model.load(path)  # plain TF, no Python classes
    np.testing.assert_allclose(raw(tf.constant(h))["watch_time"].numpy(),
                               res["watch_time"].numpy(), rtol=1e-6)


def test_config_round_trip_gives_same_outputs():
    h = np.random.default_rng(5).normal(size=(3, 8)).astype(np.float32)
    head = cread.CreadHead([1.0, 3.0, 10.0], restoration="riemann", phi0=0.8, name="cread")
    assert_config_round_trip(head, lambda layer: layer(h))
