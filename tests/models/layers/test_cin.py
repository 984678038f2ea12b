"""CIN (xDeepFM eq. 6-7) against a naive triple loop."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.layers.cin import CIN
from tests.models.layers.round_trip import assert_config_round_trip


def naive_cin(x0, kernels, layer_sizes, split_half, biases=None):
    """Eq. 6 literally: X^k_{h,*} = sum_i sum_j W^{k,h}_{ij} (X^{k-1}_{i,*} o X^0_{j,*})."""
    batch, m, dim = x0.shape
    outputs = []
    for b in range(batch):
        hidden, pooled = x0[b], []
        for k, size in enumerate(layer_sizes):
            w = kernels[k]  # [H_{k-1}, m, H_k]
            xk = np.zeros((size, dim))
            for h in range(size):
                for i in range(hidden.shape[0]):
                    for j in range(m):
                        xk[h] += w[i, j, h] * (hidden[i] * x0[b, j])
                if biases is not None:
                    xk[h] += biases[k][h]
            if split_half and k < len(layer_sizes) - 1:
                hidden, direct = xk[: size // 2], xk[size // 2:]
            else:
                hidden, direct = xk, xk
            pooled.append(direct.sum(axis=1))  # eq. 7
        outputs.append(np.concatenate(pooled))
    return np.stack(outputs)


@pytest.mark.parametrize("split_half,use_bias", [(False, False), (True, False), (True, True)])
def test_matches_naive_equation_6(split_half, use_bias):
    layer_sizes = (4, 6, 3)
    x0 = np.random.default_rng(0).normal(size=(3, 5, 4)).astype(np.float32)
    cin = CIN(layer_sizes, split_half=split_half, use_bias=use_bias,
              bias_initializer="random_normal")
    out = cin(x0).numpy()
    expected_dim = (4 // 2 + 6 // 2 + 3) if split_half else sum(layer_sizes)
    assert out.shape == (3, expected_dim) == (3, cin.output_dim)
    kernels = [k.numpy() for k in cin.kernels]
    biases = [b.numpy() for b in cin.biases] if use_bias else None
    np.testing.assert_allclose(out, naive_cin(x0, kernels, layer_sizes, split_half, biases),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rank,split_half,use_bias", [(1, False, False), (3, True, False), (2, True, True)])
def test_low_rank_matches_naive_equation_6_with_its_product_kernels(rank, split_half, use_bias):
    """Rank r: eq. 6 with W^{k,h}_{ij} = sum_rho U_{i,h rho} V_{j,h rho}, built by hand."""
    layer_sizes = (4, 6, 3)
    x0 = np.random.default_rng(4).normal(size=(3, 5, 4)).astype(np.float32)
    cin = CIN(layer_sizes, split_half=split_half, use_bias=use_bias, rank=rank,
              bias_initializer="random_normal")
    out = cin(x0).numpy()
    assert out.shape == (3, cin.output_dim) and not cin.kernels
    kernels = []
    for u, v, size in zip(cin.u, cin.v, layer_sizes):
        u, v = u.numpy(), v.numpy()
        assert u.shape[1] == v.shape[1] == size * rank and v.shape[0] == 5
        w = np.zeros((u.shape[0], 5, size))
        for i in range(u.shape[0]):
            for j in range(5):
                for h in range(size):
                    w[i, j, h] = sum(u[i, h * rank + r] * v[j, h * rank + r] for r in range(rank))
        kernels.append(w)
    biases = [b.numpy() for b in cin.biases] if use_bias else None
    expected = naive_cin(x0, kernels, layer_sizes, split_half, biases)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    for got, w in zip(cin.full_kernels(), kernels):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-5, atol=1e-6)


def test_full_cin_with_a_rank_r_kernel_equals_the_low_rank_cin():
    x0 = np.random.default_rng(5).normal(size=(4, 6, 3)).astype(np.float32)
    low = CIN((4, 2), split_half=True, rank=2)
    full = CIN((4, 2), split_half=True)
    low.build(x0.shape)
    full.build(x0.shape)
    full.set_weights([k.numpy() for k in low.full_kernels()])
    np.testing.assert_allclose(low(x0).numpy(), full(x0).numpy(), rtol=1e-5, atol=1e-5)


def test_parameter_count_matches_paper_formula():
    m, sizes = 7, (10, 8, 6)
    # §3.2.1: sum_k H_k * H_{k-1} * m with H_0 = m
    cin = CIN(sizes, split_half=False)
    cin.build((None, m, 4))
    h_prev = (m,) + sizes[:-1]
    assert cin.count_params() == sum(h * hp * m for h, hp in zip(sizes, h_prev))
    # with bias: + sum_k H_k
    cin = CIN(sizes, split_half=False, use_bias=True)
    cin.build((None, m, 4))
    assert cin.count_params() == sum(h * hp * m for h, hp in zip(sizes, h_prev)) + sum(sizes)
    # split_half: layer k is fed H_{k-1} / 2 maps
    cin = CIN(sizes, split_half=True)
    cin.build((None, m, 4))
    fed = (m, 10 // 2, 8 // 2)
    assert cin.count_params() == sum(h * f * m for h, f in zip(sizes, fed))
    # rank r: sum_k (H_{k-1} + m) * H_k * r
    cin = CIN(sizes, split_half=True, rank=3)
    cin.build((None, m, 4))
    assert cin.count_params() == sum((f + m) * h * 3 for h, f in zip(sizes, fed))


def test_kernels_of_equal_shape_are_initialised_independently():
    cin = CIN((4, 4), split_half=False)
    cin.build((None, 4, 3))  # both kernels are [4, 4, 4]
    assert not np.allclose(cin.kernels[0].numpy(), cin.kernels[1].numpy())


def test_identity_activation_is_the_default_and_activation_applies():
    x0 = np.random.default_rng(1).normal(size=(2, 3, 4)).astype(np.float32)
    plain = CIN((4,), split_half=False)
    relu = CIN((4,), split_half=False, activation="relu")
    plain.build(x0.shape)
    relu.build(x0.shape)
    relu.set_weights(plain.get_weights())
    xk = np.einsum("bid,bjd,ijh->bhd", x0, x0, plain.kernels[0].numpy())
    np.testing.assert_allclose(relu(x0).numpy(), np.maximum(xk, 0).sum(-1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs", [
    {"layer_sizes": ()},
    {"layer_sizes": (4, 0)},
    {"layer_sizes": (4, 2.5)},
    {"layer_sizes": 8},
    {"layer_sizes": (5, 4), "split_half": True},
    {"layer_sizes": (4,), "rank": 0},
    {"layer_sizes": (4,), "rank": 1.5},
    {"layer_sizes": (4,), "rank": True},
])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        CIN(**kwargs)


def test_odd_last_layer_is_fine_with_split_half_and_rank_is_checked():
    assert CIN((4, 5), split_half=True).output_dim == 7
    with pytest.raises(ValueError):
        CIN((4,))(tf.zeros([2, 3]))


@pytest.mark.parametrize("rank", [None, 2])
def test_get_config_round_trip(rank):
    cin = CIN((6, 4), split_half=True, activation="relu", use_bias=True, rank=rank, name="cin")
    clone = CIN.from_config(cin.get_config())
    assert clone.get_config() == cin.get_config() and clone.rank == rank


@pytest.mark.parametrize("rank", [None, 2])
def test_saved_model_round_trip(tmp_path, rank):
    inputs = keras.Input((5, 4))
    model = keras.Model(inputs, CIN((4, 3), use_bias=True, rank=rank)(inputs))
    x = np.random.default_rng(2).normal(size=(3, 5, 4)).astype(np.float32)
    expected = model(x).numpy()
    model.save(str(tmp_path / "m"), save_format="tf")
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    np.testing.assert_allclose(loaded(tf.constant(x), training=False).numpy(), expected,
                               rtol=1e-6, atol=1e-6)


def test_config_round_trip_gives_same_outputs():
    x0 = np.random.default_rng(3).normal(size=(2, 5, 4)).astype(np.float32)
    cin = CIN((4, 3), split_half=True, activation="relu", use_bias=True,
              bias_initializer="random_normal", name="cin")
    assert_config_round_trip(cin, lambda layer: layer(x0))
