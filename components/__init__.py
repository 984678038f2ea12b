import os

# Keras 2 (tf-keras) behind tf.keras for every module of this package (DESIGN.md): set here,
# before any of them imports TensorFlow, instead of in each module (issue #34)
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# No TFX sdist built into /tmp for Beam's DirectRunner by every Beam executor
# (components/beam_dependencies.py); remote runners keep TFX's behaviour.
from components.beam_dependencies import skip_for_local_runners  # noqa: E402

skip_for_local_runners()
