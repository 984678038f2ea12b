"""StatisticsGen sampled before decoding (components/statistics_gen/, #33): the record
reader against tf.io, the sampling rule by hand, and the executor against TFX's own
StatisticsGen executor on the same examples (every rate 1: the same statistics)."""
import os

import numpy as np
import pytest
import tensorflow as tf
from tfx.components.statistics_gen import executor as tfx_executor
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import json_utils

from components.log_example_gen import record_files
from components.statistics_gen import sampling
from components.statistics_gen.component import StatisticsGen
from components.statistics_gen.executor import SAMPLE_ROWS_KEY, Executor

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
SIZES = {"train": [700, 500], "eval": [300]}  # examples per shard file


def _example(i: int) -> bytes:
    f = {"user_id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 37])),
         "tab": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"tab%d" % (i % 5)])),
         "watch_s": tf.train.Feature(float_list=tf.train.FloatList(value=[(i * 7919 % 1000) / 10.0])),
         "hist": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i % 4))))}
    if i % 3:
        f["sometimes"] = tf.train.Feature(float_list=tf.train.FloatList(value=[i / 3.0]))
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def _records(split: str, shard: int):
    base = sum(sum(v) for k, v in SIZES.items() if k < split) + sum(SIZES[split][:shard])
    return [_example(base + i) for i in range(SIZES[split][shard])]


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    root = tmp_path_factory.mktemp("examples")
    art = standard_artifacts.Examples()
    art.uri = str(root)
    art.split_names = artifact_utils.encode_split_names(list(SIZES))
    art.span = 3
    for split, shards in SIZES.items():
        for shard in range(len(shards)):
            w = record_files.ShardWriter(os.path.join(root, f"Split-{split}", record_files.shard_name(
                "data_tfrecord", shard, len(shards), ".gz")), str(root / ".tmp"))
            w.write(_records(split, shard))
            w.close()
        art.set_int_custom_property(f"num_{split}_examples", sum(shards))
    return art


def _run(executor_cls, examples, tmp_path, name, **props):
    out = standard_artifacts.ExampleStatistics()
    out.uri = str(tmp_path / name)
    ctx = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=BEAM_ARGS, tmp_dir=str(tmp_path / "tmp"))
    props = {"exclude_splits": "[]", **props}
    executor_cls(ctx).Do({"examples": [examples]}, {"statistics": [out]}, props)
    return out


def _stats(art, split):
    from tensorflow_data_validation.utils import stats_util

    path = os.path.join(artifact_utils.get_split_uri([art], split), tfx_executor.DEFAULT_FILE_NAME)
    return stats_util.load_stats_binary(path).datasets[0]


def _summary(dataset):
    """What a reader of the statistics uses: counts, numeric moments and ranges, top strings."""
    out = {"num_examples": dataset.num_examples}
    for f in dataset.features:
        name = f.path.step[0]
        if f.HasField("num_stats"):
            s = f.num_stats
            out[name] = (s.common_stats.num_non_missing, s.common_stats.num_missing, s.common_stats.max_num_values,
                         s.common_stats.tot_num_values, round(s.mean, 6), round(s.std_dev, 6), s.min, s.max,
                         s.num_zeros)
        else:
            s = f.string_stats
            out[name] = (s.common_stats.num_non_missing, s.unique,
                         sorted((v.value, v.frequency) for v in s.top_values))
    return out


# ------------------------------------------------------------------ record reader


def test_read_frames_reads_what_tf_io_reads(tmp_path):
    records = _records("train", 0)
    gz = tmp_path / "a.gz"
    w = record_files.ShardWriter(str(gz), str(tmp_path / "tmp"))
    w.write(records[:300])
    w.write(records[300:])
    w.close()
    plain = str(tmp_path / "b.tfrecord")
    with tf.io.TFRecordWriter(plain) as tw:
        for r in records:
            tw.write(r)
    every = sampling.record_mask("x", 1.0)
    assert list(record_files.read_frames(str(gz), every)) == records
    assert list(record_files.read_frames(plain, every)) == records
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(gz), "GZIP")] == records
    # a mask shorter than the file is asked for again from where it ended
    odd = lambda start: np.arange(start, start + 7) % 2 == 1  # noqa: E731
    assert list(record_files.read_frames(plain, odd)) == records[1::2]
    (tmp_path / "empty").write_bytes(b"")
    assert list(record_files.read_frames(str(tmp_path / "empty"), every)) == []


def test_read_frames_names_a_corrupt_or_truncated_record(tmp_path):
    records = [_example(i) for i in range(5)]
    plain = tmp_path / "c.tfrecord"
    with tf.io.TFRecordWriter(str(plain)) as tw:
        for r in records:
            tw.write(r)
    data = plain.read_bytes()
    every = sampling.record_mask("x", 1.0)
    second = 12 + len(records[0]) + 4  # record 1 starts here
    bad = bytearray(data)
    bad[second + 12 + 3] ^= 0xFF
    (tmp_path / "bad").write_bytes(bytes(bad))
    with pytest.raises(ValueError, match=r"bad: record 1: corrupt data"):
        list(record_files.read_frames(str(tmp_path / "bad"), every))
    bad = bytearray(data)
    bad[second + 2] ^= 0xFF
    (tmp_path / "badlen").write_bytes(bytes(bad))
    with pytest.raises(ValueError, match=r"badlen: record 1: truncated or corrupt length"):
        list(record_files.read_frames(str(tmp_path / "badlen"), every))
    (tmp_path / "cut").write_bytes(data[:-7])
    with pytest.raises(ValueError, match=r"cut: record 4: truncated"):
        list(record_files.read_frames(str(tmp_path / "cut"), every))


# ------------------------------------------------------------------ sampling rule


def test_split_rate():
    assert sampling.split_rate("train", 0, 10_000, {}, None) == 1.0  # no budget: every example
    assert sampling.split_rate("train", 2_500, 10_000, {}, None) == 0.25
    assert sampling.split_rate("train", 20_000, 10_000, {}, None) == 1.0
    assert sampling.split_rate("train", 2_500, None, {}, None) == 1.0  # count unknown: every example
    assert sampling.split_rate("train", 2_500, 0, {}, None) == 1.0  # an empty split
    assert sampling.split_rate("train", 2_500, 10_000, {"train": 0.5}, None) == 0.5  # a named rate wins
    assert sampling.split_rate("eval", 2_500, 10_000, {"train": 0.5}, 0.1) == 0.1
    with pytest.raises(ValueError, match="must be in"):
        sampling.split_rate("train", 0, 10, {"train": 0.0}, None)
    for bad in (-1, 1, 999):  # a few rows can come out empty
        with pytest.raises(ValueError, match="sample_rows must be 0 .every example. or >= 1000"):
            sampling.split_rate("train", bad, 10, {}, None)


def test_record_mask_is_splitmix_below_the_rate():
    from models.evaluation.tfma.sampling import splitmix64

    keep = sampling.record_mask("dir/data_tfrecord-00001-of-00004.gz", 0.3)
    n = 50 * 4096
    mask = np.concatenate([keep(s) for s in range(0, n, 4096)])
    seed = __import__("zlib").crc32(b"data_tfrecord-00001-of-00004.gz")
    for k in (0, 1, 4095, 4096, 123_457):  # by hand, record by record
        assert mask[k] == (int(splitmix64(np.array([k + seed], dtype=np.uint64))[0]) < int(0.3 * 2 ** 64))
    se = (n * 0.3 * 0.7) ** 0.5
    assert abs(mask.sum() - 0.3 * n) < 5 * se
    assert np.array_equal(mask[:4096], keep(0))  # deterministic
    other = sampling.record_mask("other/data_tfrecord-00002-of-00004.gz", 0.3)(0)
    assert not np.array_equal(other, mask[:4096])  # each file its own draw


# ------------------------------------------------------------------ executor


def test_every_rate_one_gives_tfx_statistics(examples, tmp_path):
    ours = _run(Executor, examples, tmp_path, "ours")
    theirs = _run(tfx_executor.Executor, examples, tmp_path, "tfx")
    for split in SIZES:
        mine, tfx = _summary(_stats(ours, split)), _summary(_stats(theirs, split))
        assert mine == tfx and mine["num_examples"] == sum(SIZES[split])
    assert ours.split_names == theirs.split_names and ours.span == 3
    assert json_utils.loads(ours.get_json_value_custom_property(
        tfx_executor.SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME)) == {"train": 1.0, "eval": 1.0}


def test_a_row_budget_reads_a_deterministic_sample(examples, tmp_path):
    art = _run(Executor, examples, tmp_path, "a", **{SAMPLE_ROWS_KEY: 1000})
    again = _run(Executor, examples, tmp_path, "b", **{SAMPLE_ROWS_KEY: 1000})
    rates = json_utils.loads(art.get_json_value_custom_property(tfx_executor.SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME))
    rate = 1000 / 1200
    assert rates == {"train": rate, "eval": 1.0}  # 1,000 of 1,200; eval has 300
    kept = sum(int(sampling.record_mask(os.path.basename(record_files.shard_name("data_tfrecord", s, 2, ".gz")),
                                        rate)(0)[:n].sum()) for s, n in enumerate(SIZES["train"]))
    train = _stats(art, "train")
    assert train.num_examples == kept < 1200 and abs(kept - 1000) < 5 * (1200 * rate * (1 - rate)) ** 0.5
    assert _summary(train) == _summary(_stats(again, "train"))  # a rerun reads the same sample
    assert _stats(art, "eval").num_examples == 300


def test_bad_settings_are_refused(examples, tmp_path):
    with pytest.raises(ValueError, match=r"names splits \['validation'\] that are not read"):
        _run(Executor, examples, tmp_path, "c", sample_rate_by_split=json_utils.dumps({"validation": 0.5}))
    with pytest.raises(ValueError, match="no splits to read"):
        _run(Executor, examples, tmp_path, "d", exclude_splits=json_utils.dumps(["train", "eval"]))
    with pytest.raises(ValueError, match="sample_rows must be 0"):
        StatisticsGen(examples=None, sample_rows=10)


def test_component_keeps_tfx_interface():
    from tfx.types import channel_utils

    examples = channel_utils.as_channel([standard_artifacts.Examples()])
    gen = StatisticsGen(examples=examples, sample_rows=1000)
    assert gen.id == "StatisticsGen"
    assert gen.exec_properties[SAMPLE_ROWS_KEY] == 1000
    assert gen.outputs["statistics"].type == standard_artifacts.ExampleStatistics


def test_one_graph_for_all_splits_equals_a_graph_per_split(examples, tmp_path, monkeypatch):
    """The splits keyed through TFDV's sliced statistics (one Beam graph) give each split the
    statistics of its own GenerateStatistics, proto for proto (histograms and quantiles too)."""
    from components.statistics_gen import executor as ours

    one = _run(Executor, examples, tmp_path, "one", **{SAMPLE_ROWS_KEY: 1000})
    monkeypatch.setattr(ours, "_per_split", lambda options, sharded: True)
    each = _run(Executor, examples, tmp_path, "each", **{SAMPLE_ROWS_KEY: 1000})
    for split in SIZES:
        a, b = _stats(one, split), _stats(each, split)
        assert a.name == b.name == "" and a.num_examples > 0
        assert a == b


def test_feature_allowlist_and_an_empty_split_as_tfx(tmp_path):
    """TFX's options reach the one graph as they reach GenerateStatistics: a feature allowlist;
    a split with no examples gets TFX's statistics of no input (an empty dataset)."""
    import tensorflow_data_validation as tfdv

    art = standard_artifacts.Examples()
    art.uri = str(tmp_path / "examples")
    art.split_names = artifact_utils.encode_split_names(["train", "empty"])
    for split, records in (("train", _records("train", 0)), ("empty", [])):
        w = record_files.ShardWriter(os.path.join(art.uri, f"Split-{split}", "data_tfrecord-00000-of-00001.gz"),
                                     str(tmp_path / "tmp"))
        w.write(records)
        w.close()
    options = tfdv.StatsOptions(feature_allowlist=["tab", "watch_s"]).to_json()
    ours = _run(Executor, art, tmp_path, "ours", stats_options_json=options)
    theirs = _run(tfx_executor.Executor, art, tmp_path, "tfx", stats_options_json=options)
    train = _summary(_stats(ours, "train"))
    assert train == _summary(_stats(theirs, "train")) and set(train) == {"num_examples", "tab", "watch_s"}
    assert _stats(ours, "empty") == _stats(theirs, "empty")
    assert _stats(ours, "empty").num_examples == 0 and not _stats(ours, "empty").features
