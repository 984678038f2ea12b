"""Run by tests/models/test_family_signals.py in a fresh interpreter with
LOG_SIGNALS=session,sig_user_author_ctr (models.features reads it at import): the pipeline
configs, Transform, a DIN and its serving signatures with two signal families as inputs.
Prints one JSON line with what the test asserts."""
import json
import sys
import tempfile
import time

import numpy as np

L = 3
ROWS = 12


def main(work: str) -> dict:
    t0 = time.time()
    import tensorflow as tf

    from models import features as F
    from models.rankers import build_ranker
    from models.training.export import serving_signatures
    from models.training.input import vocab_sizes
    from pipeline import configs
    from tests.helpers.ranker_utils import build_transform_output, raw_batch, raw_rows, trainer_config

    rng = np.random.default_rng(3)
    rows = raw_rows(ROWS, L, seed=3)
    for r in rows:  # every family is written when one is a model input
        r.update({k: float(rng.uniform(0.05, 0.95)) for k in F.FAMILY_FEATURES})
        r.update(sig_session_position=float(rng.integers(0, 30)), sig_session_age=float(rng.uniform(0, 8)))
    t1 = time.time()
    tft_output = build_transform_output(rows, L, f"{work}/tmp", f"{work}/tft")
    t2 = time.time()
    raw = raw_batch(rows, L)
    transformed = {k: v.numpy() for k, v in tft_output.transform_features_layer()(
        {k: tf.constant(v) for k, v in raw.items()}).items()}
    model = build_ranker(trainer_config("din", L, ranker_params={"attention_hidden_units": [4],
                                                                  "mlp_hidden_units": [4]}), vocab_sizes(tft_output))
    t3 = time.time()
    signatures = serving_signatures(model, tft_output, L)  # the SavedModel's (export_serving_model saves them)
    served = signatures["serving_default"]({k: tf.constant(v) for k, v in raw.items()})
    direct = model({k: tf.constant(transformed[k]) for k in model.input_names}, training=False)
    rank_inputs = signatures["serving_rank"].structured_input_signature[0][0]
    return {
        "schema_path": configs.SCHEMA_PATH, "signal_families": list(configs.LOG_EXAMPLE_GEN.signal_families),
        "model_inputs": list(model.input_names), "serving_inputs": sorted(raw),
        "rank_user_side": sorted(k for k, s in rank_inputs.items() if s.shape[0] == 1),
        "raw": {k: raw[k].tolist() for k in ("sig_session_position", "sig_session_age", "sig_user_author_ctr")},
        "xf": {k: transformed[k + "_xf"].tolist() for k in ("sig_session_position", "sig_session_age",
                                                             "sig_user_author_ctr")},
        "served_click": served["click_prob"].numpy().reshape(-1).tolist(),
        "direct_click": np.asarray(direct["click_prob"]).reshape(-1).tolist(),
        "seconds": {"imports": round(t1 - t0, 1), "transform": round(t2 - t1, 1), "model": round(t3 - t2, 1),
                    "signatures_and_serve": round(time.time() - t3, 1)},
    }


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as work:
        print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else work)))
