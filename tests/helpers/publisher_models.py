"""Trained small rankers for the Publisher tests, fitted and exported once per session.

`trained_rankers(small_transform_output, tmp_path_factory)` fits a baseline ranker on
the 40 shared raw rows (Adam, learning rate 0.03, batch 20): 3 epochs -> artifact "A",
2 more -> artifact "B" (the continued training of a delta publish; after 5 epochs it
fits the rows closely, so pruning nearly every row must hurt), 2 more -> "C". Each artifact is laid
out like the Trainer's Model artifact: `Format-Serving/` (export_serving_model) and
`row_importance/` (run_fn's) and `warm_start/origin.json` (A is cold, B continues A, C
continues B). The raw rows are written once as a GZIP eval file.

test_publish.py, test_publish_delta.py and test_delta_budget.py use it. The suite fits
and exports once: the pytest-xdist workers of one run share the artifacts
(shared_build.built_once, as conftest's small_transform_output; nothing writes into them
afterwards: each test module publishes into its own serving base), and each process
memoises the result.
"""
import os

import numpy as np

_CACHE = {}


def trained_rankers(small_transform_output, tmp_path_factory) -> dict:
    """{"artifacts": {"A": dir, "B": dir, "C": dir}, "tft_dir", "eval": [file], "root"} (module docstring)."""
    if "result" in _CACHE:
        return _CACHE["result"]
    from tests.helpers.shared_build import built_once

    root = built_once(tmp_path_factory, "publisher_models", lambda r: _fit_and_export(small_transform_output, r))
    tft_output, _ = small_transform_output
    _CACHE["result"] = {"artifacts": {name: str(root / name) for name in "ABC"}, "eval": [str(root / "eval.gz")],
                        "root": str(root), "tft_dir": os.path.dirname(tft_output.transform_savedmodel_dir)}
    return _CACHE["result"]


def _fit_and_export(small_transform_output, root) -> None:
    """Artifacts A, B, C and eval.gz under `root` (module docstring)."""
    import tensorflow as tf

    from models.publishing import row_importance
    from models.rankers.registry import build_ranker
    from models.training import warm_start
    from models.training.export import export_serving_model
    from models.training.input import vocab_sizes
    from models.training.run_fn import fit_ranker
    from tests.conftest import SMALL_L
    from tests.helpers.ranker_utils import raw_batch, serialize_rows, trainer_config

    tft_output, rows = small_transform_output
    model = build_ranker(trainer_config("baseline", SMALL_L, learning_rate=0.03), vocab_sizes(tft_output))
    transformed = tft_output.transform_features_layer()({k: tf.constant(v) for k, v in
                                                         raw_batch(rows, SMALL_L).items()})
    x = {k: transformed[k] for k in model.input_names}
    y = {"click_prob": np.array([r["is_click"] for r in rows], np.float32),
         "watch_time_s": np.array([r["watch_time_s"] for r in rows], np.float32)}
    artifacts = {}
    for name, epochs, origin in (("A", 3, None), ("B", 2, "A"), ("C", 2, "B")):
        fit_ranker(model, x, epochs, y=y, batch_size=20, verbose=0)
        artifact = str(root / name)
        export_serving_model(model, tft_output, SMALL_L, os.path.join(artifact, "Format-Serving"))
        row_importance.write_row_importance(model, [(x, y)], artifact)
        warm_start.record_origin(artifact, artifacts.get(origin))  # which training it continues
        artifacts[name] = artifact
    eval_file = str(root / "eval.gz")
    with tf.io.TFRecordWriter(eval_file, options="GZIP") as w:
        for record in serialize_rows(rows):
            w.write(record)
