"""JSON values <-> tensors for the REST API (TF Serving's ``util/json_tensor.cc`` job).

`InputConverter` checks one input's JSON value against its ``tf.TensorSpec`` (dtype,
integer range, fixed dimensions, equal row shapes) and builds the numpy array the
signature is fed; ``{"b64": "..."}`` fills any ``tf.string`` input with binary data.
A value that does not fit raises `JsonTensorError` naming the input and the location
in the request, e.g. ``instances[3]['hist_video_id'][7]``.

`tensor_to_json` goes the other way for outputs: float32 as its shortest round-trip
decimal, strings as UTF-8 text or ``{"b64": ...}`` (always for outputs named
``*_bytes``), as TF Serving prints them.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # DESIGN.md: Keras 2 only
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import base64  # noqa: E402
import binascii  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


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
def tensor_to_json(name: str, arr: np.ndarray):
    """Tensor -> JSON value. float32 uses its shortest round-trip decimal, as TF Serving."""
    if arr.dtype == np.float32 or arr.dtype == np.float16:
        flat = np.empty(arr.size, dtype=object)
        flat[:] = [float(str(v)) for v in arr.ravel()]
        return flat.reshape(arr.shape).tolist()
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
