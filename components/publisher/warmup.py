"""TF Serving warmup file: `assets.extra/tf_serving_warmup_requests`.

A TFRecord of `tensorflow_serving.apis.PredictionLog` records, each a `predict_log`
whose request is a PredictRequest (model_spec.name, signature "serving_default",
inputs = TensorProtos of the raw serving features of `rows_per_request` eval rows).
TF Serving replays it (≤ 1000 records) before a new version takes traffic; the
embedded server (serving/) replays the same file before it swaps a version in.
"""
import os
from typing import List

import numpy as np
import tensorflow as tf

from models import features as F

WARMUP_DIR = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
MAX_RECORDS = 1000


def _batches(serialized: List[bytes], history_length: int, rows: int):
    spec = F.raw_feature_spec(history_length)
    spec = {k: spec[k] for k in F.SERVING_RAW_FEATURES}
    for i in range(0, len(serialized) - rows + 1, rows):
        parsed = tf.io.parse_example(tf.constant(serialized[i:i + rows]), spec)
        yield {k: v.numpy() for k, v in parsed.items()}


def write_warmup(saved_model_dir: str, serialized: List[bytes], history_length: int, model_name: str,
                 num_records: int, rows_per_request: int, signature_name: str = "serving_default") -> int:
    """Writes up to `num_records` requests built from raw `serialized` examples; returns
    how many were written."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    if num_records > MAX_RECORDS:
        raise ValueError(f"write_warmup: TF Serving reads at most {MAX_RECORDS} records, asked {num_records}")
    out_dir = os.path.join(saved_model_dir, WARMUP_DIR)
    tf.io.gfile.makedirs(out_dir)
    written = 0
    with tf.io.TFRecordWriter(os.path.join(out_dir, WARMUP_FILE)) as writer:
        for batch in _batches(serialized, history_length, rows_per_request):
            if written >= num_records:
                break
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name))
            for name, value in batch.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(value)))
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
            written += 1
    return written


def read_warmup(saved_model_dir: str) -> list:
    """The PredictionLog records of a version's warmup file."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(saved_model_dir, WARMUP_DIR, WARMUP_FILE)
    return [prediction_log_pb2.PredictionLog.FromString(r.numpy()) for r in tf.data.TFRecordDataset([path])]
