"""Embedded TF-Serving-REST-compatible model server (local runs, tests, `make run`).

Production serves the pushed model directory with TF Serving (`tensorflow/serving`
image, see `serving/models.config`). This module speaks the same REST subset so the
same client code and JSON work against either:

- ``POST /v1/models/<name>[/versions/<v>]:predict`` with
  ``{"signature_name": ..., "instances": [{feature: value, ...}, ...]}`` (row format,
  reply ``{"predictions": [...]}``) or ``{"inputs": {feature: [...], ...}}`` (columnar
  format, reply ``{"outputs": {...}}``). A signature with a single output gets bare
  values instead of ``{output: value}`` objects, as in TF Serving. ``{"b64": "..."}``
  is accepted for any ``tf.string`` input (e.g. serialized tf.Examples for the
  ``serving_examples`` signature).
- ``GET /v1/models/<name>[/versions/<v>]`` (version status) and
  ``GET /v1/models/<name>[/versions/<v>]/metadata`` (signature defs, as TF Serving
  prints them).

Requests are validated against the loaded SavedModel's signature (input names,
dtypes, shapes), never against a hard-coded feature list; every refused request gets
a 4xx ``{"error": "..."}`` naming the offending field. All instances of a request
go through the model in one call.

Versions: the newest integer-named directory ``<model_base_path>/<version>/`` that
holds a ``saved_model.pb`` is served (TF Serving's "latest" version policy). A poller
thread rescans every ``file_system_poll_wait_seconds`` and loads a newer version in
the background; the swap is atomic under a lock, so requests in flight finish on the
version they started with. Non-numeric names (``.tmp-3``, ``3.partial``) are
ignored: an atomic publisher writes to such a temp dir and renames it when complete.

CLI (TF Serving's flag names)::

    python -m serving.server --model_base_path outputs/serving_model/watchtime_ranker \
        --model_name watchtime_ranker --port 8501
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # DESIGN.md: Keras 2 only
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import base64  # noqa: E402
import binascii  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from http import HTTPStatus  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from typing import Dict, List, Optional, Tuple  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

log = logging.getLogger("serving.server")

DEFAULT_SIGNATURE = "serving_default"
DEFAULT_POLL_WAIT_SECONDS = 1.0  # TF Serving's --file_system_poll_wait_seconds default
MAX_BODY_BYTES = 64 * 1024 * 1024
_SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
_VERSION_DIR = re.compile(r"^[0-9]+$")


class RequestError(Exception):
    """A refused request: becomes HTTP `status` with body {"error": message}."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.message = message
        self.status = int(status)


# --------------------------------------------------------------------------- versions
def _saved_model_file(path: str) -> Optional[str]:
    for name in _SAVED_MODEL_FILES:
        f = os.path.join(path, name)
        if os.path.isfile(f):
            return f
    return None


def list_versions(model_base_path: str) -> List[int]:
    """Complete version dirs under `model_base_path`, ascending.

    A version dir has an integer name and holds a SavedModel; temp dirs of an atomic
    publisher (any non-integer name) and half-written dirs are skipped.
    """
    try:
        names = os.listdir(model_base_path)
    except FileNotFoundError:
        return []
    versions = []
    for name in names:
        path = os.path.join(model_base_path, name)
        if _VERSION_DIR.match(name) and os.path.isdir(path) and _saved_model_file(path):
            versions.append(int(name))
    return sorted(versions)


def _read_signature_defs(path: str) -> dict:
    """SignatureDefs of a SavedModel as TF Serving prints them in /metadata."""
    from google.protobuf import json_format, text_format
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    f = _saved_model_file(path)
    with open(f, "rb") as fh:
        data = fh.read()
    if f.endswith(".pbtxt"):
        text_format.Parse(data.decode("utf-8"), sm)
    else:
        sm.ParseFromString(data)
    meta_graph = sm.meta_graphs[0]
    out = {}
    for name, sig in meta_graph.signature_def.items():
        out[name] = json_format.MessageToDict(
            sig, including_default_value_fields=True, preserving_proto_field_name=True)
    return out


class Signature:
    """One serving signature: its concrete function and input/output specs."""

    def __init__(self, name: str, fn):
        self.name = name
        self.fn = fn
        _, kwargs = fn.structured_input_signature
        self.inputs: Dict[str, tf.TypeSpec] = dict(sorted(kwargs.items()))
        outputs = fn.structured_outputs
        if not isinstance(outputs, dict):
            outputs = {"output_0": outputs}
        self.outputs = dict(sorted(outputs.items()))

    def __call__(self, feed: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        tensors = {k: tf.constant(v, dtype=self.inputs[k].dtype) for k, v in feed.items()}
        result = self.fn(**tensors)
        if not isinstance(result, dict):
            result = {"output_0": result}
        return {k: v.numpy() for k, v in result.items()}


class ServedVersion:
    """A loaded SavedModel version."""

    def __init__(self, version: int, path: str):
        self.version = version
        self.path = path
        self.model = tf.saved_model.load(path)
        self.signatures = {name: Signature(name, fn)
                           for name, fn in self.model.signatures.items()}
        if not self.signatures:
            raise ValueError(f"SavedModel at {path} has no serving signatures")
        self.signature_defs = _read_signature_defs(path)


class ModelManager:
    """Serves the newest version of one model and polls its base path for new ones."""

    def __init__(self, model_name: str, model_base_path: str,
                 poll_wait_seconds: float = DEFAULT_POLL_WAIT_SECONDS):
        self.model_name = model_name
        self.model_base_path = os.path.abspath(model_base_path)
        self.poll_wait_seconds = poll_wait_seconds
        self._lock = threading.Lock()        # guards _current and _failed (the swap)
        self._load_lock = threading.Lock()   # one load at a time
        self._current: Optional[ServedVersion] = None
        self._failed: Dict[int, Tuple[float, str]] = {}  # version -> (mtime, error)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def current(self) -> Optional[ServedVersion]:
        with self._lock:
            return self._current

    def poll(self) -> bool:
        """Load the newest complete version if it is not the one served. True if swapped.

        Like TF Serving's latest-1 policy, a removed newest version rolls back to the
        next newest. A version that fails to load is reported in the status and not
        retried until its saved_model file changes; the old version keeps serving.
        """
        with self._load_lock:
            versions = list_versions(self.model_base_path)
            if not versions:
                return False
            target = versions[-1]
            current = self.current
            if current is not None and current.version == target:
                return False
            path = os.path.join(self.model_base_path, str(target))
            mtime = os.path.getmtime(_saved_model_file(path))
            with self._lock:
                failed = self._failed.get(target)
            if failed is not None and failed[0] == mtime:
                return False
            log.info("loading model %r version %d from %s", self.model_name, target, path)
            try:
                loaded = ServedVersion(target, path)
            except Exception as e:  # keep serving the old version
                log.error("failed to load model %r version %d: %s", self.model_name, target, e)
                with self._lock:
                    self._failed[target] = (mtime, f"{type(e).__name__}: {e}")
                return False
            with self._lock:
                self._current = loaded
                self._failed.pop(target, None)
            log.info("serving model %r version %d", self.model_name, target)
            return True

    def start_polling(self) -> None:
        if self.poll_wait_seconds <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._poll_loop, daemon=True,
                                        name=f"poll-{self.model_name}")
        self._thread.start()

    def _poll_loop(self) -> None:
        while not self._stop.wait(self.poll_wait_seconds):
            try:
                self.poll()
            except Exception:  # a poller must survive a flaky file system
                log.exception("polling %s failed", self.model_base_path)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def version_status(self, version: Optional[int] = None) -> dict:
        with self._lock:
            current, failed = self._current, dict(self._failed)
        rows = []
        if current is not None:
            rows.append({"version": str(current.version), "state": "AVAILABLE",
                         "status": {"error_code": "OK", "error_message": ""}})
        for v, (_, err) in sorted(failed.items(), reverse=True):
            rows.append({"version": str(v), "state": "END",
                         "status": {"error_code": "UNKNOWN", "error_message": err}})
        if version is not None:
            rows = [r for r in rows if r["version"] == str(version)]
            if not rows:
                raise RequestError(f"model '{self.model_name}' has no version {version}; "
                                   f"{self._serving_note(current)}", HTTPStatus.NOT_FOUND)
        if not rows:
            raise RequestError(f"Could not find any versions of model '{self.model_name}' "
                               f"under {self.model_base_path}", HTTPStatus.NOT_FOUND)
        return {"model_version_status": rows}

    def _serving_note(self, current: Optional[ServedVersion]) -> str:
        return (f"serving version {current.version}" if current is not None
                else "no version is loaded yet")

    def get(self, version: Optional[int] = None) -> ServedVersion:
        current = self.current
        if current is None:
            raise RequestError(f"model '{self.model_name}' has no loaded version yet "
                               f"(waiting for <version>/saved_model.pb under "
                               f"{self.model_base_path})", HTTPStatus.SERVICE_UNAVAILABLE)
        if version is not None and version != current.version:
            raise RequestError(f"model '{self.model_name}' version {version} is not "
                               f"available; {self._serving_note(current)}",
                               HTTPStatus.NOT_FOUND)
        return current


# --------------------------------------------------------------------------- requests
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


def _json_type(value) -> str:
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


def _shape_text(shape: tf.TensorShape) -> str:
    return "[" + ", ".join("-1" if d is None else str(d) for d in shape.as_list()) + "]"


class _InputConverter:
    """Validates one input's JSON value against its TensorSpec and builds the array.

    `where(path)` turns an index path into a readable location, e.g.
    ``instances[3]['hist_video_id'][7]``.
    """

    def __init__(self, name: str, spec, where):
        if not isinstance(spec, tf.TensorSpec):
            raise RequestError(f"input '{name}' is a {type(spec).__name__}; only dense "
                               "tensors are supported over REST", HTTPStatus.BAD_REQUEST)
        self.name = name
        self.spec = spec
        self.kind = _kind(spec.dtype)
        if self.kind == "unsupported":
            raise RequestError(f"input '{name}' has dtype {spec.dtype.name}, which this "
                               "server cannot fill from JSON")
        self.where = where
        if self.kind == "int":
            info = np.iinfo(spec.dtype.as_numpy_dtype)
            self.int_range = (int(info.min), int(info.max))

    def _fail(self, path, msg):
        raise RequestError(f"input '{self.name}' at {self.where(path)}: {msg}")

    def scalar(self, value, path):
        kind = self.kind
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                self._fail(path, f"expected an integer ({self.spec.dtype.name}), got "
                                 f"{_json_type(value)} {_short(value)}")
            lo, hi = self.int_range
            if not lo <= value <= hi:
                self._fail(path, f"{value} is out of range for {self.spec.dtype.name}")
            return value
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self._fail(path, f"expected a number ({self.spec.dtype.name}), got "
                                 f"{_json_type(value)} {_short(value)}")
            return float(value)
        if kind == "bool":
            if not isinstance(value, bool):
                self._fail(path, f"expected true/false, got {_json_type(value)} "
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
                         f"{_json_type(value)} {_short(value)}")

    def nested(self, value, dims, path):
        """Checks `value` against `dims` (None = any length); returns it converted."""
        if not dims:
            return self.scalar(value, path)
        if not isinstance(value, list):
            self._fail(path, f"expected a list of length "
                             f"{'any' if dims[0] is None else dims[0]} (signature shape "
                             f"{_shape_text(self.spec.shape)}), got {_json_type(value)} "
                             f"{_short(value)}")
        if dims[0] is not None and len(value) != dims[0]:
            self._fail(path, f"list has length {len(value)}, expected length {dims[0]} "
                             f"(signature shape {_shape_text(self.spec.shape)})")
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


def parse_predict_request(body: bytes, signatures: Dict[str, Signature]):
    """Validates a :predict body. Returns (signature, feed dict, row_format, batch)."""
    try:
        request = json.loads(body.decode("utf-8") if isinstance(body, bytes) else body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"request body is not valid JSON: {e}")
    if not isinstance(request, dict):
        raise RequestError(f"request body must be a JSON object, got {_json_type(request)}")
    unknown = sorted(set(request) - {"signature_name", "instances", "inputs"})
    if unknown:
        raise RequestError(f"unknown request field '{unknown[0]}'; expected 'instances' or "
                           "'inputs' and optionally 'signature_name'")
    sig_name = request.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(sig_name, str):
        raise RequestError("'signature_name' must be a string")
    if sig_name not in signatures:
        raise RequestError(f"unknown signature_name '{sig_name}'; the model has: "
                           f"{sorted(signatures)}")
    sig = signatures[sig_name]
    if ("instances" in request) == ("inputs" in request):
        raise RequestError("request needs exactly one of 'instances' (row format) or "
                           "'inputs' (columnar format)")
    if "instances" in request:
        feed, batch = _parse_instances(request["instances"], sig)
        return sig, feed, True, batch
    feed, batch = _parse_inputs(request["inputs"], sig)
    return sig, feed, False, batch


def _check_names(names, sig: Signature, where: str):
    expected = set(sig.inputs)
    unknown = sorted(set(names) - expected)
    if unknown:
        raise RequestError(f"unknown input '{unknown[0]}' in {where}; signature "
                           f"'{sig.name}' takes: {sorted(expected)}")
    missing = sorted(expected - set(names))
    if missing:
        raise RequestError(f"missing input '{missing[0]}' in {where} (signature "
                           f"'{sig.name}' needs {len(expected)} inputs; missing: {missing})")


def _parse_instances(instances, sig: Signature):
    if not isinstance(instances, list):
        raise RequestError(f"'instances' must be a list, got {_json_type(instances)}")
    if not instances:
        raise RequestError("'instances' is empty")
    single = len(sig.inputs) == 1
    only = next(iter(sig.inputs)) if single else None
    named = isinstance(instances[0], dict) and not (
        single and set(instances[0]) == {"b64"})
    if not named and not single:
        raise RequestError(f"instances[0] must be an object of named inputs (signature "
                           f"'{sig.name}' takes {len(sig.inputs)} inputs), got "
                           f"{_json_type(instances[0])}")
    if not named:  # single-input signature: each instance is the bare value
        for i, inst in enumerate(instances):
            if isinstance(inst, dict) and set(inst) != {"b64"}:
                raise RequestError(f"inconsistent instance keys: instances[{i}] is an "
                                   "object but instances[0] is a bare value of input "
                                   f"'{only}'")
        columns = {only: instances}
    else:
        keys0 = set(instances[0])
        for i, inst in enumerate(instances):
            if not isinstance(inst, dict):
                raise RequestError(f"instances[{i}] must be an object of named inputs like "
                                   f"instances[0], got {_json_type(inst)}")
            keys = set(inst)
            unknown = sorted(keys - set(sig.inputs))
            if unknown:
                _check_names(keys, sig, f"instances[{i}]")
            if i > 0 and keys != keys0:
                lacks = sorted(keys0 - keys)
                extra = sorted(keys - keys0)
                if lacks:
                    raise RequestError(f"inconsistent instance keys: instances[{i}] lacks "
                                       f"'{lacks[0]}', which instances[0] has; every "
                                       "instance needs the same inputs")
                raise RequestError(f"inconsistent instance keys: instances[{i}] has "
                                   f"'{extra[0]}', which instances[0] lacks; every "
                                   "instance needs the same inputs")
            if i == 0:
                _check_names(keys, sig, "instances[0]")
        columns = {k: [inst[k] for inst in instances] for k in sig.inputs}

    def where_row(name):
        def where(path):
            tail = "".join(f"[{p}]" for p in path[1:])
            return (f"instances[{path[0]}]" if not named
                    else f"instances[{path[0]}]['{name}']") + tail
        return where

    feed = {}
    for name, spec in sig.inputs.items():
        conv = _InputConverter(name, spec, where_row(name))
        dims = spec.shape.as_list()[1:] if spec.shape.rank else []
        if spec.shape.rank == 0:
            raise RequestError(f"input '{name}' is a scalar without batch dimension; use "
                               "the columnar 'inputs' format")
        feed[name] = conv.to_array(columns[name], dims, lambda i: [i])
    return feed, len(instances)


def _parse_inputs(inputs, sig: Signature):
    if not isinstance(inputs, dict) or (len(sig.inputs) == 1 and set(inputs) == {"b64"}):
        if len(sig.inputs) != 1:
            raise RequestError(f"'inputs' must be an object of named inputs (signature "
                               f"'{sig.name}' takes {len(sig.inputs)} inputs)")
        inputs = {next(iter(sig.inputs)): inputs}
    _check_names(inputs.keys(), sig, "'inputs'")
    feed, batch, batch_from = {}, None, None
    for name, spec in sig.inputs.items():
        value = inputs[name]

        def where(path, name=name):
            return f"inputs['{name}']" + "".join(f"[{p}]" for p in path)
        conv = _InputConverter(name, spec, where)
        dims = spec.shape.as_list() if spec.shape.rank is not None else None
        if dims is None:
            raise RequestError(f"input '{name}' has unknown rank; not supported")
        if not dims:
            feed[name] = np.array(conv.scalar(value, []),
                                  dtype=object if conv.kind == "string"
                                  else spec.dtype.as_numpy_dtype)
            continue
        if not isinstance(value, list):
            raise RequestError(f"input '{name}' at {where([])}: expected a list with a "
                               f"batch dimension (signature shape "
                               f"{_shape_text(spec.shape)}), got {_json_type(value)}")
        if dims[0] is not None and len(value) != dims[0]:
            raise RequestError(f"input '{name}': batch size {len(value)}, the signature "
                               f"needs {dims[0]}")
        if batch is None:
            batch, batch_from = len(value), name
        elif len(value) != batch:
            raise RequestError(f"input '{name}' has batch size {len(value)} but "
                               f"'{batch_from}' has {batch}; all inputs need the same "
                               "batch size")
        feed[name] = conv.to_array(value, dims[1:], lambda i: [i])
    if batch == 0:
        raise RequestError("'inputs' has batch size 0")
    return feed, batch


# --------------------------------------------------------------------------- responses
def _json_array(name: str, arr: np.ndarray):
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


def format_predict_response(outputs: Dict[str, np.ndarray], row_format: bool, batch: int):
    names = sorted(outputs)
    values = {k: _json_array(k, outputs[k]) for k in names}
    if not row_format:
        return {"outputs": values[names[0]] if len(names) == 1 else values}
    for k in names:
        if outputs[k].ndim == 0 or outputs[k].shape[0] != batch:
            raise RequestError(f"output '{k}' has shape {list(outputs[k].shape)}, whose "
                               f"first dimension is not the batch size {batch}; use the "
                               "columnar 'inputs' format", HTTPStatus.INTERNAL_SERVER_ERROR)
    if len(names) == 1:
        return {"predictions": values[names[0]]}
    return {"predictions": [{k: values[k][i] for k in names} for i in range(batch)]}


def predict(served: ServedVersion, body: bytes) -> dict:
    sig, feed, row_format, batch = parse_predict_request(body, served.signatures)
    try:
        outputs = sig(feed)
    except tf.errors.InvalidArgumentError as e:  # e.g. an unparsable tf.Example
        raise RequestError(f"signature '{sig.name}' rejected the input: "
                           f"{_tf_error_text(e.message)}")
    return format_predict_response(outputs, row_format, batch)


def _tf_error_text(message: str) -> str:
    """The op's own message without TF's graph-execution boilerplate."""
    skip = ("Graph execution error", "Detected at", "<stack traces", "[[")
    lines = [ln.strip() for ln in message.splitlines()]
    text = " ".join(ln for ln in lines if ln and not ln.startswith(skip))
    return re.sub(r"\s*\[Op:[^\]]*\]\s*$", "", text) or message.strip()


def metadata(manager: ModelManager, served: ServedVersion) -> dict:
    return {"model_spec": {"name": manager.model_name, "signature_name": "",
                           "version": str(served.version)},
            "metadata": {"signature_def": {"signature_def": served.signature_defs}}}


# --------------------------------------------------------------------------- HTTP
_ROUTE = re.compile(r"^/v1/models/(?P<name>[^/:]+)"
                    r"(?:/versions/(?P<version>[^/:]+))?"
                    r"(?P<suffix>/metadata|:[A-Za-z]+)?/?$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for client sessions
    server_version = "watchtime-ranker-serving/1"

    def log_message(self, fmt, *args):  # route http.server's stderr chatter to logging
        log.debug("%s %s", self.address_string(), fmt % args)

    def _send(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, method: str, body: Optional[bytes]):
        path = self.path.split("?", 1)[0]
        m = _ROUTE.match(path)
        if not m:
            raise RequestError(f"unknown path '{path}'; expected /v1/models/<name>"
                               "[/versions/<v>][/metadata|:predict]", HTTPStatus.NOT_FOUND)
        name, version, suffix = m.group("name"), m.group("version"), m.group("suffix")
        managers = self.server.managers
        if name not in managers:
            raise RequestError(f"unknown model '{name}'; this server serves: "
                               f"{sorted(managers)}", HTTPStatus.NOT_FOUND)
        manager = managers[name]
        if version is not None:
            if not version.isdigit():
                raise RequestError(f"version '{version}' in the path is not an integer",
                                   HTTPStatus.NOT_FOUND)
            version = int(version)
        if method == "GET" and suffix is None:
            return manager.version_status(version)
        if method == "GET" and suffix == "/metadata":
            return metadata(manager, manager.get(version))
        if method == "POST" and suffix == ":predict":
            return predict(manager.get(version), body)
        if suffix in (":classify", ":regress"):
            raise RequestError(f"'{suffix[1:]}' is not supported; use ':predict'",
                               HTTPStatus.NOT_IMPLEMENTED)
        raise RequestError(f"{method} {path} is not supported", HTTPStatus.METHOD_NOT_ALLOWED)

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError("missing Content-Length header", HTTPStatus.LENGTH_REQUIRED)
        try:
            n = int(length)
        except ValueError:
            raise RequestError(f"bad Content-Length header '{length}'")
        if n > MAX_BODY_BYTES:
            raise RequestError(f"request body of {n} bytes exceeds {MAX_BODY_BYTES}",
                               HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        return self.rfile.read(n)

    def _handle(self, method: str) -> None:
        try:
            body = None
            if method == "POST":
                try:
                    body = self._read_body()  # always, so keep-alive stays in sync
                except RequestError:
                    self.close_connection = True
                    raise
            payload = self._route(method, body)
            self._send(HTTPStatus.OK, payload)
        except RequestError as e:
            if e.status >= 500:
                log.error("%s %s: %s", method, self.path, e.message)
            self._send(e.status, {"error": e.message})
        except Exception as e:  # a bug or a model failure: 500, server stays up
            log.exception("%s %s failed", method, self.path)
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(e).__name__}: {e}"})

    def do_GET(self):  # noqa: N802 (http.server naming)
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")


class ModelServer(ThreadingHTTPServer):
    """Threaded HTTP server over one or more ModelManagers."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, managers: Dict[str, ModelManager]):
        super().__init__(address, _Handler)
        self.managers = managers
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        host = self.server_address[0]
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{self.port}"

    def start_background(self) -> None:
        for m in self.managers.values():
            m.start_polling()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        name="rest-server")
        self._thread.start()

    def stop(self) -> None:
        """Stops accepting requests, stops the pollers, closes the socket."""
        self.shutdown()
        for m in self.managers.values():
            m.stop()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _read_model_config(path: str) -> Dict[str, str]:
    """TF Serving's --model_config_file (text ModelServerConfig) -> {name: base_path}."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    with open(path) as f:
        text_format.Parse(f.read(), config)
    out = {}
    for c in config.model_config_list.config:
        base = c.base_path
        if not os.path.isabs(base):  # relative to the config file (TF Serving: cwd)
            base = os.path.join(os.path.dirname(os.path.abspath(path)), base)
        out[c.name] = base
        policy = c.model_version_policy
        if policy.WhichOneof("policy_choice") not in (None, "latest") or (
                policy.HasField("latest") and policy.latest.num_versions > 1):
            log.warning("model %r: only the 'latest 1' version policy is implemented; "
                        "serving the newest version only", c.name)
    if not out:
        raise ValueError(f"{path} lists no models (model_config_list {{ config {{...}} }})")
    return out


def make_server(models: Dict[str, str], port: int = 0, host: str = "127.0.0.1",
                poll_wait_seconds: float = DEFAULT_POLL_WAIT_SECONDS) -> ModelServer:
    """Builds a server for {model_name: model_base_path}; loads current versions now."""
    managers = {}
    for name, base in models.items():
        manager = ModelManager(name, base, poll_wait_seconds)
        manager.poll()
        if manager.current is None:
            log.warning("no servable version of model %r under %s yet; waiting for one",
                        name, manager.model_base_path)
        managers[name] = manager
    return ModelServer((host, port), managers)


def start_server(model_base_path: str, model_name: str, port: int = 0,
                 host: str = "127.0.0.1",
                 poll_wait_seconds: float = DEFAULT_POLL_WAIT_SECONDS):
    """Starts a server in a background thread. Returns (server, port).

    The newest version is loaded before this returns. Stop with ``server.stop()``.
    """
    server = make_server({model_name: model_base_path}, port, host, poll_wait_seconds)
    server.start_background()
    return server, server.port


def build_arg_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m serving.server",
        description="TF-Serving-REST-compatible server for pushed SavedModel versions.")
    p.add_argument("--model_base_path", help="directory holding <version>/saved_model.pb")
    p.add_argument("--model_name", default="default",
                   help="name in /v1/models/<name> (TF Serving's default: 'default')")
    p.add_argument("--model_config_file",
                   help="TF Serving text ModelServerConfig (several models); "
                        "replaces --model_name/--model_base_path")
    p.add_argument("--port", "--rest_api_port", dest="port", type=int, default=8501,
                   help="REST port (0 = any free port)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 for all)")
    p.add_argument("--file_system_poll_wait_seconds", type=float,
                   default=DEFAULT_POLL_WAIT_SECONDS,
                   help="seconds between scans for new versions (<= 0: never rescan)")
    p.add_argument("--verbose", action="store_true", help="log every request")
    return p


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.model_config_file:
        models = _read_model_config(args.model_config_file)
    elif args.model_base_path:
        models = {args.model_name: args.model_base_path}
    else:
        print("error: give --model_base_path (and --model_name) or --model_config_file",
              file=sys.stderr)
        return 2
    for name, base in models.items():
        if not os.path.isdir(base):
            print(f"error: model base path of '{name}' does not exist: {base}",
                  file=sys.stderr)
            return 2
    server = make_server(models, args.port, args.host, args.file_system_poll_wait_seconds)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server.start_background()
    for name, m in server.managers.items():
        cur = m.current
        print(f"Serving model '{name}' ({'version ' + str(cur.version) if cur else 'no version yet'}) "
              f"at {server.url}/v1/models/{name}", flush=True)
    while not stop.wait(0.5):
        pass
    log.info("shutting down")
    server.stop()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
