"""The REST API of TF Serving (the subset we serve), independent of the socket server.

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

`handle_request(managers, method, path, body)` is the whole API as a function: it
routes a request to its `ModelManager` and returns ``(HTTP status, JSON body)``;
`serving.http_server` only moves bytes. Parsing helpers: `parse_predict_request`,
`format_predict_response`; JSON <-> tensor conversion lives in `serving.json_tensor`.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # DESIGN.md: Keras 2 only
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import json  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
from http import HTTPStatus  # noqa: E402
from typing import Dict, Optional, Tuple  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from serving.json_tensor import (InputConverter, JsonTensorError, json_type,  # noqa: E402
                                 shape_text, tensor_to_json)
from serving.model_manager import (ModelManager, ServableError,  # noqa: E402
                                   ServableUnavailableError, ServedVersion, Signature)

log = logging.getLogger(__name__)

DEFAULT_SIGNATURE = "serving_default"


class RequestError(Exception):
    """A refused request: becomes HTTP `status` with body {"error": message}."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.message = message
        self.status = int(status)


# --------------------------------------------------------------------------- requests
def parse_predict_request(body: bytes, signatures: Dict[str, Signature]):
    """Validates a :predict body. Returns (signature, feed dict, row_format, batch)."""
    try:
        request = json.loads(body.decode("utf-8") if isinstance(body, bytes) else body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"request body is not valid JSON: {e}")
    if not isinstance(request, dict):
        raise RequestError(f"request body must be a JSON object, got {json_type(request)}")
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
    try:
        if "instances" in request:
            feed, batch = _parse_instances(request["instances"], sig)
            return sig, feed, True, batch
        feed, batch = _parse_inputs(request["inputs"], sig)
        return sig, feed, False, batch
    except JsonTensorError as e:  # a value that does not fit its input: 400
        raise RequestError(e.message) from None


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
        raise RequestError(f"'instances' must be a list, got {json_type(instances)}")
    if not instances:
        raise RequestError("'instances' is empty")
    single = len(sig.inputs) == 1
    only = next(iter(sig.inputs)) if single else None
    named = isinstance(instances[0], dict) and not (
        single and set(instances[0]) == {"b64"})
    if not named and not single:
        raise RequestError(f"instances[0] must be an object of named inputs (signature "
                           f"'{sig.name}' takes {len(sig.inputs)} inputs), got "
                           f"{json_type(instances[0])}")
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
                                   f"instances[0], got {json_type(inst)}")
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
        conv = InputConverter(name, spec, where_row(name))
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
        conv = InputConverter(name, spec, where)
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
                               f"{shape_text(spec.shape)}), got {json_type(value)}")
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
def format_predict_response(outputs: Dict[str, np.ndarray], row_format: bool, batch: int):
    names = sorted(outputs)
    values = {k: tensor_to_json(k, outputs[k]) for k in names}
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


# --------------------------------------------------------------------------- routing
_ROUTE = re.compile(r"^/v1/models/(?P<name>[^/:]+)"
                    r"(?:/versions/(?P<version>[^/:]+))?"
                    r"(?P<suffix>/metadata|:[A-Za-z]+)?/?$")


def route(managers: Dict[str, ModelManager], method: str, path: str,
          body: Optional[bytes]) -> dict:
    """Dispatches one request to the model it names and returns the JSON reply.

    Raises `RequestError` (or the manager's `ServableError`) for a refused request.
    """
    path = path.split("?", 1)[0]
    m = _ROUTE.match(path)
    if not m:
        raise RequestError(f"unknown path '{path}'; expected /v1/models/<name>"
                           "[/versions/<v>][/metadata|:predict]", HTTPStatus.NOT_FOUND)
    name, version, suffix = m.group("name"), m.group("version"), m.group("suffix")
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


def error_reply(method: str, path: str, error: Exception) -> Tuple[int, dict]:
    """(HTTP status, TF-Serving-style body {"error": message}) for a failed request.

    A model without a loaded version is 503, an unknown version 404, a refused request
    its `RequestError.status`; anything else is a bug or a model failure: 500.
    """
    if isinstance(error, ServableError):
        status = (HTTPStatus.SERVICE_UNAVAILABLE
                  if isinstance(error, ServableUnavailableError) else HTTPStatus.NOT_FOUND)
        error = RequestError(error.message, status)
    if isinstance(error, RequestError):
        if error.status >= 500:
            log.error("%s %s: %s", method, path, error.message)
        return error.status, {"error": error.message}
    log.error("%s %s failed", method, path, exc_info=error)
    return int(HTTPStatus.INTERNAL_SERVER_ERROR), {"error": f"{type(error).__name__}: {error}"}


def handle_request(managers: Dict[str, ModelManager], method: str, path: str,
                   body: Optional[bytes] = None) -> Tuple[int, dict]:
    """One REST request -> (HTTP status, JSON reply body). Never raises."""
    try:
        return int(HTTPStatus.OK), route(managers, method, path, body)
    except Exception as e:  # a refused request, a bug or a model failure; server stays up
        return error_reply(method, path, e)
