"""Subprocess body of test_determinism.py: DETERMINISTIC training -> predictions.

    python -m tests.models.training.determinism_worker OUT.npz SEED [SEED ...]

Fixes determinism first (models/training/determinism.py, before any TensorFlow op, as
pipeline/run_local.py does), then per seed does what run_fn does with that seed: seeds
TensorFlow, builds the default ranker (DIN: Dice, target attention) and trains it on
batches gathered in a seeded shuffled order (models/training/input.py
in_memory_dataset), then saves its click_prob / watch_time_s on fixed rows. Its own
process: op determinism is process-global and the thread pools are fixed at start.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

L = 5
ROWS, BATCH = 256, 32


def main(out_path: str, seeds) -> None:
    from models.training.determinism import enable_determinism

    assert enable_determinism()

    import numpy as np
    import tf_keras as keras

    from models.rankers import build_ranker
    from models.training.input import in_memory_dataset
    from models.training.run_fn import fit_ranker
    from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes, trainer_config

    sizes = small_vocab_sizes()
    x, y = random_transformed(ROWS, L, sizes, seed=0)
    probe, _ = random_transformed(16, L, sizes, seed=1)
    saved = {}
    for i, seed in enumerate(seeds):
        keras.utils.set_random_seed(seed)  # as run_fn; the input shuffle is seeded too
        model = build_ranker(trainer_config("din", L, seed=seed, deterministic=True), sizes)
        fit_ranker(model, in_memory_dataset(x, y, BATCH, True, seed=seed, num_epochs=2), 1, verbose=0)  # as run_fn
        out = model(probe, training=False)
        for name in ("click_prob", "watch_time_s"):
            saved[f"{name}_{i}"] = out[name].numpy()
    np.savez(out_path, **saved)


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2:]])
