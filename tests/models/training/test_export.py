"""export.py's request sides: the user-context and candidate features partition the
serving features (serving_rank's batch-1 and batch-N inputs). serving_rank's equality
with serving_default on the same rows is checked on every exported ranker in
tests/models/rankers/test_rankers.py (`_check_serving_rank`); here: DIN's one-row history
flag through keras.models.load_model and a re-export (the publisher's path)."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import features as F
from models.layers.row_broadcast import takes_one_row_history
from models.rankers import build_ranker
from models.training.export import export_serving_model
from models.training.input import vocab_sizes
from models.training.run_fn import ead_thresholds_from_transform_output
from tests.conftest import SMALL_L
from tests.helpers.ranker_utils import raw_batch, raw_rows, trainer_config


def test_feature_sides_partition_the_serving_features():
    assert set(F.USER_CONTEXT_FEATURES) | set(F.CANDIDATE_FEATURES) == set(F.SERVING_RAW_FEATURES)
    assert not set(F.USER_CONTEXT_FEATURES) & set(F.CANDIDATE_FEATURES)
    assert {"video_id", "author_id", "duration_s"} <= set(F.CANDIDATE_FEATURES)
    assert set(F.HISTORY_FEATURES) <= set(F.USER_CONTEXT_FEATURES)


def _rank_equals_default(loaded, raw):
    """serving_rank on the first row's user side (all rows share it) + every candidate ==
    serving_default."""
    want = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in raw.items()})
    got = loaded.signatures["serving_rank"](
        **{k: tf.constant(v[:1] if k in F.USER_CONTEXT_FEATURES else v) for k, v in raw.items()})
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name].numpy(), want[name].numpy(), rtol=1e-5, atol=1e-6)
    assert np.std(want["click_prob"].numpy()) > 0  # candidates differ: not a constant


def _attention_ops(loaded, signature):
    """Op types of every node of a signature (its library functions included), plus
    "target_attention/<op>" for the nodes inside the TargetAttention layer."""
    graph_def = loaded.signatures[signature].graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    out = set()
    for node in nodes:
        out.add(node.op)
        if "target_attention/" in node.name:
            out.add(f"target_attention/{node.op}")
    return out


@pytest.mark.parametrize("variant", ["plain", "dual_attention", "titans"])
def test_one_row_history_flag_survives_load_model(variant, small_transform_output, tmp_path):
    """DIN's builder flag (history with 1 row in serving_rank) is in its RowConcatenate's
    config, so keras.models.load_model (the publisher's reload) keeps it; the
    reloaded model re-exported still serves serving_rank equal to serving_default. DIN with
    dual attention does not broadcast rows everywhere: flag False, history broadcast.
    With the Titans memory (MemoryAsGate) the reload keeps its weights and config too."""
    tft_output, _ = small_transform_output
    params = {"attention_hidden_units": [8], "mlp_hidden_units": [8]}
    dual_attention = variant == "dual_attention"
    if dual_attention:
        params.update(dual_attention=True, dual_attention_hidden_units=[4])
    if variant == "titans":  # the default memory: one chunk of the whole history
        params.update(long_memory="titans")
    tf.random.set_seed(0)
    model = build_ranker(trainer_config("din", SMALL_L, ranker_params=params), vocab_sizes(tft_output),
                         ead_thresholds=ead_thresholds_from_transform_output(tft_output))
    if variant == "titans":
        assert model.get_layer("titans_mag").memory.chunk_size == SMALL_L
    if dual_attention:  # the serving export has no hist_tab input: check the flag only
        assert not takes_one_row_history(model)
        model.save(str(tmp_path / "dual"), save_format="tf")
        assert not takes_one_row_history(keras.models.load_model(str(tmp_path / "dual"), compile=False))
        return
    trained_dir, again_dir = str(tmp_path / "trained"), str(tmp_path / "again")
    export_serving_model(model, tft_output, SMALL_L, trained_dir)
    reloaded = keras.models.load_model(trained_dir, compile=False)
    assert takes_one_row_history(model) and takes_one_row_history(reloaded)
    export_serving_model(reloaded, tft_output, SMALL_L, again_dir)
    rows = raw_rows(6, SMALL_L, seed=4)
    for r in rows:  # one user against 6 candidates: what serving_rank broadcasts
        r.update({k: rows[0][k] for k in F.USER_CONTEXT_FEATURES})
    raw = raw_batch(rows, SMALL_L)
    served = []
    for export_dir in (trained_dir, again_dir):
        loaded = tf.saved_model.load(export_dir)
        _rank_equals_default(loaded, raw)
        served.append(loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in raw.items()}))
    for name in served[0]:  # the reload kept every weight (the memory's too)
        np.testing.assert_allclose(served[1][name].numpy(), served[0][name].numpy(), rtol=1e-6, atol=1e-6)
        # one user's history: the attention's folded form (the keys transposed once);
        # N rows: the concatenated form; chosen when tracing (no branch)
        rank_ops = _attention_ops(loaded, "serving_rank")
        default_ops = _attention_ops(loaded, "serving_default")
        assert "target_attention/Transpose" in rank_ops and "target_attention/Transpose" not in default_ops
        assert not {"If", "StatelessIf"} & (rank_ops | default_ops)


def test_a_model_without_row_concatenate_takes_the_history_broadcast():
    inputs = keras.Input((2,))
    assert not takes_one_row_history(keras.Model(inputs, keras.layers.Dense(1)(inputs)))
