"""Subprocess body of the strategy tests: trains a ranker a few steps, writes JSON.

    python -m tests.helpers.strategy_worker mirrored2 OUT.json
    TF_CONFIG=... python -m tests.helpers.strategy_worker multi_worker OUT.json BACKUP_DIR
    python -m tests.helpers.strategy_worker parameter_server OUT.json

Runs in its own process because logical devices and cluster servers must be set up
before TensorFlow initialises its runtime.
"""
import json
import os
import socket
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

L = 5
STEPS = 3
GLOBAL_BATCH = 16


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _data(sizes, n, seed=0):
    from tests.helpers.ranker_utils import random_transformed

    return random_transformed(n, L, sizes, seed=seed)


def _checksum(model):
    import numpy as np

    return float(sum(np.sum(np.asarray(w, dtype=np.float64)) for w in model.get_weights()))


def mirrored2(out):
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from models.training import strategies
    from models.rankers import build_ranker
    from models.training.run_fn import fit_ranker
    from tests.helpers.ranker_utils import small_vocab_sizes, trainer_config

    strategy = strategies.make_strategy("mirrored")
    sizes = small_vocab_sizes()
    with strategy.scope():
        model = build_ranker(trainer_config("din", L), sizes)
    x, y = _data(sizes, GLOBAL_BATCH * STEPS)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    history = fit_ranker(model, ds, 1, verbose=0)  # the Trainer's fit
    per_replica = strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group)
    json.dump({"replicas": strategy.num_replicas_in_sync,
               "replica_ids": sorted(int(v) for v in strategy.experimental_local_results(per_replica)),
               "devices": list(strategy.extended.worker_devices),
               "loss": history.history["loss"][-1], "steps": STEPS}, open(out, "w"))


def multi_worker(out, backup_dir):
    import tensorflow as tf
    import tf_keras as keras

    from models.training import strategies
    from models.rankers import build_ranker
    from models.training.lr_schedule import decay_callbacks
    from models.training.run_fn import fit_ranker
    from tests.helpers.ranker_utils import small_vocab_sizes, trainer_config

    strategy = strategies.make_strategy("multi_worker")
    sizes = small_vocab_sizes()
    config = trainer_config("baseline", L, ranker_params={"hidden_units": [16]}, learning_rate_decay="linear")
    with strategy.scope():
        model = build_ranker(config, sizes)
    x, y = _data(sizes, GLOBAL_BATCH * STEPS)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    backup = keras.callbacks.BackupAndRestore(backup_dir=backup_dir)
    # the Trainer's decaying rate (models/training/lr_schedule.py), set on every worker alike
    decay = decay_callbacks(config, GLOBAL_BATCH * STEPS, 2, batch_size=GLOBAL_BATCH, optimizer=model.optimizer)
    history = fit_ranker(model, ds, 2, callbacks=[backup] + decay, verbose=0)
    json.dump({"replicas": strategy.num_replicas_in_sync, "task": list(strategies.task()),
               "chief": strategies.is_chief(), "loss": history.history["loss"],
               "checksum": _checksum(model), "learning_rate": config.learning_rate,
               "learning_rate_after": float(keras.backend.get_value(model.optimizer.learning_rate)),
               "iterations": int(model.optimizer.iterations.numpy())}, open(out, "w"))


def parameter_server(out):
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from models.training import strategies
    from models.rankers import build_ranker
    from models.training.lr_schedule import decay_callbacks
    from models.training.run_fn import fit_ranker
    from tests.helpers.ranker_utils import small_vocab_sizes, trainer_config

    # In-process cluster: 1 worker + 2 ps servers in this process, this process is the chief.
    spec = {"worker": [f"localhost:{free_port()}"], "ps": [f"localhost:{free_port()}" for _ in range(2)]}
    cluster = tf.train.ClusterSpec(spec)
    config = tf.compat.v1.ConfigProto()
    for job, addresses in spec.items():
        for i in range(len(addresses)):
            tf.distribute.Server(cluster, job_name=job, task_index=i, protocol="grpc", config=config,
                                 start=True)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
    # video table: 2002 rows x 8 x 4 B = 64 KB -> two 32 KB shards at min 16 KB
    strategy = strategies.make_strategy("parameter_server", cluster_resolver=resolver,
                                        ps_min_shard_bytes=16 << 10, ps_max_shards=2)
    sizes = dict(small_vocab_sizes(), video_id=2000)
    config = trainer_config("baseline", L, embedding_dim=8, ranker_params={"hidden_units": [16]},
                            learning_rate_decay="linear")
    with strategy.scope():
        model = build_ranker(config, sizes)
    table = model.get_layer("features").tables["video_id"]
    before = np.concatenate([v.numpy() for v in table.variables])
    x, y = _data(sizes, GLOBAL_BATCH * 8)

    def dataset_fn(input_context):
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)

    history = fit_ranker(model, keras.utils.experimental.DatasetCreator(dataset_fn), 1, steps_per_epoch=STEPS,
                         callbacks=decay_callbacks(config, None, 1, train_steps=STEPS, optimizer=model.optimizer),
                         verbose=0)
    after = np.concatenate([v.numpy() for v in table.variables])
    json.dump({"sharded": type(table).__name__, "shards": len(table.variables),
               "shard_devices": [v.device for v in table.variables],
               "shape": list(table.shape), "loss": history.history["loss"], "learning_rate": config.learning_rate,
               "learning_rate_after": float(keras.backend.get_value(model.optimizer.learning_rate)),
               "changed_rows": int(np.sum(np.any(before != after, axis=1)))}, open(out, "w"))


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "mirrored2":
        mirrored2(out)
    elif mode == "multi_worker":
        multi_worker(out, sys.argv[3])
    elif mode == "parameter_server":
        parameter_server(out)
    else:
        raise ValueError(f"unknown mode {mode!r}")
