"""One loaded SavedModel version: discovery on disk, loading, signatures, warmup replay.

Layout (TF Serving's ``sources/storage_path/file_system_storage_path_source.cc``):
``<base>/<int64 version>/saved_model.pb`` + ``variables/``, ``assets/``,
``assets.extra/``. Children whose name is not an integer (``.publishing-7-123``,
``7.partial``) are ignored, so a publisher writes under a temp name and renames.

Warmup (``servables/tensorflow/saved_model_warmup.cc``, ``g3doc/saved_model_warmup.md``):
``assets.extra/tf_serving_warmup_requests`` is a TFRecord of serialized
``tensorflow.serving.PredictionLog``; each ``predict_log.request`` is replayed
``num_request_iterations_for_warmup`` times during the load, before the version is
AVAILABLE; a corrupt file (CRC), more than 1000 records or a failing request fails the
load. Without the file every signature is called once on a synthetic one-row request
(errors ignored): a concrete function's first call runs Grappler and costs hundreds of
milliseconds, which would otherwise land on the first user request after a swap.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import logging
import re
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.eager.polymorphic_function.concrete_function import ConcreteFunction
from tensorflow.python.framework.ops import EagerTensor

log = logging.getLogger(__name__)

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_WARMUP_RECORDS = 1000  # WarmupConsts::kMaxNumRecords
_VERSION_DIR = re.compile(r"^[0-9]{1,19}$")
PREDICT_METHOD = "tensorflow/serving/predict"
# numeric dtypes whose numpy arrays become eager tensors without conversion (strings:
# object arrays, converted by tf.constant)
_NUMPY_DTYPES = {d: np.dtype(d.as_numpy_dtype) for d in
                 (tf.float16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64,
                  tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.bool)}


def saved_model_file(path: str) -> Optional[str]:
    for name in SAVED_MODEL_FILES:
        f = os.path.join(path, name)
        if os.path.isfile(f):
            return f
    return None


def list_versions(model_base_path: str) -> List[int]:
    """Integer-named version dirs holding a SavedModel file, ascending."""
    try:
        names = os.listdir(model_base_path)
    except (FileNotFoundError, NotADirectoryError):
        return []
    versions = []
    for name in names:
        path = os.path.join(model_base_path, name)
        if _VERSION_DIR.match(name) and os.path.isdir(path) and saved_model_file(path):
            v = int(name)
            if v < 2 ** 63:
                versions.append(v)
    return sorted(versions)


def read_signature_defs(path: str) -> dict:
    """SignatureDefs of a SavedModel as TF Serving prints them in /metadata."""
    from google.protobuf import json_format, text_format
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    f = saved_model_file(path)
    with open(f, "rb") as fh:
        data = fh.read()
    if f.endswith(".pbtxt"):
        text_format.Parse(data.decode("utf-8"), sm)
    else:
        sm.ParseFromString(data)
    out = {}
    for name, sig in sm.meta_graphs[0].signature_def.items():
        out[name] = json_format.MessageToDict(
            sig, including_default_value_fields=True, preserving_proto_field_name=True)
    return out


class Signature:
    """One serving signature: its concrete function, input/output specs, method name."""

    def __init__(self, name: str, fn, method_name: str = PREDICT_METHOD):
        self.name = name
        self.fn = fn
        self.method_name = method_name
        _, kwargs = fn.structured_input_signature
        self.inputs: Dict[str, tf.TypeSpec] = dict(sorted(kwargs.items()))
        outputs = fn.structured_outputs
        if not isinstance(outputs, dict):
            outputs = {"output_0": outputs}
        self.outputs = dict(sorted(outputs.items()))
        # Flat call (the hot path): the signature's tensors in the concrete function's
        # own argument order, shapes checked here against plain lists. Binding keyword
        # arguments through the structured signature costs ~0.5-2 ms per call for 45
        # inputs; `_call_flat` is TF 2.16's ConcreteFunction entry point below it.
        keywords = [k.decode() if isinstance(k, bytes) else k
                    for k in (getattr(fn, "_arg_keywords", None) or [])]
        specs = self.inputs.values()
        self._flat = (keywords if sorted(keywords) == sorted(self.inputs) and hasattr(fn, "_call_flat")
                      and all(isinstance(t, tf.TensorSpec) for t in specs) else None)
        # A loaded signature is a `load._WrapperFunction`, whose `_call_flat` maps its
        # ~230 captured variable handles through a distribution-strategy check on every
        # call (~0.3 ms) before ConcreteFunction's; with no distributed variable among
        # them (a served model has none) that map is the identity, so it is done once here.
        captures = list(getattr(fn, "captured_inputs", ()))
        self._captures = (captures if isinstance(fn, ConcreteFunction)
                          and all(isinstance(c, EagerTensor) for c in captures) else None)
        self._shapes = {k: (t.shape.as_list() if t.shape.rank is not None else None)
                        for k, t in self.inputs.items()}

    def __call__(self, feed: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        if self._flat is not None and feed.keys() == self.inputs.keys():
            for k, v in feed.items():
                want, got = self._shapes[k], np.shape(v)
                if want is not None and (len(want) != len(got) or any(
                        w is not None and w != g for w, g in zip(want, got))):
                    raise TypeError(f"input '{k}' has shape {list(got)}; signature '{self.name}' "
                                    f"takes {self.inputs[k].shape}")
            args = [self._tensor(k, feed[k]) for k in self._flat]
            if self._captures is not None:
                result = ConcreteFunction._call_flat(self.fn, args, self._captures)
            else:
                result = self.fn._call_flat(args, self.fn.captured_inputs)
        else:
            result = self.fn(**{k: tf.constant(v, dtype=self.inputs[k].dtype) for k, v in feed.items()})
        if not isinstance(result, dict):
            result = {"output_0": result}
        return {k: v.numpy() for k, v in result.items()}

    def _tensor(self, name: str, value) -> tf.Tensor:
        """`value` as an eager tensor of the input's dtype. An array already of that dtype
        is wrapped directly (what tf.constant does after its checks: ~10 us less per
        input, 45 inputs per request); anything else goes through tf.constant."""
        dtype = self.inputs[name].dtype
        if isinstance(value, np.ndarray) and value.dtype == _NUMPY_DTYPES.get(dtype):
            return EagerTensor(value, context.context().device_name, dtype.as_datatype_enum)
        return tf.constant(value, dtype=dtype)


class ServedVersion:
    """A loaded (and warmed-up) SavedModel version."""

    def __init__(self, version: int, path: str, warmup_iterations: int = 1,
                 enable_warmup: bool = True):
        self.version = version
        self.path = path
        self.model = tf.saved_model.load(path)
        self.signature_defs = read_signature_defs(path)
        self.signatures = {
            name: Signature(name, fn, self.signature_defs.get(name, {}).get(
                "method_name", PREDICT_METHOD))
            for name, fn in self.model.signatures.items()}
        if not self.signatures:
            raise ValueError(f"SavedModel at {path} has no serving signatures")
        self.warmup_records = 0
        if enable_warmup:
            self.warmup_records = warm_up(self, max(1, warmup_iterations))


# --------------------------------------------------------------------------- warmup
def read_warmup_requests(path: str) -> list:
    """The PredictRequests of `<version>/assets.extra/tf_serving_warmup_requests`.

    Raises like TF Serving: a corrupt record (tf.errors.DataLossError), more than 1000
    records, or a log type this server cannot replay.
    """
    from tensorflow_serving.apis import prediction_log_pb2

    file = os.path.join(path, WARMUP_FILE)
    if not os.path.isfile(file):
        return []
    requests = []
    for record in tf.data.TFRecordDataset(file):  # CRCs checked: DataLossError
        if len(requests) >= MAX_WARMUP_RECORDS:
            raise ValueError(f"Number of warmup records exceeds the maximum "
                             f"({MAX_WARMUP_RECORDS}) at {file}")
        entry = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        kind = entry.WhichOneof("log_type")
        if kind != "predict_log":
            raise ValueError(f"warmup record {len(requests)} in {file} is a {kind}; "
                             "this server replays predict_log records only")
        requests.append(entry.predict_log.request)
    return requests


def warm_up(served: ServedVersion, iterations: int) -> int:
    """Replays the warmup file (or a synthetic request per signature). Returns records."""
    requests = read_warmup_requests(served.path)
    for i, req in enumerate(requests):
        name = req.model_spec.signature_name or "serving_default"
        if name not in served.signatures:
            raise ValueError(f"warmup record {i}: signature '{name}' not in the model")
        sig = served.signatures[name]
        feed = {k: tf.make_ndarray(v) for k, v in req.inputs.items()}
        missing = sorted(set(sig.inputs) - set(feed))
        if missing:
            raise ValueError(f"warmup record {i}: missing input '{missing[0]}'")
        for _ in range(iterations):
            sig(feed)
    if not requests:
        for sig in served.signatures.values():
            try:
                sig(synthetic_request(sig))
            except Exception as e:  # synthetic values may be invalid (e.g. tf.Examples)
                log.debug("synthetic warmup of %s failed: %s", sig.name, e)
    return len(requests)


def synthetic_request(sig: Signature) -> Dict[str, np.ndarray]:
    """One row of zeros / empty strings per input (batch 1 where the shape is open)."""
    feed = {}
    for name, spec in sig.inputs.items():
        shape = [1 if d is None else d for d in spec.shape.as_list()]
        if spec.dtype == tf.string:
            feed[name] = np.full(shape, b"", dtype=object)
        else:
            feed[name] = np.zeros(shape, dtype=spec.dtype.as_numpy_dtype)
    return feed
