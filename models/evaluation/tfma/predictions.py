"""TFMA's predictions, with each signature called by keyword.

TFMA 0.47's ``ModelSignaturesDoFn`` calls a signature that takes serialized examples
positionally, ``signature(tf.constant(batch))``. A loaded SavedModel's signature
functions bind keyword arguments only, so TensorFlow's ``ConcreteFunction`` first tries
its structured signature, fails and builds the ``TypeError`` message, which holds the
``repr`` of the whole batch (1,000 serialized examples: megabytes of escaped bytes),
then calls the flat signature, which works. The prediction is right; the message is
the cost: measured on the pipeline's DIN with 1,000-row batches at load ~2, 0.46 CPU-s a
batch positionally against 0.12 CPU-s by keyword (~340 CPU-µs per eval row per model,
candidate and baseline; ~180 µs idle, from bench_evaluator's 20k rows), and 129 GB
allocated for the strings of a 45k-row evaluation (memray).

:func:`PredictionsExtractor` is TFMA's (same stage name, same ``ModelSignaturesDoFn``,
same outputs) with the loaded models wrapped so that a signature of exactly one input
called with one positional tensor is called with that input's name::

    signature(x)  ->  signature(**{name: x})     (signature inputs = {name})

Anything else is passed through unchanged.
"""
from __future__ import annotations

from typing import Any, Dict, List

import apache_beam as beam
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis import constants
from tensorflow_model_analysis.extractors import extractor as tfma_extractor
from tensorflow_model_analysis.extractors import predictions_extractor
from tensorflow_model_analysis.utils import model_util

STAGE_NAME = predictions_extractor.PREDICTIONS_EXTRACTOR_STAGE_NAME


class KeywordSignature:
    """A signature function that also takes its single input positionally (module doc)."""

    def __init__(self, fn):
        self._fn = fn
        _, kwargs = getattr(fn, "structured_input_signature", ((), {}))
        self.input_name = next(iter(kwargs)) if len(kwargs) == 1 else None

    def __call__(self, *args, **kwargs):
        if self.input_name is not None and len(args) == 1 and not kwargs:
            return self._fn(**{self.input_name: args[0]})
        return self._fn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)


class KeywordModel:
    """A loaded SavedModel whose ``signatures`` are :class:`KeywordSignature` s."""

    def __init__(self, model):
        self._model = model
        self.signatures = {k: KeywordSignature(f) for k, f in model.signatures.items()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class _KeywordSignaturesDoFn(model_util.ModelSignaturesDoFn):
    def setup(self):
        super().setup()
        self._loaded_models = {k: KeywordModel(m) for k, m in self._loaded_models.items()}


def PredictionsExtractor(eval_config: tfma.EvalConfig, eval_shared_model) -> tfma_extractor.Extractor:  # noqa: N802
    """TFMA's ``PredictionsExtractor`` (predictions_extractor._ModelSignaturesInferenceWrapper,
    TFMA 0.47) with :class:`KeywordModel` s."""
    specs: List[tfma.ModelSpec] = list(eval_config.model_specs)
    shared = model_util.verify_and_update_eval_shared_models(eval_shared_model)
    if not shared:
        raise ValueError("no eval shared model: the PredictionsExtractor needs the model(s) to predict with")
    signature_names: Dict[str, List[str]] = {'' if len(specs) == 1 else s.name: [s.signature_name] for s in specs}
    return tfma_extractor.Extractor(stage_name=STAGE_NAME, ptransform=beam.ParDo(_KeywordSignaturesDoFn(
        model_specs=specs, eval_shared_models={m.model_name: m for m in shared},
        output_keypath=(constants.PREDICTIONS_KEY,), signature_names=signature_names,
        prefer_dict_outputs=False)))
