"""Every Keras layer class under models/ is registered (keras.saving.register_keras_serializable):
the Trainer exports without per-layer call traces (models/training/export.py), so the
Publisher's keras.models.load_model rebuilds the ranker from the layers' configs and needs
each class by its registered name. An unregistered layer would load as a revived stub that
cannot be called (the Publisher's sweep and rewrite fail)."""
import importlib
import inspect
import pathlib

import tf_keras as keras

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _layer_classes():
    for path in sorted((ROOT / "models").rglob("*.py")):
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, keras.layers.Layer):
                yield cls


def test_every_layer_class_is_registered():
    classes = list(_layer_classes())
    assert len(classes) >= 10  # the rankers' layers and heads are found
    unregistered = [f"{c.__module__}.{c.__name__}" for c in classes
                    if keras.saving.get_registered_object(keras.saving.get_registered_name(c)) is not c]
    assert not unregistered, "register with @keras.saving.register_keras_serializable: " + ", ".join(unregistered)
