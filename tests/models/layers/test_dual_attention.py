"""Dual attention: numbers vs NumPy, scene split, padding, permutation, round trip."""
import numpy as np
import pytest
import tensorflow as tf

from models.layers.dual_attention import DualAttention
from tests.models.layers.round_trip import assert_config_round_trip

B, L, D, P = 3, 6, 4, 5


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    target = rng.normal(size=(B, D)).astype(np.float32)
    history = rng.normal(size=(B, L, D)).astype(np.float32)
    hist_scene = np.array([[1, 2, 1, 2, 2, 0], [1, 1, 1, 1, 0, 0], [2, 1, 2, 1, 2, 1]], np.int64)
    scene = np.array([1, 1, 2], np.int64)
    profile = rng.normal(size=(B, P)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    return target, history, hist_scene, scene, profile, mask


def _np_unit(att, q, keys, mask):
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    (k0, b0), (k1, b1) = [(d.kernel.numpy(), d.bias.numpy())
                          for d in att.hidden_layers + [att.score_layer]]
    t = np.broadcast_to(q[:, None], keys.shape)
    s = (sig(np.concatenate([keys, t, keys - t, keys * t], -1) @ k0 + b0) @ k1 + b1)[..., 0]
    w = np.where(mask, np.exp(s - np.where(mask, s, -np.inf).max(-1, keepdims=True, initial=-1e30)), 0)
    w = w / np.maximum(w.sum(-1, keepdims=True), 1e-30)
    return np.einsum("bl,bld->bd", w, keys), w


def test_matches_numpy_two_stage_equations():
    target, history, hs, scene, profile, mask = inputs()
    dual = DualAttention(hidden_units=(3,), activation="sigmoid")
    out, f, g = dual(target, history, hs, scene, profile, mask=mask, return_attention_scores=True)
    other = mask & (hs != scene[:, None])
    current = mask & (hs == scene[:, None])
    q1 = profile @ dual.intent_query.kernel.numpy() + dual.intent_query.bias.numpy()
    intent, f_np = _np_unit(dual.intent_attention, q1, history, other)
    q2 = (np.concatenate([intent, target], -1) @ dual.current_query.kernel.numpy()
          + dual.current_query.bias.numpy())
    value, g_np = _np_unit(dual.current_attention, q2, history, current)
    np.testing.assert_allclose(f.numpy(), f_np, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.numpy(), g_np, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), np.concatenate([value, intent], -1), rtol=1e-5, atol=1e-5)
    # each stage sums to 1 over its own items; row 1 has no other-scene item -> intent 0
    np.testing.assert_allclose(f.numpy().sum(-1), [1, 0, 1], atol=1e-6)
    np.testing.assert_allclose(g.numpy().sum(-1), [1, 1, 1], atol=1e-6)
    np.testing.assert_array_equal(out.numpy()[1, D:], np.zeros(D))
    assert np.all(f.numpy()[~other] == 0) and np.all(g.numpy()[~current] == 0)


@pytest.mark.parametrize("training", [True, False])
def test_padded_items_never_change_the_output(training):
    target, history, hs, scene, profile, mask = inputs(1)
    dual = DualAttention(hidden_units=(8,), activation="dice")
    out = dual(target, history, hs, scene, profile, mask=mask, training=training)
    garbage, hs2 = history.copy(), hs.copy()
    garbage[~mask] = 100.0
    hs2[~mask] = scene[np.nonzero(~mask)[0]]  # padding claiming the current scene
    out2 = dual(target, garbage, hs2, scene, profile, mask=mask, training=training)
    np.testing.assert_allclose(out2.numpy(), out.numpy(), rtol=1e-5, atol=1e-5)


def test_permuting_history_keeps_output():
    target, history, hs, scene, profile, mask = inputs(2)
    dual = DualAttention(hidden_units=(8,), activation="prelu")
    out, f, g = dual(target, history, hs, scene, profile, mask=mask, return_attention_scores=True)
    perm = np.array([4, 0, 5, 2, 1, 3])
    out_p, f_p, g_p = dual(target, history[:, perm], hs[:, perm], scene, profile, mask=mask[:, perm],
                           return_attention_scores=True)
    np.testing.assert_allclose(out_p.numpy(), out.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(f_p.numpy(), f.numpy()[:, perm], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_p.numpy(), g.numpy()[:, perm], rtol=1e-5, atol=1e-6)


def test_bad_arguments_and_config_round_trip():
    with pytest.raises(ValueError):
        DualAttention(hidden_units=(0,))
    with pytest.raises(ValueError):
        DualAttention(activation="swish")
    with pytest.raises(ValueError, match="dim"):
        DualAttention(hidden_units=(4,))(tf.zeros([2, 3]), tf.zeros([2, 4, 5]), tf.zeros([2, 4], tf.int64),
                                         tf.zeros([2], tf.int64), tf.zeros([2, 2]))
    target, history, hs, scene, profile, mask = inputs(3)
    assert_config_round_trip(DualAttention(hidden_units=(4, 2), activation="sigmoid", name="dual"),
                             lambda layer: layer(target, history, hs, scene, profile, mask=mask))
