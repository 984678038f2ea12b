"""A tiny SavedModel with known outputs, and request helpers, for the serving tests.

The model mimics a pushed ranker's signatures: `serving_default` takes raw features
(int64 ids, a string, a float, an int64 history of length 5), `serving_examples`
takes serialized tf.Examples, `click_only` has a single output, `serving_rank` takes one user (batch 1) and N
candidates. Its outputs are
simple arithmetic of the inputs, so expected numbers are computed by hand and by
calling the SavedModel directly.
"""
import json
import os

import requests
import tensorflow as tf

MODEL = "tiny_ranker"
L = 5
RAW_SPECS = [
    tf.TensorSpec([None], tf.int64, name="user_id"),
    tf.TensorSpec([None], tf.int64, name="video_id"),
    tf.TensorSpec([None], tf.string, name="video_type"),
    tf.TensorSpec([None], tf.float32, name="duration_s"),
    tf.TensorSpec([None, L], tf.int64, name="hist_video_id"),
    tf.TensorSpec([None], tf.int64, name="hist_len"),
]
RAW_NAMES = [s.name for s in RAW_SPECS]
PARSE_SPEC = {
    "user_id": tf.io.FixedLenFeature([], tf.int64),
    "video_id": tf.io.FixedLenFeature([], tf.int64),
    "video_type": tf.io.FixedLenFeature([], tf.string),
    "duration_s": tf.io.FixedLenFeature([], tf.float32),
    "hist_video_id": tf.io.FixedLenFeature([L], tf.int64),
    "hist_len": tf.io.FixedLenFeature([], tf.int64),
}


class TinyRanker(tf.Module):
    """click_prob = ((user_id + video_id) mod 10) / 10 + 0.01 hist_len
    watch_time_s = 0.5 duration_s + sum(non-pad hist_video_id) + len(video_type) + offset
    """

    def __init__(self, watch_offset: float):
        super().__init__()
        self.watch_offset = tf.Variable(watch_offset, dtype=tf.float32)

    def _outputs(self, user_id, video_id, video_type, duration_s, hist_video_id, hist_len):
        click = (tf.cast((user_id + video_id) % 10, tf.float32) / 10.0
                 + 0.01 * tf.cast(hist_len, tf.float32))
        real = tf.where(hist_video_id >= 0, hist_video_id, tf.zeros_like(hist_video_id))
        watch = (0.5 * duration_s + tf.cast(tf.reduce_sum(real, axis=1), tf.float32)
                 + tf.cast(tf.strings.length(video_type), tf.float32) + self.watch_offset)
        return {"click_prob": click[:, None], "watch_time_s": watch[:, None]}

    @tf.function(input_signature=RAW_SPECS)
    def serve(self, user_id, video_id, video_type, duration_s, hist_video_id, hist_len):
        return self._outputs(user_id, video_id, video_type, duration_s, hist_video_id,
                             hist_len)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(self, examples):
        return self._outputs(**tf.io.parse_example(examples, PARSE_SPEC))

    @tf.function(input_signature=RAW_SPECS)
    def click_only(self, user_id, video_id, video_type, duration_s, hist_video_id, hist_len):
        out = self._outputs(user_id, video_id, video_type, duration_s, hist_video_id,
                            hist_len)
        return {"click_prob": out["click_prob"]}


    @tf.function(input_signature=[
        tf.TensorSpec([1], tf.int64, name="user_id"),
        tf.TensorSpec([1, L], tf.int64, name="hist_video_id"),
        tf.TensorSpec([1], tf.int64, name="hist_len"),
        tf.TensorSpec([None], tf.int64, name="video_id"),
        tf.TensorSpec([None], tf.string, name="video_type"),
        tf.TensorSpec([None], tf.float32, name="duration_s")])
    def rank(self, user_id, hist_video_id, hist_len, video_id, video_type, duration_s):
        """serving_rank: one user (batch 1) x N candidates, broadcast in the graph."""
        n = tf.shape(video_id)[0]
        return self._outputs(tf.repeat(user_id, n), video_id, video_type, duration_s,
                             tf.repeat(hist_video_id, n, axis=0), tf.repeat(hist_len, n))


USER_NAMES = ["user_id", "hist_video_id", "hist_len"]


def save_model(path, watch_offset=0.0):
    m = TinyRanker(watch_offset)
    tf.saved_model.save(m, str(path), signatures={
        "serving_default": m.serve, "serving_examples": m.serve_examples,
        "click_only": m.click_only, "serving_rank": m.rank})


def write_warmup(model_dir, instances, signature="serving_default", n_records=1):
    """assets.extra/tf_serving_warmup_requests as the publisher writes it (PredictionLog)."""
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    dtypes = {s.name: s.dtype for s in RAW_SPECS}
    os.makedirs(os.path.join(model_dir, "assets.extra"), exist_ok=True)
    path = os.path.join(model_dir, "assets.extra", "tf_serving_warmup_requests")
    with tf.io.TFRecordWriter(path) as w:
        for _ in range(n_records):
            req = predict_pb2.PredictRequest()
            req.model_spec.name = MODEL
            req.model_spec.signature_name = signature
            for k in [k for k in RAW_NAMES if k in instances[0]]:
                req.inputs[k].CopyFrom(tf.make_tensor_proto(
                    [inst[k] for inst in instances], dtype=dtypes[k]))
            w.write(prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=req)).SerializeToString())
    return path


def publish(base, version, watch_offset):
    """Atomic publish like the Pusher: write a temp dir, then rename."""
    tmp = os.path.join(base, f".tmp-{version}")
    save_model(tmp, watch_offset)
    os.rename(tmp, os.path.join(base, str(version)))


def make_instance(i):
    return {"user_id": i, "video_id": 3 * i + 1, "video_type": "NORMAL" if i % 2 else "AD",
            "duration_s": 10.5 + i, "hist_video_id": [i, i + 1, -1, -1, -1], "hist_len": 2}


def to_example(inst) -> bytes:
    f = tf.train.Feature
    ex = tf.train.Example(features=tf.train.Features(feature={
        "user_id": f(int64_list=tf.train.Int64List(value=[inst["user_id"]])),
        "video_id": f(int64_list=tf.train.Int64List(value=[inst["video_id"]])),
        "video_type": f(bytes_list=tf.train.BytesList(value=[inst["video_type"].encode()])),
        "duration_s": f(float_list=tf.train.FloatList(value=[inst["duration_s"]])),
        "hist_video_id": f(int64_list=tf.train.Int64List(value=inst["hist_video_id"])),
        "hist_len": f(int64_list=tf.train.Int64List(value=[inst["hist_len"]])),
        "is_click": f(int64_list=tf.train.Int64List(value=[1])),  # a label: dropped
    }))
    return ex.SerializeToString()


def direct_outputs(model_dir, instances, signature="serving_default"):
    fn = tf.saved_model.load(str(model_dir)).signatures[signature]
    dtypes = {s.name: s.dtype for s in RAW_SPECS}
    feed = {k: tf.constant([inst[k] for inst in instances], dtype=dtypes[k])
            for k in RAW_NAMES}
    return {k: v.numpy() for k, v in fn(**feed).items()}


def post(url, path, body, raw=False):
    data = body if raw else json.dumps(body)
    return requests.post(url + path, data=data, timeout=30,
                         headers={"Content-Type": "application/json"})


PREDICT = f"/v1/models/{MODEL}:predict"


def without(d, key):
    return {k: v for k, v in d.items() if k != key}


GOOD = make_instance(1)
