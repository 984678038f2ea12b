"""REST client for TF Serving and the embedded server (`python -m serving`).

    from serving import client
    # one user x N candidates (serving_rank, TF Serving's columnar form)
    out = client.rank("http://127.0.0.1:8501", "watchtime_ranker", user_features,
                      candidate_features)          # -> {"click_prob": [[..], ...], ...}
    # rows (serving_default)
    instances = client.examples_to_instances(serialized_examples, SERVING_RAW_FEATURES)
    preds = client.predict("http://127.0.0.1:8501", "watchtime_ranker", instances)

Every call has a timeout and retries, with exponential backoff, on connection errors,
503, and TF Serving's 404 ``Servable not found for request: Latest(<model>)`` (no
version AVAILABLE yet, e.g. during startup or while the first version loads; TF Serving
gives the same answer for an unknown model name, which therefore fails after the
retries) — never on other 4xx, which `ServingError` reports with the server's own error
text. gRPC: use
``tensorflow_serving.apis.prediction_service_pb2_grpc`` with the same signatures.
`predict` itself does not import TensorFlow; `examples_to_instances` does.
"""
import base64
import json
import threading
import time
from typing import Dict, Iterable, List, Optional, Sequence

import requests


class ServingError(RuntimeError):
    """A request the server refused or could not serve (or could not be sent).

    `status` is the HTTP status (None when the server was unreachable) and `message`
    the server's {"error": ...} text, which names the offending field.
    """

    def __init__(self, status: Optional[int], message: str, url: str):
        super().__init__(f"{url}: HTTP {status}: {message}" if status is not None
                         else f"{url}: {message}")
        self.status = status
        self.message = message
        self.url = url


PredictError = ServingError  # the name callers of predict() may look for


def _model_url(url_base: str, model_name: str, version: Optional[int] = None) -> str:
    url = f"{url_base.rstrip('/')}/v1/models/{model_name}"
    return url if version is None else f"{url}/versions/{int(version)}"


RETRY_STATUSES = (503,)
_session = threading.local()


def _http() -> requests.Session:  # one keep-alive session per thread
    if not hasattr(_session, "s"):
        _session.s = requests.Session()
    return _session.s


def _not_loaded_yet(resp) -> bool:
    """TF Serving's 404 for a model with no AVAILABLE version (core/basic_manager.cc)."""
    return resp.status_code == 404 and b"Servable not found for request: Latest(" in resp.content


def _call(method: str, url: str, timeout: float, json_body=None, retries: int = 3,
          backoff: float = 0.2) -> dict:
    """One request with up to `retries` retries (backoff, 2x backoff, ...) on connection
    errors, 503 and the not-loaded-yet 404; raises ServingError carrying the server's error text."""
    data = None if json_body is None else json.dumps(json_body)
    headers = {"Content-Type": "application/json"}
    for attempt in range(retries + 1):
        try:
            resp = _http().request(method, url, data=data, headers=headers, timeout=timeout)
        except requests.RequestException as e:
            if attempt < retries:
                time.sleep(backoff * 2 ** attempt)
                continue
            raise ServingError(None, f"cannot reach the server: {e}", url) from e
        if attempt < retries and (resp.status_code in RETRY_STATUSES or _not_loaded_yet(resp)):
            time.sleep(backoff * 2 ** attempt)
            continue
        break
    try:
        payload = resp.json()
    except ValueError:
        payload = None
    if resp.status_code >= 400:
        message = (payload.get("error") if isinstance(payload, dict) else None) \
            or resp.text.strip() or resp.reason
        raise ServingError(resp.status_code, message, url)
    if not isinstance(payload, dict):
        raise ServingError(resp.status_code, f"reply is not a JSON object: {resp.text[:200]}",
                           url)
    return payload


def predict(url_base: str, model_name: str, instances: Sequence, signature_name: Optional[str] = None,
            timeout: float = 30, version: Optional[int] = None, retries: int = 3) -> list:
    """Row-format :predict. Returns `predictions`, one entry per instance.

    Each entry is {output_name: value} or, for a single-output signature, the bare
    value (TF Serving's convention). Raises ServingError with the server's message on
    4xx/5xx.
    """
    body = {"instances": list(instances)}
    if signature_name:
        body["signature_name"] = signature_name
    url = _model_url(url_base, model_name, version) + ":predict"
    reply = _call("POST", url, timeout, body, retries=retries)
    if "predictions" not in reply:
        raise ServingError(200, f"reply has no 'predictions': {str(reply)[:200]}", url)
    return reply["predictions"]


def predict_columns(url_base: str, model_name: str, inputs: Dict[str, list],
                    signature_name: Optional[str] = None, timeout: float = 30,
                    version: Optional[int] = None):
    """Columnar-format :predict ({"inputs": {name: batch}}). Returns `outputs`."""
    body = {"inputs": inputs}
    if signature_name:
        body["signature_name"] = signature_name
    url = _model_url(url_base, model_name, version) + ":predict"
    return _call("POST", url, timeout, body)["outputs"]


def rank(url_base: str, model_name: str, user: Dict[str, object],
         candidates: Dict[str, list], timeout: float = 30, version: Optional[int] = None,
         signature_name: str = "serving_rank", retries: int = 3) -> dict:
    """One user x N candidates with the `serving_rank` signature.

    `user`: {feature: value} for the user-side features (sent with batch 1);
    `candidates`: {feature: [value per candidate]}. Returns {output: [[v], ...]} with
    one row per candidate, in order.
    """
    inputs = {k: [v] for k, v in user.items()}
    inputs.update(candidates)
    url = _model_url(url_base, model_name, version) + ":predict"
    reply = _call("POST", url, timeout, {"signature_name": signature_name, "inputs": inputs},
                  retries=retries)
    if "outputs" not in reply:
        raise ServingError(200, f"reply has no 'outputs': {str(reply)[:200]}", url)
    return reply["outputs"]


def model_status(url_base: str, model_name: str, timeout: float = 10) -> dict:
    """GET /v1/models/<name>: {"model_version_status": [...]}."""
    return _call("GET", _model_url(url_base, model_name), timeout)


def model_metadata(url_base: str, model_name: str, timeout: float = 10) -> dict:
    """GET /v1/models/<name>/metadata: signature defs of the served version."""
    return _call("GET", _model_url(url_base, model_name) + "/metadata", timeout)


def wait_until_available(url_base: str, model_name: str, timeout: float = 60,
                         min_version: Optional[int] = None) -> int:
    """Polls the status until a version (>= min_version) is AVAILABLE; returns it."""
    deadline = time.monotonic() + timeout
    last = "no reply yet"
    while True:
        try:
            for row in model_status(url_base, model_name)["model_version_status"]:
                v = int(row["version"])
                if row["state"] == "AVAILABLE" and (min_version is None or v >= min_version):
                    return v
            last = "no AVAILABLE version" + (f" >= {min_version}" if min_version else "")
        except ServingError as e:
            last = str(e)
        if time.monotonic() > deadline:
            raise TimeoutError(f"model '{model_name}' at {url_base} not available after "
                               f"{timeout}s: {last}")
        time.sleep(0.2)


def _feature_values(feature):
    kind = feature.WhichOneof("kind")
    if kind == "int64_list":
        return [int(v) for v in feature.int64_list.value]
    if kind == "float_list":
        return [float(v) for v in feature.float_list.value]
    if kind == "bytes_list":
        return [_bytes_to_json(v) for v in feature.bytes_list.value]
    return []


def _bytes_to_json(value: bytes):
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(value).decode("ascii")}


def examples_to_instances(serialized_examples: Iterable, raw_feature_names: Sequence[str],
                          list_feature_names: Optional[Iterable[str]] = None) -> List[dict]:
    """tf.Examples (serialized bytes or tf.train.Example) -> JSON instances.

    Only `raw_feature_names` are kept (e.g. `models.features.SERVING_RAW_FEATURES`,
    so labels and meta columns of logged rows are dropped). int64 -> int,
    float -> float, bytes -> str ({"b64": ...} if not UTF-8). Features in
    `list_feature_names` (default: `models.features.SERVING_LIST_FEATURES`, the history
    lists and, when LOG_SIGNALS enables it, hist_tab) stay lists;
    every other feature must hold exactly one value and becomes a scalar.
    Raises ValueError naming the example index and feature when one is missing.
    """
    from tensorflow.core.example import example_pb2

    if list_feature_names is None:
        from models.features import SERVING_LIST_FEATURES
        list_feature_names = SERVING_LIST_FEATURES
    list_names = set(list_feature_names)
    instances = []
    for i, ex in enumerate(serialized_examples):
        if isinstance(ex, (bytes, bytearray)):
            parsed = example_pb2.Example()
            parsed.ParseFromString(bytes(ex))
            ex = parsed
        features = ex.features.feature
        instance = {}
        for name in raw_feature_names:
            if name not in features:
                raise ValueError(f"example {i} has no feature '{name}'")
            values = _feature_values(features[name])
            if name in list_names:
                instance[name] = values
            elif len(values) != 1:
                raise ValueError(f"example {i}: feature '{name}' has {len(values)} values; "
                                 "expected exactly one (list it in list_feature_names if "
                                 "it is a list)")
            else:
                instance[name] = values[0]
        instances.append(instance)
    return instances
