"""Artifact type produced by the ModelReport component."""
from tfx import types


class ModelReport(types.Artifact):
    """The model-analysis report of one evaluation.

    Layout of ``uri``: ``index.html`` (open it in a browser), ``plots/*.png``
    (matplotlib figures the page shows), ``report.json`` (the numbers behind the page:
    blessing, gates, metrics per slice, thresholds) and ``tensorboard/`` (the
    Evaluator's metrics per slice as TensorBoard scalars, tags
    ``model_analysis/<slice>/<output>/<metric>``).
    """
    TYPE_NAME = "watchtime_ranker.ModelReport"  # KFP v2 needs <namespace>.<Name>
