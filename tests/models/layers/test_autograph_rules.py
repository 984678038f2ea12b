"""AutoGraph skips tf_keras and our models package once models.layers is imported
(models/layers/autograph_rules.py)."""
import importlib

import tensorflow as tf  # noqa: F401  (after conftest sets TF_USE_LEGACY_KERAS)
from tensorflow.python.autograph.impl import conversion

import models.layers  # noqa: F401
from models.layers import autograph_rules  # noqa
from models.layers.dice import Dice


def test_tf_keras_and_our_layers_are_left_unconverted():
    import inspect

    layer_module = inspect.getmodule(tf.keras.layers.Layer)
    assert layer_module.__name__.startswith("tf_keras.")
    # a module-level Keras function every Layer.__call__ runs (before the rule: converted)
    input_spec = importlib.import_module(layer_module.__name__.replace("base_layer", "input_spec"))
    assert conversion.is_allowlisted(input_spec.assert_input_compatibility)
    assert conversion.is_allowlisted(Dice.call)


def test_a_tf_function_of_ours_is_converted_at_its_top_level_only():
    """tf.function asks for its own function's conversion (user_requested), past the rules;
    a function of ours it calls runs unconverted, so Python control flow on a tensor there
    fails loudly at trace time instead of silently meaning something else."""
    import pytest

    from models.layers import _utils

    def zero_if_negative(x):
        if tf.reduce_sum(x) < 0:
            x = tf.zeros_like(x)
        return x

    zero_if_negative.__module__ = _utils.__name__  # as if it were ours
    assert conversion.is_allowlisted(zero_if_negative)
    top = tf.function(zero_if_negative)
    assert top(tf.constant([-1.0, -2.0])).numpy().tolist() == [0.0, 0.0]
    assert top(tf.constant([1.0, 3.0])).numpy().tolist() == [1.0, 3.0]
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError):
        tf.function(lambda x: zero_if_negative(x) + 1.0)(tf.constant([1.0]))


def test_apply_adds_the_rule_once():
    from tensorflow.python.autograph.core import config

    autograph_rules.apply()
    autograph_rules.apply()
    for package in ("tf_keras", "models"):
        assert sum(isinstance(r, config.DoNotConvert) and r.matches(package) for r in config.CONVERSION_RULES) == 1
