"""AutoGraph leaves tf-keras alone, as it leaves keras.

AutoGraph converts every Python function a traced function calls unless a rule says
not to (TF 2.16 ``tensorflow/python/autograph/core/config.py`` ``CONVERSION_RULES``,
first match wins). TensorFlow's list skips ``tensorflow`` and ``keras``, but Keras 2 now
lives in the ``tf_keras`` package (DESIGN.md: TF_USE_LEGACY_KERAS), which no rule names:
each time one of our layers (converted, since its ``call`` is user code) calls a Keras
layer, AutoGraph transpiled Keras' own ``Layer.__call__``, input checks, ``add_weight``,
initializers, serialization... Building the tests' small DIN made 604 conversions, 21
of its 23 CPU-s; with this rule, 89 conversions (our own functions only) and 5 CPU-s;
model building, ``fit``'s train-step trace and the SavedModel export all pay it.
Keras' code is written to run unconverted (it is what ``DoNotConvert('keras')`` did for
Keras inside TensorFlow), so the graphs compute the same values; our layers are still
converted as before.

Importing ``models.layers`` applies the rule once per process (every ranker and head
imports a layer from here before any model is traced).
"""
from tensorflow.python.autograph.core import config as _autograph_config

TF_KERAS_RULE = _autograph_config.DoNotConvert("tf_keras")


def apply() -> None:
    """Appends ``DoNotConvert('tf_keras')`` to AutoGraph's rules (once)."""
    rules = tuple(_autograph_config.CONVERSION_RULES)
    if not any(isinstance(r, _autograph_config.DoNotConvert) and r.matches("tf_keras") for r in rules):
        _autograph_config.CONVERSION_RULES = rules + (TF_KERAS_RULE,)


apply()
