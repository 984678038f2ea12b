"""Artifact type produced by the Publisher besides the standard PushedModel."""
from tfx import types


class PublishReport(types.Artifact):
    """The publish report: ``publish_report.json`` in ``uri`` (bytes per table before and
    after, rows kept, quantization error, NE/AUC/XAUC/MAE of trained vs published, golden
    max |Δp|, warmup records, decision and reason; components/publisher/publish.py)."""
    TYPE_NAME = "watchtime_ranker.PublishReport"  # KFP v2 needs <namespace>.<Name>
