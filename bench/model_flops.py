"""FLOPs and parameter counts of a Keras ranker for the scaling benchmark (#36).

Forward FLOPs per example are counted by TensorFlow's graph profiler
(tf.compat.v1.profiler, float_operation) on the model's inference graph with the
variables frozen to constants: MatMul counts 2·m·k·n, BiasAdd / Add / Mul one per output
element; ops without a registered count (activations, gathers, softmax) count 0, so
the figure is the dense arithmetic (what grows with width and depth). Batch-independent
ops cancel by counting two batch sizes:

    flops/example = (F(b₂) − F(b₁)) / (b₂ − b₁)

Training compute of a run (Kaplan et al. 2020's C ≈ 6·N·D: the backward pass costs
about twice the forward):

    C = TRAIN_FLOPS_FACTOR · flops/example · examples seen,   TRAIN_FLOPS_FACTOR = 3

Parameters: embedding = the lookup tables (FeatureLayer's emb_* / linear_* tables,
keras Embedding layers), non-embedding = the rest (Kaplan's N).
"""
import re

TRAIN_FLOPS_FACTOR = 3
_TABLE = re.compile(r"(^|/)(emb_|linear_(?!numerics)|embeddings)")


def graph_flops(model, batch: int) -> int:
    """Float ops the profiler counts for one inference call of `model` on `batch` rows."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    specs = {}
    for t in model.inputs:
        name = t.name.split(":")[0]
        specs[name] = tf.TensorSpec([batch] + list(t.shape[1:]), t.dtype, name=name)
    # autograph off: the Keras graph has no Python control flow to convert, and the first
    # autograph conversion of a process costs ~10 s
    fn = tf.function(lambda x: model(x, training=False), autograph=False)
    if isinstance(model.input, dict):
        concrete = fn.get_concrete_function({k: specs[k] for k in model.input})
    else:
        concrete = fn.get_concrete_function(next(iter(specs.values())))
    graph = convert_variables_to_constants_v2(concrete).graph
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    return int(tf.compat.v1.profiler.profile(graph=graph, options=options).total_float_ops)


def flops_per_example(model, batches=(1, 2)) -> float:
    """(F(b₂) − F(b₁)) / (b₂ − b₁): forward FLOPs per example."""
    b1, b2 = batches
    return (graph_flops(model, b2) - graph_flops(model, b1)) / (b2 - b1)


def parameter_counts(model) -> dict:
    """{"total", "embedding", "non_embedding"} trainable + non-trainable parameters."""
    total = emb = 0
    for w in model.weights:
        n = int(w.shape.num_elements())
        total += n
        emb += n if _TABLE.search(w.name) else 0
    return {"total": total, "embedding": emb, "non_embedding": total - emb}
