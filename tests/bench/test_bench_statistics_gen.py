"""bench_statistics_gen's comparison of a sample's statistics with the full read's, by hand."""
import math
import os

import pytest
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from bench import bench_statistics_gen


def _write(root, split, n, mean, std, tops):
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    d = stats.datasets.add(num_examples=n)
    f = d.features.add()
    f.path.step.append("watch_s")
    f.num_stats.mean, f.num_stats.std_dev = mean, std
    f.num_stats.common_stats.num_non_missing = n
    g = d.features.add()
    g.path.step.append("tab")
    g.string_stats.common_stats.num_non_missing = n
    for v in tops:
        g.string_stats.top_values.add(value=v, frequency=1)
    os.makedirs(os.path.join(root, f"Split-{split}"))
    with open(os.path.join(root, f"Split-{split}", "FeatureStats.pb"), "wb") as fh:
        fh.write(stats.SerializeToString())


def test_compare_gives_mean_errors_in_standard_errors(tmp_path):
    _write(str(tmp_path / "full"), "train", 10_000, 5.0, 2.0, ["a", "b", "c"])
    _write(str(tmp_path / "sample"), "train", 400, 5.3, 2.1, ["b", "a", "d"])
    schema = schema_pb2.Schema()
    got = bench_statistics_gen.compare(str(tmp_path / "full"), str(tmp_path / "sample"), ["train"], schema)["train"]
    assert got["examples_read"] == 400 and got["examples"] == 10_000
    assert got["mean_error_se_max"] == pytest.approx(round(0.3 / (2.0 / math.sqrt(400)), 2))  # 3.0
    assert got["string_top10_equal"] == "0/1"
    # without a schema every feature is unexpected, for the sample and the full read alike
    assert got["anomalies"] == got["anomalies_full"] == ["tab", "watch_s"]
