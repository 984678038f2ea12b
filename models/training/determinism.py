"""DETERMINISTIC=1 (TrainerConfig ``deterministic``): bit-reproducible training.

Same seed + same data -> the same weights, hence the same predictions, bit for bit:

- ``tf.config.experimental.enable_op_determinism()``: every op picks its deterministic
  kernel (or raises), and tf.data keeps element order (``deterministic=True`` for
  parallel map / interleave), so batches and reductions are the same each run;
- one intra-op and one inter-op thread: Eigen splits a reduction or a matmul by the
  pool's size, so a fixed pool (here 1, the same on every machine) fixes the order of
  the floating-point sums. TensorFlow fixes its pools when its context starts: the
  caller of a whole run (`make run`: pipeline/run_local.py) calls this before any op;
  called later (the Trainer inside the tfx CLI), the pools stay as they are and the
  run is reproducible on machines with the same core count only (logged).

The seed itself is TrainerConfig ``seed``: run_fn calls keras.utils.set_random_seed (Python's
random, NumPy, TensorFlow; tf-keras draws an unseeded initializer's seed from Python's
random module, so tf.random.set_seed alone gave other initial weights in every process)
and seeds the input shuffle.
"""
from absl import logging

THREADS = 1


def enable_determinism() -> bool:
    """Deterministic ops and fixed thread pools; returns whether the pools could be fixed."""
    import tensorflow as tf

    tf.config.experimental.enable_op_determinism()
    threading = tf.config.threading
    if (threading.get_intra_op_parallelism_threads(), threading.get_inter_op_parallelism_threads()) == (
            THREADS, THREADS):
        return True
    try:
        threading.set_intra_op_parallelism_threads(THREADS)
        threading.set_inter_op_parallelism_threads(THREADS)
    except RuntimeError as e:  # the context already started: its pools stay
        logging.warning("deterministic training: thread pools not fixed (%s); results reproduce on "
                        "machines with this core count only", e)
        return False
    return True
