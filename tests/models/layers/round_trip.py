"""Shared check: a layer survives get_config -> from_config with the same outputs."""
import numpy as np
import tensorflow as tf
import tf_keras as keras


def assert_config_round_trip(layer, call, package="watchtime_ranker"):
    """`call(layer)` runs the layer on fixed inputs. Checks that the class is registered
    under `package` (SavedModels name it so), that serialize/deserialize and
    from_config(get_config()) give the same config, and that the clone, with the
    original's weights, computes the same outputs."""
    cls = type(layer)
    assert keras.saving.get_registered_object(f"{package}>{cls.__name__}") is cls
    config = layer.get_config()
    expected = tf.nest.map_structure(lambda t: np.asarray(t), call(layer))
    clone = cls.from_config(config)
    assert clone.get_config() == config
    again = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(again) is cls and again.get_config() == config
    call(clone)  # builds the weights
    clone.set_weights(layer.get_weights())
    got = tf.nest.map_structure(lambda t: np.asarray(t), call(clone))
    tf.nest.assert_same_structure(got, expected)
    for g, e in zip(tf.nest.flatten(got), tf.nest.flatten(expected)):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
    return clone
