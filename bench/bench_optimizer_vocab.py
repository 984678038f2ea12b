"""What one training step's optimizer update costs as the embedding tables grow (issue #33).

    .venv/bin/python -m bench.bench_optimizer_vocab

The pipeline's rankers train with tf-keras' Adam (models/heads/model.py). For a sparse
(``tf.IndexedSlices``) gradient its ``update_step`` still decays both moments of every row
and moves every row of the table::

    m <- b1 m + (1 - b1) g_rows,  v <- b2 v + (1 - b2) g_rows^2,  w <- w - a m / (sqrt(v) + e)

(tf_keras/src/optimizers/adam.py: ``m.assign_add(-m * (1 - beta_1))`` then ``scatter_add``),
so a step costs O(rows of all tables x dim) whatever the batch touches. On simulated logs
the vocabularies grow with the log (more users and videos): 34k embedding rows at 1M log
rows, 129k at 4M (bench-scale's Transform), so the Trainer's time per step grows with the
log and its time exponent sits above 1. A lazy Adam (the moments and weights of the rows in
the batch only: TF Addons' LazyAdam, TorchRec's row-wise optimizers) would cost O(batch)
but trains a different model; this bench measures the effect, it does not change the
optimizer.

Times ``apply_gradients`` with ``keras.optimizers.Adam`` and ``SGD`` (the sparse update
alone) on one ``Embedding(V, 16)`` (the pipeline's EMBEDDING_DIM) and a batch of 256 x 51
lookups (a target and a 50-item history), in one ``tf.function``, for V = 25k, 100k, 400k.
Writes ``bench/results/optimizer_vocab.json`` (``BENCH_OUT``): ``ms_per_step`` by optimizer
and V, the machine and the load average.
"""
import json
import os
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("BENCH_OUT", os.path.join(_ROOT, "bench", "results", "optimizer_vocab.json"))
ROWS = (25_000, 100_000, 400_000)
DIM, BATCH, LOOKUPS = 16, 256, 51


def step_ms(optimizer_name: str, rows: int, steps: int = 300, warmup: int = 20) -> float:
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    emb = keras.layers.Embedding(rows, DIM)
    emb.build((None,))
    from models.heads.lazy_adam import LazyAdam

    opt = LazyAdam(1e-3) if optimizer_name == "LazyAdam" else getattr(keras.optimizers, optimizer_name)(1e-3)
    ids = tf.constant(np.random.default_rng(0).integers(0, rows, (BATCH, LOOKUPS)), tf.int32)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(emb(ids) ** 2)
        grads = tape.gradient(loss, emb.trainable_variables)
        opt.apply_gradients(zip(grads, emb.trainable_variables))

    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps * 1e3


def main() -> dict:
    from bench.bench_scale import machine

    result = {"bench": "optimizer_vocab", "machine": machine(), "dim": DIM, "batch": BATCH,
              "lookups_per_row": LOOKUPS, "loadavg_before": [round(x, 2) for x in os.getloadavg()],
              "ms_per_step": {}}
    for name in ("Adam", "SGD", "LazyAdam"):
        result["ms_per_step"][name] = {str(v): round(step_ms(name, v), 3) for v in ROWS}
        print(name, result["ms_per_step"][name], flush=True)
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
