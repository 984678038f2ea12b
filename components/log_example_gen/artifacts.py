"""Artifact types produced by LogExampleGen."""
from tfx import types


class DeadLetterRows(types.Artifact):
    """Rows LogExampleGen could not turn into examples, with the reason for each.

    Layout of ``uri``: ``bad_rows-*.jsonl`` (one JSON object per bad row: table,
    source file, line number, reason, raw line) and ``counts.json`` (good / bad by
    reason / per split / history-only counts of the run).
    """
    TYPE_NAME = "watchtime_ranker.DeadLetterRows"  # KFP v2 needs <namespace>.<Name>
