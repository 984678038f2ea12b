"""Distribution strategies: Mirrored on 2 logical CPUs, MultiWorkerMirrored with 2 local
workers, ParameterServer with an in-process cluster and a partitioned embedding."""
import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.helpers.strategy_worker import free_port


def _env(**extra):
    return dict(os.environ, PYTHONPATH=ROOT, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", **extra)


def _run(args, env):
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.strategy_worker"] + args, cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc, timeout=240):
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-5000:]


def test_mirrored_strategy_over_two_logical_cpus(tmp_path):
    out = tmp_path / "mirrored.json"
    _finish(_run(["mirrored2", str(out)], _env()))
    result = json.loads(out.read_text())
    assert result["replicas"] == 2 and result["replica_ids"] == [0, 1]
    assert len(result["devices"]) == 2
    assert math.isfinite(result["loss"])


def test_multi_worker_mirrored_with_two_local_workers(tmp_path):
    workers = [f"localhost:{free_port()}", f"localhost:{free_port()}"]
    procs = []
    for i in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})
        procs.append(_run(["multi_worker", str(tmp_path / f"w{i}.json"), str(tmp_path / "backup")],
                          _env(TF_CONFIG=tf_config)))
    for p in procs:
        _finish(p)
    w0, w1 = (json.loads((tmp_path / f"w{i}.json").read_text()) for i in range(2))
    assert w0["replicas"] == w1["replicas"] == 2
    assert w0["chief"] and not w1["chief"]
    assert len(w0["loss"]) == 2 and all(math.isfinite(v) for v in w0["loss"])
    # synchronous all-reduce training: both workers end with the same weights
    assert w0["checksum"] == pytest.approx(w1["checksum"], rel=1e-6)
    # the decaying rate ran on both workers and left the configured one
    assert w0["iterations"] == w1["iterations"] == 2 * 3  # 2 epochs of STEPS (3) batches
    assert w0["learning_rate_after"] == w1["learning_rate_after"] == pytest.approx(w0["learning_rate"])


def test_parameter_server_with_partitioned_embedding(tmp_path):
    out = tmp_path / "ps.json"
    _finish(_run(["parameter_server", str(out)], _env()))
    result = json.loads(out.read_text())
    assert result["sharded"] == "ShardedVariable" and result["shards"] == 2
    assert {"/job:ps/replica:0/task:0" in d or "/job:ps/task:0" in d for d in result["shard_devices"]} == {True, False}
    assert result["shape"] == [2002, 8]
    assert all(math.isfinite(v) for v in result["loss"])
    assert result["changed_rows"] > 0  # the sharded table was trained
    assert result["learning_rate_after"] == pytest.approx(result["learning_rate"])  # the decay ran and ended


def test_unknown_strategy_raises():
    from models.training.strategies import make_strategy

    with pytest.raises(ValueError, match="unknown strategy 'horovod'"):
        make_strategy("horovod")
    with pytest.raises(ValueError, match="TF_CONFIG"):
        make_strategy("parameter_server")


def test_mirrored_over_one_device_is_the_default_strategy():
    """One local device: no MirroredStrategy (its one-replica overhead, strategies.py); two
    logical devices: MirroredStrategy over both (test_mirrored_strategy_over_two_logical_cpus)."""
    import tensorflow as tf

    from models.training.strategies import make_strategy

    one = make_strategy("mirrored", devices=["/device:CPU:0"])
    assert one is tf.distribute.get_strategy() and one.num_replicas_in_sync == 1
    assert not isinstance(one, tf.distribute.MirroredStrategy)
