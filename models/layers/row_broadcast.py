"""Row broadcasting: tensors whose batch (dimension 0) is 1 or B combined as B rows.

One ranking request scores one user against N candidates. The user-side tensors
(profile, history, their embeddings) can stay at batch 1 and be broadcast only where
they meet the candidate side:

    broadcast_rows([x_1, ..., x_k]) = [x_j repeated to B rows],  B = max_j rows(x_j)

Every x_j has 1 or B rows (anything else is a shape error at run time, as for tf.concat).
When all inputs already have B rows the ops are no-ops (BroadcastTo forwards its input),
so training graphs are unchanged in value. Standard ops only (Shape, Max, BroadcastTo).

Whether a whole model takes its [L]-long history inputs with 1 row against B candidate
rows (every layer where the two sides meet broadcasts rows) is a property of its builder;
the model's RowConcatenate carries it as ``one_row_history`` in its config (set by the
builder, models/rankers/din.py; read by :func:`takes_one_row_history`), so a model reloaded with
``keras.models.load_model`` keeps it (export's ``serving_rank`` reads it).
"""
import tf_keras as keras
import tensorflow as tf


def broadcast_rows(tensors):
    """The tensors of ``tensors`` (list, batch 1 or B each) with B rows each."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    static = {t.shape[0] for t in tensors}
    if len(static) == 1 and None not in static:
        return tensors  # same static batch: nothing to broadcast
    rows = tf.reduce_max(tf.stack([tf.shape(t)[0] for t in tensors]))
    return [tf.broadcast_to(t, tf.concat([[rows], tf.shape(t)[1:]], axis=0)) for t in tensors]


def concat_rows(tensors, axis=-1):
    """``tf.concat(broadcast_rows(tensors), axis)`` (axis != 0)."""
    return tf.concat(broadcast_rows(tensors), axis=axis)


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class RowConcatenate(keras.layers.Concatenate):
    """``keras.layers.Concatenate`` whose inputs may have 1 or B rows (:func:`concat_rows`).

    No weights: it replaces a ``Concatenate`` in a model without changing its checkpoints.

    Args:
        one_row_history: the model this layer belongs to takes its [L]-long history
            inputs with 1 row against B candidate rows. Only recorded (in ``get_config``),
            not used by the layer itself. Default False.
        **kwargs: ``keras.layers.Concatenate``'s (``axis``, ``name``, ...).
    """

    def __init__(self, one_row_history=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(one_row_history, bool):
            raise ValueError(f"RowConcatenate: one_row_history must be a bool, got {one_row_history!r}.")
        self.one_row_history = one_row_history

    def build(self, input_shape):  # rows (dimension 0) may differ: 1 or B
        super().build([tf.TensorShape([None]).concatenate(tf.TensorShape(s)[1:]) for s in input_shape])

    def compute_output_shape(self, input_shape):
        out = super().compute_output_shape(
            [tf.TensorShape([None]).concatenate(tf.TensorShape(s)[1:]) for s in input_shape])
        rows = {tf.TensorShape(s)[0] for s in input_shape}
        return tf.TensorShape([max(rows) if None not in rows else None]).concatenate(out[1:])

    def _merge_function(self, inputs):
        return concat_rows(inputs, axis=self.axis)

    def get_config(self):
        return dict(super().get_config(), one_row_history=self.one_row_history)


def takes_one_row_history(model) -> bool:
    """True when `model` (built, or reloaded with load_model) takes its [L]-long history
    inputs with 1 row against B candidate rows (a RowConcatenate with one_row_history)."""
    return any(isinstance(layer, RowConcatenate) and layer.one_row_history for layer in model.layers)
