"""Transform with FramesTFXIO (components/transform/, #33): the same RecordBatches as
TFX's TFExampleRecord, and the same transform graph as TFX's own Transform executor on
the same examples (assets byte for byte, transformed features equal)."""
import os

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
from tensorflow_transform.tf_metadata import schema_utils
from tfx.components.transform import executor as tfx_executor
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import transform_pb2
from tfx.types import artifact_utils, channel_utils, standard_artifacts
from tfx_bsl.tfxio import tf_example_record

from components.log_example_gen import record_files
from components.transform.component import Transform
from components.transform.executor import Executor, FramesTransformProcessor
from components.transform.frames_tfxio import FramesTFXIO
from models import features as F
from models.transform_config import FORCE_TF_COMPAT_V1
from pipeline import configs
from tests.helpers.ranker_utils import raw_batch, raw_rows, serialize_rows

L = 5
SHARDS = {"train": [130, 110], "eval": [60]}  # rows per shard file
BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("transform_examples")
    rows = raw_rows(sum(sum(v) for v in SHARDS.values()), L, seed=3)
    examples = standard_artifacts.Examples()
    examples.uri = str(root / "examples")
    examples.split_names = artifact_utils.encode_split_names(list(SHARDS))
    start = 0
    for split, sizes in SHARDS.items():
        for shard, n in enumerate(sizes):
            w = record_files.ShardWriter(os.path.join(examples.uri, f"Split-{split}", record_files.shard_name(
                "data_tfrecord", shard, len(sizes), ".gz")), str(root / ".tmp"))
            w.write(serialize_rows(rows[start:start + n]))
            w.close()
            start += n
    schema = standard_artifacts.Schema()
    schema.uri = str(root / "schema")
    os.makedirs(schema.uri)
    from tfx.utils import io_utils

    io_utils.write_pbtxt_file(os.path.join(schema.uri, "schema.pbtxt"),
                              schema_utils.schema_from_feature_spec(F.raw_feature_spec(L)))
    return rows, examples, schema


_COLLECTED = []  # the in-memory DirectRunner runs _collect in this process


def _collect(batch):
    _COLLECTED.append(batch)


def _batches(tfxio, batch_size=None):
    _COLLECTED.clear()
    with beam.Pipeline() as p:
        _ = p | tfxio.BeamSource(batch_size) | beam.Map(_collect)
    return list(_COLLECTED)


def _sorted_rows(batches):
    """The rows of `batches` in a fixed order (a PCollection has none)."""
    return sorted(pa.Table.from_batches(batches).to_pylist(), key=repr)


@pytest.mark.parametrize("batch_size", [None, 7])
def test_frames_tfxio_gives_tfx_s_record_batches(data, batch_size):
    _, examples, _ = data
    schema = schema_utils.schema_from_feature_spec(F.raw_feature_spec(L))
    pattern = os.path.join(examples.uri, "Split-train", "*")
    ours, tfx = FramesTFXIO(pattern, schema=schema), tf_example_record.TFExampleRecord(pattern, schema=schema)
    assert ours.ArrowSchema().equals(tfx.ArrowSchema())
    got, want = _batches(ours, batch_size), _batches(tfx)
    assert all(b.schema.equals(ours.ArrowSchema()) for b in got)
    if batch_size:
        assert max(b.num_rows for b in got) == batch_size
    assert sum(b.num_rows for b in got) == 240
    assert _sorted_rows(got) == _sorted_rows(want)

    projected = ours.Project(["video_id", "hist_video_id"])
    assert isinstance(projected.projected, FramesTFXIO)  # TFXIO wraps the projection
    assert projected.ArrowSchema().names == ["hist_video_id", "video_id"]
    assert _sorted_rows(_batches(projected)) == _sorted_rows(_batches(tfx.Project(["video_id", "hist_video_id"])))


def test_frames_tfxio_names_a_pattern_without_files_and_a_corrupt_file(data, tmp_path):
    _, examples, _ = data
    with pytest.raises(ValueError, match="no files match .*Split-nope"):
        FramesTFXIO(os.path.join(examples.uri, "Split-nope", "*")).BeamSource()
    bad = tmp_path / "bad.gz"
    good = open(os.path.join(examples.uri, "Split-eval", record_files.shard_name("data_tfrecord", 0, 1, ".gz")),
                "rb").read()
    import gzip

    raw = bytearray(gzip.decompress(good))
    raw[40] ^= 0xFF  # a byte of the first record's data
    bad.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(Exception, match="bad.gz: record 0: corrupt data"):
        _batches(FramesTFXIO(str(bad)))


def _run(executor_cls, data, out_dir):
    _, examples, schema = data
    component = Transform(
        examples=channel_utils.as_channel([examples]), schema=channel_utils.as_channel([schema]),
        preprocessing_fn="models.preprocessing.preprocessing_fn",
        custom_config=configs.TRANSFORM.to_custom_config(),
        splits_config=transform_pb2.SplitsConfig(analyze=["train"], transform=[]),
        materialize=False, disable_statistics=True, disable_analyzer_cache=True,
        force_tf_compat_v1=FORCE_TF_COMPAT_V1)
    graph = standard_artifacts.TransformGraph()
    graph.uri = str(out_dir / "transform_graph")
    ctx = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=BEAM_ARGS, tmp_dir=str(out_dir / "tmp"))
    props = {k: v for k, v in component.exec_properties.items() if v is not None}
    executor_cls(ctx).Do({"examples": [examples], "schema": [schema]}, {"transform_graph": [graph]}, props)
    return graph.uri


def test_transform_graph_equals_tfx_s_executor(data, tmp_path):
    import tensorflow_transform as tft

    rows = data[0]
    ours, theirs = _run(Executor, data, tmp_path / "ours"), _run(tfx_executor.Executor, data, tmp_path / "tfx")
    assets = sorted(os.listdir(os.path.join(ours, "transform_fn", "assets")))
    assert assets == sorted(os.listdir(os.path.join(theirs, "transform_fn", "assets"))) and assets
    for name in assets:
        a, b = (open(os.path.join(d, "transform_fn", "assets", name), "rb").read() for d in (ours, theirs))
        assert a == b, name
    batch = {k: tf.constant(v) for k, v in raw_batch(rows[:64], L).items()}
    got = tft.TFTransformOutput(ours).transform_features_layer()(batch)
    want = tft.TFTransformOutput(theirs).transform_features_layer()(batch)
    assert sorted(got) == sorted(want) and got
    for k in want:
        g, w = got[k].numpy(), want[k].numpy()
        if np.issubdtype(w.dtype, np.floating):
            # TFX's TFXIO sizes its batches by bytes or by timing (tfx_bsl batch_util), ours
            # are 1,000 rows: the analyzers' float sums (mean, variance) add in another order,
            # a few float32 ulps (2.4e-7 once the raw examples gained sig_tag_tab_watch)
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=k)
        else:
            np.testing.assert_array_equal(g, w, err_msg=k)


def test_the_pipeline_s_transform_reads_through_frames_tfxio(data, tmp_path, monkeypatch):
    made = []
    real = FramesTFXIO.BeamSource
    monkeypatch.setattr(FramesTFXIO, "BeamSource", lambda self, *a: made.append(self) or real(self, *a))
    _run(Executor, data, tmp_path)
    assert made and all(t._file_pattern[0].endswith(os.path.join("Split-train", "*")) for t in made)
    assert tfx_executor.TransformProcessor is not FramesTransformProcessor  # restored
    assert Transform.EXECUTOR_SPEC.executor_class is Executor


def _tf_example(**features) -> bytes:
    def feature(v):
        if v and isinstance(v[0], bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
        if v and isinstance(v[0], float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=v))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    return tf.train.Example(features=tf.train.Features(
        feature={k: feature(v) for k, v in features.items()})).SerializeToString()


def test_example_decoder_gives_tfx_bsl_s_batches_and_falls_back_where_the_parse_cannot_tell():
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx_bsl.coders import example_coder

    from components.transform.example_decoder import ExampleDecoder

    schema = schema_pb2.Schema()
    for name, kind in (("i", schema_pb2.INT), ("f", schema_pb2.FLOAT), ("s", schema_pb2.BYTES)):
        schema.feature.add(name=name, type=kind)
    serialized = schema.SerializeToString()
    ours, tfx_bsl = ExampleDecoder(serialized), example_coder.ExamplesToRecordBatchDecoder(serialized)
    full = [_tf_example(i=[n, -n], f=[n / 4.0], s=[b"x%d" % n, b""], extra=[1]) for n in range(5)]
    batches = {
        "every feature present": full,
        "a missing feature": full[:2] + [_tf_example(i=[7], f=[1.0])],
        "an empty list": full[:2] + [_tf_example(i=[], f=[1.0], s=[b"y"])],
        "no records": [],
    }
    expect_fallback = {"every feature present": 0, "a missing feature": 1, "an empty list": 1, "no records": 0}
    for name, records in batches.items():
        before = ours.fallback_batches
        got, want = ours.DecodeBatch(records), tfx_bsl.DecodeBatch(records)
        assert got.equals(want), name
        assert ours.fallback_batches - before == expect_fallback[name], name
    assert ours.ArrowSchema().equals(tfx_bsl.ArrowSchema())
    with tf.Graph().as_default():  # graph mode: tfx-bsl decodes
        before = ours.fallback_batches
        assert ours.DecodeBatch(full).equals(tfx_bsl.DecodeBatch(full)) and ours.fallback_batches == before + 1
    # last: a failed DecodeBatch leaves tfx-bsl's decoder unusable (its builders keep the partial batch)
    wrong_type = full[:1] + [_tf_example(i=[1.5], f=[1.0], s=[b"z"])]
    with pytest.raises(Exception) as ours_error:
        ours.DecodeBatch(wrong_type)
    with pytest.raises(Exception) as tfx_bsl_error:
        tfx_bsl.DecodeBatch(wrong_type)
    assert str(ours_error.value) == str(tfx_bsl_error.value)  # tfx-bsl's own error
