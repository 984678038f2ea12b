import os

# Keras 2 (tf-keras) behind tf.keras for every module of this package (DESIGN.md): set here,
# before any of them imports TensorFlow, instead of in each module (issue #34)
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
