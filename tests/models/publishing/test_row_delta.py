"""models/publishing/row_delta.py: a hand-computed coding, the exact round trip (served +
coded delta == the trainer's published rows, within quantization.py's bound of its fp32
rows), 50 deltas without drift, the payload's checks and its bytes."""
import zlib

import numpy as np
import pytest

from models.publishing import quantization, row_delta


def _parts(table):
    q, scale, bias = quantization.quantize_rows(table)
    return {"values": q, "scale_bias": np.stack([scale, bias], 1)}


def test_coding_by_hand():
    served = {"values": np.array([[250, 3], [10, 10], [0, 7]], np.uint8),
              "scale_bias": np.array([[1.0, -2.0], [1.0, 0.0], [0.5, 0.25]], np.float16)}
    new = {"values": np.array([[2, 3], [99, 99], [255, 7]], np.uint8),
           "scale_bias": np.array([[1.0, -2.0], [9.0, 9.0], [0.5, 0.5]], np.float16)}
    a = row_delta.encode(served, new, np.array([0, 2]))
    assert set(a) == {"row_gaps", "values_delta", "scale_bias_delta"}
    np.testing.assert_array_equal(a["row_gaps"], [0, 2])
    assert a["row_gaps"].dtype == np.uint16
    # 2 − 250 = −248 ≡ 8 (mod 256); 255 − 0 = 255
    np.testing.assert_array_equal(a["values_delta"], [[8, 0], [255, 0]])
    # fp16 bits: 0.25 = 0x3400, 0.5 = 0x3800 → +0x0400; the unchanged ones 0
    assert a["scale_bias_delta"].dtype == np.uint16
    np.testing.assert_array_equal(a["scale_bias_delta"], [[0, 0], [0, 0x0400]])
    rows, parts = row_delta.decode(served, a)
    np.testing.assert_array_equal(rows, [0, 2])
    assert parts["values"].dtype == np.uint8 and parts["scale_bias"].dtype == np.float16
    np.testing.assert_array_equal(parts["values"], new["values"][[0, 2]])
    np.testing.assert_array_equal(parts["scale_bias"], new["scale_bias"][[0, 2]])
    zipped = sum(len(zlib.compress(v.tobytes(), 6)) for v in a.values())
    assert row_delta.deflated_bytes(a) == zipped
    with pytest.raises(ValueError, match="strictly increasing"):
        row_delta.encode(served, new, np.array([2, 0]))


def test_round_trip_is_exact_and_within_the_quantization_bound():
    rng = np.random.default_rng(0)
    trainer0 = rng.normal(scale=0.1, size=(300, 16)).astype(np.float32)
    trainer1 = trainer0 + rng.normal(scale=1e-3, size=trainer0.shape).astype(np.float32)
    served, new = _parts(trainer0), _parts(trainer1)
    rows = np.sort(rng.choice(300, 40, replace=False))
    got_rows, got = row_delta.decode(served, row_delta.encode(served, new, rows))
    np.testing.assert_array_equal(got_rows, rows)
    for part in served:  # bit for bit the trainer's published rows
        assert got[part].tobytes() == new[part][rows].tobytes()
    x_hat = quantization.dequantize_rows(got["values"], got["scale_bias"][:, 0], got["scale_bias"][:, 1])
    half_step = 0.5 * got["scale_bias"][:, :1].astype(np.float64)
    assert np.all(np.abs(x_hat.astype(np.float64) - trainer1[rows]) <= half_step * (1 + 1e-6) + 1e-7)
    # fp32 tables: the float32 bit patterns (uint32 mod 2^32), exact too
    f_served, f_new = {"values": trainer0[:, :1].copy()}, {"values": trainer1[:, :1].copy()}
    a = row_delta.encode(f_served, f_new, rows, np.int32)
    assert a["values_delta"].dtype == np.uint32 and a["row_gaps"].dtype == np.int32
    _, f_got = row_delta.decode(f_served, a)
    np.testing.assert_array_equal(f_got["values"], trainer1[rows, :1])


def test_fifty_deltas_do_not_drift():
    """Each delta codes the top 10 % rows by change against what the server holds; the
    served rows equal the trainer's published rows wherever sent, and after a delta of every
    row the whole table is the trainer's published table exactly (no accumulated error)."""
    rng = np.random.default_rng(1)
    trainer = rng.normal(scale=0.1, size=(200, 8)).astype(np.float32)
    served = _parts(trainer)
    for step in range(50):
        trainer = trainer + rng.normal(scale=2e-3, size=trainer.shape).astype(np.float32)
        new = _parts(trainer)
        change = np.abs(new["values"].astype(int) - served["values"]).sum(1)
        rows = np.sort(np.argsort(-change, kind="stable")[:20])
        got_rows, got = row_delta.decode(served, row_delta.encode(served, new, rows))
        served = {p: v.copy() for p, v in served.items()}
        for p in served:
            served[p][got_rows] = got[p]
            np.testing.assert_array_equal(served[p][rows], new[p][rows])
    new = _parts(trainer)
    _, got = row_delta.decode(served, row_delta.encode(served, new, np.arange(200)))
    for p in served:
        assert got[p].tobytes() == new[p].tobytes()
    x_hat = quantization.dequantize_rows(got["values"], got["scale_bias"][:, 0], got["scale_bias"][:, 1])
    assert np.max(np.abs(x_hat - trainer) / got["scale_bias"][:, :1].astype(np.float32)) <= 0.5 + 1e-3


def test_a_payload_that_does_not_fit_is_refused():
    rng = np.random.default_rng(2)
    served, new = _parts(rng.normal(size=(50, 4))), _parts(rng.normal(size=(50, 4)))
    good = row_delta.encode(served, new, np.array([1, 5, 9]))

    def bad(match, **changes):
        with pytest.raises(row_delta.RowDeltaError, match=match):
            row_delta.decode(served, {k: v for k, v in dict(good, **changes).items() if v is not None})

    bad("not strictly increasing", row_gaps=np.array([1, 4, 0], np.uint16))   # a repeated row
    bad("inside \\[0, 50\\)", row_gaps=np.array([1, 4, 45], np.uint16))        # row 50
    bad("row_gaps", row_gaps=np.array([1.0, 4.0, 4.0]))                          # not integers
    bad("values_delta: int8", values_delta=good["values_delta"].view(np.int8))
    bad("scale_bias_delta", scale_bias_delta=good["scale_bias_delta"][:2])
    bad("expected", scale_bias_delta=None)                                       # a part missing
    bad("expected", extra=np.zeros(3, np.uint8))


def test_small_moves_cost_fewer_bytes_than_the_rows():
    """Rows moved by small steps: the coded rows deflate to well under the k·(2 + D + 4)
    bytes of "values" (measured here: about a half)."""
    rng = np.random.default_rng(3)
    t0 = rng.normal(scale=0.1, size=(2000, 16)).astype(np.float32)
    t1 = t0 + rng.normal(scale=2e-3, size=t0.shape).astype(np.float32)
    rows = np.arange(0, 2000, 10)
    coded = row_delta.deflated_bytes(row_delta.encode(_parts(t0), _parts(t1), rows))
    plain = len(rows) * (2 + 16 + 4)
    assert coded < 0.75 * plain, (coded, plain)
