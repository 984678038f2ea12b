"""Artifact types produced by LogExampleGen."""
from tfx import types


def num_examples_property(split: str) -> str:
    """The Examples artifact's custom property with a split's example count (StatisticsGen
    reads it to size its sample)."""
    return f"num_{split}_examples"


class DeadLetterRows(types.Artifact):
    """Rows LogExampleGen could not turn into examples, with the reason for each.

    Layout of ``uri``: ``bad_rows-*.jsonl`` (one JSON object per bad row: table,
    source file, line number, reason, raw line) and ``counts.json`` (good / bad by
    reason / per split / history-only counts of the run).
    """
    # KFP v2 needs <namespace>.<Name>; its container entry point imports a custom type by
    # that title (kubeflow_v2_entrypoint_utils._retrieve_class_path), so the image must
    # have a module `watchtime_ranker` exporting this class (the Dockerfile writes it).
    TYPE_NAME = "watchtime_ranker.DeadLetterRows"
