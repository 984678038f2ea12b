"""Reading one metric's prediction, label and features from TFMA's extracts.

Our models output a dict (``click_prob``, ``watch_time_s``, optional ``quantiles``,
``ranking_score``) and ``ModelSpec.label_keys`` maps outputs to label features. A
:class:`Reader` resolves, for one metric key:

- the prediction: model output ``prediction_output``, default the MetricsSpec output
  name (``tfma.MetricsSpec(output_names=[...])``), so a metric in the ``click_prob``
  spec reads ``click_prob``;
- the label: the *feature* ``label_key`` when given (TFMA's own convention, as in
  ``MinLabelPosition``), else the label ModelSpec.label_keys gives that output. A
  feature is needed when the output has no label of its own, e.g. nDCG of
  ``ranking_score`` with gain ``watch_time_s``, or ``quantiles`` against
  ``watch_time_s``;
- features (``user_key``, ``item_key``, ...): combiners see them only through a
  ``FeaturePreprocessor`` limited to the features a metric names.

TFMA 0.47 hands combiners one example per ``add_input`` (after its unbatching);
:func:`flat_rows` turns that example's values into equal-length 1-D rows.
``get_predictions(output)`` returns the whole dict when the output is missing, which
we turn into a ``ValueError`` naming the outputs.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional

import numpy as np
from tensorflow_model_analysis.metrics import metric_types
from tensorflow_model_analysis.utils import util as tfma_util


def _values(value: Any, what: str) -> np.ndarray:
    if value is None:
        raise ValueError(f"{what} is missing from the metric inputs")
    if isinstance(value, Mapping):
        raise ValueError(f"{what} is ambiguous: got a dict with keys {sorted(value)}; "
                         "name one (prediction_output / label_key / MetricsSpec.output_names)")
    return np.asarray(value)


class Reader:
    """Reads prediction, label and features of one example for one metric key."""

    def __init__(self, key: metric_types.MetricKey, prediction_output: Optional[str],
                 label_key: Optional[str]):
        self.model_name = key.model_name or None
        self.output = prediction_output or key.output_name or None
        self.label_output = key.output_name or None
        self.label_key = label_key

    def prediction(self, element) -> np.ndarray:
        value = element.get_predictions(self.model_name, self.output)
        return _values(value, f"prediction output {self.output!r}").astype(np.float64)

    def label(self, element) -> np.ndarray:
        if self.label_key:
            return self.feature(element, self.label_key).astype(np.float64)
        value = element.get_labels(self.model_name, self.label_output)
        return _values(value, f"label of output {self.label_output!r} (or set label_key)"
                       ).astype(np.float64)

    @staticmethod
    def feature(element, name: str) -> np.ndarray:
        features = element.features
        if features is None or name not in features:
            have = sorted(features) if features is not None else []
            raise ValueError(f"feature {name!r} not in the eval examples (have {have})")
        return np.asarray(tfma_util.get_by_keys(features, [name]))


def flat_rows(*arrays: np.ndarray) -> List[np.ndarray]:
    """Flattens per-example values to equal-length 1-D rows (scalars broadcast)."""
    flat = [np.asarray(a).reshape(-1) for a in arrays]
    n = max(a.size for a in flat)
    out = []
    for a in flat:
        if a.size == n:
            out.append(a)
        elif a.size == 1:
            out.append(np.repeat(a, n))
        else:
            raise ValueError(f"per-example sizes differ: {[x.size for x in flat]}")
    return out


def hashable_id(v: Any) -> Any:
    """A hashable Python scalar for an id (bytes stay bytes)."""
    return v.item() if isinstance(v, np.generic) else v
