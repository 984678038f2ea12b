"""Model versions for the embedded server: discovery, loading, swapping and status.

A model lives under ``<model_base_path>/<version>/`` (TF Serving's layout). The
newest integer-named directory that holds a ``saved_model.pb`` is served (TF
Serving's "latest" version policy). A `ModelManager` loads it, and its poller thread
rescans every ``file_system_poll_wait_seconds`` and loads a newer version in the
background; the swap is atomic under a lock, so requests in flight finish on the
version they started with. Non-numeric names (``.tmp-3``, ``3.partial``) are
ignored: an atomic publisher writes to such a temp dir and renames it when complete.
A version that fails to load is reported in the status; the old one keeps serving.

`read_model_config` reads TF Serving's ``--model_config_file`` into
``{model_name: model_base_path}``.

Nothing here knows about HTTP: lookups that cannot be served raise
`ServableNotFoundError` / `ServableUnavailableError`, which `serving.rest_api` turns
into 404 / 503 replies.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # DESIGN.md: Keras 2 only
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import logging  # noqa: E402
import re  # noqa: E402
import threading  # noqa: E402
from typing import Dict, List, Optional, Tuple  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

log = logging.getLogger(__name__)

DEFAULT_POLL_WAIT_SECONDS = 1.0  # TF Serving's --file_system_poll_wait_seconds default
_SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
_VERSION_DIR = re.compile(r"^[0-9]+$")


class ServableError(Exception):
    """A model or version lookup that cannot be served; `message` says why."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ServableNotFoundError(ServableError):
    """No such version (or no version at all) of the model: TF Serving's NOT_FOUND."""


class ServableUnavailableError(ServableError):
    """The model has no loaded version yet: TF Serving's UNAVAILABLE."""


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


def read_signature_defs(path: str) -> dict:
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
        self.signature_defs = read_signature_defs(path)


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
        """TF Serving's GetModelStatus reply: the served version, then failed ones."""
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
                raise ServableNotFoundError(f"model '{self.model_name}' has no version "
                                            f"{version}; {self._serving_note(current)}")
        if not rows:
            raise ServableNotFoundError(f"Could not find any versions of model "
                                        f"'{self.model_name}' under {self.model_base_path}")
        return {"model_version_status": rows}

    def _serving_note(self, current: Optional[ServedVersion]) -> str:
        return (f"serving version {current.version}" if current is not None
                else "no version is loaded yet")

    def get(self, version: Optional[int] = None) -> ServedVersion:
        """The served version (`version`, if given, must be it)."""
        current = self.current
        if current is None:
            raise ServableUnavailableError(
                f"model '{self.model_name}' has no loaded version yet (waiting for "
                f"<version>/saved_model.pb under {self.model_base_path})")
        if version is not None and version != current.version:
            raise ServableNotFoundError(f"model '{self.model_name}' version {version} is "
                                        f"not available; {self._serving_note(current)}")
        return current


def read_model_config(path: str) -> Dict[str, str]:
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
