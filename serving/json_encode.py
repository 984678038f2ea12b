"""Output tensors -> JSON text, written as TF Serving writes them, without a Python float
object per value (the REST hot path: 100 candidates x 100 quantiles = 10,000 floats).

TF Serving (``util/json_tensor.cc`` ``WriteDecimal``) writes a float with
``absl::StrCat`` (printf ``%g``, 6 significant digits) and, when those 6 digits do not
read back as the same float, with ``%.9g`` (``max_digits10``); a text with neither '.'
nor 'e' gets ``.0`` (so 3 is ``3.0``, while 9000000 stays ``9e+06``). Here the choice
is made vectorised (numpy) per element, and each row's text comes from one C-level
``%`` format over a per-element format string (``%.6g`` | ``%.9g`` | either + ``.0``).
A 6-digit candidate whose scaled value lies within 1e-6 of a rounding tie takes 9
digits, so the text always reads back exactly (9 digits always round-trip a float32).

`row_texts(name, arr)` gives one JSON text per row (dimension 0); float32 rows of rank
<= 1 take the fast path, everything else goes through `json_tensor.tensor_to_json`.
Non-finite values are the caller's business (`predict_codec` refuses them).
"""
import json

import numpy as np

from serving.json_tensor import tensor_to_json

_TOKENS = np.array(["%.6g", "%.9g", "%.6g.0", "%.9g.0"], dtype=object)


def _rounded(a: np.ndarray, exp10: np.ndarray, digits: int):
    """(|x| rounded to `digits` significant digits, near a rounding tie) in float64."""
    p = digits - 1 - exp10
    up = 10.0 ** np.abs(p)  # exact powers of ten up to 1e22; divide rather than x 10^-k
    scaled = np.where(p >= 0, a * up, a / up)
    tie = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    m = np.round(scaled)
    return np.where(p >= 0, m / up, m * up), tie


def float_formats(x: np.ndarray) -> np.ndarray:
    """Per-element printf format (object array, shape of `x`) of TF Serving's text for
    the finite float32 values `x`."""
    x = np.asarray(x, np.float32)
    a = np.abs(x.astype(np.float64))
    exp10 = np.zeros(a.shape, np.float64)
    nz = a != 0
    exp10[nz] = np.floor(np.log10(a[nz]))
    r6, tie = _rounded(a, exp10, 6)
    six = ~nz | (~tie & (r6.astype(np.float32) == a.astype(np.float32)))
    r9, _ = _rounded(a, exp10, 9)
    shown = np.where(six, r6, r9)  # the value the text spells
    whole = (shown == np.floor(shown)) & (shown < np.where(six, 1e6, 1e9))
    return _TOKENS[(~six).astype(np.int64) + 2 * whole.astype(np.int64)]


def row_texts(name: str, arr: np.ndarray) -> list:
    """JSON text of each arr[i] (arr has rank >= 1)."""
    if arr.dtype == np.float32 and arr.ndim <= 2 and arr.size:
        values = arr.astype(np.float64).tolist()
        fmts = float_formats(arr)
        if arr.ndim == 1:
            return [f % v for f, v in zip(fmts.tolist(), values)]
        return ["[" + ", ".join(f) % tuple(v) + "]" for f, v in zip(fmts.tolist(), values)]
    return [json.dumps(v) for v in tensor_to_json(name, arr)]


def tensor_text(name: str, arr: np.ndarray) -> str:
    """JSON text of a whole tensor (any rank). A float32 tensor of rank 1 or 2 is one
    printf call over a format string of the whole tensor (the columnar reply's hot path:
    one C-level pass over 10,000 values instead of one per row)."""
    if arr.ndim == 0:
        return row_texts(name, arr.reshape(1))[0]
    if arr.dtype == np.float32 and arr.ndim <= 2 and arr.size:
        fmts = float_formats(arr).tolist()
        if arr.ndim == 1:
            fmt = "[" + ", ".join(fmts) + "]"
        else:
            fmt = "[[" + "], [".join(map(", ".join, fmts)) + "]]"
        return fmt % tuple(arr.astype(np.float64).ravel().tolist())
    return "[" + ", ".join(row_texts(name, arr)) + "]"
