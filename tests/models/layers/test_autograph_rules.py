"""AutoGraph skips tf_keras once models.layers is imported (models/layers/autograph_rules.py)."""
import importlib

import tensorflow as tf  # noqa: F401  (after conftest sets TF_USE_LEGACY_KERAS)
from tensorflow.python.autograph.impl import conversion

import models.layers  # noqa: F401
from models.layers import autograph_rules  # noqa
from models.layers.dice import Dice


def test_tf_keras_is_left_unconverted_and_our_layers_are_converted():
    import inspect

    layer_module = inspect.getmodule(tf.keras.layers.Layer)
    assert layer_module.__name__.startswith("tf_keras.")
    # a module-level Keras function every Layer.__call__ runs (before the rule: converted)
    input_spec = importlib.import_module(layer_module.__name__.replace("base_layer", "input_spec"))
    assert conversion.is_allowlisted(input_spec.assert_input_compatibility)
    assert not conversion.is_allowlisted(Dice.call)


def test_apply_adds_the_rule_once():
    from tensorflow.python.autograph.core import config

    autograph_rules.apply()
    autograph_rules.apply()
    assert sum(isinstance(r, config.DoNotConvert) and r.matches("tf_keras") for r in config.CONVERSION_RULES) == 1
