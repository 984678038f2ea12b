"""models/publishing/dense_delta.py: a hand-computed int8 coding, the round trip within the
bound, and drift control: 50 successive deltas coded against the served weights stay within
one quantization step of the trainer's (coding against the previous target drifts)."""
import numpy as np
import pytest

from models.publishing import dense_delta


def test_int8_coding_by_hand():
    served = np.array([0.0, 1.0, -2.0], np.float32)
    target = np.array([0.254, 1.1, -2.0254], np.float32)
    c = dense_delta.encode(served, target, "int8_delta")
    # d = t − s (float64 of the float32 values) ≈ [0.254, 0.1, −0.0254]: Δ = 0.254 / 127 = 0.002
    assert c.q.dtype == np.int8 and c.scale.dtype == np.float32
    assert float(c.scale) == pytest.approx(0.002, rel=1e-6)
    np.testing.assert_array_equal(c.q, [127, 50, -13])  # −0.0254 / 0.002 = −12.7 → −13
    got = dense_delta.apply(served, c)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [0.254, 1.1, -2.026], rtol=0, atol=1e-6)
    err = abs(float(got[2]) - float(target[2]))
    assert err == pytest.approx(0.0006, abs=1e-6) and err <= float(c.scale) / 2
    assert c.nbytes == 3 + 4


def test_int4_coding_by_hand():
    served = np.zeros(4, np.float32)
    target = np.array([0.7, 0.25, -0.04, -0.7], np.float32)  # Δ = 0.7 / 7 = 0.1
    c = dense_delta.encode(served, target, "int4_delta")
    np.testing.assert_array_equal(c.q, [7, 2, 0, -7])  # 2.5 → 2 (to even), −0.4 → 0
    np.testing.assert_allclose(dense_delta.apply(served, c), [0.7, 0.2, 0.0, -0.7], rtol=0, atol=1e-7)


def test_unchanged_tensor_codes_to_zero_and_fp16_coding():
    s = np.array([[1.5, -3.0]], np.float32)
    c = dense_delta.encode(s, s.copy(), "int8_delta")
    assert float(c.scale) == 0.0 and not c.q.any()
    np.testing.assert_array_equal(dense_delta.apply(s, c), s)
    t = np.array([[1.5 + 2 ** -10, -3.0 - 1e-3]], np.float32)
    f = dense_delta.encode(s, t, "fp16_delta")
    assert f.q.dtype == np.float16 and f.scale is None and f.nbytes == 4
    got = dense_delta.apply(s, f)
    assert np.all(np.abs(got.astype(np.float64) - t) <= dense_delta.error_bound(s, t, f))
    assert got[0, 0] == t[0, 0]  # 2^-10 is exact in fp16
    with pytest.raises(ValueError, match="coding"):
        dense_delta.encode(s, t, "int4")
    with pytest.raises(ValueError, match="float tensors"):
        dense_delta.encode(s, t[:, :1], "int8_delta")


@pytest.mark.parametrize("coding", dense_delta.CODINGS)
def test_round_trip_within_the_bound(coding):
    rng = np.random.default_rng(3)
    served = rng.normal(scale=0.5, size=(64, 33)).astype(np.float32)
    target = (served + rng.normal(scale=1e-3, size=served.shape) * rng.random(served.shape) ** 3).astype(np.float32)
    c = dense_delta.encode(served, target, coding)
    got = dense_delta.apply(served, c).astype(np.float64)
    err, bound = np.abs(got - target), dense_delta.error_bound(served, target, c)
    assert np.all(err <= bound)
    if coding in dense_delta.LEVELS:
        step, levels = float(c.scale), {"int8_delta": 127, "int6_delta": 31, "int5_delta": 15, "int4_delta": 7}[coding]
        assert step == pytest.approx(np.max(np.abs(target.astype(np.float64) - served)) / levels, rel=1e-6)
        assert err.max() <= 0.5 * step * (1 + 1e-3) and err.max() > 0.3 * step  # the half step, not less
        assert np.abs(c.q).max() == levels and c.q.dtype == np.int8
    print(f"\n{coding}: max error {err.max():.3g}, bound {bound.max():.3g}")


def test_fifty_deltas_coded_against_the_served_weights_do_not_drift():
    """Trainer weights random-walk (Adam-like steps) for 50 publishes; each delta codes
    trainer − served. After every delta |served − trainer| ≤ Δ/2 + ε-terms (one half step),
    while coding against the previous TARGET (what was meant to be sent) accumulates error."""
    rng = np.random.default_rng(7)
    trainer = rng.normal(scale=0.3, size=(40, 16)).astype(np.float32)
    served = trainer.copy()  # a full version
    naive, meant = trainer.copy(), trainer.copy()
    naive_err = []
    for _ in range(50):  # int8_delta; the int4 one obeys the same half-step bound (round trip test)
        trainer = (trainer + 1e-3 * np.sign(rng.normal(size=trainer.shape)) * rng.random(trainer.shape)
                   ).astype(np.float32)
        c = dense_delta.encode(served, trainer, "int8_delta")
        served = dense_delta.apply(served, c)
        err = np.abs(served.astype(np.float64) - trainer)
        assert np.all(err <= dense_delta.error_bound(served, trainer, c) + 1e-12)
        assert err.max() <= float(c.scale)  # within one step (half a step + float32 roundings)
        n = dense_delta.encode(meant, trainer, "int8_delta")  # drift: coded against what was meant
        naive, meant = dense_delta.apply(naive, n), trainer.copy()
        naive_err.append(float(np.max(np.abs(naive.astype(np.float64) - trainer)) / float(n.scale)))
    assert naive_err[-1] > 2.0  # more than two steps off after 50 deltas: the error compounds
    print(f"\nafter 50 deltas: served within {err.max() / float(c.scale):.2f} step; "
          f"coded against the previous target: {naive_err[-1]:.1f} steps")
