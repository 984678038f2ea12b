"""Table-batched int8 tables (models/publishing/table_batch.py) against a NumPy reference:
the fields in one gather, any-shape lookups at the table's offset, the first-order column,
the checkpoint layout (variables stored once, extents) and a partial update of a batch."""
import numpy as np
import pytest
import tensorflow as tf

from models.layers.feature_layer import lookup_tables
from models.publishing import delta as delta_lib
from models.publishing.quantization import dequantize_rows, quantize_rows
from models.publishing.table_batch import BatchEntry, TableBatch

# (V, K) per table: two pruned tables and one kept whole (no remap of its own)
SHAPES = {"emb_a": (30, 12), "emb_b": (9, 9), "emb_c": (50, 20)}
D = 8


def _entries(seed=0, pruned=("emb_a", "emb_c"), first_order=False):
    rng = np.random.default_rng(seed)
    out, want = [], {}
    for name, (v, k) in SHAPES.items():
        remap = None
        if name in pruned:
            remap = rng.integers(0, k, v)
            remap[:k] = np.arange(k)  # every compact row is used
        else:
            k = v
        q, s, b = quantize_rows(rng.normal(0, 0.2, (k, D)).astype(np.float32))
        fo = rng.normal(0, 0.1, (k, 1)).astype(np.float32) if first_order else None
        out.append(BatchEntry(name, q, s, b, remap=remap, first_order=fo,
                              first_order_name=name.replace("emb_", "linear_") if first_order else None))
        index = remap if remap is not None else np.arange(v)
        want[name] = dequantize_rows(q, s, b)[index]  # [V, D]: the row each vocabulary id serves
        if first_order:
            want[name.replace("emb_", "linear_")] = fo[index]
    return out, want


def test_fields_are_one_gather_and_equal_the_numpy_reference():
    entries, want = _entries(first_order=True)
    batch = TableBatch(entries)
    views = [batch.views[n] for n in SHAPES]
    rng = np.random.default_rng(1)
    ids = [rng.integers(0, v, 6).astype(np.int64) for v, _ in SHAPES.values()]
    for got, name, x in zip(batch.lookup_many(views, ids), SHAPES, ids):
        np.testing.assert_array_equal(got.numpy(), want[name][x])
    linear = [batch.views[n.replace("emb_", "linear_")] for n in SHAPES]
    for got, view, x in zip(batch.lookup_many(linear, ids), linear, ids):
        np.testing.assert_array_equal(got.numpy(), want[view.name][x])

    @tf.function(input_signature=[[tf.TensorSpec([None], tf.int64)] * 3])
    def fields(x):
        return lookup_tables(views, x), lookup_tables(linear, x)  # the FeatureLayer's call

    ops = fields.get_concrete_function().graph.get_operations()
    gathers = sorted(op.get_attr("dtype").name for op in ops if op.type == "ResourceGather")
    # one remap gather shared by both columns, then scale_bias, values and first_order
    assert gathers == ["float16", "float32", "uint16", "uint8"], gathers
    got_emb, got_lin = fields([tf.constant(i) for i in ids])
    for got, name, x in zip(got_emb, SHAPES, ids):
        np.testing.assert_array_equal(got.numpy(), want[name][x])


@pytest.mark.parametrize("pruned", [("emb_a", "emb_c"), ()])
def test_any_shape_lookup_at_the_tables_offset(pruned):
    entries, want = _entries(pruned=pruned)
    batch = TableBatch(entries)
    assert (batch.remap is None) == (not pruned)  # nothing pruned: the rows are id + offset
    rng = np.random.default_rng(2)
    for name, (v, _) in SHAPES.items():
        view = batch.views[name]
        history = np.tile(rng.integers(0, v, (1, 7)), (5, 1))  # one user's history on 5 rows
        history[2, 3] = 0
        for ids in (rng.integers(0, v, 4), history, history[:1], history[None]):
            eager = tf.nn.embedding_lookup(view, ids).numpy()
            traced = tf.function(lambda i, t=view: tf.nn.embedding_lookup(t, i))(ids).numpy()
            np.testing.assert_array_equal(eager, want[name][ids])
            np.testing.assert_array_equal(traced, eager)


def test_views_report_their_share_and_bad_batches_are_refused():
    entries, _ = _entries()
    batch = TableBatch(entries)
    assert batch.remap.dtype == tf.uint16 and batch.remap.shape == (sum(v for v, _ in SHAPES.values()),)
    for name, (v, k) in SHAPES.items():
        k = k if name != "emb_b" else v
        assert batch.views[name].num_bytes() == k * (D + 4) + v * 2 + 16
        assert list(batch.views[name].extent.numpy())[1::2] == [v, k]
    with pytest.raises(ValueError, match="share a width"):
        TableBatch([entries[0], BatchEntry("w", *quantize_rows(np.ones((3, 4), np.float32)))])
    with pytest.raises(ValueError, match="remap entries"):
        TableBatch([BatchEntry("x", *quantize_rows(np.ones((3, D), np.float32)), remap=np.array([0, 3]))])
    with pytest.raises(ValueError, match="first_order_name"):  # the first-order view needs its table's name
        TableBatch([BatchEntry("y", *quantize_rows(np.ones((3, D), np.float32)), first_order=np.ones((3, 1)))])


def _save(path, seed):
    """A published-like SavedModel of one batch: score = Σ_fields rows · w."""
    entries, _ = _entries(seed)
    m = tf.Module()
    batch = TableBatch(entries)
    m.tables = dict(batch.views)
    m.w = tf.Variable(np.full((D, 1), 0.5, np.float32))
    views = [batch.views[n] for n in SHAPES]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name=n) for n in "abc"])
    def serve(a, b, c):
        return {"score": tf.matmul(tf.add_n(lookup_tables(views, [a, b, c])), m.w)}

    tf.saved_model.save(m, path, signatures={"serving_default": serve})
    return path


def test_checkpoint_holds_the_batch_once_and_a_delta_updates_each_tables_slice(tmp_path):
    base_dir, new_dir = _save(str(tmp_path / "1"), 0), _save(str(tmp_path / "new"), 0)
    base = delta_lib.read_checkpoint(base_dir)
    keys = delta_lib.table_keys(base[delta_lib.OBJECT_GRAPH_KEY], names=list(SHAPES))
    assert len({k["values"] for k in keys.values()}) == 1  # one variable, tracked by every view
    assert sum(np.asarray(a).dtype == np.uint8 for a in base.values()) == 1
    for name, (v, k) in SHAPES.items():
        k = k if name != "emb_b" else v
        assert delta_lib.table_row_count(base, keys[name]) == k
    # the new training changed some rows of every table: a delta of all rows is the new version
    new = delta_lib.read_checkpoint(new_dir)
    rng = np.random.default_rng(3)
    for part in ("values", "scale_bias"):
        key = keys["emb_a"][part]
        new[key] = np.array(new[key])
        new[key][rng.integers(0, len(new[key]), 10)] = new[key][::-1][:10]
    d = delta_lib.compute_delta(base, new, keys, 1.0, "row_change", published={t: {} for t in keys})
    manifest = delta_lib.write_delta(d, str(tmp_path / "deltas" / "2"), base_version=1, version=2)
    _, tables, dense = delta_lib.read_delta(str(tmp_path / "deltas" / "2"))
    got = delta_lib.apply_delta(base, manifest, tables, dense)
    for key in new:
        if key != delta_lib.OBJECT_GRAPH_KEY:
            np.testing.assert_array_equal(got[key], new[key])
    # a partial delta sends the most-changed rows of each table, as local rows of its slice
    d = delta_lib.compute_delta(base, new, keys, 0.2, "row_change", published={t: {} for t in keys})
    for name in SHAPES:
        rows = d.tables[name]["rows"].astype(np.int64)
        changed = np.any(delta_lib.table_rows(new, keys[name]) != delta_lib.table_rows(base, keys[name]), 1)
        assert rows.max() < delta_lib.table_row_count(base, keys[name])
        if changed.any():
            assert changed[rows].sum() == min(len(rows), changed.sum())
    # another plan (a different remap slice) is refused
    other = dict(new)
    other[keys["emb_a"]["remap"]] = np.roll(np.asarray(new[keys["emb_a"]["remap"]]), 1)
    with pytest.raises(delta_lib.DeltaMismatchError, match="pruning plan"):
        delta_lib.compute_delta(base, other, keys, 1.0, "row_change")
    # the saved batch serves in a plain tf.saved_model.load: Σ_fields rows · w
    _, want = _entries(0)
    ids = {"a": [0, 29], "b": [8, 1], "c": [49, 3]}
    score = tf.saved_model.load(base_dir).signatures["serving_default"](
        **{k: tf.constant(v, tf.int64) for k, v in ids.items()})["score"].numpy()
    expect = sum(want[f"emb_{k}"][v] for k, v in ids.items()) @ np.full((D, 1), 0.5, np.float32)
    np.testing.assert_allclose(score, expect, rtol=1e-5, atol=1e-6)


def test_fp32_batch_gathers_rows_as_they_are():
    rng = np.random.default_rng(4)
    rows = {name: rng.normal(0, 0.1, (v, D)).astype(np.float32) for name, (v, _) in SHAPES.items()}
    batch = TableBatch([BatchEntry(name, r) for name, r in rows.items()], name="fp32_tables")
    assert not batch.quantized and batch.scale_bias is None and batch.remap is None
    ids = [rng.integers(0, len(r), 5) for r in rows.values()]
    for got, (name, r), x in zip(batch.lookup_many([batch.views[n] for n in rows], ids), rows.items(), ids):
        np.testing.assert_array_equal(got.numpy(), r[x])  # bit-exact: no dequantize
        assert batch.views[name].num_bytes() == len(r) * 4 * D + 16
    with pytest.raises(ValueError, match="every table int8"):
        TableBatch([BatchEntry("a", *quantize_rows(rows["emb_a"])), BatchEntry("b", rows["emb_b"])])


def test_stacked_lookup_of_interleaved_batches_keeps_the_tables_order():
    """lookup_tables(stacked=True) over an int8 batch, an fp32 batch and a plain variable
    interleaved: S × T × D in the given order; a [B, L] history of two tables of one batch
    is looked up once per distinct row (one UniqueV2), a [1, L] one directly."""
    entries, want = _entries(5)
    int8 = TableBatch(entries[:2])
    rng = np.random.default_rng(6)
    fp32_rows = rng.normal(0, 0.1, (50, D)).astype(np.float32)
    fp32 = TableBatch([BatchEntry("emb_c", fp32_rows)])
    plain = tf.Variable(rng.normal(0, 0.1, (9, D)).astype(np.float32))
    tables = [int8.views["emb_b"], fp32.views["emb_c"], plain, int8.views["emb_a"]]
    refs = [want["emb_b"], fp32_rows, plain.numpy(), want["emb_a"]]
    ids = [rng.integers(0, len(r), 6) for r in refs]
    got = tf.function(lambda x: lookup_tables(tables, x, stacked=True))(ids).numpy()
    assert got.shape == (6, 4, D)
    for i, (r, x) in enumerate(zip(refs, ids)):
        np.testing.assert_array_equal(got[:, i], r[x])
    pair = [int8.views["emb_a"], int8.views["emb_b"]]
    history = np.tile(rng.integers(0, 9, (1, 7)), (5, 1))
    for rows in (history, history[:1]):
        hist = [rows, (rows + 3) % 9]

        @tf.function
        def both(a, b):
            return lookup_tables(pair, [a, b], stacked=True)

        out = both(*hist).numpy()
        assert out.shape == rows.shape + (2, D)
        np.testing.assert_array_equal(out[..., 0, :], want["emb_a"][hist[0]])
        np.testing.assert_array_equal(out[..., 1, :], want["emb_b"][hist[1]])
        ops = [op.type for op in both.get_concrete_function(*hist).graph.get_operations()]
        assert ops.count("UniqueV2") == (1 if len(rows) > 1 else 0) and "Unique" not in ops
        assert ops.count("ResourceGather") == 3  # remap, scale_bias, values: both tables at once
