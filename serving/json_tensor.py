"""JSON values <-> tensors for the REST API (TF Serving's ``util/json_tensor.cc`` job).

`InputConverter` checks one input's JSON value against its ``tf.TensorSpec`` (dtype,
integer range, fixed dimensions, equal row shapes) and builds the numpy array the
signature is fed; ``{"b64": "..."}`` fills any ``tf.string`` input with binary data.
A value that does not fit raises `JsonTensorError` naming the input and the location
in the request, e.g. ``instances[3]['hist_video_id'][7]``.

Fast path (`InputConverter.fast_array`): numeric inputs are built with one
``np.array`` call over the decoded JSON list (C loops, no Python per element) and then
validated vectorised: dtype kind (ints only for int inputs, TF Serving's
``json_tensor.cc`` rejects ``1.0``), shape against the signature, integer range and
finite float32 values. Anything the fast path cannot prove valid (a bool somewhere in
the body, ragged lists, strings, nulls) falls back to the element-wise checker, which
produces the error message naming the exact element.

Deliberate deviations from TF Serving, for ``{"error"}``-free garbage-in: NaN/Infinity
in a float input and floats beyond float32's range are refused with a 400 (TF Serving
accepts them and silently computes with them).

`tensor_to_json` goes the other way for outputs: float32 as the 6- or 9-digit decimal
TF Serving prints, strings as UTF-8 text or ``{"b64": ...}`` (always for outputs named
``*_bytes``), as TF Serving prints them.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import base64
import binascii
import json
import math

import numpy as np
import tensorflow as tf


class JsonTensorError(ValueError):
    """A JSON value that does not fit its input's TensorSpec; `message` says where."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _kind(dtype: tf.DType) -> str:
    if dtype == tf.string:
        return "string"
    if dtype == tf.bool:
        return "bool"
    if dtype.is_integer:
        return "int"
    if dtype.is_floating:
        return "float"
    return "unsupported"


def json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def shape_text(shape: tf.TensorShape) -> str:
    return "[" + ", ".join("-1" if d is None else str(d) for d in shape.as_list()) + "]"


class InputConverter:
    """Validates one input's JSON value against its TensorSpec and builds the array.

    `where(path)` turns an index path into a readable location, e.g.
    ``instances[3]['hist_video_id'][7]``.
    """

    def __init__(self, name: str, spec, where):
        if not isinstance(spec, tf.TensorSpec):
            raise JsonTensorError(f"input '{name}' is a {type(spec).__name__}; only "
                                  "dense tensors are supported over REST")
        self.name = name
        self.spec = spec
        self.kind = _kind(spec.dtype)
        if self.kind == "unsupported":
            raise JsonTensorError(f"input '{name}' has dtype {spec.dtype.name}, which "
                                  "this server cannot fill from JSON")
        self.where = where
        if self.kind == "int":
            info = np.iinfo(spec.dtype.as_numpy_dtype)
            self.int_range = (int(info.min), int(info.max))

    def _fail(self, path, msg):
        raise JsonTensorError(f"input '{self.name}' at {self.where(path)}: {msg}")

    def scalar(self, value, path):
        kind = self.kind
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                self._fail(path, f"expected an integer ({self.spec.dtype.name}), got "
                                 f"{json_type(value)} {_short(value)}")
            lo, hi = self.int_range
            if not lo <= value <= hi:
                self._fail(path, f"{value} is out of range for {self.spec.dtype.name}")
            return value
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self._fail(path, f"expected a number ({self.spec.dtype.name}), got "
                                 f"{json_type(value)} {_short(value)}")
            if ((isinstance(value, float) and not math.isfinite(value))
                    or abs(value) > _FLOAT_MAX.get(self.spec.dtype, math.inf)):
                self._fail(path, f"{_short(value)} is not a finite {self.spec.dtype.name} "
                                 "(NaN, Infinity and out-of-range numbers are refused)")
            return float(value)
        if kind == "bool":
            if not isinstance(value, bool):
                self._fail(path, f"expected true/false, got {json_type(value)} "
                                 f"{_short(value)}")
            return value
        # string: UTF-8 text, or {"b64": ...} for binary (TF Serving's convention)
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (binascii.Error, ValueError) as e:
                self._fail(path, f"invalid base64 in {{\"b64\": ...}}: {e}")
        self._fail(path, f"expected a string or {{\"b64\": \"...\"}}, got "
                         f"{json_type(value)} {_short(value)}")

    def nested(self, value, dims, path):
        """Checks `value` against `dims` (None = any length); returns it converted."""
        if not dims:
            return self.scalar(value, path)
        if not isinstance(value, list):
            self._fail(path, f"expected a list of length "
                             f"{'any' if dims[0] is None else dims[0]} (signature shape "
                             f"{shape_text(self.spec.shape)}), got {json_type(value)} "
                             f"{_short(value)}")
        if dims[0] is not None and len(value) != dims[0]:
            self._fail(path, f"list has length {len(value)}, expected length {dims[0]} "
                             f"(signature shape {shape_text(self.spec.shape)})")
        return [self.nested(v, dims[1:], path + [i]) for i, v in enumerate(value)]

    def fast_array(self, value, dims, may_hold_bools: bool) -> "np.ndarray | None":
        """`value` as an array of shape `dims` (None = any) if it provably fits, else None.

        One ``np.array`` over the JSON list, then vectorised checks. JSON booleans would
        silently become 0/1 here, so a body that may hold one takes the slow path.
        """
        if self.kind not in ("int", "float") or may_hold_bools:
            return None
        try:
            arr = np.array(value)
        except (ValueError, OverflowError, TypeError):  # ragged lists, huge ints
            return None
        if arr.ndim != len(dims) or any(d is not None and d != n
                                         for d, n in zip(dims, arr.shape)):
            return None
        kind = arr.dtype.kind
        target = self.spec.dtype.as_numpy_dtype
        if self.kind == "int":
            if kind not in "iu":
                return None
            if arr.size and (arr.min() < self.int_range[0] or arr.max() > self.int_range[1]):
                return None
            return arr.astype(target, copy=False)
        if kind not in "iuf":
            return None
        out = arr.astype(target, copy=False)
        if not np.isfinite(out).all():  # NaN/Infinity, or beyond float32's range
            return None
        return out

    def to_array(self, items: list, dims, path_of) -> np.ndarray:
        """`items[i]` is one batch row; all rows must have the same shape."""
        converted = [self.nested(v, dims, path_of(i)) for i, v in enumerate(items)]
        first_shape = _list_shape(converted[0]) if converted else ()
        for i, v in enumerate(converted):
            if _list_shape(v) != first_shape:
                self._fail(path_of(i), f"shape {list(_list_shape(v))} differs from "
                                       f"{list(first_shape)} at {self.where(path_of(0))}; "
                                       "all rows of a batch need the same shape")
        if self.kind == "string":  # object array of bytes; np.array would make S<n>
            return _nested_to_object(converted, (len(converted),) + first_shape)
        return np.array(converted, dtype=self.spec.dtype.as_numpy_dtype).reshape(
            (len(converted),) + first_shape)


_FLOAT_MAX = {tf.float16: float(np.finfo(np.float16).max),
              tf.float32: float(np.finfo(np.float32).max)}


def _list_shape(value) -> tuple:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape)


def _nested_to_object(converted, shape) -> np.ndarray:
    flat = []

    def walk(v):
        if isinstance(v, list):
            for x in v:
                walk(x)
        else:
            flat.append(v)
    walk(converted)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape)


# --------------------------------------------------------------------------- outputs
def short_decimals(x: np.ndarray) -> np.ndarray:
    """float32 -> float64 holding the decimal TF Serving prints: 6 significant digits if
    they read back as the same float32, else max_digits10 = 9 (``util/json_tensor.cc``
    WriteDecimal; `serving.json_encode` writes the same text). Vectorised: round(d·10^s)
    / 10^s is the double nearest that decimal (both exact doubles, one correctly rounded
    division), so ``repr`` prints it short; tiny/huge magnitudes where 10^s is not exact
    keep their exact float64 value."""
    d = x.astype(np.float64).ravel()
    out = d.copy()
    nz = np.isfinite(d) & (d != 0)
    exp = np.zeros(d.shape, np.int64)
    exp[nz] = np.floor(np.log10(np.abs(d[nz]))).astype(np.int64)
    todo = nz.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for digits in (6, 9):
            s = digits - 1 - exp
            ok_scale = todo & (np.abs(s) <= 22)
            if not ok_scale.any():
                break
            pos = ok_scale & (s >= 0)
            neg = ok_scale & (s < 0)
            r = np.empty_like(d)
            r[pos] = np.round(d[pos] * 10.0 ** s[pos]) / 10.0 ** s[pos]
            r[neg] = np.round(d[neg] / 10.0 ** -s[neg]) * 10.0 ** -s[neg]
            good = ok_scale & (r.astype(x.dtype) == x.ravel())
            out[good] = r[good]
            todo &= ~good
    return out.reshape(x.shape)


def tensor_to_json(name: str, arr: np.ndarray):
    """Tensor -> JSON value. float32 as TF Serving's 6- or 9-digit round-trip decimal."""
    if arr.dtype == np.float32 or arr.dtype == np.float16:
        return short_decimals(arr).tolist()
    if arr.dtype == object or arr.dtype.kind == "S":
        flat = np.empty(arr.size, dtype=object)
        flat[:] = [_json_bytes(name, v) for v in arr.ravel()]
        return flat.reshape(arr.shape).tolist()
    return arr.tolist()


def _json_bytes(name: str, value: bytes):
    if not name.endswith("_bytes"):  # TF Serving b64-encodes outputs named *_bytes
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return {"b64": base64.b64encode(value).decode("ascii")}
