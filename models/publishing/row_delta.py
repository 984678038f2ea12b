"""Delta-coded embedding rows (issue #35): the rows of a delta sent as the difference of their
bit patterns from the rows the server holds, exact, deflated.

A table's rows in version N (the served base) and in the trainer's publish under the same
plan are parts P ∈ {values, scale_bias} (int8 tables: q uint8 [K, D] and fp16 [K, 2],
models/publishing/quantization.py; fp32 tables: values float32 [K, D]). For the chosen rows
S = s_0 < s_1 < … < s_{k−1} (priority.top_rows, sorted) the coding "code_delta" sends

    row_gaps   = [s_0, s_1 − s_0, …, s_{k−1} − s_{k−2}]          (the index dtype, uint16 / int32)
    P_delta    = (bits(P^new[S]) − bits(P^served[S])) mod 2^w    (uint<w>, w = the part's bit width:
                                                                  8 for q, 16 for fp16, 32 for fp32)
decoded (`decode`, in the patcher):

    S          = cumsum(row_gaps)                                 (strictly increasing, < K)
    P'[S]      = from_bits((bits(P^served[S]) + P_delta) mod 2^w)

so P' = P^new bit for bit: the served rows are exactly the trainer's published rows (within
quantization.py's int8 bound |x − x̂| ≤ scale/2 of the trainer's fp32 rows), whatever the
number of deltas — nothing is rounded, nothing drifts. It pays because a row moved by a few
Adam steps keeps most of its codes: the differences cluster at 0 (and 255 = −1), and the
high bytes of the scale / bias bit differences are mostly 0; the table's file is written
with deflate. Bytes: deflate(row_gaps) + Σ_P deflate(P_delta) (+ npz framing) against
k·(i + D + 4) for "values" (bench-freshness, DIN, validation day: 0.57 of their bytes).

>>> arrays = encode({"values": q_served, "scale_bias": sb_served}, {"values": q_new, ...}, rows)
>>> rows, parts = decode({"values": q_served, "scale_bias": sb_served}, arrays)   # parts == new[rows]
"""
import zlib
from typing import Dict, Tuple

import numpy as np

CODINGS = ("values", "code_delta")  # PublishConfig.delta_rows
PARTS = ("values", "scale_bias")


class RowDeltaError(ValueError):
    """A coded row payload that does not fit the served table (the message names the array)."""


def _bits(a: np.ndarray) -> np.ndarray:
    """The array's bit patterns as unsigned ints of the same width (a view, no copy)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def encode(served: Dict[str, np.ndarray], new: Dict[str, np.ndarray], rows: np.ndarray,
           index_dtype=np.uint16) -> Dict[str, np.ndarray]:
    """{"row_gaps", "<part>_delta" per part} for the rows `rows` (module docstring)."""
    rows = np.asarray(rows, np.int64)
    if rows.size and (np.any(np.diff(rows) <= 0) or rows[0] < 0):
        raise ValueError("row_delta.encode: rows must be strictly increasing and >= 0")
    out = {"row_gaps": np.diff(rows, prepend=0).astype(index_dtype)}
    for part in PARTS:
        if part not in new:
            continue
        s, n = np.asarray(served[part]), np.asarray(new[part])
        if s.dtype != n.dtype or s.shape != n.shape:
            raise ValueError(f"row_delta.encode: {part} served {s.dtype}{list(s.shape)} vs new {n.dtype}{list(n.shape)}")
        out[f"{part}_delta"] = _bits(n[rows]) - _bits(s[rows])  # unsigned: wraps mod 2^w
    return out


def decode(served: Dict[str, np.ndarray], arrays: Dict[str, np.ndarray]) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:
    """(rows int64 [k], {part: the new rows [k, …] in the served part's dtype}); RowDeltaError
    when the gaps, a part's dtype or shape, or the set of parts do not fit `served`."""
    gaps = arrays.get("row_gaps")
    if gaps is None or gaps.ndim != 1 or gaps.dtype.kind not in "ui":
        raise RowDeltaError(f"row_gaps: expected a 1-d integer array, got {None if gaps is None else gaps.dtype}")
    rows = np.cumsum(gaps.astype(np.int64))
    count = int(next(iter(served.values())).shape[0])
    if rows.size and (gaps[0] < 0 or np.any(gaps[1:] <= 0) or rows[-1] >= count):
        raise RowDeltaError(f"row_gaps: rows not strictly increasing inside [0, {count})")
    wanted = {f"{p}_delta" for p in served} | {"row_gaps"}
    if set(arrays) != wanted:
        raise RowDeltaError(f"arrays {sorted(arrays)}, expected {sorted(wanted)}")
    parts = {}
    for part, s in served.items():
        d, bits = arrays[f"{part}_delta"], _bits(np.asarray(s))
        if d.dtype != bits.dtype or d.shape != (len(rows),) + bits.shape[1:]:
            raise RowDeltaError(f"{part}_delta: {d.dtype}{list(d.shape)} does not fit {s.dtype}{list(s.shape)} "
                                f"with {len(rows)} rows (expected {bits.dtype})")
        parts[part] = (bits[rows] + d).view(s.dtype)
    return rows, parts


def deflated_bytes(arrays: Dict[str, np.ndarray], level: int = 6) -> int:
    """Σ deflate(array bytes): the payload of a coded table without npz framing (bench-freshness)."""
    return int(sum(len(zlib.compress(np.ascontiguousarray(a).tobytes(), level)) for a in arrays.values()))
