"""preprocessing_fn: shared video vocabulary, padding index 0, masks, numerics."""
import numpy as np
import pytest

import tensorflow as tf  # noqa: F401  (after conftest sets TF_USE_LEGACY_KERAS)
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from models import features as F
from models.transform_config import FORCE_TF_COMPAT_V1
from tests.helpers.ranker_utils import configured_preprocessing_fn

L = 4


def _row(user, video, hist_videos, watch, **over):
    row = {k: 0 for k in F.RAW_INT_FEATURES}
    row.update({k: 1.0 for k in F.RAW_FLOAT_FEATURES})
    row.update({k: b"x" for k in F.RAW_BYTES_FEATURES})
    pad = L - len(hist_videos)
    row.update(
        user_id=user, video_id=video, author_id=video * 10, is_click=1, watch_time_s=watch,
        hist_video_id=list(hist_videos) + [-1] * pad,
        hist_author_id=[v * 10 for v in hist_videos] + [-1] * pad,
        hist_is_click=[1] * len(hist_videos) + [0] * pad,
        hist_watch_time_s=[3.0] * len(hist_videos) + [0.0] * pad,
        hist_time_gap_s=[60.0] * len(hist_videos) + [0.0] * pad,
        hist_tab=[1] * len(hist_videos) + [-1] * pad,
        hist_len=len(hist_videos),
    )
    row.update(over)
    return row


SIGNALS_ON = ["sig_propensity", "sig_user_coec", "sig_video_watch"]  # enabled here as LOG_SIGNALS would
PROPS, COECS, WATCHES = [0.1, 0.5, 0.8], [0.5, 1.0, 4.0], [0.0, 1.5, 4.0]


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setattr(F, "NUMERIC_FEATURES", F.BASE_NUMERIC_FEATURES + SIGNALS_ON)
    mp.setattr(F, "ID_SHARED_VOCAB", {**F.ID_SHARED_VOCAB, "hist_tab": "tab"})
    sig = [dict(sig_propensity=p, sig_user_coec=c, sig_video_watch=w) for p, c, w in zip(PROPS, COECS, WATCHES)]
    rows = [
        _row(1, 100, [], 2.0, duration_s=10.0, **sig[0]),
        _row(1, 101, [100], 5.0, duration_s=100.0, hist_tab=[7, -1, -1, -1], **sig[1]),
        _row(2, 100, [999, 101], 0.5, duration_s=1000.0, **sig[2]),  # 999 only ever seen in a history
    ]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(F.raw_feature_spec(L)))
    temp = str(tmp_path_factory.mktemp("tft"))
    try:
        with tft_beam.Context(temp_dir=temp, force_tf_compat_v1=FORCE_TF_COMPAT_V1):
            (out, _), transform_fn = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
                configured_preprocessing_fn(), output_record_batches=False)
            out_dir = str(tmp_path_factory.mktemp("tft_out"))
            _ = transform_fn | tft_beam.WriteTransformFn(out_dir)
    finally:
        mp.undo()
    return out, tft.TFTransformOutput(out_dir)


def test_history_shares_target_vocabulary(transformed):
    out, tft_output = transformed
    vocab = [v.decode() if isinstance(v, bytes) else v for v in tft_output.vocabulary_by_name("video_id_vocab")]
    assert set(vocab) == {"100", "101", "999"}  # history-only video is in the shared vocabulary
    index = {v: i + 1 for i, v in enumerate(vocab)}  # +1: row 0 is the padding row
    assert out[1]["video_id_xf"] == index["101"]
    assert list(out[1]["hist_video_id_xf"]) == [index["100"], 0, 0, 0]
    assert list(out[2]["hist_video_id_xf"]) == [index["999"], index["101"], 0, 0]
    # the same video gets the same index as target and as history item
    assert out[0]["video_id_xf"] == out[1]["hist_video_id_xf"][0]


def test_mask_and_history_values(transformed):
    out, _ = transformed
    np.testing.assert_array_equal(out[0]["hist_mask_xf"], [0, 0, 0, 0])
    np.testing.assert_array_equal(out[2]["hist_mask_xf"], [1, 1, 0, 0])
    np.testing.assert_allclose(out[2]["hist_watch_time_s_xf"], [np.log1p(3.0)] * 2 + [0, 0], rtol=1e-6)
    np.testing.assert_allclose(out[2]["hist_time_gap_s_xf"], [np.log1p(60.0)] * 2 + [0, 0], rtol=1e-6)
    assert out[2]["hist_len_xf"] == 2.0


def test_numeric_log1p_zscore_and_labels(transformed):
    out, _ = transformed
    g = np.log1p([10.0, 100.0, 1000.0])
    expected = (g - g.mean()) / g.std()
    got = [r["duration_s_xf"] for r in out]
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    assert [r["watch_time_s"] for r in out] == [2.0, 5.0, 0.5]
    assert all(r["is_click"] == 1.0 for r in out)


def test_ead_thresholds_are_a_transform_asset_and_bucket_the_label(transformed):
    import json

    out, tft_output = transformed
    with open(tft_output.vocabulary_file_by_name("ead_thresholds")) as f:
        report = json.load(f)
    thresholds = np.asarray(report["thresholds"])
    assert np.all(np.diff(thresholds) > 0)
    for row in out:
        assert row["watch_time_bucket"] == int(np.sum(row["watch_time_s"] > thresholds))


def test_signal_transforms_match_numpy():
    from models.preprocessing import SIGNAL_EPS, signal_transform

    x = np.array([0.0, 0.2, 0.5, 1.0, 3.0], np.float32)
    p = np.clip(x, SIGNAL_EPS, 1 - SIGNAL_EPS)
    np.testing.assert_allclose(signal_transform(tf.constant(x), "logit"), np.log(p / (1 - p)), rtol=1e-5)
    np.testing.assert_allclose(signal_transform(tf.constant(x), "log"), np.log(np.maximum(x, SIGNAL_EPS)),
                               rtol=1e-5)
    np.testing.assert_array_equal(signal_transform(tf.constant(x), "none"), x)
    assert set(F.SIGNAL_TRANSFORMS.values()) <= {"logit", "log", "none"}


def test_enabled_signals_are_transformed_then_z_scored(transformed):
    """With signals on (LOG_SIGNALS), each is g(x) then z-scored; hist_tab shares tab's vocabulary."""
    out, tft_output = transformed
    for key, g in (("sig_propensity", np.log(np.array(PROPS) / (1 - np.array(PROPS)))),
                   ("sig_user_coec", np.log(COECS)), ("sig_video_watch", np.array(WATCHES))):
        np.testing.assert_allclose([r[key + "_xf"] for r in out], (g - g.mean()) / g.std(), rtol=1e-4, atol=1e-5)
    vocab = [v.decode() if isinstance(v, bytes) else v for v in tft_output.vocabulary_by_name("tab_vocab")]
    assert "7" in vocab  # a tab only seen in a history is in tab's vocabulary
    assert list(out[1]["hist_tab_xf"]) == [vocab.index("7") + 1, 0, 0, 0]
    assert list(out[0]["hist_tab_xf"]) == [0, 0, 0, 0]


def test_an_unseen_value_gets_the_one_oov_index_without_hashing(transformed):
    """With one OOV bucket an unseen id / string maps to vocab_size + 1 (the index the
    hashed bucket gave: vocab_size + hash % 1 + 1), known ones to index + 1, padding to 0;
    the transform graph has no hash op."""
    import os

    from tensorflow.core.protobuf import saved_model_pb2

    _, tft_output = transformed
    rows = [_row(3, 100, [123456, 101], 1.0, video_type=b"never-seen"), _row(1, 777, [100], 1.0)]
    batch = {k: tf.constant([r[k] for r in rows], dtype=s.dtype) for k, s in F.raw_feature_spec(L).items()}
    got = {k: v.numpy().tolist() for k, v in tft_output.transform_features_layer()(batch).items()}
    vocab = [v.decode() if isinstance(v, bytes) else v for v in tft_output.vocabulary_by_name("video_id_vocab")]
    oov = len(vocab) + 1
    assert got["hist_video_id_xf"] == [[oov, vocab.index("101") + 1, 0, 0], [vocab.index("100") + 1, 0, 0, 0]]
    assert got["video_id_xf"] == [vocab.index("100") + 1, oov]
    for key in ("user_id", "video_type"):  # an unseen id, an unseen string
        assert got[key + "_xf"][0] == tft_output.vocabulary_size_by_name(F.vocab_name(key)) + 1, key
        assert got[key + "_xf"][1] <= tft_output.vocabulary_size_by_name(F.vocab_name(key)), key
    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(tft_output.transform_savedmodel_dir, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    graph = sm.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node} | {n.op for fn in graph.library.function for n in fn.node_def}
    assert "LookupTableFindV2" in ops and not [op for op in ops if "Hash" in op and "Table" not in op], sorted(ops)


def _tft_order(tokens):
    """tft.vocabulary's order, by brute force: count descending, then the token's text
    (bytes) descending; ids are counted as their decimal text."""
    import collections

    counts = collections.Counter(str(t).encode() if not isinstance(t, bytes) else t for t in tokens)
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def test_every_output_of_the_fixture_against_brute_force(small_transform_output):
    """Every output of the pipeline's transform graph on the shared 40-row fixture
    (tests/conftest.py) against NumPy: vocabulary ids in tft.vocabulary's order with a
    shared table for history ids, z-scores, history values, labels and EAD buckets. It
    held before the vocabularies were fused and the EAD analyzer became one phase
    (issue #33), with every output equal to the bit, and holds after."""
    from tests.conftest import SMALL_L
    from models.preprocessing import signal_transform
    from models.watch_time import ead_analyzer

    output, rows = small_transform_output
    spec = F.raw_feature_spec(SMALL_L)
    batch = {k: tf.constant([r[k] for r in rows], dtype=s.dtype) for k, s in spec.items()}
    got = {k: v.numpy() for k, v in output.transform_features_layer()(batch).items()}

    hist_len = np.array([r["hist_len"] for r in rows])
    mask = np.arange(SMALL_L)[None, :] < hist_len[:, None]
    expected = {"hist_mask_xf": mask.astype(np.float32), "hist_len_xf": hist_len.astype(np.float32)}
    shared = {target: hist for hist, target in F.ID_SHARED_VOCAB.items()}
    for key in F.ID_FEATURES + F.STRING_FEATURES:
        tokens = [r[key] for r in rows]
        if key in shared:
            tokens += [v for r, m in zip(rows, mask) for v, keep in zip(r[shared[key]], m) if keep]
        vocab = _tft_order(tokens)
        assert output.vocabulary_by_name(F.vocab_name(key)) == vocab, key
        assert output.vocabulary_size_by_name(F.vocab_name(key)) == len(vocab), key
        index = {t: i + 1 for i, t in enumerate(vocab)}  # 0 is padding; OOV = size + 1 (none here)
        enc = [str(r[key]).encode() if not isinstance(r[key], bytes) else r[key] for r in rows]
        expected[F.transformed_name(key)] = np.array([index[t] for t in enc])
        if key in shared:
            expected[F.transformed_name(shared[key])] = np.array(
                [[index[str(v).encode()] if keep else 0 for v, keep in zip(r[shared[key]], m)]
                 for r, m in zip(rows, mask)])
    for key in F.NUMERIC_FEATURES:
        x = np.array([r[key] for r in rows], np.float64)
        if key in F.LOG1P_FEATURES:
            x = np.log1p(np.maximum(x, 0.0))
        elif key in F.SIGNAL_TRANSFORMS:  # tested against NumPy in test_signal_transforms_match_numpy
            x = signal_transform(tf.constant(x), F.SIGNAL_TRANSFORMS[key]).numpy()
        expected[F.transformed_name(key)] = (x - x.mean()) / x.std()
    for key in F.HISTORY_VALUE_FEATURES:
        x = np.array([r[key] for r in rows], np.float64)
        expected[F.transformed_name(key)] = np.where(mask, x if key == "hist_is_click" else np.log1p(x), 0.0)
    watch = np.array([r[F.LABEL_WATCH] for r in rows], np.float32)
    thresholds = np.asarray(ead_analyzer.read_ead_result(output).thresholds, np.float32)
    expected.update({F.LABEL_CLICK: np.array([r[F.LABEL_CLICK] for r in rows], np.float32),
                     F.LABEL_WATCH: watch,
                     F.WATCH_BUCKET_LABEL: (watch[:, None] > thresholds[None, :]).sum(1)})

    assert sorted(got) == sorted(expected)
    for key, want in expected.items():
        if got[key].dtype.kind == "i":
            np.testing.assert_array_equal(got[key], want, err_msg=key)
        else:
            np.testing.assert_allclose(got[key], want, rtol=1e-5, atol=1e-5, err_msg=key)
