"""REST ``:classify`` and ``:regress`` (TF Serving's ``util/json_tensor.cc``
``FillClassificationRequestFromJson`` / ``FillRegressionRequestFromJson`` and
``servables/tensorflow/classifier.cc`` / ``regressor.cc``).

Body ``{"signature_name"?, "context"?: {feature: value}, "examples": [{feature: value |
[values]}, ...]}``: each example (merged with the context) becomes a ``tf.Example``
(int -> int64_list, float -> float_list, string -> bytes_list, ``{"b64"}`` -> bytes),
and the serialized batch feeds the signature's single string input. Only a signature
whose ``method_name`` is ``tensorflow/serving/classify`` (outputs ``classes`` and/or
``scores``) or ``tensorflow/serving/regress`` (output ``outputs``) allows it; the
ranker's signatures are predict signatures, so on them this is TF Serving's 400.
Reply ``{"results": ...}``: regress ``[value, ...]``, classify
``[[[class, score], ...], ...]``.
"""
import base64

import numpy as np

from serving.errors import RequestError
from serving.json_tensor import json_type
from serving.predict_codec import parse_json_body, signature_of

METHODS = {"classify": "tensorflow/serving/classify", "regress": "tensorflow/serving/regress"}
_NAMES = {"classify": "classification", "regress": "regression"}


def _feature(name: str, value, where: str):
    import tensorflow as tf

    values = value if isinstance(value, list) else [value]
    if not values:
        return tf.train.Feature()
    if all(isinstance(v, bool) for v in values):
        raise RequestError(f"{where} feature '{name}': booleans are not a tf.Example type")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    out = []
    for v in values:
        if isinstance(v, str):
            out.append(v.encode("utf-8"))
        elif isinstance(v, dict) and set(v) == {"b64"}:
            out.append(base64.b64decode(v["b64"]))
        else:
            raise RequestError(f"{where} feature '{name}': values of mixed or unsupported "
                               f"type ({json_type(v)})")
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=out))


def examples_from_json(request: dict) -> list:
    import tensorflow as tf

    examples = request.get("examples")
    if not isinstance(examples, list) or not examples:
        raise RequestError("Missing or empty 'examples' array in the request")
    context = request.get("context", {})
    if not isinstance(context, dict):
        raise RequestError("'context' must be an object of features")
    out = []
    for i, ex in enumerate(examples):
        if not isinstance(ex, dict):
            raise RequestError(f"examples[{i}] must be an object of features")
        feats = {k: _feature(k, v, "context") for k, v in context.items()}
        feats.update({k: _feature(k, v, f"examples[{i}]") for k, v in ex.items()})
        out.append(tf.train.Example(
            features=tf.train.Features(feature=feats)).SerializeToString())
    return out


def classify_or_regress(served, verb: str, body: bytes) -> dict:
    request = parse_json_body(body)
    sig = signature_of(request, served.signatures)
    if sig.method_name != METHODS[verb]:
        raise RequestError(f"Expected {_NAMES[verb]} signature method_name to be "
                           f"{METHODS[verb]}. Was: {sig.method_name}")
    if len(sig.inputs) != 1:
        raise RequestError(f"Expected one input Tensor for signature '{sig.name}'")
    name = next(iter(sig.inputs))
    serialized = np.array(examples_from_json(request), dtype=object)
    out = sig({name: serialized})
    if verb == "regress":
        values = np.asarray(out["outputs"], np.float32).reshape(len(serialized), -1)[:, 0]
        return {"results": [float(str(v)) for v in values]}
    n = len(serialized)
    scores = out.get("scores")
    classes = out.get("classes")
    results = []
    for i in range(n):
        row_scores = [] if scores is None else np.asarray(scores[i]).ravel().tolist()
        row_classes = ([] if classes is None else
                       [c.decode() if isinstance(c, bytes) else str(c)
                        for c in np.asarray(classes[i]).ravel()])
        k = max(len(row_scores), len(row_classes))
        results.append([[row_classes[j] if row_classes else str(j),
                         float(str(np.float32(row_scores[j]))) if row_scores else 0.0]
                        for j in range(k)])
    return {"results": results}
