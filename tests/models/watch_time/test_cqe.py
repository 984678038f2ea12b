"""CQE head (Lin et al. 2024): monotone quantiles, pinball loss + gradients, CSE/DQC/CDE."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.watch_time import cqe
from tests.models.layers.round_trip import assert_config_round_trip


def _inv_softplus(v):
    return np.log(np.expm1(v))


def _fixed_head(values, **kw):
    """Head whose quantiles are exactly `values` for any input (zero kernels)."""
    values = np.asarray(values, dtype=np.float64)
    head = cqe.CqeHead(num_quantiles=values.size, **kw)
    head(tf.zeros([1, 3]))
    head.base.set_weights([np.zeros((3, 1)), _inv_softplus(values[:1])])
    head.increments.set_weights([np.zeros((3, values.size - 1)), _inv_softplus(np.diff(values))])
    return head


def test_quantile_levels():
    np.testing.assert_allclose(cqe.quantile_levels(4), [.2, .4, .6, .8])
    assert cqe.quantile_levels().size == 100 and cqe.quantile_levels()[-1] == pytest.approx(100 / 101)


@pytest.mark.parametrize("increment", ["softplus", "relu"])
def test_quantiles_monotone_nonnegative_for_any_input(increment):
    rng = np.random.default_rng(0)
    head = cqe.CqeHead(num_quantiles=100, increment=increment)
    head(tf.zeros([1, 8]))
    for trial in range(30):
        scale = 10.0 ** rng.integers(-2, 5)  # weights from 1e-2 to 1e4: saturating regimes
        head.base.set_weights([rng.normal(0, scale, (8, 1)), rng.normal(0, scale, 1)])
        head.increments.set_weights([rng.normal(0, scale, (8, 99)), rng.normal(0, scale, 99)])
        h = rng.normal(0, 10.0 ** rng.integers(-1, 3), (64, 8)).astype(np.float32)
        out = head(h)
        q = out["quantiles"].numpy()
        assert q.shape == (64, 100) and np.all(np.isfinite(q))
        assert np.all(q >= 0) and np.all(np.diff(q, axis=1) >= 0), (trial, scale)
        assert np.all(out["cse"].numpy() <= out["dqc"].numpy() + 1e-3 * (1 + np.abs(q).max()))


def test_pinball_loss_value_and_gradients_by_hand():
    taus = [0.25, 0.5, 0.75]
    y = tf.constant([2.0, 0.0])
    q = tf.Variable([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    with tf.GradientTape() as tape:
        loss = cqe.pinball_loss(y, q, taus)
    # row 1: u = (1, 0, -1) -> .25 + 0 + .25 ; row 2: u = (-1, -2, -3) -> .75 + 1 + .75
    assert loss.numpy() == pytest.approx((0.5 + 2.5) / 2)
    # d rho / d t = 1(y < t) - tau (u = 0 -> -tau), divided by the batch size
    np.testing.assert_allclose(tape.gradient(loss, q).numpy(),
                               [[-0.125, -0.25, 0.125], [0.375, 0.25, 0.125]], rtol=1e-6)
    np.testing.assert_allclose(cqe.pinball_loss_per_example(y, q, taus).numpy(), [0.5, 2.5])
    kl = cqe.PinballLoss(num_quantiles=3)(tf.reshape(y, [2, 1]), q)
    assert kl.numpy() == pytest.approx(1.5)


def test_cde_eq8_by_hand():
    q = np.array([[1.0, 2.0, 4.0, 8.0]])
    assert cqe.conditional_expectation(q)[0] == pytest.approx((15 + 4.5) / 5)
    assert cqe.conditional_expectation(tf.constant(q)).numpy()[0] == pytest.approx(3.9)


def test_head_cse_dqc_cde_values():
    # tau = (.2, .4, .6, .8); tau_low = .3 -> midpoint of 1, 2; tau_high = .7 -> of 4, 8
    head = _fixed_head([1.0, 2.0, 4.0, 8.0], tau_low=0.3, tau_high=0.7, default_k=0.5)
    out = head(tf.ones([2, 3]))
    np.testing.assert_allclose(out["quantiles"].numpy(), [[1, 2, 4, 8]] * 2, rtol=1e-5)
    np.testing.assert_allclose(out["cse"].numpy(), [1.5, 1.5], rtol=1e-5)
    np.testing.assert_allclose(out["dqc"].numpy(), [0.5 * 1.5 + 0.5 * 6] * 2, rtol=1e-5)
    np.testing.assert_allclose(out["cde"].numpy(), [3.9, 3.9], rtol=1e-5)
    out = head(tf.ones([2, 3]), k=tf.constant([0.2, 1.0]))
    np.testing.assert_allclose(out["dqc"].numpy(), [0.2 * 1.5 + 0.8 * 6, 1.5], rtol=1e-5)


def test_default_grid_interpolation():
    # N = 100: tau_low = .25 = 25.25/101 -> 0-based columns 24, 25 with weight .25
    head = cqe.CqeHead()
    out = head(tf.random.normal([4, 5], seed=1))
    q = out["quantiles"].numpy()
    np.testing.assert_allclose(out["cse"].numpy(), 0.75 * q[:, 24] + 0.25 * q[:, 25], rtol=1e-5)
    t_high = 0.3 * q[:, 69] + 0.7 * q[:, 70]  # .7 = 70.7/101
    np.testing.assert_allclose(out["dqc"].numpy(), 0.5 * out["cse"].numpy() + 0.5 * t_high, rtol=1e-5)
    np.testing.assert_allclose(out["cde"].numpy(),
                               (q.sum(1) + (q[:, 0] + q[:, -1]) / 2) / 101, rtol=1e-5)


def test_invalid_arguments():
    with pytest.raises(ValueError):
        cqe.CqeHead(num_quantiles=3, tau_low=0.1)  # below tau_1 = .25
    with pytest.raises(ValueError):
        cqe.CqeHead(increment="exp")
    with pytest.raises(ValueError):
        cqe.CqeHead(tau_low=0.7, tau_high=0.25)
    with pytest.raises(ValueError):
        cqe.quantile_levels(1)


def test_config_and_savedmodel_roundtrip(tmp_path):
    inp = keras.Input([5])
    model = keras.Model(inp, cqe.CqeHead(num_quantiles=9, increment="relu", tau_low=0.3,
                                         name="cqe")(inp))
    clone = cqe.CqeHead.from_config(model.get_layer("cqe").get_config())
    assert (clone.num_quantiles, clone.increment, clone.tau_low) == (9, "relu", 0.3)
    h = np.random.default_rng(3).normal(size=(3, 5)).astype(np.float32)
    model.save(str(tmp_path / "m"), save_format="tf")
    loaded = keras.models.load_model(str(tmp_path / "m"))
    for key in ("quantiles", "cse", "dqc", "cde"):
        np.testing.assert_allclose(loaded(h)[key].numpy(), model(h)[key].numpy(), rtol=1e-6)


def test_config_round_trip_gives_same_outputs():
    h = np.random.default_rng(4).normal(size=(3, 5)).astype(np.float32)
    head = cqe.CqeHead(num_quantiles=9, increment="relu", tau_low=0.3, default_k=0.2, name="cqe")
    assert_config_round_trip(head, lambda layer: layer(h))
    # one initializer instance per Dense (a reused unseeded one repeats its draws)
    assert head.base.kernel_initializer is not head.increments.kernel_initializer
