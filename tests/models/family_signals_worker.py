"""Run by tests/models/test_family_signals.py in a fresh interpreter with
LOG_SIGNALS=session,sig_user_author_ctr (models.features reads it at import): the pipeline
configs, Transform, a DIN and its SavedModel with two signal families as inputs.
Prints one JSON line with what the test asserts."""
import json
import sys
import tempfile

import numpy as np

L = 3
ROWS = 12


def main(work: str) -> dict:
    import tensorflow as tf

    from models import features as F
    from models.rankers import build_ranker
    from models.training.export import export_serving_model
    from models.training.input import vocab_sizes
    from pipeline import configs
    from tests.helpers.ranker_utils import build_transform_output, raw_batch, raw_rows, trainer_config

    rng = np.random.default_rng(3)
    rows = raw_rows(ROWS, L, seed=3)
    for r in rows:  # every family is written when one is a model input
        r.update({k: float(rng.uniform(0.05, 0.95)) for k in F.FAMILY_FEATURES})
        r.update(sig_session_position=float(rng.integers(0, 30)), sig_session_age=float(rng.uniform(0, 8)))
    tft_output = build_transform_output(rows, L, f"{work}/tmp", f"{work}/tft")
    raw = raw_batch(rows, L)
    transformed = {k: v.numpy() for k, v in tft_output.transform_features_layer()(
        {k: tf.constant(v) for k, v in raw.items()}).items()}
    model = build_ranker(trainer_config("din", L, ranker_params={"attention_hidden_units": [4],
                                                                  "mlp_hidden_units": [4]}), vocab_sizes(tft_output))
    export_serving_model(model, tft_output, L, f"{work}/export")
    loaded = tf.saved_model.load(f"{work}/export")
    served = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in raw.items()})
    direct = model({k: tf.constant(transformed[k]) for k in model.input_names}, training=False)
    rank_inputs = loaded.signatures["serving_rank"].structured_input_signature[1]
    return {
        "schema_path": configs.SCHEMA_PATH, "signal_families": list(configs.LOG_EXAMPLE_GEN.signal_families),
        "model_inputs": list(model.input_names), "serving_inputs": sorted(raw),
        "rank_user_side": sorted(k for k, s in rank_inputs.items() if s.shape[0] == 1),
        "raw": {k: raw[k].tolist() for k in ("sig_session_position", "sig_session_age", "sig_user_author_ctr")},
        "xf": {k: transformed[k + "_xf"].tolist() for k in ("sig_session_position", "sig_session_age",
                                                             "sig_user_author_ctr")},
        "served_click": served["click_prob"].numpy().reshape(-1).tolist(),
        "direct_click": np.asarray(direct["click_prob"]).reshape(-1).tolist(),
    }


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as work:
        print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else work)))
