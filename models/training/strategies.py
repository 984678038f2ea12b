"""tf.distribute strategy chosen by config (`strategy` in the Trainer custom_config).

- ``mirrored`` (default): synchronous data parallelism over the local devices: every
  GPU, else every logical CPU device (tests split the CPU into two logical devices). Over
  one device (a plain machine) it is TensorFlow's default strategy: MirroredStrategy with
  one replica is not free (its per-step replica context and cross-replica reduction cost
  DIN + CREAD + CQE at batch 64 ~14 % of its steady examples/s: 5,307 / 5,447 against
  6,289 / 6,138 with the default strategy on the default data, alternating; session 45).
- ``multi_worker``: MultiWorkerMirroredStrategy; the cluster comes from TF_CONFIG
  (every worker runs run_fn; worker 0 / the chief writes the real outputs).
- ``parameter_server``: ParameterServerStrategy; the cluster comes from TF_CONFIG
  (or a given resolver), and variables larger than ``ps_min_shard_bytes`` are split
  row-wise over up to ``ps_max_shards`` parameter servers by
  ``MinSizePartitioner`` — in practice the big embedding tables, which then live as
  ShardedVariables (FeatureLayer looks them up with tf.nn.embedding_lookup).
  Keras trains it from a coordinator with ``DatasetCreator`` and ``steps_per_epoch``.

Checkpointing: run_fn adds ``keras.callbacks.BackupAndRestore`` under the model run
dir, so a restarted (killed) worker resumes from the last finished epoch.
"""
import json
import os

import tensorflow as tf

STRATEGIES = ("mirrored", "multi_worker", "parameter_server")


def local_devices():
    """Every GPU, else every logical CPU device."""
    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def embedding_partitioner(num_ps: int, min_shard_bytes: int = 256 << 10, max_shards: int = None):
    """Row-wise partitioner: shards of at least `min_shard_bytes`, at most one per ps."""
    max_shards = max(1, min(int(max_shards or num_ps), int(num_ps)))
    return tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=int(min_shard_bytes), max_shards=max_shards)


def make_strategy(name: str = "mirrored", cluster_resolver=None, ps_min_shard_bytes: int = 256 << 10,
                  ps_max_shards: int = None, devices=None) -> tf.distribute.Strategy:
    """The strategy called `name` (see the module docstring). Unknown names: ValueError."""
    if name == "mirrored":
        devices = devices or local_devices()
        return tf.distribute.MirroredStrategy(devices=devices) if len(devices) > 1 else tf.distribute.get_strategy()
    if name == "multi_worker":
        if cluster_resolver is None and not os.environ.get("TF_CONFIG"):
            raise ValueError("strategy 'multi_worker' needs a cluster: set TF_CONFIG")
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)
    if name == "parameter_server":
        if cluster_resolver is None:
            if not os.environ.get("TF_CONFIG"):
                raise ValueError("strategy 'parameter_server' needs a cluster: set TF_CONFIG "
                                 "(chief, worker and ps tasks) or pass a cluster_resolver")
            cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        num_ps = len(cluster_resolver.cluster_spec().as_dict().get("ps", []))
        if num_ps < 1:
            raise ValueError("strategy 'parameter_server' needs at least one 'ps' task in the cluster")
        return tf.distribute.ParameterServerStrategy(
            cluster_resolver,
            variable_partitioner=embedding_partitioner(num_ps, ps_min_shard_bytes, ps_max_shards))
    raise ValueError(f"unknown strategy {name!r}; known: {list(STRATEGIES)}")


def is_parameter_server(strategy) -> bool:
    return isinstance(strategy, tf.distribute.ParameterServerStrategy)


def task():
    """(task type, task index) from TF_CONFIG, or (None, None) when not in a cluster."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    t = config.get("task") or {}
    return t.get("type"), t.get("index")


def is_chief() -> bool:
    """True for the chief (or worker 0 when the cluster has no chief) and outside clusters."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task_type, index = task()
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    return task_type == "worker" and index == 0 and "chief" not in config.get("cluster", {})


def write_dir(path: str) -> str:
    """`path` on the chief; a worker-private temp dir under it elsewhere (MWMS saving
    needs every worker to write, only the chief's copy is kept)."""
    if is_chief():
        return path
    task_type, index = task()
    return os.path.join(path, f"workertemp_{task_type}_{index}")
