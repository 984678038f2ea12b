"""TF Serving's REST API as a function: ``handle_request(core, method, path, body)``.

Routes (``model_servers/http_rest_api_handler.cc``; case-insensitive, model names and
labels percent-decoded):

- ``POST /v1/models/<m>[/versions/<v> | /labels/<l>]:(predict|classify|regress)``
- ``GET /v1/models/<m>[/versions/<v> | /labels/<l>][/metadata]`` (status, metadata)
- ``GET /monitoring/prometheus/metrics`` (``--monitoring_config_file``; `serving.metrics`)

Anything else under ``/v1/`` is 400 ``Malformed request: <METHOD> <path>`` (TF Serving's
default status in ``ProcessRequest``), e.g. PUT/DELETE, GET on ``:predict``, a
non-digit version, ``:PREDICT``; ``GET /v1/models`` is 400 ``Missing model name in
request.``; a version that overflows int64 is 400 ``Failed to convert version: <v> to
numeric.``. Paths outside ``/v1/`` are 404 (TF Serving: libevent's HTML 404; here JSON).
Errors map to HTTP as in `serving.errors`; the predict body is `serving.predict_codec`.
``:classify`` / ``:regress`` need a signature whose ``method_name`` is
``tensorflow/serving/classify`` / ``regress`` (``servables/tensorflow/
classifier.cc`` / ``regressor.cc``); otherwise 400 with TF Serving's message.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import logging
import re
import time
from http import HTTPStatus
from typing import Optional, Tuple
from urllib.parse import unquote

import tensorflow as tf

from serving.errors import JsonReply, RawReply, RequestError  # noqa: F401  (re-exported)
from serving.examples_api import classify_or_regress
from serving.model_manager import (LabelError, ModelManager, ServableError,
                                   ServableUnavailableError, ServedVersion)
from serving.predict_codec import (encode_predict_response,  # noqa: F401
                                   format_predict_response, parse_predict_request)

log = logging.getLogger(__name__)

METRICS_PATH = "/monitoring/prometheus/metrics"  # TF Serving's documented default
_V1 = re.compile(r"(?i)/v1/.*")
# RE2 \d is ASCII only: [0-9] keeps a non-ASCII digit out of the version (-> 400)
_POST = re.compile(r"(?i)/v1/models/([^/:]+)(?:(?:/versions/([0-9]+))|(?:/labels/([^/:]+)))?"
                   r":(classify|regress|predict)")
_GET = re.compile(r"(?i)/v1/models(?:/([^/:]+))?(?:(?:/versions/([0-9]+))|"
                  r"(?:/labels/([^/:]+)))?(?:/(metadata))?")
_INT64_MAX = 2 ** 63 - 1
_LATEST = re.compile(r"Servable not found for request: Latest\([^)]*\)")  # TF Serving's text


def _version(text: Optional[str]) -> Optional[int]:
    if not text:
        return None
    v = int(text)
    if v > _INT64_MAX:
        raise RequestError(f"Failed to convert version: {text} to numeric.")
    return v


def predict(served: ServedVersion, body: bytes) -> JsonReply:
    sig, feed, row_format, batch = parse_predict_request(body, served.signatures)
    try:
        outputs = sig(feed)
    except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
        text = getattr(e, "message", None) or str(e)
        raise RequestError(f"signature '{sig.name}' rejected the input: {_tf_error_text(text)}")
    return JsonReply(encode_predict_response(outputs, row_format, batch))


def _tf_error_text(message: str) -> str:
    """The op's own message without TF's graph-execution boilerplate."""
    skip = ("Graph execution error", "Detected at", "<stack traces", "[[")
    lines = [ln.strip() for ln in message.splitlines()]
    text = " ".join(ln for ln in lines if ln and not ln.startswith(skip))
    return re.sub(r"\s*\[Op:[^\]]*\]\s*$", "", text) or message.strip()


def metadata(manager: ModelManager, served: ServedVersion) -> dict:
    """GetModelMetadata (``get_model_metadata_impl.cc``): note the doubled key."""
    return {"model_spec": {"name": manager.model_name, "signature_name": "",
                           "version": str(served.version)},
            "metadata": {"signature_def": {"signature_def": served.signature_defs}}}


def route(core, method: str, path: str, body: Optional[bytes]):
    """Dispatches one request; returns the JSON reply (dict) or a `RawReply`.

    Raises `RequestError` (or a `ServableError`) for a refused request.
    """
    path = path.split("?", 1)[0]
    if method == "GET" and path.lower() == METRICS_PATH:
        return RawReply(core.metrics.render().encode(), "text/plain; version=0.0.4")
    if not _V1.fullmatch(path):
        raise RequestError(f"Not Found: {path} (the API is under /v1/models/<name>)",
                           HTTPStatus.NOT_FOUND)
    malformed = RequestError(f"Malformed request: {method} {path}")
    m = _POST.fullmatch(path) if method == "POST" else None
    if m:
        name, version, label, verb = m.groups()
        if verb not in ("predict", "classify", "regress"):
            raise malformed  # ":PREDICT": the regex is case-insensitive, the verb is not
        version = _version(version)
        manager = core.manager(unquote(name))
        served = manager.get(version, unquote(label) if label else None)
        start = time.perf_counter()
        ok = False
        try:
            if verb == "predict":
                reply = predict(served, body)
            else:
                reply = classify_or_regress(served, verb, body)
            ok = True
            return reply
        finally:
            core.metrics.observe_request(manager.model_name, verb.lower(), ok,
                                         time.perf_counter() - start)
    m = _GET.fullmatch(path) if method == "GET" else None
    if m:
        name, version, label, sub = m.groups()
        if not name:
            raise RequestError("Missing model name in request.")
        version = _version(version)
        manager = core.manager(unquote(name))
        if label:
            version = manager.resolve_label(unquote(label))
        if sub is None:
            return manager.version_status(version)
        if sub != "metadata":
            raise malformed
        return metadata(manager, manager.get(version))
    raise malformed


def error_reply(method: str, path: str, error: Exception) -> Tuple[int, dict]:
    """(HTTP status, ``{"error": message}``) for a failed request.

    Unknown model/version 404, unknown label 400, a refused request its
    `RequestError.status`; anything else is a bug or a model failure: 500.

    A model with no AVAILABLE version (not loaded yet, or every version removed) is 404
    ``Servable not found for request: Latest(<name>)``, as in TF Serving 2.16: its
    serving map holds only versions in state kReady, and a lookup that misses it returns
    ``errors::NotFound("Servable not found for request: ", request.DebugString())``
    (``core/basic_manager.cc`` ``BasicManager::ServingMap::GetUntypedServableHandle``),
    which ``model_servers/http_server.cc`` ``ToHTTPStatusCode`` maps to 404. Not 503:
    TF Serving answers 503 only for UNAVAILABLE (e.g. a full batching queue).
    `serving.client` retries this 404 (the model may be loading).
    """
    if isinstance(error, ServableError):
        message = error.message
        if isinstance(error, ServableUnavailableError):
            status = HTTPStatus.NOT_FOUND
            log.debug("%s %s: %s", method, path, message)  # the detail (base path) stays here
            m = _LATEST.match(message)
            message = m.group(0) if m else message
        elif isinstance(error, LabelError):
            status = HTTPStatus.BAD_REQUEST
        else:
            status = HTTPStatus.NOT_FOUND
        error = RequestError(message, status)
    if isinstance(error, RequestError):
        if error.status >= 500:
            log.error("%s %s: %s", method, path, error.message)
        return error.status, {"error": error.message}
    log.error("%s %s failed", method, path, exc_info=error)
    return int(HTTPStatus.INTERNAL_SERVER_ERROR), {"error": f"{type(error).__name__}: {error}"}


def handle_request(core, method: str, path: str,
                   body: Optional[bytes] = None) -> Tuple[int, object]:
    """One REST request -> (HTTP status, reply body). Never raises.

    `core` is a `serving.server_core.ServerCore` (or a plain {name: ModelManager}).
    """
    if isinstance(core, dict):
        core = _DictCore(core)
    try:
        return int(HTTPStatus.OK), route(core, method, path, body)
    except Exception as e:  # a refused request, a bug or a model failure; server stays up
        return error_reply(method, path, e)


class _DictCore:
    """{name: ModelManager} seen as a ServerCore (tests, embedding)."""

    def __init__(self, managers):
        from serving.metrics import Metrics

        self.managers = managers
        self.metrics = Metrics()

    def manager(self, name: str) -> ModelManager:
        from serving.model_manager import ServableNotFoundError

        if name not in self.managers:
            raise ServableNotFoundError(f"Servable not found for request: Latest({name})")
        return self.managers[name]
