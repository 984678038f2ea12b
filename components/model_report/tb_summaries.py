"""The Evaluator's metrics per slice as TensorBoard summaries.

One concept: writing an :class:`inputs.Evaluation` as TensorBoard event files, so
``tensorboard --logdir <pipeline root>`` shows the Trainer's curves (written by the
keras TensorBoard callback under ``Trainer/model_run/<id>/``) and the model analysis
(under ``ModelReport/report/<id>/tensorboard/``) side by side.

Tags:

- ``model_analysis/<slice>/<output>/<metric>`` scalar per metric of the candidate,
  ``<slice>`` = ``overall`` or ``column=value`` (e.g.
  ``model_analysis/tab=1/click_prob/auc``);
- ``model_analysis/overall/<output>/<metric>_change_vs_baseline`` for the overall
  slice when there was a baseline;
- ``model_analysis/blessed``: 1.0 blessed, 0.0 not;
- ``model_analysis/gates`` (text): the blessing gates as a Markdown table.

Every value is written at ``step`` (default 0): each report is its own TensorBoard
run, named by its directory.
"""
from __future__ import annotations

import re
from typing import List, Optional

from components.model_report.inputs import OVERALL, Evaluation

PREFIX = "model_analysis"


def slice_tag(slice_name: str) -> str:
    """``Overall`` -> ``overall``; other slice names keep ``column=value`` with
    whitespace and characters TensorBoard treats specially replaced by ``_``."""
    if slice_name == OVERALL:
        return "overall"
    return re.sub(r"[\s/\\]+", "_", slice_name)


def metric_tag(slice_name: str, output: str, metric: str) -> str:
    return f"{PREFIX}/{slice_tag(slice_name)}/{output or 'all'}/{metric.replace('/', '_')}"


def gates_markdown(evaluation: Evaluation) -> str:
    lines = ["| slice | output | metric | rule | candidate | baseline | change | result |",
             "|---|---|---|---|---|---|---|---|"]
    for g in evaluation.gates:
        cells = [g.slice, g.output, g.metric, g.rule()] + [
            "-" if v is None else f"{v:.6g}" for v in (g.value, g.baseline, g.change)]
        cells.append("pass" if g.passed else f"FAIL {g.message}")
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def write_summaries(logdir: str, evaluation: Evaluation, blessed: Optional[bool] = None,
                    step: int = 0) -> List[str]:
    """Writes the summaries (see module docstring) into ``logdir``; returns the scalar tags."""
    import tensorflow as tf

    tags = []
    writer = tf.summary.create_file_writer(logdir)
    with writer.as_default():
        for s in evaluation.slices:
            for output, by_metric in sorted(s.metrics.items()):
                for metric, value in sorted(by_metric.items()):
                    tag = metric_tag(s.name, output, metric)
                    tf.summary.scalar(tag, float(value), step=step)
                    tags.append(tag)
            if s.name == OVERALL:
                for output, by_metric in sorted(s.change.items()):
                    for metric, value in sorted(by_metric.items()):
                        tag = metric_tag(s.name, output, f"{metric}_change_vs_baseline")
                        tf.summary.scalar(tag, float(value), step=step)
                        tags.append(tag)
        if blessed is not None:
            tag = f"{PREFIX}/blessed"
            tf.summary.scalar(tag, 1.0 if blessed else 0.0, step=step)
            tags.append(tag)
        if evaluation.gates:
            tf.summary.text(f"{PREFIX}/gates", gates_markdown(evaluation), step=step)
    writer.flush()
    writer.close()
    return tags
