"""Helpers for ranker tests: random transformed inputs, raw rows, a small TFTransformOutput."""
import os

import numpy as np

from models import features as F
from models.transform_config import FORCE_TF_COMPAT_V1
from pipeline import configs

SMALL_VOCAB = 12


def small_vocab_sizes(size=SMALL_VOCAB):
    return {k: size for k in F.ID_FEATURES + F.STRING_FEATURES}


def random_transformed(n, history_length, vocab_sizes, oov_buckets=1, seed=0):
    """(features, labels) like Transform's output: ids in [1, vocab + oov], 0 = padding."""
    rng = np.random.default_rng(seed)
    x = {}
    for k in F.ID_FEATURES + F.STRING_FEATURES:
        x[F.transformed_name(k)] = rng.integers(1, vocab_sizes[k] + oov_buckets + 1, n).astype(np.int64)
    for k in F.NUMERIC_FEATURES:
        x[F.transformed_name(k)] = rng.normal(size=n).astype(np.float32)
    hist_len = rng.integers(0, history_length + 1, n)
    hist_len[0] = 0  # an empty history is always in the batch
    mask = (np.arange(history_length)[None, :] < hist_len[:, None]).astype(np.float32)
    x["hist_mask_xf"] = mask
    x[F.transformed_name(F.HISTORY_LEN_FEATURE)] = hist_len.astype(np.float32)
    for hist_key, target in F.ID_SHARED_VOCAB.items():
        ids = rng.integers(1, vocab_sizes[target] + oov_buckets + 1, (n, history_length))
        x[F.transformed_name(hist_key)] = (ids * mask).astype(np.int64)
    x["hist_is_click_xf"] = (rng.random((n, history_length)) < 0.5).astype(np.float32) * mask
    x["hist_watch_time_s_xf"] = np.log1p(rng.exponential(10.0, (n, history_length))).astype(np.float32) * mask
    x["hist_time_gap_s_xf"] = np.log1p(rng.exponential(3600.0, (n, history_length))).astype(np.float32) * mask
    # a learnable signal: click depends on the target video id's parity
    click = ((x["video_id_xf"] % 2 == 0) ^ (rng.random(n) < 0.1)).astype(np.float32)
    labels = {"click_prob": click, "watch_time_s": (click * rng.exponential(20.0, n)).astype(np.float32)}
    return x, labels


def raw_rows(n, history_length, seed=0):
    """Raw tf.Example-like rows (models.features.raw_feature_spec) with varied values."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        length = int(rng.integers(0, history_length + 1))
        pad = history_length - length
        hv = [int(v) for v in rng.integers(100, 110, length)]
        row = {k: int(rng.integers(0, 4)) for k in F.RAW_INT_FEATURES}
        row.update({k: float(rng.exponential(20.0)) for k in F.RAW_FLOAT_FEATURES})
        row.update({k: float(rng.uniform(0.01, 0.99)) for k in F.SIGNAL_FEATURES})  # rates and ratios
        row.update({k: [b"a", b"b", b"c"][int(rng.integers(0, 3))] for k in F.RAW_BYTES_FEATURES})
        row.update(
            user_id=int(rng.integers(1, 6)), video_id=int(rng.integers(100, 110)),
            author_id=int(rng.integers(10, 14)), is_click=int(rng.integers(0, 2)),
            hist_video_id=hv + [-1] * pad,
            hist_author_id=[v // 10 for v in hv] + [-1] * pad,
            hist_is_click=[int(c) for c in rng.integers(0, 2, length)] + [0] * pad,
            hist_watch_time_s=[float(w) for w in rng.exponential(10.0, length)] + [0.0] * pad,
            hist_time_gap_s=[float(g) for g in rng.exponential(3600.0, length)] + [0.0] * pad,
            hist_tab=[int(t) for t in rng.integers(0, 4, length)] + [-1] * pad,
            hist_len=length,
        )
        rows.append(row)
    return rows


def build_transform_output(rows, history_length, temp_dir, out_dir):
    """Analyze + transform `rows` with models.preprocessing; returns a TFTransformOutput."""
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    preprocessing_fn = configured_preprocessing_fn()

    metadata = dataset_metadata.DatasetMetadata(
        schema_utils.schema_from_feature_spec(F.raw_feature_spec(history_length)))
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=FORCE_TF_COMPAT_V1):
        transform_fn = (rows, metadata) | tft_beam.AnalyzeDataset(preprocessing_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(out_dir)
    # the raw schema beside it, as TFX's Transform writes it (tft_output.raw_metadata: the
    # Trainer parses raw examples with it)
    from tensorflow_transform.tf_metadata import metadata_io

    metadata_io.write_metadata(metadata, os.path.join(out_dir, tft.TFTransformOutput.RAW_METADATA_DIR))
    return tft.TFTransformOutput(out_dir)


def serialize_rows(rows):
    """Raw rows (as from `raw_rows`) -> serialized tf.Examples, through LogExampleGen's own
    writer (components/log_example_gen/parsing.py `to_tf_example`)."""
    from components.log_example_gen.parsing import to_tf_example

    def text(v):
        return v.decode("utf-8") if isinstance(v, bytes) else v

    return [to_tf_example({k: text(v) for k, v in r.items()}).SerializeToString() for r in rows]


def raw_batch(rows, history_length):
    """Rows -> dict of numpy arrays with the serving (SERVING_RAW_FEATURES) keys and dtypes."""
    spec = F.raw_feature_spec(history_length)
    dtypes = {"int64": np.int64, "float32": np.float32, "string": object}
    return {k: np.array([r[k] for r in rows], dtype=dtypes[spec[k].dtype.name])
            for k in F.SERVING_RAW_FEATURES}


def trainer_config(model_type: str, history_length: int, **changes):
    """pipeline/configs/'s TrainerConfig for small test rankers: the regression watch
    head, the builder's own ranker defaults and 4-wide embeddings unless `changes` say
    otherwise."""
    fields = dict(watch_head="regression", ranker_params={}, embedding_dim=4)
    fields.update(changes)
    return configs.trainer_config(model_type, history_length=history_length, **fields)


def configured_preprocessing_fn():
    """`preprocessing_fn` bound to pipeline/configs/'s TransformConfig, as Transform calls it."""
    import functools

    from models.preprocessing import preprocessing_fn

    return functools.partial(preprocessing_fn, custom_config=configs.TRANSFORM.to_custom_config())
