"""The body of a REST ``:predict``: JSON -> feed arrays, outputs -> JSON (TF Serving's
``util/json_tensor.cc`` ``FillPredictRequestFromJson`` / ``MakeJsonFromTensors``).

- **Row format** ``{"instances": [{name: value}, ...]}``: every input gets batch
  ``len(instances)``; reply ``{"predictions": [...]}`` (a single-output signature gets
  bare values).
- **Columnar format** ``{"inputs": {name: value}}``: no batch dimension is added and
  inputs may have different dimension 0, which is what ``serving_rank`` (one user's
  context with batch 1, N candidates with batch N) needs; reply ``{"outputs": ...}``.

Unknown top-level keys are ignored, as in TF Serving. The request is validated against
the loaded signature (names, dtypes, shapes; TF Serving itself leaves shapes to the
runtime) and against feature ranges (`check_ranges`: ``0 <= hist_len <= L``); every
refused value is a 400 naming the input and its place in the request. Outputs that
are NaN/Infinity are refused (400) instead of written as bare tokens, which strict
JSON parsers reject.
"""
import json
from http import HTTPStatus
from typing import Dict

import numpy as np

from serving.errors import RequestError
from serving.json_encode import row_texts, tensor_text
from serving.json_tensor import InputConverter, JsonTensorError, json_type, shape_text, tensor_to_json
from serving.servable import Signature

DEFAULT_SIGNATURE = "serving_default"
HISTORY_LEN_FEATURE = "hist_len"  # models.features.HISTORY_LEN_FEATURE


def parse_json_body(body) -> dict:
    """JSON object of a request body, with TF Serving's parse error texts."""
    text = body.decode("utf-8", errors="strict") if isinstance(body, (bytes, bytearray)) else body
    if text is None or not text.strip():
        raise RequestError("JSON Parse error: The document is empty")
    try:
        request = json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"JSON Parse error: {e.msg} at offset: {e.pos}")
    except RecursionError:  # a hostile document nested 100,000 deep
        raise RequestError("JSON Parse error: the document is nested too deeply")
    if not isinstance(request, dict):
        raise RequestError(f"JSON Parse error: the document root Is not object "
                           f"(got {json_type(request)})")
    return request


def signature_of(request: dict, signatures: Dict[str, Signature]) -> Signature:
    name = request.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(name, str):
        raise RequestError("'signature_name' key must be a string value.")
    name = name or DEFAULT_SIGNATURE
    if name not in signatures:
        raise RequestError(f'Serving signature name: "{name}" not found in signature def '
                           f"(the model has: {sorted(signatures)})")
    return signatures[name]


def parse_predict_request(body, signatures: Dict[str, Signature]):
    """Validates a :predict body. Returns (signature, feed dict, row_format, batch)."""
    try:
        request = parse_json_body(body)
    except UnicodeDecodeError as e:
        raise RequestError(f"JSON Parse error: body is not UTF-8: {e}")
    sig = signature_of(request, signatures)
    if "instances" in request and "inputs" in request:
        raise RequestError("Not both 'instances' and 'inputs' can be specified in the "
                           "request")
    if "instances" not in request and "inputs" not in request:
        raise RequestError("Missing 'inputs' or 'instances' key")
    if isinstance(body, (bytes, bytearray)):  # JSON true/false would pass as 1/0 in np.array
        may_hold_bools = b"true" in body or b"false" in body
    else:
        may_hold_bools = True
    try:
        if "instances" in request:
            feed, batch = _parse_instances(request["instances"], sig, may_hold_bools)
            check_ranges(feed, sig, True)
            return sig, feed, True, batch
        feed, batch = _parse_inputs(request["inputs"], sig, may_hold_bools)
        check_ranges(feed, sig, False)
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


def _parse_instances(instances, sig: Signature, may_hold_bools: bool):
    if not isinstance(instances, list):
        raise RequestError(f"'instances' must be a list, got {json_type(instances)}")
    if not instances:
        raise RequestError("No values in 'instances' array (empty)")
    single = len(sig.inputs) == 1
    only = next(iter(sig.inputs)) if single else None
    named = isinstance(instances[0], dict) and not (single and set(instances[0]) == {"b64"})
    if not named and not single:
        raise RequestError(f"instances[0] must be an object of named inputs (signature "
                           f"'{sig.name}' takes {len(sig.inputs)} inputs), got "
                           f"{json_type(instances[0])}")
    if not named:  # single-input signature: each instance is the bare value
        for i, inst in enumerate(instances):
            if isinstance(inst, dict) and set(inst) != {"b64"}:
                raise RequestError(f"inconsistent instance keys: instances[{i}] is an "
                                   f"object but instances[0] is a bare value of input '{only}'")
        columns = {only: instances}
    else:
        keys0 = instances[0].keys() if isinstance(instances[0], dict) else None
        _check_names(set(keys0), sig, "instances[0]")
        for i, inst in enumerate(instances):
            if not isinstance(inst, dict):
                raise RequestError(f"instances[{i}] must be an object of named inputs like "
                                   f"instances[0], got {json_type(inst)}")
            if inst.keys() != keys0:
                _check_names(set(inst), sig, f"instances[{i}]")
        columns = {k: [inst[k] for inst in instances] for k in sig.inputs}

    def where_row(name):
        def where(path):
            tail = "".join(f"[{p}]" for p in path[1:])
            return (f"instances[{path[0]}]" if not named
                    else f"instances[{path[0]}]['{name}']") + tail
        return where

    feed = {}
    for name, spec in sig.inputs.items():
        if spec.shape.rank == 0:
            raise RequestError(f"input '{name}' is a scalar without batch dimension; use "
                               "the columnar 'inputs' format")
        conv = InputConverter(name, spec, where_row(name))
        dims = spec.shape.as_list()[1:] if spec.shape.rank else []
        arr = conv.fast_array(columns[name], [len(instances)] + dims, may_hold_bools)
        feed[name] = arr if arr is not None else conv.to_array(columns[name], dims,
                                                               lambda i: [i])
    return feed, len(instances)


def _parse_inputs(inputs, sig: Signature, may_hold_bools: bool):
    if not isinstance(inputs, dict) or (len(sig.inputs) == 1 and set(inputs) == {"b64"}):
        if len(sig.inputs) != 1:
            raise RequestError(f"'inputs' must be an object of named inputs (signature "
                               f"'{sig.name}' takes {len(sig.inputs)} inputs)")
        inputs = {next(iter(sig.inputs)): inputs}
    missing = [k for k in sig.inputs if k not in inputs]
    if missing:  # extra keys are ignored, as in TF Serving
        raise RequestError(f"Missing named input: {missing[0]} in 'inputs' object "
                           f"(signature '{sig.name}' needs {sorted(sig.inputs)})")
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
            feed[name] = np.array(conv.scalar(value, []), dtype=object
                                  if conv.kind == "string" else spec.dtype.as_numpy_dtype)
            continue
        if not isinstance(value, list):
            raise RequestError(f"input '{name}' at {where([])}: expected a list (signature "
                               f"shape {shape_text(spec.shape)}), got {json_type(value)}")
        if dims[0] is not None and len(value) != dims[0]:
            raise RequestError(f"input '{name}': dimension 0 is {len(value)}, the signature "
                               f"needs {dims[0]} (shape {shape_text(spec.shape)})")
        if not value:
            raise RequestError(f"input '{name}' is empty")
        if dims[0] is None:  # open dimension 0 = the batch: equal across such inputs
            if batch is None:
                batch, batch_from = len(value), name
            elif len(value) != batch:
                raise RequestError(f"input '{name}' has dimension 0 of {len(value)} but "
                                   f"'{batch_from}' has {batch}; inputs with an open "
                                   "dimension 0 form one batch")
        arr = conv.fast_array(value, [len(value)] + dims[1:], may_hold_bools)
        feed[name] = arr if arr is not None else conv.to_array(value, dims[1:], lambda i: [i])
    return feed, batch if batch is not None else 1


def check_ranges(feed: Dict[str, np.ndarray], sig: Signature, row_format: bool) -> None:
    """Feature ranges the signature's dtypes cannot express: ``0 <= hist_len <= L``,
    L being the length of the history inputs (``[.., L]`` int/float lists)."""
    if HISTORY_LEN_FEATURE not in feed:
        return
    hist = [(k, s.shape[-1]) for k, s in sig.inputs.items()
            if k.startswith("hist_") and k != HISTORY_LEN_FEATURE and s.shape.rank
            and s.shape.rank >= 2 and s.shape[-1] is not None]
    if not hist:
        return
    name, length = hist[0]
    lens = np.asarray(feed[HISTORY_LEN_FEATURE])
    bad = np.flatnonzero((lens < 0) | (lens > length))
    if bad.size:
        i = int(bad[0])
        where = f"instances[{i}]" if row_format else f"inputs['{HISTORY_LEN_FEATURE}'][{i}]"
        raise RequestError(f"input '{HISTORY_LEN_FEATURE}' at {where}: "
                           f"{lens.ravel()[i]} is out of range [0, {length}] (the length of "
                           f"'{name}')")


def check_outputs(outputs: Dict[str, np.ndarray], row_format: bool, batch: int) -> list:
    """Refuses outputs JSON cannot carry (NaN/Infinity) or the row format cannot split
    by instance. Returns the output names, sorted."""
    names = sorted(outputs)
    for k in names:
        arr = outputs[k]
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            i = int(np.flatnonzero(~np.isfinite(arr.reshape(arr.shape[0], -1)
                                                if arr.ndim else arr.reshape(1, 1)).any(1))[0])
            raise RequestError(f"output '{k}' is not finite (NaN/Infinity) for row {i}, "
                               "which strict JSON cannot carry; check the input values")
    if row_format:
        for k in names:
            if outputs[k].ndim == 0 or outputs[k].shape[0] != batch:
                raise RequestError(f"output '{k}' has shape {list(outputs[k].shape)}, whose "
                                   f"first dimension is not the batch size {batch}; use the "
                                   "columnar 'inputs' format", HTTPStatus.INTERNAL_SERVER_ERROR)
    return names


def format_predict_response(outputs: Dict[str, np.ndarray], row_format: bool, batch: int):
    """The reply as a JSON-able dict (`encode_predict_response` writes the same as text)."""
    names = check_outputs(outputs, row_format, batch)
    values = {k: tensor_to_json(k, outputs[k]) for k in names}
    if not row_format:
        return {"outputs": values[names[0]] if len(names) == 1 else values}
    if len(names) == 1:
        return {"predictions": values[names[0]]}
    return {"predictions": [{k: values[k][i] for k in names} for i in range(batch)]}


def encode_predict_response(outputs: Dict[str, np.ndarray], row_format: bool,
                            batch: int) -> bytes:
    """The reply as JSON bytes, floats in TF Serving's text (`serving.json_encode`):
    what the REST handler sends, without building a Python float per value."""
    names = check_outputs(outputs, row_format, batch)
    if not row_format:
        texts = {k: tensor_text(k, outputs[k]) for k in names}
        body = texts[names[0]] if len(names) == 1 else \
            "{" + ", ".join(f"{json.dumps(k)}: {texts[k]}" for k in names) + "}"
        return ('{"outputs": ' + body + "}").encode()
    rows = {k: row_texts(k, outputs[k]) for k in names}
    if len(names) == 1:
        items = rows[names[0]]
    else:
        keys = [json.dumps(k) + ": " for k in names]
        items = ["{" + ", ".join(key + rows[k][i] for key, k in zip(keys, names)) + "}"
                 for i in range(batch)]
    return ('{"predictions": [' + ", ".join(items) + "]}").encode()
