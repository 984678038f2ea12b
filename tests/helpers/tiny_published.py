"""A tiny published-like SavedModel for the delta and patcher tests.

score(ids) = sigmoid([emb_video_id(ids), linear_video_id(ids)] · w): an int8 table and an
fp32 first-order table, both pruned to half their rows with remaps (PublishedTable), one
dense weight, an asset and a warmup file. tests/models/publishing/test_delta.py and
tests/serving/test_patcher.py both build their versions with `tiny_versions`.
"""
import os

import numpy as np
import tensorflow as tf

from models.publishing import pruning
from models.publishing.published_table import PublishedTable
from models.publishing.quantization import quantize_rows

V, D = 40, 8


def tiny_weights(seed):
    rng = np.random.default_rng(seed)
    return {"emb_video_id": rng.normal(0, 0.1, (V, D)).astype(np.float32),
            "linear_video_id": rng.normal(0, 0.1, (V, 1)).astype(np.float32),
            "w": rng.normal(0, 0.5, (D + 1, 1)).astype(np.float32)}


def tiny_plans():
    keep = np.r_[0, np.arange(1, V, 2), V - 1]  # half the rows + padding + OOV
    return {name: pruning.build_remap(np.unique(keep), V, "oov", oov_rows=[V - 1])
            for name in ("emb_video_id", "linear_video_id")}


def save_tiny(path, weights, plans, asset_dir):
    """A published-like SavedModel: score = sigmoid([emb(ids), linear(ids)] · w)."""
    m = tf.Module()
    for name in ("emb_video_id", "linear_video_id"):
        plan = plans[name]
        compact = pruning.compact_table(weights[name], plan)
        remap = plan.remap.astype(pruning.remap_dtype(plan.compact_rows))
        if name.startswith("emb_"):
            q, s, b = quantize_rows(compact)
            setattr(m, name, PublishedTable(q, s, b, remap=remap, name=name))
        else:
            setattr(m, name, PublishedTable(compact, remap=remap, name=name))
    m.w = tf.Variable(weights["w"])
    vocab = os.path.join(asset_dir, "vocab.txt")
    if not os.path.exists(vocab):
        os.makedirs(asset_dir, exist_ok=True)
        with open(vocab, "w") as f:
            f.write("a\nb\n")
    m.vocab = tf.saved_model.Asset(vocab)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name="ids")])
    def serve(ids):
        x = tf.concat([tf.nn.embedding_lookup(m.emb_video_id, ids), tf.nn.embedding_lookup(m.linear_video_id, ids)], 1)
        return {"score": tf.sigmoid(tf.matmul(x, m.w))}

    tf.saved_model.save(m, path, signatures={"serving_default": serve})
    extra = os.path.join(path, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(name="tiny", signature_name="serving_default"))
    request.inputs["ids"].CopyFrom(tf.make_tensor_proto(np.array([1, 2], np.int64)))
    with tf.io.TFRecordWriter(os.path.join(extra, "tf_serving_warmup_requests")) as w:
        w.write(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
                .SerializeToString())
    return path


def score(path, ids):
    return tf.saved_model.load(path).signatures["serving_default"](ids=tf.constant(ids, tf.int64))["score"].numpy()


def tiny_versions(root, base_name: str) -> dict:
    """`<root>/<base_name>/1` (weights seed 0) and `<root>/new_full` (the full publish of
    the seed-1 weights under the same plans): {"base", "new_full", "root"}."""
    base = os.path.join(str(root), base_name)
    plans = tiny_plans()
    save_tiny(os.path.join(base, "1"), tiny_weights(0), plans, os.path.join(str(root), "assets"))
    new_full = save_tiny(os.path.join(str(root), "new_full"), tiny_weights(1), plans, os.path.join(str(root), "assets"))
    return {"base": base, "new_full": new_full, "root": root}
