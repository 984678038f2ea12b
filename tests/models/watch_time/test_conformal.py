"""Split-conformal recalibrated levels (conformal.py): PIT and levels against brute
force, the finite-sample coverage bound on held-back simulated data, and the levels
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


def _brute_pit(y, t, taus):
    """Bisection on the level for the piecewise-linear quantile function through (0, 0)."""
    grid = np.concatenate([[0.0], taus])
    curve = np.concatenate([[0.0], t])
    if y > curve[-1]:
        return 1.0 + (y - curve[-1])
    lo, hi = 0.0, taus[-1]
    for _ in range(60):  # the lowest level whose quantile reaches y
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if np.interp(mid, grid, curve) >= y else (mid, hi)
    return hi


def test_pit_and_levels_match_brute_force_order_statistics():
    rng = np.random.default_rng(0)
    y, q = rng.exponential(5.0, 37), np.sort(rng.exponential(5.0, (37, 5)), axis=1)
    y[:3] = 0.0  # skipped videos: PIT 0
    q[3, 1:3] = q[3, 0]  # a flat stretch
    y[3] = q[3, 0]  # ... on which the lowest level counts
    scores = conformal.scores(y, q, TAUS)
    np.testing.assert_allclose(scores, [_brute_pit(y[n], q[n], TAUS) for n in range(37)], atol=1e-9)
    assert np.all(scores[:3] == 0.0) and scores[3] == pytest.approx(TAUS[0])
    got = conformal.fit_levels(y, q, TAUS)
    for i, tau in enumerate(TAUS):
        k = int(np.ceil((37 + 1) * tau - 1e-9))  # 1-based rank
        assert got[i] == pytest.approx(sorted(scores)[k - 1])
    assert conformal.conformal_rank(99, 0.5) == 50 and conformal.conformal_rank(9, 0.1) == 1
    # y = 1 below t = 3: level 0.9 / 3; y = 2 a second past t = 1: 1 + 1; k > n: the largest score
    np.testing.assert_allclose(conformal.scores([1.0, 2.0], [[3.0], [1.0]], [0.9]), [0.3, 2.0])
    assert conformal.fit_levels([1.0, 2.0], [[3.0], [1.0]], [0.9])[0] == 2.0
    # the served quantile at the new level is the model's line read there (+ seconds past level 1)
    levels = np.array([0.05, 0.25, 0.3, 0.95, 1.5])
    out = conformal.apply_levels(q, levels, TAUS)
    grid, curve = np.concatenate([[0.0], TAUS]), np.concatenate([np.zeros((37, 1)), q], axis=1)
    want = [[np.interp(min(g, TAUS[-1]), grid, curve[n]) + max(g - 1, 0) for g in levels] for n in range(37)]
    np.testing.assert_allclose(out, want, rtol=1e-12)
    np.testing.assert_allclose(conformal.apply_levels(q, TAUS, TAUS), q, rtol=1e-12)  # the grid: identity
    # y <= q(g) exactly when pit(y) <= g (the equivalence the guarantee rests on)
    for g in (0.07, 0.3, 0.8, 0.95, 3.0):
        qg = conformal.apply_levels(q, np.full(5, g), TAUS)[:, 0]
        np.testing.assert_array_equal(y <= qg + 1e-12, scores <= g + 1e-12)
    with pytest.raises(ValueError, match="quantiles must be"):
        conformal.fit_levels(y, q[:, :2], TAUS)
    with pytest.raises(ValueError, match="tau"):
        conformal.conformal_rank(10, 1.0)


def test_held_back_half_coverage_within_finite_sample_bound():
    rng = np.random.default_rng(1)
    x, y = _simulate(rng, 20_000)
    q = _bad_quantiles(x, TAUS)
    cal, test = slice(0, 10_000), slice(10_000, None)
    raw_cov = np.mean(y[test, None] <= q[test], axis=0)
    assert np.max(np.abs(raw_cov - TAUS)) > 0.1  # the model is miscalibrated (the test can fail)
    levels = conformal.fit_levels(y[cal], q[cal], TAUS)
    cov = np.mean(y[test, None] <= conformal.apply_levels(q[test], levels, TAUS), axis=0)
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
    scores = np.sort(conformal.scores(y[:, :n_cal].reshape(-1), q[:, :n_cal].reshape(-1, TAUS.size),
                                   TAUS).reshape(reps, n_cal), axis=1)
    k = np.array([conformal.conformal_rank(n_cal, t) for t in TAUS]) - 1
    levels = scores[:, k]  # [reps, N]
    np.testing.assert_allclose(levels[0], conformal.fit_levels(y[0, :n_cal], q[0, :n_cal], TAUS))
    # y <= q(g)  <=>  pit(y) <= g: score the test rows on the level scale
    test_pit = conformal.scores(y[:, n_cal:].reshape(-1), q[:, n_cal:].reshape(-1, TAUS.size),
                             TAUS).reshape(reps, n_test)
    covered = test_pit[:, :, None] <= levels[:, None, :]
    mean_cov = covered.mean(axis=(0, 1))
    # sd of the mean: Beta(k, n + 1 - k) spread of each split's coverage + the test rows' binomial noise
    se = np.sqrt(TAUS * (1 - TAUS) * (1 / (n_cal + 2) + 1 / n_test) / reps)
    assert np.all(mean_cov >= TAUS - 4 * se), mean_cov
    assert np.all(mean_cov <= TAUS + 1 / (n_cal + 1) + 4 * se), mean_cov


def test_levels_keep_quantiles_monotone_and_nonnegative_on_a_zero_atom():
    """Watch time with 30 % skipped videos (y = 0): the recalibrated quantiles stay >= 0 and
    monotone with no clip or sort, and still cover tau on held-back rows (ties at 0 only
    raise coverage, the lower bound holds)."""
    rng = np.random.default_rng(3)
    x, y = _simulate(rng, 20_000)
    y[rng.random(y.size) < 0.3] = 0.0
    q = _bad_quantiles(x, TAUS) + 2.0  # too high: the levels move down
    levels = conformal.fit_levels(y[:10_000], q[:10_000], TAUS)
    assert np.all(np.diff(levels) >= 0)
    served = conformal.apply_levels(q[10_000:], levels, TAUS)
    assert np.all(served >= 0) and np.all(np.diff(served, axis=1) >= 0)
    cov = np.mean(y[10_000:, None] <= served, axis=0)
    se = np.sqrt(TAUS * (1 - TAUS) * 2 / 10_000)
    assert np.all(cov >= TAUS - 4 * se), cov
    atom = np.mean(y[10_000:] == 0)
    below = TAUS < atom  # tau = 0.1, 0.25: the quantile is 0 and covers the whole atom
    np.testing.assert_allclose(levels[below], 0.0)
    np.testing.assert_allclose(cov[below], atom)
    assert np.all(cov[~below] <= TAUS[~below] + 1 / 10_001 + 4 * se[~below]), cov


def _tiny_model(num_quantiles=9, **kw):
    tf.random.set_seed(0)
    inp = keras.Input((3,), name="x")
    out = cqe.CqeHead(num_quantiles=num_quantiles, name="cqe", **kw)(inp)
    return keras.Model(inp, {"quantiles": out["quantiles"], "cse": out["cse"]})


def test_fit_model_levels_sets_the_head_weight_and_survives_saved_model(tmp_path):
    model = _tiny_model(tower_units=[4], stop_gradient=True)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(400, 3)).astype(np.float32)
    y = rng.exponential(10.0, 400).astype(np.float32)
    raw = model(x)["quantiles"].numpy()
    data = tf.data.Dataset.from_tensor_slices(({"x": x}, {"quantiles": y})).batch(64)
    fit = conformal.fit_model_levels(model, data)
    taus = cqe.quantile_levels(9)
    expected = conformal.fit_levels(y, raw, taus)
    np.testing.assert_allclose(fit["levels"], expected, rtol=1e-5, atol=1e-6)
    assert "cqe/conformal_levels:0" in [w.name for w in model.non_trainable_weights]
    calibrated = model(x)["quantiles"].numpy()
    np.testing.assert_allclose(calibrated, conformal.apply_levels(raw, expected, taus), rtol=1e-4, atol=1e-3)
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
    np.testing.assert_allclose(record["levels"], expected, rtol=1e-5, atol=1e-6)


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


def test_head_reads_its_quantiles_at_the_levels_like_apply_levels():
    """The CqeHead's served quantiles (TF, standard ops) equal conformal.apply_levels on its
    raw quantiles, for the identity grid, levels between grid points, below the first
    level and past level 1 (seconds above the top quantile)."""
    model = _tiny_model(num_quantiles=9)
    head = conformal.cqe_layers(model)[0]
    x = np.random.default_rng(5).normal(size=(50, 3)).astype(np.float32)
    raw = model(x)["quantiles"].numpy()
    taus = cqe.quantile_levels(9)
    for levels in (taus, np.array([0.0, 0.01, 0.15, 0.15, 0.33, 0.5, 0.85, 0.95, 1.0]),
                   np.array([0.02, 0.2, 0.3, 0.4, 0.6, 0.9, 1.0, 1.5, 4.0])):
        head.set_conformal_levels(levels)
        np.testing.assert_allclose(model(x)["quantiles"].numpy(), conformal.apply_levels(raw, levels, taus),
                                   rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="non-decreasing levels"):
        head.set_conformal_levels(taus[::-1])


def test_fit_model_levels_by_chunks_equals_one_chunk(monkeypatch):
    """The [n, N] temporaries are built a chunk of rows at a time (bounded memory): any chunk
    size gives the same levels and coverages, bit for bit."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 3)).astype(np.float32)
    y = rng.exponential(10.0, 300).astype(np.float32)
    data = tf.data.Dataset.from_tensor_slices(({"x": x}, {"quantiles": y})).batch(64)
    model, fits = _tiny_model(tower_units=[4], stop_gradient=True), []
    for rows in (10 ** 6, 7, 64):  # each fit starts from the uncalibrated quantiles (levels reset)
        monkeypatch.setattr(conformal, "FIT_CHUNK_ROWS", rows)
        fits.append(conformal.fit_model_levels(model, data))
    for fit in fits[1:]:
        assert fit == fits[0]
