"""Row importance from the optimizer slots, the published table lookup, and the Keras
rewrite: 0 % pruning + no quantization gives exactly the trained predictions."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import features as F
from models.layers.feature_layer import CATEGORICAL
from models.publishing import row_importance, rewrite
from models.publishing.published_table import PublishedTable
from models.publishing.quantization import dequantize_rows, quantize_rows
from models.rankers.registry import build_ranker
from pipeline import configs
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes, trainer_config

L = 4


@pytest.fixture(scope="module")
def ranker_and_batch():
    vocab = small_vocab_sizes()
    x, y = random_transformed(32, L, vocab, seed=1)
    model = build_ranker(trainer_config("baseline", L), vocab)
    return model, x, y


def _fresh_copy(model):
    """A clone with the same layer weights (layer by layer: a compiled model's weights also
    list its metrics' variables, which a clone has not)."""
    clone = keras.models.clone_model(model)
    for mine, theirs in zip(clone.layers, model.layers):
        mine.set_weights(theirs.get_weights())
    return clone


def test_row_importance_reads_adam_v_and_adagrad_accumulator(ranker_and_batch):
    model, x, y = ranker_and_batch
    table = row_importance.feature_layer(model).tables["video_id"]
    for optimizer, slot_attr in ((keras.optimizers.Adam(), "_velocities"),
                                 (keras.optimizers.Adagrad(), "_accumulators")):
        optimizer.build(model.trainable_variables)
        slot = row_importance.second_moment_slot(optimizer, table)
        assert slot is getattr(optimizer, slot_attr)[optimizer._index_dict[optimizer._var_key(table)]]
        values = np.random.default_rng(0).random(slot.shape).astype(np.float32)
        slot.assign(values)
        model.optimizer = optimizer
        got = row_importance.compute_row_importance(model, [(x, y)])
        cols = got["tables"]["emb_video_id"]
        np.testing.assert_allclose(cols["opt_state"], values.mean(axis=1), rtol=1e-6)
        np.testing.assert_allclose(cols["l2_norm"], np.linalg.norm(table.numpy(), axis=1), rtol=1e-5)
        # touches: target ids + unmasked history ids, brute force
        ids = np.concatenate([x["video_id_xf"], x["hist_video_id_xf"][x["hist_mask_xf"] > 0]])
        np.testing.assert_array_equal(cols["touch_count"], np.bincount(ids, minlength=table.shape[0]))
    assert got["optimizer"] == "Adagrad:accumulator"


def test_published_table_lookup_is_remap_then_dequantize():
    rng = np.random.default_rng(0)
    compact = rng.normal(0, 0.05, (5, 3)).astype(np.float32)
    q, s, b = quantize_rows(compact)
    remap = np.array([0, 4, 1, 4, 2, 3, 4], np.uint16)
    table = PublishedTable(q, s, b, remap=remap, name="t")
    ids = tf.constant([[0, 1], [5, 6]], tf.int64)
    want = dequantize_rows(q, s, b)[remap[ids.numpy()]]
    np.testing.assert_array_equal(tf.nn.embedding_lookup(table, ids).numpy(), want)
    assert table.num_bytes() == 5 * 3 + 5 * 2 * 2 + 7 * 2


def test_no_pruning_no_quantization_is_exact_and_int8_is_close(ranker_and_batch):
    model, x, _ = ranker_and_batch
    want = {k: v.numpy() for k, v in model(x).items()}
    config = configs.publish_config(prune_fraction=None, quantize=False)
    for batch_tables in (True, False):  # one fp32 batch of every table, or table by table
        exact = _fresh_copy(model)
        rewrite.publish_tables(exact, None, config.replace(batch_tables=batch_tables))
        tables = row_importance.feature_layer(exact).tables.values()
        if batch_tables:
            assert len({id(t.table_batch) for t in tables}) == 1 and all(t.remap is None for t in tables)
        else:
            assert all(isinstance(t, PublishedTable) for t in tables)
        got = {k: v.numpy() for k, v in exact(x).items()}
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
    published = _fresh_copy(model)
    report = rewrite.publish_tables(published, None, configs.publish_config(
        prune_fraction=0.5, criterion="l2_norm", quantize=True, quantize_min_dim=4, allocation="per_table",
        default_row="oov"))
    names = {w.name for w in published.weights}
    assert not any("emb_" in n for n in names), "fp32 tables must leave the published model"
    summary = rewrite.tables_summary(report)
    # per table: 14 rows of width 4 -> 7 kept: uint8 rows + fp16 scale/bias + uint16 remap
    # (+ 16 bytes: the table's int32 [4] extent in the batch)
    n = len(report)
    assert summary["rows"] == 14 * n and summary["rows_kept"] == 7 * n
    assert summary["embedding_bytes_fp32"] == n * 14 * 4 * 4
    assert summary["embedding_bytes_published"] == n * (7 * (4 + 4) + 14 * 2 + 16)
    tables = row_importance.feature_layer(published).tables
    assert len({id(t.table_batch) for t in tables.values()}) == 1  # one batch: every table int8, width 4
    got = published(x)["click_prob"].numpy()
    assert np.all(np.isfinite(got)) and np.abs(got - want["click_prob"]).max() < 0.05
    # the same publish table by table: the same int8 rows, the same predictions, no extents
    unbatched = _fresh_copy(model)
    report = rewrite.publish_tables(unbatched, None, configs.publish_config(
        prune_fraction=0.5, criterion="l2_norm", quantize=True, quantize_min_dim=4, allocation="per_table",
        default_row="oov", batch_tables=False))
    assert rewrite.tables_summary(report)["embedding_bytes_published"] == n * (7 * (4 + 4) + 14 * 2)
    assert all(isinstance(t, PublishedTable) for t in row_importance.feature_layer(unbatched).tables.values())
    np.testing.assert_allclose(unbatched(x)["click_prob"].numpy(), got, rtol=1e-6, atol=1e-7)


def test_sweep_rewrites_in_place_and_restores_the_trained_tables(ranker_and_batch):
    from models.publishing import sweep

    model, x, y = ranker_and_batch
    want = model(x)["click_prob"].numpy()
    weights_before = len(model.weights)
    click = (np.arange(32) % 2).astype(np.float64)
    watch = np.arange(32, dtype=np.float64)
    rows = sweep.prune_sweep(model, None, configs.publish_config(quantize=False), x, click, watch,
                             [0.0, 0.5], ["l2_norm"])
    assert [r["fraction"] for r in rows] == [0.0, 0.5]
    assert rows[0]["ne_loss"] == 0 and rows[0]["max_abs_delta_click_prob"] == 0  # fp32, nothing pruned
    assert rows[1]["rows_kept"] < rows[1]["rows"]
    np.testing.assert_array_equal(model(x)["click_prob"].numpy(), want)  # the trained tables are back
    assert len(model.weights) == weights_before
    stopped = sweep.prune_sweep(model, None, configs.publish_config(quantize=False), x, click, watch,
                                [0.5, 0.0, 0.25], ["l2_norm"], stop=lambda r: r["ne_loss"] == 0)
    assert [r["fraction"] for r in stopped] == [0.5, 0.0]  # up to the first row that stops it
    assert stopped[0]["ne_loss"] == rows[1]["ne_loss"]
    # a known base (the Publisher's eval check: the trained SavedModel's scores) replaces the prediction
    base = sweep.predict(model, x)
    assert sweep.prune_sweep(model, None, configs.publish_config(quantize=False), x, click, watch,
                             [0.0, 0.5], ["l2_norm"], base=base) == rows
    other = sweep.prune_sweep(model, None, configs.publish_config(quantize=False), x, click, watch, [0.0],
                              ["l2_norm"], base={k: v * 0.5 for k, v in base.items()})
    assert other[0]["ne_loss"] != 0 and other[0]["max_abs_delta_click_prob"] > 0


@pytest.mark.parametrize("traced_min_rows", [0, 10**9])  # traced, eager
def test_predict_scores_with_the_tables_the_model_holds_at_each_call(ranker_and_batch, monkeypatch,
                                                                     traced_min_rows):
    """sweep.predict (traced once per call, or eager): after a rewrite it scores with the new
    tables, in batches of any size (32 rows, batches of 5: 6 x 5 + 2), as the eager model does."""
    from models.publishing import sweep

    model, x, _ = ranker_and_batch
    monkeypatch.setattr(sweep, "BATCH", 5)
    monkeypatch.setattr(sweep, "TRACED_MIN_ROWS", traced_min_rows)
    copy = _fresh_copy(model)
    scores = []
    for rewritten in (False, True):
        if rewritten:
            rewrite.publish_tables(copy, None, configs.publish_config(
                prune_fraction=0.5, criterion="l2_norm", quantize=True, quantize_min_dim=4, allocation="per_table",
                default_row="oov"))
        got, eager = sweep.predict(copy, x), copy(x, training=False)
        for k in got:
            np.testing.assert_allclose(got[k], eager[k].numpy().reshape(-1), rtol=1e-5, atol=1e-6)
        scores.append(got["click_prob"])
    assert np.abs(scores[1] - scores[0]).max() > 1e-4  # the rewrite changed the scores


@pytest.fixture(scope="module")
def xdeepfm_and_batch():
    """xDeepFM: every feature has an embedding table and a width-1 first-order table."""
    vocab = small_vocab_sizes()
    x, _ = random_transformed(32, L, vocab, seed=2)
    model = build_ranker(trainer_config("xdeepfm", L), vocab)
    return model, x


def _remap_gathers(concrete) -> int:
    """Gathers of uint16 (remap) variables in a traced graph."""
    return sum(1 for op in concrete.graph.get_operations()
               if op.type == "ResourceGather" and op.get_attr("dtype") == tf.uint16)


def test_tables_of_one_vocabulary_share_one_remap_exactly_and_count_it_once(xdeepfm_and_batch, tmp_path):
    model, x = xdeepfm_and_batch
    want = {k: v.numpy() for k, v in model(x).items()}
    layer = row_importance.feature_layer(model)
    features = sorted(layer.linear_tables)
    assert features == sorted(layer.tables)
    # a threshold below every score keeps every row: identity remaps, shared, fp32 rows
    # (table by table: the tables of one batch share the batch's remap, test_table_batch.py)
    exact = _fresh_copy(model)
    report = rewrite.publish_tables(exact, None, configs.publish_config(
        prune_fraction=None, prune_threshold=-1.0, criterion="l2_norm", quantize=False, batch_tables=False))
    published = row_importance.feature_layer(exact)
    for f in features:
        emb, lin = published.tables[f], published.linear_tables[f]
        assert emb.remap is not None and emb.remap is lin.remap, f
        assert report[f"linear_{f}"]["remap_shared_with"] == f"emb_{f}"
    got = {k: v.numpy() for k, v in exact(x).items()}
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    # the report counts each shared remap once: the sum is the bytes of the distinct variables
    distinct = {id(v): v for f in features for t in (published.tables[f], published.linear_tables[f])
                for v in t.variables}
    assert rewrite.tables_summary(report)["embedding_bytes_published"] == sum(
        v.shape.num_elements() * v.dtype.size for v in distinct.values())
    # one remap gather per ids tensor in the traced graph: targets + the history ids
    concrete = tf.function(lambda inputs: exact(inputs)).get_concrete_function(
        {k: tf.TensorSpec([None] + list(v.shape[1:]), tf.as_dtype(v.dtype)) for k, v in x.items()})
    assert _remap_gathers(concrete) == len(features) + len(F.ITEM_ENTITIES)
    # ... and stored once in the SavedModel: one uint16 [V] checkpoint entry per feature
    tf.saved_model.save(exact, str(tmp_path / "sm"))
    reader = tf.train.load_checkpoint(str(tmp_path / "sm" / "variables" / "variables"))
    remaps = [k for k, dtype in reader.get_variable_to_dtype_map().items() if dtype == tf.uint16]
    assert len(remaps) == len(features), remaps
    tf.saved_model.save(model, str(tmp_path / "trained"))  # both graphs run through Grappler alike
    np.testing.assert_array_equal(tf.saved_model.load(str(tmp_path / "sm"))(x)["click_prob"].numpy(),
                                  tf.saved_model.load(str(tmp_path / "trained"))(x)["click_prob"].numpy())


def test_pruned_int8_shared_remap_sends_both_tables_to_the_same_rows(xdeepfm_and_batch):
    model, x = xdeepfm_and_batch
    trained = {n: tf.convert_to_tensor(v).numpy() for n, v in
               row_importance.embedding_tables(row_importance.feature_layer(model)).items()}
    published = _fresh_copy(model)
    report = rewrite.publish_tables(published, None, configs.publish_config(
        prune_fraction=0.5, criterion="l2_norm", quantize=True, quantize_min_dim=4, allocation="per_table",
        default_row="oov"))
    layer = row_importance.feature_layer(published)
    ids = np.arange(trained["emb_video_id"].shape[0])
    emb = layer.tables["video_id"]
    v0, v_rows, k0, _ = emb.extent.numpy()  # the table's slices of the batch's remap and rows
    remap = emb.remap.numpy().astype(np.int64)[v0:v0 + v_rows] - k0
    # the first-order table rides in the batch: the same remap, its own column of the rows
    assert layer.linear_tables["video_id"].remap is emb.remap
    assert layer.linear_tables["video_id"].table_batch is emb.table_batch
    kept = np.flatnonzero(np.bincount(remap, minlength=remap.max() + 1)[remap] == 1)  # ids alone in their row
    # summed score: each group drops ⌊V/2⌋ rows of both tables at once
    assert report["emb_video_id"]["rows_kept"] == report["linear_video_id"]["rows_kept"] == len(ids) - len(ids) // 2
    np.testing.assert_array_equal(tf.nn.embedding_lookup(layer.linear_tables["video_id"], ids).numpy()[kept],
                                  trained["linear_video_id"][kept])
    step = report["emb_video_id"]["max_abs_error"]
    np.testing.assert_allclose(tf.nn.embedding_lookup(layer.tables["video_id"], ids).numpy()[kept],
                               trained["emb_video_id"][kept], atol=step + 1e-7)
    assert np.all(np.isfinite(published(x)["click_prob"].numpy()))


def test_tables_below_the_min_share_of_the_largest_keep_every_row():
    vocab = dict(small_vocab_sizes(), video_id=100)  # 102 rows; every other table 14
    x, _ = random_transformed(32, L, vocab, seed=3)
    model = build_ranker(trainer_config("baseline", L), vocab)
    want = model(x)["click_prob"].numpy()
    config = configs.publish_config(prune_fraction=0.5, criterion="l2_norm", quantize=True, quantize_min_dim=4,
                                    allocation="per_table", default_row="oov", min_table_share=0.2)  # 14 < 0.2 · 102
    # batched: the int8 table in one batch, the small fp32 ones (every row) in another,
    # the fields put back in order
    batched = _fresh_copy(model)
    report = rewrite.publish_tables(batched, None, config)
    assert report["emb_video_id"]["batch"] != report["emb_user_id"]["batch"]
    small = {name: e for name, e in report.items() if name != "emb_video_id"}
    assert all(not e["quantized"] and e["rows_kept"] == e["rows"] == 14 for e in small.values())
    layer = row_importance.feature_layer(batched)
    assert layer.tables["user_id"].table_batch.remap is None  # nothing pruned there: ids + offsets
    fields = layer(x)["fields"].numpy()
    trained = row_importance.feature_layer(model)
    for i, key in enumerate(CATEGORICAL):
        if key != "video_id":  # fp32 rows as trained, at their field's place
            np.testing.assert_array_equal(fields[:, i], trained.tables[key].numpy()[x[F.transformed_name(key)]])
    assert np.abs(batched(x)["click_prob"].numpy() - want).max() < 0.05
    # table by table: as trained (fp32, no remap)
    report = rewrite.publish_tables(model, None, config.replace(batch_tables=False))
    assert report["emb_video_id"]["quantized"] and report["emb_video_id"]["rows_kept"] == 102 - 51
    small = {name: e for name, e in report.items() if name != "emb_video_id"}
    assert small and all(not e["quantized"] and e["rows_kept"] == e["rows"] == 14 for e in small.values())
    assert all(e["bytes_published"] == e["bytes_fp32"] for e in small.values())
    layer = row_importance.feature_layer(model)
    for key, table in layer.tables.items():  # one gather of the fp32 rows, as trained
        assert (table.remap is None and table.values.dtype == tf.float32) == (key != "video_id")
    assert np.all(np.isfinite(model(x)["click_prob"].numpy())) and want.shape == (32, 1)
    with pytest.raises(ValueError, match="min_table_share"):
        configs.publish_config(min_table_share=1.0)
