"""Int8 row-wise quantization against a NumPy FBGEMM reference, and the pruning remap."""
import numpy as np
import pytest

from models.publishing import pruning
from models.publishing.quantization import dequantize_rows, quantize_rows, quantized_bytes


def fbgemm_reference(x):
    """FBGEMM FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf, bit rate 8 (round to nearest)."""
    x = np.asarray(x, np.float32)
    bias = x.min(axis=1).astype(np.float16)
    lo = bias.astype(np.float32)
    scale = ((x.max(axis=1) - lo) / 255.0).astype(np.float16).astype(np.float32)
    scale[scale == 0] = 1.0
    q = np.clip(np.rint((x - lo[:, None]) / scale[:, None]), 0, 255).astype(np.uint8)
    return q, scale, bias


def test_error_at_most_half_a_step_and_close_to_fbgemm():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.normal(0, 0.01, (200, 16)),                     # embedding-like rows
        np.full((3, 16), 0.37), np.zeros((1, 16)),           # constant rows (max = min)
        rng.uniform(-3e4, 3e4, (5, 16)),                     # huge ranges (scale ~235)
        rng.normal(0, 1e-6, (5, 16)),                         # tiny ranges (fp16 subnormal scales)
    ]).astype(np.float32)
    q, scale, bias = quantize_rows(x)
    assert q.dtype == np.uint8 and scale.dtype == np.float16 and bias.dtype == np.float16
    x_hat = dequantize_rows(q, scale, bias)
    s = scale.astype(np.float64)
    err = np.abs(x_hat.astype(np.float64) - x)
    # every element within half a quantization step (fp32 arithmetic slack: 1e-6 relative),
    # constant rows included (0.37 is not an fp16: the bias rounds down, the step covers the rest)
    assert np.all(err <= s[:, None] / 2 * (1 + 1e-6) + 1e-6 * np.abs(x))
    # a constant row exact in fp16 (zeros): FBGEMM's corner case, scale 1, q = 0, x_hat exact
    assert q[203].tolist() == [0] * 16 and scale[203] == 1 and np.all(x_hat[203] == 0)
    # against the FBGEMM formula: scale within two fp16 ulps (bias down + scale up), codes within one level
    q_ref, scale_ref, _ = fbgemm_reference(x)
    ref = np.ptp(x, axis=1) > 1e-3  # FBGEMM underflows tiny ranges to scale 0 -> 1; here a subnormal
    assert np.all(np.abs(s[ref] - scale_ref[ref]) <= 2.01 * np.spacing(scale_ref[ref].astype(np.float16)))
    assert np.abs(q[ref].astype(int) - q_ref[ref].astype(int)).max() <= 1
    # hand-computed row: [0, 1, 2.55] -> scale 0.01 (fp16 0.01000213...), q = [0, 100, 255]
    q1, s1, b1 = quantize_rows(np.array([[0.0, 1.0, 2.55]]))
    assert b1[0] == 0 and q1.tolist() == [[0, 100, 255]] and abs(float(s1[0]) - 0.01) < 1e-5
    assert quantized_bytes(10, 16) == 200  # 20 bytes per row at D = 16 (3.2x smaller than 64)


def test_quantize_refuses_what_fp16_cannot_hold():
    with pytest.raises(ValueError, match="fp16"):
        quantize_rows(np.array([[-1e8, 1e8]]))
    with pytest.raises(ValueError, match="non-finite"):
        quantize_rows(np.array([[0.0, np.nan]]))


def test_remap_sends_kept_ids_to_compact_rows_and_pruned_ids_to_the_default():
    importance = np.array([0.0, 5.0, 0.1, 3.0, 0.2, 9.0, 0.0])  # row 0 padding, row 6 OOV
    plan = pruning.prune_plan(importance, 7, fraction=0.5, default_row="oov", oov_rows=[6])
    # floor(0.5*7)=3 pruned: keep padding 0, OOV 6 and the top-2 of the rest (5, 1)
    assert plan.kept.tolist() == [0, 1, 5, 6]
    assert plan.remap.tolist() == [0, 1, 3, 3, 3, 2, 3]
    table = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)
    compact = pruning.compact_table(table, plan)
    np.testing.assert_array_equal(compact[plan.remap[[0, 1, 5, 6]]], table[[0, 1, 5, 6]])
    np.testing.assert_array_equal(compact[plan.remap[[2, 3, 4]]], table[[6, 6, 6]])
    zeros = pruning.prune_plan(importance, 7, fraction=0.5, default_row="zeros", oov_rows=[6])
    compact = pruning.compact_table(table, zeros)
    assert zeros.compact_rows == 5 and np.all(compact[zeros.remap[[2, 3, 4]]] == 0)
    by_threshold = pruning.prune_plan(importance, 7, threshold=1.0, oov_rows=[6])
    assert by_threshold.kept.tolist() == [0, 1, 3, 5, 6]
    none = pruning.prune_plan(importance, 7, fraction=0.0, oov_rows=[6])
    assert none.remap.tolist() == list(range(7))
    assert pruning.remap_dtype(1000) == np.uint16 and pruning.remap_dtype(70000) == np.int32
    with pytest.raises(ValueError, match="exactly one"):
        pruning.select_rows(importance, fraction=0.5, threshold=1.0)
