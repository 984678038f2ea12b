"""bench/model_flops.py against hand counts."""
import tf_keras as keras

from bench.model_flops import flops_per_example, graph_flops, parameter_counts


def _mlp():
    x = keras.Input((4,), name="a")
    h = keras.layers.Dense(8, activation="relu")(x)
    return keras.Model(x, keras.layers.Dense(1, activation="sigmoid")(h))


def test_mlp_flops_by_hand():
    # per row: MatMul 2·4·8 + BiasAdd 8 + MatMul 2·8·1 + BiasAdd 1 = 89 (activations not counted)
    model = _mlp()
    assert graph_flops(model, 1) == 89
    assert graph_flops(model, 3) == 3 * 89
    assert flops_per_example(model) == 89


def test_dict_inputs_and_embedding_parameters():
    ids = keras.Input((1,), name="ids", dtype="int64")
    dense = keras.Input((2,), name="dense")
    e = keras.layers.Flatten()(keras.layers.Embedding(10, 3)(ids))
    z = keras.layers.Concatenate()([e, dense])
    model = keras.Model({"ids": ids, "dense": dense}, keras.layers.Dense(1)(z))
    assert parameter_counts(model) == {"total": 30 + 5 * 1 + 1, "embedding": 30, "non_embedding": 6}
    assert flops_per_example(model) == 2 * 5 * 1 + 1  # the gather costs no float op
