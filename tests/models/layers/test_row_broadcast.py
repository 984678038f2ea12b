"""Row broadcasting (one user's side with 1 row against B candidate rows)."""
import numpy as np
import pytest
import tensorflow as tf

from models.layers.feature_layer import FeatureLayer
from models.layers.row_broadcast import RowConcatenate, broadcast_rows, concat_rows
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes


def test_concat_rows_repeats_single_rows():
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    b = np.array([[9.0]], np.float32)
    want = np.concatenate([a, np.repeat(b, 3, 0)], -1)
    np.testing.assert_array_equal(concat_rows([a, b]).numpy(), want)
    np.testing.assert_array_equal(RowConcatenate()([tf.constant(a), tf.constant(b)]).numpy(), want)
    same = broadcast_rows([tf.constant(a), tf.constant(a)])  # equal rows: unchanged
    np.testing.assert_array_equal(same[1].numpy(), a)
    dyn = tf.function(lambda x, y: concat_rows([x, y]),
                      input_signature=[tf.TensorSpec([None, 2]), tf.TensorSpec([None, 1])])
    np.testing.assert_array_equal(dyn(a, b).numpy(), want)


def test_feature_layer_history_with_one_row_equals_the_tiled_history():
    """History inputs with 1 row (scalars with B rows): history outputs keep 1 row and equal
    the tiled computation; the linear terms broadcast them."""
    x, _ = random_transformed(5, 4, small_vocab_sizes(), seed=3)
    hist = {k for k, v in x.items() if np.ndim(v) == 2}
    tiled = {k: (np.repeat(v[1:2], 5, 0) if k in hist else v) for k, v in x.items()}
    one = {k: (v[1:2] if k in hist else v) for k, v in x.items()}
    layer = FeatureLayer(small_vocab_sizes(), embedding_dim=3, linear=True)
    want = layer({k: tf.constant(v) for k, v in tiled.items()})
    got = layer({k: tf.constant(v) for k, v in one.items()})
    for key in ("history", "history_pooled", "history_mask"):
        assert got[key].shape[0] == 1
        np.testing.assert_allclose(got[key].numpy()[0], want[key].numpy()[3], rtol=1e-6, atol=1e-7)
    for key in ("fields_flat", "numerics", "target_item", "linear_terms", "linear_logit"):
        np.testing.assert_allclose(got[key].numpy(), want[key].numpy(), rtol=1e-6, atol=1e-7)


def test_row_concatenate_carries_the_one_row_history_flag():
    """The model-level flag serving_rank reads survives get_config / from_config (what
    keras.models.load_model rebuilds the layer from); not a bool is refused."""
    layer = RowConcatenate(one_row_history=True, name="din_input")
    clone = RowConcatenate.from_config(layer.get_config())
    assert clone.one_row_history is True and clone.name == "din_input"
    assert RowConcatenate().get_config()["one_row_history"] is False
    with pytest.raises(ValueError, match="one_row_history"):
        RowConcatenate(one_row_history="yes")
