"""AutoGraph leaves tf-keras and our own model code alone.

AutoGraph converts every Python function a traced function calls unless a rule says
not to (TF 2.16 ``tensorflow/python/autograph/core/config.py`` ``CONVERSION_RULES``,
first match wins). TensorFlow's list skips ``tensorflow`` and ``keras``, but:

- Keras 2 now lives in the ``tf_keras`` package (DESIGN.md: TF_USE_LEGACY_KERAS), which
  no rule names: each time one of our layers called a Keras layer, AutoGraph transpiled
  Keras' own ``Layer.__call__``, input checks, ``add_weight``, initializers... Building
  the tests' small DIN made 604 conversions, 21 of its 23 CPU-s; 89 after this rule.
  Keras' code is written to run unconverted (what ``DoNotConvert('keras')`` did for it).
- Our own package ``models`` builds graphs with TensorFlow ops only: no Python ``if``,
  ``while`` or ``for`` over a tensor's value, no ``print``/``assert`` of tensors
  (shape checks read static shapes), so converting it changes nothing in the graph and
  costs time: the default pipeline's Trainer spent 8.6 s transpiling our functions (1,036
  conversions: Keras re-converts a layer's ``call`` per instance and per trace), and the
  Publisher and every test that builds a model pay the same again. A function that does
  need AutoGraph would fail loudly at trace time ("using a tf.Tensor as a Python bool is
  not allowed"); write it with ``tf.cond``/``tf.while_loop``/``tf.where``, or put it in a
  ``tf.function`` of its own, which AutoGraph converts whatever the rules.

Importing ``models.layers`` applies the rules once per process (every ranker and head
imports a layer from here before any model is traced).
"""
from tensorflow.python.autograph.core import config as _autograph_config

PACKAGES = ("tf_keras", "models")


def apply() -> None:
    """Appends ``DoNotConvert(p)`` to AutoGraph's rules for each of PACKAGES (once)."""
    rules = tuple(_autograph_config.CONVERSION_RULES)
    for package in PACKAGES:
        if not any(isinstance(r, _autograph_config.DoNotConvert) and r.matches(package) for r in rules):
            rules += (_autograph_config.DoNotConvert(package),)
    _autograph_config.CONVERSION_RULES = rules


apply()
