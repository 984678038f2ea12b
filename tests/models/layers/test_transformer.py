"""BST transformer block (+ Shaw relative positions) against a naive loop; the
time-gap embedding it is fed with: test_time_gap.py."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.layers.time_gap import TimeGapBucketEmbedding
from models.layers.transformer import TransformerEncoderBlock
from tests.models.layers.round_trip import assert_config_round_trip

B, S, D, H, DK = 2, 5, 6, 2, 3
MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)


def sequence(seed=0):
    return np.random.default_rng(seed).normal(size=(B, S, D)).astype(np.float32)


def block(relative=False, ffn_activation="gelu", **kwargs):
    layer = TransformerEncoderBlock(num_heads=H, key_dim=DK, ffn_units=7, dropout_rate=0.0,
                                    ffn_activation=ffn_activation,
                                    relative_positions=relative, max_relative_position=2,
                                    relative_initializer="random_normal", **kwargs)
    layer.build((None, S, D))
    return layer


def weights_by_name(layer):
    """Weight name without the ':0' suffix and the block's own name scope."""
    names = [w.name.split(":")[0] for w in layer.weights]
    names = [n[len(layer.name) + 1:] if n.startswith(layer.name + "/") else n for n in names]
    assert len(set(names)) == len(names), names
    return dict(zip(names, layer.weights))


def naive_block(layer, x, mask):
    """Loops over batch, head, i, j: Vaswani eq. 1 with Shaw et al. eq. 3-4 edges."""
    w = {k: v.numpy() for k, v in weights_by_name(layer).items()}
    K = layer.max_relative_position

    def layer_norm(y, gamma, beta, eps=1e-6):
        mu, var = y.mean(-1, keepdims=True), y.var(-1, keepdims=True)
        return (y - mu) / np.sqrt(var + eps) * gamma + beta

    out = np.zeros_like(x)
    for b in range(x.shape[0]):
        e = x[b]
        attended = np.zeros_like(e)
        for h in range(H):
            q = e @ w["query_kernel"][:, h] + w["query_bias"][h]
            k = e @ w["key_kernel"][:, h] + w["key_bias"][h]
            v = e @ w["value_kernel"][:, h] + w["value_bias"][h]
            z = np.zeros_like(v)
            for i in range(S):
                logits, values = [], []
                for j in range(S):
                    a_k, a_v = 0.0, 0.0
                    if layer.relative_positions:
                        idx = int(np.clip(j - i, -K, K)) + K
                        a_k = w["relative_key_embeddings"][idx]
                        a_v = w["relative_value_embeddings"][idx]
                    logits.append(q[i] @ (k[j] + a_k) / np.sqrt(DK))
                    values.append(v[j] + a_v)
                valid = mask[b]
                if valid.any():
                    logits = np.array(logits)
                    p = np.exp(logits - logits[valid].max()) * valid
                    p /= p.sum()
                    z[i] = sum(p[j] * values[j] for j in range(S))
            attended += z @ w["output_kernel"][h]
        attended += w["output_bias"]
        s1 = layer_norm(e + attended, w["attention_layer_norm/gamma"], w["attention_layer_norm/beta"])
        hidden = s1 @ w["ffn_kernel_1"] + w["ffn_bias_1"]
        hidden = np.where(hidden > 0, hidden, 0.2 * hidden)  # leaky_relu, slope 0.2
        ffn = hidden @ w["ffn_kernel_2"] + w["ffn_bias_2"]
        out[b] = layer_norm(s1 + ffn, w["ffn_layer_norm/gamma"], w["ffn_layer_norm/beta"])
    return out


@pytest.mark.parametrize("relative", [False, True])
def test_matches_naive_implementation(relative):
    layer = block(relative, ffn_activation="leaky_relu")
    for name, var in weights_by_name(layer).items():  # non-trivial biases and LayerNorm
        if "bias" in name or "beta" in name or "gamma" in name:
            var.assign(var + np.random.default_rng(len(name)).normal(size=var.shape) * 0.3)
    x = sequence()
    out, scores = layer(x, mask=MASK, return_attention_scores=True)
    assert out.shape == (B, S, D) and scores.shape == (B, H, S, S)
    np.testing.assert_allclose(out.numpy(), naive_block(layer, x, MASK), rtol=1e-4, atol=1e-4)
    scores = scores.numpy()
    assert np.all(scores[0][..., ~MASK[0]] == 0.0)  # padded keys get no weight
    np.testing.assert_allclose(scores.sum(-1), np.ones((B, H, S)), rtol=1e-5)


@pytest.mark.parametrize("relative", [False, True])
def test_masked_positions_never_leak_into_unmasked_outputs(relative):
    layer = block(relative)
    x = sequence(1)
    changed = x.copy()
    changed[~MASK] = np.random.default_rng(7).normal(scale=50.0, size=((~MASK).sum(), D))
    out = layer(x, mask=MASK).numpy()
    out_changed = layer(changed, mask=MASK.astype(np.int32)).numpy()
    np.testing.assert_allclose(out_changed[MASK], out[MASK], rtol=1e-5, atol=1e-5)
    assert np.abs(out_changed[~MASK] - out[~MASK]).max() > 1e-3  # the test can fail


def test_relative_with_zero_edge_vectors_equals_plain_block():
    plain, relative = block(False), block(True)
    rel_weights = weights_by_name(relative)
    for name, var in weights_by_name(plain).items():
        rel_weights[name].assign(var)
    x = sequence(2)
    assert np.abs(relative(x, mask=MASK).numpy() - plain(x, mask=MASK).numpy()).max() > 1e-4
    relative.relative_key_embeddings.assign(tf.zeros_like(relative.relative_key_embeddings))
    relative.relative_value_embeddings.assign(tf.zeros_like(relative.relative_value_embeddings))
    np.testing.assert_allclose(relative(x, mask=MASK).numpy(), plain(x, mask=MASK).numpy(),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("relative", [False, True])
def test_padding_only_rows_are_finite(relative):
    layer = block(relative)
    mask = MASK.copy()
    mask[0] = False
    out, scores = layer(sequence(3), mask=mask, training=True, return_attention_scores=True)
    assert np.isfinite(out.numpy()).all()
    np.testing.assert_array_equal(scores.numpy()[0], 0.0)
    grads = None
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(sequence(3), mask=mask, training=True))
    grads = tape.gradient(loss, layer.trainable_weights)
    assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)


def test_projection_kernels_are_initialised_independently():
    layer = block(True)
    q, k, v = (layer.query_kernel.numpy(), layer.key_kernel.numpy(), layer.value_kernel.numpy())
    assert not np.allclose(q, k) and not np.allclose(k, v)
    assert not np.allclose(layer.relative_key_embeddings.numpy(),
                           layer.relative_value_embeddings.numpy())


def test_dropout_only_in_training():
    layer = TransformerEncoderBlock(num_heads=H, key_dim=DK, dropout_rate=0.5)
    x = sequence(4)
    np.testing.assert_array_equal(layer(x, training=False).numpy(), layer(x).numpy())
    assert np.abs(layer(x, training=True).numpy() - layer(x, training=False).numpy()).max() > 1e-3


@pytest.mark.parametrize("kwargs", [
    {"num_heads": 0}, {"key_dim": 2.5}, {"ffn_units": 0}, {"ffn_activation": "tanh"},
    {"dropout_rate": 1.0}, {"max_relative_position": 0}, {"layer_norm_epsilon": 0.0},
])
def test_invalid_arguments(kwargs):
    args = {"num_heads": 2, "key_dim": 4}
    args.update(kwargs)
    with pytest.raises(ValueError):
        TransformerEncoderBlock(**args)


def test_get_config_round_trips():
    layer = TransformerEncoderBlock(num_heads=4, key_dim=8, ffn_units=32,
                                    relative_positions=True, max_relative_position=4, name="t")
    assert TransformerEncoderBlock.from_config(layer.get_config()).get_config() == layer.get_config()


@pytest.mark.parametrize("relative", [False, True])
def test_config_round_trip_gives_same_outputs(relative):
    x = sequence(6)
    assert_config_round_trip(block(relative), lambda layer: layer(x, mask=MASK, return_attention_scores=True))


def test_saved_model_round_trip(tmp_path):
    items = keras.Input((S, D), name="items")
    gaps = keras.Input((S,), name="gaps")
    mask = keras.Input((S,), dtype=tf.bool, name="mask")
    seq = items + TimeGapBucketEmbedding(D, boundaries=[1.0, 60.0])(gaps)
    out = TransformerEncoderBlock(H, DK, relative_positions=True, max_relative_position=2)(
        seq, mask=mask)
    model = keras.Model([items, gaps, mask], out)
    x, g = sequence(5), np.array([[0, 0.5, 30, 100, 0]] * B, np.float32)
    expected = model([x, g, MASK], training=False).numpy()
    model.save(str(tmp_path / "m"), save_format="tf")
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    got = loaded([tf.constant(x), tf.constant(g), tf.constant(MASK)], training=False).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
