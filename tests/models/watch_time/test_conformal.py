"""Split-conformal quantile offsets (CQR, Romano et al. 2019): formula against brute
force, the finite-sample coverage bound on held-back simulated data, and the offsets
living in the CQE head as a SavedModel variable."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.watch_time import conformal, cqe

TAUS = np.array([0.1, 0.25, 0.5, 0.75, 0.9])


def _simulate(rng, n):
    """Heteroscedastic, skewed watch times: y = exp(mu(x) + sigma(x) eps) - 1 >= 0."""
    x = rng.uniform(-1, 1, n)
    y = np.expm1(np.maximum(1.5 + x + (0.5 + 0.4 * x) * rng.standard_normal(n), 0.0))
    return x, y


def _bad_quantiles(x, taus):
    """A miscalibrated model: right shape in x, quantiles too low and too narrow."""
    from scipy.stats import norm

    return np.expm1(np.maximum(1.2 + x[:, None] + 0.2 * norm.ppf(taus)[None, :], 0.0))


def test_offsets_match_brute_force_order_statistics():
    rng = np.random.default_rng(0)
    y, q = rng.exponential(5.0, 37), np.sort(rng.exponential(5.0, (37, 5)), axis=1)
    got = conformal.fit_offsets(y, q, TAUS)
    for i, tau in enumerate(TAUS):
        scores = sorted(y[n] - q[n, i] for n in range(37))
        k = int(np.ceil((37 + 1) * tau - 1e-9))  # 1-based rank
        assert got[i] == pytest.approx(scores[k - 1])
    assert conformal.conformal_rank(99, 0.5) == 50 and conformal.conformal_rank(9, 0.1) == 1
    assert conformal.fit_offsets([1.0, 2.0], [[0.0], [0.0]], [0.9])[0] == 2.0  # k > n: largest score
    with pytest.raises(ValueError, match="quantiles must be"):
        conformal.fit_offsets(y, q[:, :2], TAUS)
    with pytest.raises(ValueError, match="tau"):
        conformal.conformal_rank(10, 1.0)


def test_held_back_half_coverage_within_finite_sample_bound():
    rng = np.random.default_rng(1)
    x, y = _simulate(rng, 20_000)
    q = _bad_quantiles(x, TAUS)
    cal, test = slice(0, 10_000), slice(10_000, None)
    raw_cov = np.mean(y[test, None] <= q[test], axis=0)
    assert np.max(np.abs(raw_cov - TAUS)) > 0.1  # the model is miscalibrated (the test can fail)
    offsets = conformal.fit_offsets(y[cal], q[cal], TAUS)
    cov = np.mean(y[test, None] <= conformal.apply_offsets(q[test], offsets), axis=0)
    for tau, c in zip(TAUS, cov):
        lo, hi = conformal.coverage_bounds(10_000, tau)
        # conditional on the calibration half the coverage is Beta(k, n + 1 - k); the test half
        # adds binomial noise: 4 standard deviations of both around the bound
        se = np.sqrt(tau * (1 - tau) * (1 / 10_000 + 1 / 10_000))
        assert lo - 4 * se <= c <= hi + 4 * se, (tau, c)


def test_mean_coverage_over_splits_is_inside_the_bound():
    """E[coverage] in [tau, tau + 1/(n+1)] exactly: 4,000 small splits (n = 49) pin the mean."""
    rng = np.random.default_rng(2)
    reps, n_cal, n_test = 4000, 49, 50
    x, y = _simulate(rng, reps * (n_cal + n_test))
    x, y = x.reshape(reps, -1), y.reshape(reps, -1)
    q = _bad_quantiles(x.reshape(-1), TAUS).reshape(reps, n_cal + n_test, TAUS.size)
    scores = np.sort(y[:, :n_cal, None] - q[:, :n_cal], axis=1)
    k = np.array([conformal.conformal_rank(n_cal, t) for t in TAUS]) - 1
    offsets = scores[:, k, np.arange(TAUS.size)]  # [reps, N]
    np.testing.assert_allclose(offsets[0], conformal.fit_offsets(y[0, :n_cal], q[0, :n_cal], TAUS))
    covered = y[:, n_cal:, None] <= q[:, n_cal:] + offsets[:, None, :]
    mean_cov = covered.mean(axis=(0, 1))
    # sd of the mean: Beta(k, n + 1 - k) spread of each split's coverage + the test rows' binomial noise
    se = np.sqrt(TAUS * (1 - TAUS) * (1 / (n_cal + 2) + 1 / n_test) / reps)
    assert np.all(mean_cov >= TAUS - 4 * se), mean_cov
    assert np.all(mean_cov <= TAUS + 1 / (n_cal + 1) + 4 * se), mean_cov


def test_apply_offsets_keeps_quantiles_monotone_and_nonnegative():
    q = np.array([[0.0, 1.0, 2.0, 3.0]])
    out = conformal.apply_offsets(q, [-1.0, 0.5, -2.0, 0.0])
    np.testing.assert_allclose(out, [[0.0, 1.5, 1.5, 3.0]])
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 100)).astype(np.float32)
    np.testing.assert_allclose(cqe.running_max(tf.constant(x)).numpy(), np.maximum.accumulate(x, axis=1))


def _tiny_model(num_quantiles=9, **kw):
    tf.random.set_seed(0)
    inp = keras.Input((3,), name="x")
    out = cqe.CqeHead(num_quantiles=num_quantiles, name="cqe", **kw)(inp)
    return keras.Model(inp, {"quantiles": out["quantiles"], "cse": out["cse"]})


def test_fit_model_offsets_sets_the_head_weight_and_survives_saved_model(tmp_path):
    model = _tiny_model(tower_units=[4], stop_gradient=True)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(400, 3)).astype(np.float32)
    y = rng.exponential(10.0, 400).astype(np.float32)
    raw = model(x)["quantiles"].numpy()
    data = tf.data.Dataset.from_tensor_slices(({"x": x}, {"quantiles": y})).batch(64)
    fit = conformal.fit_model_offsets(model, data)
    taus = cqe.quantile_levels(9)
    expected = conformal.fit_offsets(y, raw, taus)
    np.testing.assert_allclose(fit["offsets"], expected, rtol=1e-5, atol=1e-4)
    assert "cqe/conformal_offsets:0" in [w.name for w in model.non_trainable_weights]
    calibrated = model(x)["quantiles"].numpy()
    np.testing.assert_allclose(calibrated, conformal.apply_offsets(raw, expected), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(fit["coverage_after"], np.mean(y[:, None] <= calibrated, axis=0), atol=1e-2)
    # in sample, the k-th score's own row is covered: coverage = k / n, k = ceil((n + 1) tau)
    gap = np.array(fit["coverage_after"]) - taus
    assert np.all(gap >= -1e-9) and np.all(gap <= (1 + taus) / 400 + 1e-9), gap
    # CSE is read from the calibrated quantiles
    np.testing.assert_allclose(model(x)["cse"].numpy(), cqe.interpolate_quantile(calibrated, 0.25, taus),
                               rtol=1e-5, atol=1e-4)
    tf.saved_model.save(model, str(tmp_path / "m"))
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    np.testing.assert_allclose(loaded(x[:5])["quantiles"].numpy(), calibrated[:5], rtol=1e-5, atol=1e-3)
    # the model report reads the record back from the SavedModel's variables
    from components.model_report.quantile_calibration import read_conformal_coverage

    record = read_conformal_coverage(str(tmp_path / "m"))
    np.testing.assert_allclose(record["before"], fit["coverage_before"], atol=1e-6)
    np.testing.assert_allclose(record["after"], fit["coverage_after"], atol=1e-6)
    np.testing.assert_allclose(record["offsets"], expected, rtol=1e-5, atol=1e-4)


def test_stop_gradient_tower_gets_no_gradient_into_the_shared_layer():
    inp = keras.Input((3,))
    shared = keras.layers.Dense(4, name="shared")
    head = cqe.CqeHead(num_quantiles=5, tower_units=[4], stop_gradient=True)
    model = keras.Model(inp, head(shared(inp))["quantiles"])
    x, y = tf.ones([2, 3]), tf.constant([1.0, 5.0])
    with tf.GradientTape() as tape:
        loss = cqe.pinball_loss(y, model(x), cqe.quantile_levels(5))
    grads = tape.gradient(loss, shared.trainable_weights + head.tower[0].trainable_weights)
    assert grads[0] is None and grads[1] is None and grads[2] is not None


def test_pinball_log1p_and_sum_over_batch_against_numpy():
    rng = np.random.default_rng(5)
    y, q = rng.exponential(8.0, 16), np.sort(rng.exponential(8.0, (16, 4)), axis=1)
    taus = cqe.quantile_levels(4)
    u = np.log1p(y)[:, None] - np.log1p(q)
    brute = np.array([sum(u[n, i] * (taus[i] - (u[n, i] < 0)) for i in range(4)) for n in range(16)])
    np.testing.assert_allclose(cqe.pinball_loss_log1p_per_example(y, q, taus).numpy(), brute, rtol=1e-6)
    mean_loss = cqe.PinballLoss(4, space="log1p")(y[:, None], q).numpy()
    sum_loss = cqe.PinballLoss(4, space="log1p", batch_reduction="sum")(y[:, None], q).numpy()
    assert mean_loss == pytest.approx(brute.mean(), rel=1e-5) and sum_loss == pytest.approx(brute.sum(), rel=1e-5)
    clone = cqe.PinballLoss.from_config(cqe.PinballLoss(4, space="log1p", batch_reduction="sum").get_config())
    assert clone.space == "log1p" and clone.batch_reduction == "sum"
    with pytest.raises(ValueError, match="space"):
        cqe.PinballLoss(4, space="log")
