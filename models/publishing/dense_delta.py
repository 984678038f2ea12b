"""Delta-coded dense weights (issue #35): a dense variable sent as its difference from the
value the server holds, quantized, and added back by the patcher.

For one float variable with trainer value t and served value s (what version N holds: the
Publisher reads it from N's checkpoint, so s is exact, never a copy of what was meant):

    d = t − s                                              (float64)
    int8_delta:  Δ = max_i |d_i| / L,  L = 127   (one float32 step per tensor; Δ = 0 when d = 0)
                 q = clip(round(d / Δ), −L, L)             int8, 1 byte per element
    int4_delta:  the same with L = 7 (15 levels, still one int8 per element: most codes
                 are small and the deflated payload is ~0.43 of int8_delta's: 2.8 vs
                 6.5 bits per parameter on the DIN of bench-freshness); int5_delta L = 15,
                 int6_delta L = 31 in between
    fp16_delta:  q = fp16(d)                               2 bytes per element, Δ unused
    applied:     s' = fl32(s + fl32(q · Δ))    (fp16: fl32(s + fl32(q)))     `apply`

Bound (`error_bound`, elementwise, ε = 2⁻²³ the float32 relative spacing):

    int8/4: |s' − t| ≤ Δ/2 + ε·(|t| + |d|)   the half step of rounding d/Δ, plus the float32
                                             roundings of q·Δ (≤ ε/2·|q·Δ| ≤ ε/2·(|d| + Δ/2))
                                             and of the sum (≤ ε/2·|s'|)
    fp16:  |s' − t| ≤ 2⁻¹¹·|d| + 2⁻²⁵ + ε·(|t| + |d|)   (fp16 rounding: relative 2⁻¹¹, absolute
                                             2⁻²⁵ in fp16's subnormal range)

Drift control: because d is always taken against the SERVED s (not against what the previous
delta meant to send), the error after any number of deltas is the last delta's rounding alone,
≤ one half step: it never compounds (tests/models/publishing/test_dense_delta.py, 50 deltas).

The coded payload compresses: the int8 codes of small Adam steps cluster around 0, and the
delta's dense file is written with deflate (models/publishing/delta.py).

>>> c = encode(served, trainer, "int8_delta")    # Coded(q int8 [shape], scale float32 [])
>>> new = apply(served, c)                       # float32, |new − trainer| ≤ error_bound(...)
"""
import dataclasses
from typing import Optional

import numpy as np

CODINGS = ("int8_delta", "int6_delta", "int5_delta", "int4_delta", "fp16_delta")
LEVELS = {"int8_delta": 127, "int6_delta": 31, "int5_delta": 15, "int4_delta": 7}  # L: codes in [−L, L]
FP32_EPS = 2.0 ** -23
FP16_REL, FP16_ABS = 2.0 ** -11, 2.0 ** -25


@dataclasses.dataclass
class Coded:
    """One coded variable: q (int8 codes or fp16 differences) and the step Δ (scale)."""
    coding: str
    q: np.ndarray
    scale: Optional[np.ndarray] = None  # float32 scalar, int8_delta / int4_delta only

    @property
    def nbytes(self) -> int:
        return int(self.q.nbytes + (self.scale.nbytes if self.scale is not None else 0))


def encode(served: np.ndarray, target: np.ndarray, coding: str) -> Coded:
    """The coded difference target − served (module docstring); same shape, float variables only."""
    if coding not in CODINGS:
        raise ValueError(f"dense_delta.encode: coding must be one of {CODINGS}, got {coding!r}")
    s, t = np.asarray(served), np.asarray(target)
    if s.shape != t.shape or not np.issubdtype(t.dtype, np.floating):
        raise ValueError(f"dense_delta.encode: served {s.dtype}{list(s.shape)} and target {t.dtype}{list(t.shape)} "
                         "must be float tensors of one shape")
    d = t.astype(np.float64) - s.astype(np.float64)
    if coding == "fp16_delta":
        return Coded(coding, d.astype(np.float16))
    peak, levels = (float(np.max(np.abs(d))) if d.size else 0.0), LEVELS[coding]
    scale = np.float32(peak / levels)
    if scale == 0 or not np.isfinite(scale):
        if not np.isfinite(peak):
            raise ValueError("dense_delta.encode: the difference is not finite")
        return Coded(coding, np.zeros(d.shape, np.int8), np.float32(0.0))
    q = np.clip(np.rint(d / np.float64(scale)), -levels, levels).astype(np.int8)
    return Coded(coding, q, np.asarray(scale, np.float32))


def decode(coded: Coded) -> np.ndarray:
    """The float32 difference q·Δ (int8 / int4) or fl32(q) (fp16)."""
    if coded.coding == "fp16_delta":
        return coded.q.astype(np.float32)
    if coded.coding in LEVELS:
        return coded.q.astype(np.float32) * np.float32(coded.scale)
    raise ValueError(f"dense_delta.decode: unknown coding {coded.coding!r}")


def apply(served: np.ndarray, coded: Coded) -> np.ndarray:
    """s' = fl32(s + decode(coded)), in the served variable's dtype (float32 arithmetic)."""
    s = np.asarray(served)
    if tuple(coded.q.shape) != s.shape:
        raise ValueError(f"dense_delta.apply: coded shape {list(coded.q.shape)} vs served {list(s.shape)}")
    return (s.astype(np.float32) + decode(coded)).astype(s.dtype)


def apply_checked(served: np.ndarray, coded: Coded) -> np.ndarray:
    """apply(served, coded) after checking the codes' dtype (int8 | fp16 onto float32) and the
    step (one finite float32 >= 0); ValueError naming what does not fit (the patcher's check)."""
    want = np.float16 if coded.coding == "fp16_delta" else np.int8
    if coded.coding not in CODINGS or coded.q.dtype != want or np.asarray(served).dtype != np.float32:
        raise ValueError(f"{coded.coding} codes {coded.q.dtype} onto base {np.asarray(served).dtype} "
                         f"(expected {np.dtype(want).name} onto float32)")
    if coded.coding in LEVELS:
        scale = None if coded.scale is None else np.asarray(coded.scale)
        if scale is None or scale.shape != () or scale.dtype != np.float32 or not (np.isfinite(scale) and scale >= 0):
            raise ValueError(f"{coded.coding} needs one finite float32 step >= 0, "
                             f"got {None if scale is None else (scale.dtype, scale.shape)}")
    return apply(served, coded)


def error_bound(served: np.ndarray, target: np.ndarray, coded: Coded) -> np.ndarray:
    """The elementwise bound on |apply(served, coded) − target| (module docstring)."""
    t64 = np.asarray(target, np.float64)
    t, d = np.abs(t64), np.abs(t64 - np.asarray(served, np.float64))
    rounding = FP32_EPS * (t + d)
    if coded.coding == "fp16_delta":
        return FP16_REL * d + FP16_ABS + rounding
    return 0.5 * float(coded.scale) + rounding
