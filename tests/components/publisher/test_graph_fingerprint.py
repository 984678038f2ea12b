"""state.graph_fingerprint: what a delta may be assembled on (freshness.publish_delta).

`make run-continuous` fell back to a full version at span 2 with "the published graph
(ops or signatures) differs from the base's": the first export of a ranker in a process
captures two equal float32 1.0 scalars, a later export one, so op-type counts of the
top-level graph differed by one Const between two exports of the same model code. The
fingerprint now counts top-level constants by value."""
import tensorflow as tf

from components.publisher import state as state_lib


def _export(path, fn, signature=tf.TensorSpec([None], tf.float32)):
    module = tf.Module()
    module.f = tf.function(fn, input_signature=[signature])
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.f})
    return state_lib.graph_fingerprint(str(path))


def _rewrite_graph(path, edit):
    """Edits the top-level graph of the SavedModel at `path` in place (edit(graph_def))."""
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString((path / "saved_model.pb").read_bytes())
    edit(sm.meta_graphs[0].graph_def)
    (path / "saved_model.pb").write_bytes(sm.SerializeToString())
    return state_lib.graph_fingerprint(str(path))


def test_a_second_equal_constant_counts_once_but_values_ops_and_signatures_count(tmp_path):
    one = tf.constant(1.0)
    base = _export(tmp_path / "base", lambda x: {"y": x * one + x * one})
    assert _export(tmp_path / "again", lambda x: {"y": x * one + x * one}) == base  # deterministic

    def duplicate_scalar(graph):  # what the first export in a process holds: one more equal scalar Const
        [scalar] = [n for n in graph.node if n.op == "Const" and n.attr["value"].tensor.dtype == tf.float32]
        extra = graph.node.add()
        extra.CopyFrom(scalar)
        extra.name = scalar.name + "_extra"
    assert _rewrite_graph(tmp_path / "again", duplicate_scalar) == base

    def another_value(graph):
        for n in graph.node:
            if n.op == "Const" and n.attr["value"].tensor.dtype == tf.float32:
                n.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(2.0, tf.float32))
    assert _rewrite_graph(tmp_path / "again", another_value) != base
    assert _export(tmp_path / "op", lambda x: {"y": x * one - x * one}) != base  # another op
    assert _export(tmp_path / "sig", lambda x: {"y": x * one + x * one},
                   tf.TensorSpec([None, 1], tf.float32)) != base  # another input shape
