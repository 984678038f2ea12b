"""Int8 row-wise quantization with fp16 scale and bias (FBGEMM FusedNBitRowwiseQuantizedSBHalf).

Per row x ∈ R^D (FBGEMM `FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf`, bit rate 8):

    bias  = fp16(min_j x_j)
    scale = fp16((max_j x_j − bias) / 255)
    q_j   = clamp(round((x_j − bias) / scale), 0, 255)          uint8
    x̂_j   = q_j · scale + bias                                  (dequantized, fp32)

Storage: D + 4 bytes per row (D = 16: 20 bytes vs 64 in fp32, 3.2×).

One deviation from FBGEMM, so that |x − x̂| ≤ scale/2 holds for every element: FBGEMM
rounds bias and scale to the *nearest* fp16, which can put the fp16 bias above the
row's minimum or 255·scale below its range, clipping the row's extremes by up to half
an fp16 ulp. Here the bias is rounded *down* and the scale *up* to the next fp16
(a relative change of at most 2^-11 to the scale). A row with max = fp16 bias (e.g. a
zero row) gets scale 1 and q = 0 (x̂ = bias, FBGEMM's corner case); a constant row
whose value is not an fp16 keeps a tiny scale and is reconstructed within scale/2. A row whose range does not fit in
fp16 (scale > 65504) is refused with a ValueError: keep that table in fp32.

Example:

>>> q, scale, bias = quantize_rows(table)          # uint8 [V, D], float16 [V], float16 [V]
>>> table_hat = dequantize_rows(q, scale, bias)    # float32 [V, D]
"""
from typing import Tuple

import numpy as np

LEVELS = 255  # 2^8 − 1
FP16_MAX = float(np.finfo(np.float16).max)


def _fp16_down(x: np.ndarray) -> np.ndarray:
    """Largest fp16 ≤ x (elementwise)."""
    h = x.astype(np.float16)
    too_high = h.astype(np.float64) > x
    h[too_high] = np.nextafter(h[too_high], np.float16(-np.inf))
    return h


def _fp16_up(x: np.ndarray) -> np.ndarray:
    """Smallest fp16 ≥ x (elementwise)."""
    h = x.astype(np.float16)
    too_low = h.astype(np.float64) < x
    h[too_low] = np.nextafter(h[too_low], np.float16(np.inf))
    return h


def quantize_rows(table) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """fp32 [V, D] -> (q uint8 [V, D], scale float16 [V], bias float16 [V]) (module docstring)."""
    x = np.asarray(table, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"quantize_rows: expected a [rows, dim] table, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("quantize_rows: the table has non-finite values")
    lo, hi = x.min(axis=1), x.max(axis=1)
    if np.any(np.abs(lo) > FP16_MAX):
        raise ValueError(f"quantize_rows: a row minimum {lo[np.abs(lo) > FP16_MAX][0]:g} does not fit in fp16")
    bias = _fp16_down(lo)
    span = hi - bias.astype(np.float64)
    if np.any(span / LEVELS > FP16_MAX):
        raise ValueError(f"quantize_rows: a row range {span.max():g} gives a scale above fp16's max "
                         f"{FP16_MAX:g}; keep this table in fp32")
    scale = _fp16_up(span / LEVELS)
    scale[span == 0] = np.float16(1.0)
    s = scale.astype(np.float64)[:, None]
    q = np.clip(np.rint((x - bias.astype(np.float64)[:, None]) / s), 0, LEVELS).astype(np.uint8)
    return q, scale, bias


def dequantize_rows(q, scale, bias) -> np.ndarray:
    """x̂ = q·scale + bias in fp32, the same arithmetic as the serving graph."""
    return (np.asarray(q).astype(np.float32) * np.asarray(scale).astype(np.float32)[:, None]
            + np.asarray(bias).astype(np.float32)[:, None])


def quantized_bytes(rows: int, dim: int) -> int:
    """Bytes of `rows` quantized rows: D uint8 + fp16 scale + fp16 bias each."""
    return int(rows) * (int(dim) + 4)
