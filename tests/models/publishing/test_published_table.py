"""PublishedTable lookups (models/publishing/published_table.py) against a NumPy reference."""
import numpy as np
import tensorflow as tf

from models.publishing.published_table import PublishedTable, Remap
from models.publishing.quantization import dequantize_rows, quantize_rows

V, K, D = 30, 12, 8


def _tables(seed=0):
    rng = np.random.default_rng(seed)
    remap = rng.integers(0, K, V).astype(np.uint16)
    q, s, b = quantize_rows(rng.normal(0, 0.2, (K, D)).astype(np.float32))
    linear = rng.normal(0, 0.1, (K, 1)).astype(np.float32)
    shared = Remap(remap)
    return remap, (q, s, b), linear, PublishedTable(q, s, b, remap=shared, name="emb_x"), \
        PublishedTable(linear, remap=shared, name="linear_x")


def test_scale_and_bias_are_one_fp16_pair_per_row():
    _, (q, s, b), _, emb, _ = _tables()
    assert emb.scale_bias.dtype == tf.float16 and emb.scale_bias.shape == (K, 2)
    np.testing.assert_array_equal(emb.scale_bias.numpy(), np.stack([s, b], 1))
    assert emb.num_bytes(remap=False) == K * D + K * 4


def test_lookup_of_any_rank_equals_the_numpy_reference_row_for_row():
    remap, (q, s, b), linear, emb, lin = _tables()
    want_emb, want_lin = dequantize_rows(q, s, b), linear
    rng = np.random.default_rng(1)
    history = np.tile(rng.integers(0, V, (1, 7)), (5, 1))  # one user's history, 5 candidate rows
    history[2, 3] = 0  # and a row that differs
    for ids in (np.array([3, 3, 29, 0]), history, history[None]):
        ids = ids.astype(np.int32)
        for table, want in ((emb, want_emb), (lin, want_lin)):
            eager = tf.nn.embedding_lookup(table, ids).numpy()
            traced = tf.function(lambda i, t=table: tf.nn.embedding_lookup(t, i))(ids).numpy()
            assert eager.shape == ids.shape + (want.shape[1],)
            np.testing.assert_allclose(eager, want[remap[ids]], rtol=1e-6, atol=1e-7)
            np.testing.assert_array_equal(traced, eager)
            # a sequence is looked up per distinct id, then gathered: the same rows exactly
            np.testing.assert_array_equal(eager.reshape(-1, want.shape[1]),
                                          tf.nn.embedding_lookup(table, ids.reshape(-1)).numpy())


def test_a_sequence_is_deduplicated_once_for_the_tables_of_its_vocabulary():
    _, _, _, emb, lin = _tables()

    @tf.function(input_signature=[tf.TensorSpec([None, 7], tf.int32)])
    def both(hist):
        return tf.nn.embedding_lookup(emb, hist), tf.nn.embedding_lookup(lin, hist)

    ops = [op for op in both.get_concrete_function().graph.get_operations()]
    assert sum(op.type == "Unique" for op in ops) == 1
    # one remap gather (of the unique ids) shared by both tables; values and scale_bias gathers
    gathers = [op.get_attr("dtype") for op in ops if op.type == "ResourceGather"]
    assert sorted(g.name for g in gathers) == ["float16", "float32", "uint16", "uint8"]
