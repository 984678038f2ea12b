"""DIN target attention: masking, permutation equivariance, empty histories, numbers."""
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.layers._utils import masked_softmax
from models.layers.target_attention import TargetAttention
from tests.models.layers.round_trip import assert_config_round_trip

B, L, D = 3, 5, 4


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(B, D)).astype(np.float32)
    keys = rng.normal(size=(B, L, D)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
    return query, keys, mask


def test_matches_numpy_activation_unit():
    query, keys, mask = inputs()
    att = TargetAttention(hidden_units=(6, 3), activation="sigmoid")
    out, w = att(query, keys, mask=mask, return_attention_scores=True)
    (k0, b0), (k1, b1), (k2, b2) = [(d.kernel.numpy(), d.bias.numpy())
                                    for d in att.hidden_layers + [att.score_layer]]
    sig = lambda z: 1 / (1 + np.exp(-z))
    t = np.broadcast_to(query[:, None], keys.shape)
    feats = np.concatenate([keys, t, keys - t, keys * t], -1)
    scores = (sig(sig(feats @ k0 + b0) @ k1 + b1) @ k2 + b2)[..., 0]
    expected_w = np.where(mask, scores, 0.0)  # no softmax (paper)
    np.testing.assert_allclose(w.numpy(), expected_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), np.einsum("bl,bld->bd", expected_w, keys),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("activation,training", [("dice", True), ("dice", False),
                                                 ("prelu", None), ("sigmoid", None)])
def test_padded_keys_never_change_the_output(activation, training):
    query, keys, mask = inputs()
    att = TargetAttention(hidden_units=(8, 4), activation=activation)
    out, w = att(query, keys, mask=mask, training=training, return_attention_scores=True)
    garbage = keys.copy()
    garbage[~mask] = np.random.default_rng(9).normal(scale=100.0, size=(~mask).sum() * D).reshape(-1, D)
    out2, w2 = att(query, garbage, mask=mask, training=training, return_attention_scores=True)
    np.testing.assert_allclose(out2.numpy(), out.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w2.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    assert np.all(w.numpy()[~mask] == 0.0)


@pytest.mark.parametrize("use_softmax", [False, True])
def test_permuting_history_permutes_weights_and_keeps_output(use_softmax):
    query, keys, mask = inputs(1)
    att = TargetAttention(hidden_units=(8,), activation="dice", use_softmax=use_softmax)
    out, w = att(query, keys, mask=mask, training=False, return_attention_scores=True)
    perm = np.array([3, 0, 4, 2, 1])
    out_p, w_p = att(query, keys[:, perm], mask=mask[:, perm], training=False,
                     return_attention_scores=True)
    np.testing.assert_allclose(w_p.numpy(), w.numpy()[:, perm], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out_p.numpy(), out.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("use_softmax", [False, True])
@pytest.mark.parametrize("training", [True, False])
def test_empty_history_gives_zero_vector(use_softmax, training):
    query, keys, _ = inputs(2)
    att = TargetAttention(hidden_units=(8, 4), use_softmax=use_softmax)
    out, w = att(query, keys, mask=np.zeros((B, L), bool), training=training,
                 return_attention_scores=True)
    np.testing.assert_array_equal(out.numpy(), np.zeros((B, D)))
    np.testing.assert_array_equal(w.numpy(), np.zeros((B, L)))
    out0, w0 = att(query, np.zeros((B, 0, D), np.float32), mask=np.zeros((B, 0), bool),
                   training=training, return_attention_scores=True)
    assert out0.shape == (B, D) and w0.shape == (B, 0)
    np.testing.assert_array_equal(out0.numpy(), np.zeros((B, D)))
    assert all(np.isfinite(v.numpy()).all() for v in att.weights)


def test_softmax_weights_sum_to_one_over_valid_items():
    query, keys, mask = inputs(3)
    att = TargetAttention(hidden_units=(8,), activation="prelu", use_softmax=True)
    out, w = att(query, keys, mask=mask.astype(np.float32), return_attention_scores=True)
    w = w.numpy()
    np.testing.assert_allclose(w.sum(-1), np.ones(B), rtol=1e-6)
    assert np.all(w[~mask] == 0.0) and np.all(w[mask] > 0.0)
    np.testing.assert_allclose(out.numpy(), np.einsum("bl,bld->bd", w, keys), rtol=1e-5, atol=1e-6)


def test_no_mask_means_all_items_valid():
    query, keys, _ = inputs(4)
    att = TargetAttention(hidden_units=(4,), activation="sigmoid")
    # The masked form scores the valid pairs gathered out of the batch (other MatMul shapes),
    # so the two agree to float rounding (one CI-like run: 1 ulp apart), not bit for bit.
    np.testing.assert_allclose(att(query, keys).numpy(),
                               att(query, keys, mask=np.ones((B, L), bool)).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kwargs", [
    {"hidden_units": (8, 0)},
    {"hidden_units": 8},
    {"activation": "swish"},
    {"activation": None},
])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        TargetAttention(**kwargs)


def test_dimension_mismatch_is_rejected():
    with pytest.raises(ValueError):
        TargetAttention()(tf.zeros([2, 3]), tf.zeros([2, 4, 5]))


def test_get_config_round_trip():
    att = TargetAttention(hidden_units=(16, 8), activation="prelu", use_softmax=True, name="ta")
    clone = TargetAttention.from_config(att.get_config())
    assert clone.get_config() == att.get_config()


def test_saved_model_round_trip(tmp_path):
    query_in = keras.Input((D,), name="query")
    keys_in = keras.Input((L, D), name="keys")
    mask_in = keras.Input((L,), dtype=tf.bool, name="mask")
    out, w = TargetAttention(hidden_units=(8, 4))(query_in, keys_in, mask=mask_in,
                                                  return_attention_scores=True)
    model = keras.Model([query_in, keys_in, mask_in], [out, w])
    query, keys, mask = inputs(5)
    model([query, keys, mask], training=True)  # move Dice's moving averages
    expected = [t.numpy() for t in model([query, keys, mask], training=False)]
    model.save(str(tmp_path / "m"), save_format="tf")
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    got = loaded([tf.constant(query), tf.constant(keys), tf.constant(mask)], training=False)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("activation,use_softmax", [("dice", False), ("prelu", True)])
def test_config_round_trip_gives_same_outputs(activation, use_softmax):
    query, keys, mask = inputs(6)
    att = TargetAttention(hidden_units=(8, 4), activation=activation, use_softmax=use_softmax, name="ta")
    assert_config_round_trip(att, lambda layer: layer(query, keys, mask=mask, training=False,
                                                      return_attention_scores=True))


def test_scaled_dot_matches_numpy_and_masks():
    query, keys, mask = inputs(5)
    att = TargetAttention(scoring="scaled_dot")
    out, w = att(query, keys, mask=mask, return_attention_scores=True)
    logits = np.einsum("bd,ble,de->bl", query, keys, att.key_kernel.numpy()) / np.sqrt(D)
    e = np.where(mask, np.exp(logits - np.where(mask, logits, -np.inf).max(-1, keepdims=True)), 0.0)
    w_np = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(w.numpy(), w_np, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), np.einsum("bl,bld->bd", w_np, keys), rtol=1e-5, atol=1e-5)
    garbage = keys.copy()
    garbage[~mask] = 50.0
    np.testing.assert_allclose(att(query, garbage, mask=mask).numpy(), out.numpy(), rtol=1e-5, atol=1e-5)
    perm = np.array([3, 0, 4, 2, 1])
    np.testing.assert_allclose(att(query, keys[:, perm], mask=mask[:, perm]).numpy(), out.numpy(),
                               rtol=1e-5, atol=1e-5)
    empty = att(query, keys, mask=np.zeros((B, L), bool))
    np.testing.assert_array_equal(empty.numpy(), np.zeros((B, D)))
    assert_config_round_trip(TargetAttention(scoring="scaled_dot", name="sdp"),
                             lambda layer: layer(query, keys, mask=mask))
    with pytest.raises(ValueError, match="scoring"):
        TargetAttention(scoring="dot")


def _brute_force_scores(att, query, keys, mask):
    """Scores of the concatenated form MLP([h, t, h - t, h ∘ t]) (sigmoid activations)."""
    (k0, b0), (k1, b1), (k2, b2) = [(d.kernel.numpy(), d.bias.numpy())
                                    for d in att.hidden_layers + [att.score_layer]]
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    t = np.broadcast_to(query[:, None], keys.shape)
    feats = np.concatenate([keys, t, keys - t, keys * t], -1).astype(np.float64)
    return np.where(mask, (sig(sig(feats @ k0 + b0) @ k1 + b1) @ k2 + b2)[..., 0], 0.0)


@pytest.mark.parametrize("batch", [1, 4])
def test_one_user_history_against_many_targets_equals_the_concatenated_form(batch):
    """Keys with 1 row (serving_rank: one user's history, B candidates) take the folded
    one-MatMul path; it equals the brute-force concatenated form on the tiled keys, and
    the concatenated path of the same layer (same variables) on tiled inputs (Dice at
    inference)."""
    rng = np.random.default_rng(7)
    query = rng.normal(size=(batch, D)).astype(np.float32)
    keys1 = rng.normal(size=(1, L, D)).astype(np.float32)
    mask1 = np.array([[1, 1, 0, 1, 0]], bool)
    keys, mask = np.repeat(keys1, batch, 0), np.repeat(mask1, batch, 0)
    att = TargetAttention(hidden_units=(6, 3), activation="sigmoid")
    out, w = att(query, keys1, mask=mask1, return_attention_scores=True)
    want_w = _brute_force_scores(att, query, keys, mask)
    np.testing.assert_allclose(w.numpy(), want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), np.einsum("bl,bld->bd", want_w, keys), rtol=1e-5, atol=1e-5)

    dice = TargetAttention(hidden_units=(8, 4), activation="dice", use_softmax=True)
    dice(query, keys, mask=mask, training=True)  # moving statistics away from 0 / 1
    out_tiled = dice(query, keys, mask=mask, training=False)
    out_one = dice(query, keys1, mask=mask1, training=False)
    assert out_one.shape == (batch, D)
    np.testing.assert_allclose(out_one.numpy(), out_tiled.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("key_rows", [2, 1])
def test_both_forms_have_the_concatenated_variables(key_rows):
    """Built first by either form (keys with N rows or one user's), the layer has the
    concatenated Dense([4D] -> U) variables, so checkpoints load into both forms."""
    att = TargetAttention(hidden_units=(6, 3), name="target_attention")
    att(tf.zeros([2, D]), tf.zeros([key_rows, L, D]))
    shapes = {v.name: tuple(v.shape) for v in att.weights}
    assert shapes["target_attention/dense_0/kernel:0"] == (4 * D, 6)
    assert shapes["target_attention/dense_0/bias:0"] == (6,)
    assert shapes["target_attention/score/kernel:0"] == (3, 1)


def _op_types(att, key_rows):
    fn = tf.function(lambda q, k, m: att(q, k, mask=m, training=False), input_signature=[
        tf.TensorSpec([None, D]), tf.TensorSpec([key_rows, L, D]), tf.TensorSpec([key_rows, L], tf.bool)])
    return {op.type for op in fn.get_concrete_function().graph.get_operations()}


def test_the_form_is_chosen_when_tracing():
    """Keys with unknown rows (training, serving_default): the concatenated form, no branch,
    no broadcast of the keys; keys with a static batch of 1 (serving_rank): the folded
    MatMul, no concatenation of the pair features."""
    att = TargetAttention(hidden_units=(6, 3), activation="dice")
    n_rows, one_row = _op_types(att, None), _op_types(att, 1)
    assert "ConcatV2" in n_rows and not {"If", "StatelessIf"} & n_rows
    assert "ConcatV2" not in one_row and not {"If", "StatelessIf"} & one_row


@pytest.mark.parametrize("scoring,use_softmax", [("mlp", True), ("mlp", False), ("scaled_dot", True)])
@pytest.mark.parametrize("mask1", [[[1, 0, 1, 1, 0]], [[0, 0, 0, 0, 0]], None], ids=["some", "empty", "none"])
def test_one_user_scores_only_valid_items_and_equals_the_tiled_call(scoring, use_softmax, mask1):
    """The one-user path scores the K valid items only and scatters the weights back to
    the L positions: same output and weights as the N-row path on tiled inputs, also for
    an empty history (zeros) and without a mask."""
    rng = np.random.default_rng(11)
    query = rng.normal(size=(4, D)).astype(np.float32)
    keys1 = rng.normal(size=(1, L, D)).astype(np.float32)
    att = TargetAttention(hidden_units=(6, 3), activation="prelu", use_softmax=use_softmax,
                          scoring=scoring)
    m1 = None if mask1 is None else np.array(mask1, bool)
    tiled_mask = None if m1 is None else np.repeat(m1, 4, 0)
    want_out, want_w = att(query, np.repeat(keys1, 4, 0), mask=tiled_mask, return_attention_scores=True)
    out, w = att(query, keys1, mask=m1, return_attention_scores=True)
    np.testing.assert_allclose(w.numpy(), want_w.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), want_out.numpy(), rtol=1e-5, atol=1e-6)
    if mask1 is not None and not np.any(mask1):
        assert not np.any(out.numpy()) and not np.any(w.numpy())
    np.testing.assert_allclose(att(query, keys1, mask=m1).numpy(), out.numpy(), rtol=1e-6, atol=1e-7)


_EMPTY_HISTORY_SCRIPT = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np, tensorflow as tf
from models.layers._utils import masked_softmax
from models.layers.target_attention import TargetAttention
att = TargetAttention(hidden_units=(8, 4), activation="dice", use_softmax={softmax}, scoring="{scoring}")
query = tf.constant(np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32))
rows = {rows}
call = tf.function(lambda q, k, m: att(q, k, mask=m, training={training}, return_attention_scores=True),
                   input_signature=[tf.TensorSpec([None, 6]), tf.TensorSpec([rows, 7, 6]),
                                    tf.TensorSpec([rows, 7], tf.bool)])
out, w = call(query, tf.zeros([max(rows or 5, 1), 7, 6]), tf.zeros([max(rows or 5, 1), 7], tf.bool))
assert out.shape == (5, 6) and w.shape == (5, 7), (out.shape, w.shape)
assert not np.any(out.numpy()) and not np.any(w.numpy())
print("ok")
"""


@pytest.mark.parametrize("scoring,use_softmax", [("mlp", False), ("mlp", True), ("scaled_dot", True)])
@pytest.mark.parametrize("rows,training", [(1, False), (None, False), (None, True)],
                         ids=["one-user", "n-rows", "n-rows-training"])
def test_an_empty_history_runs_in_a_graph(scoring, use_softmax, rows, training):
    """Users without a valid history item, traced as serving_rank (one user) and as
    serving_default / training (N rows: no valid pair in the whole batch) run them: zero
    output and weights. With K = 0 items the MLP used to get zero-size inputs, on which
    oneDNN's fused MatMul aborts the process (dnnl::error), so this runs in a subprocess
    and checks its exit status."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.run([sys.executable, "-c", _EMPTY_HISTORY_SCRIPT.format(scoring=scoring, softmax=use_softmax,
                                                                                         rows=rows, training=training)],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=root))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


@pytest.mark.parametrize("use_softmax", [False, True])
def test_valid_pairs_only_equal_scoring_every_pair(use_softmax):
    """The N-row path runs the activation unit on the valid (row, item) pairs only; the
    paper's form scores all B·L pairs (padding kept out of Dice's statistics) and masks
    them. Same weights, output, gradients and Dice moving averages, in training."""
    rng = np.random.default_rng(5)
    query = tf.constant(rng.normal(size=(B, D)).astype(np.float32))
    keys = tf.constant(rng.normal(size=(B, L, D)).astype(np.float32))
    _, _, mask = inputs()
    fast = TargetAttention(hidden_units=(6, 3), activation="dice", use_softmax=use_softmax)
    every = TargetAttention(hidden_units=(6, 3), activation="dice", use_softmax=use_softmax)
    fast(query, keys, mask=mask, training=False)
    every(query, keys, mask=mask, training=False)
    every.set_weights(fast.get_weights())

    def every_pair(q, k):
        hidden = every._first_dense_concatenated(q, k, D)
        scores = every._mlp_scores(hidden, tf.reshape(mask, [-1]), B, L, True)
        w = (masked_softmax(scores, mask) if use_softmax else tf.where(mask, scores, tf.zeros_like(scores)))
        return tf.matmul(w[:, tf.newaxis, :], k)[:, 0, :], w

    with tf.GradientTape(persistent=True) as tape:
        tape.watch([query, keys])
        out, w = fast(query, keys, mask=mask, training=True, return_attention_scores=True)
        want_out, want_w = every_pair(query, keys)
        loss, want_loss = tf.reduce_sum(out * out), tf.reduce_sum(want_out * want_out)
    np.testing.assert_allclose(w.numpy(), want_w.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), want_out.numpy(), rtol=1e-5, atol=1e-6)
    for got, want in zip(tape.gradient(loss, [query, keys] + fast.trainable_variables),
                         tape.gradient(want_loss, [query, keys] + every.trainable_variables)):
        np.testing.assert_allclose(tf.convert_to_tensor(got).numpy(), tf.convert_to_tensor(want).numpy(),
                                   rtol=1e-4, atol=1e-6)
    for got, want in zip(fast.non_trainable_weights, every.non_trainable_weights):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
