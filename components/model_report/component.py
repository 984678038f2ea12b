"""ModelReport: a TFX component that turns an evaluation into a report and TensorBoard runs.

Usage in a pipeline (after the Evaluator)::

    from components.model_report import ModelReport

    model_report = ModelReport(
        evaluation=evaluator.outputs["evaluation"],
        blessing=evaluator.outputs["blessing"],
        examples=example_gen.outputs["examples"],
        ead_num_thresholds=20, ead_beta=100.0, ead_t_max_quantile=0.99,  # Transform's
        transform_graph=transform.outputs["transform_graph"])   # optional

Inputs: the Evaluator's ``evaluation`` (TFMA output dir) and ``blessing``; the
``examples`` (train split: watch-time distribution and EAD; eval split: its
distribution drawn for comparison); optionally the ``transform_graph`` (EAD thresholds
from ``transform_fn/assets/ead_thresholds.json`` when Transform exported them;
otherwise they are computed with ``models.watch_time.ead.search_thresholds`` on train watch times
with the ``ead_*`` parameters, which the pipeline sets to Transform's settings).

Output ``report`` (:class:`ModelReport`): ``index.html`` + ``plots/*.png`` +
``report.json``, and ``tensorboard/`` with the metrics per slice as summaries. The
report lives under the pipeline root, so ``tensorboard --logdir <pipeline root>``
shows it next to the Trainer's logs. Custom properties: ``index_html`` (path),
``blessed`` (0/1), ``num_slices``.
"""
import os

from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from components.model_report import discretization, inputs, quantile_calibration, tb_summaries
from components.model_report import report as report_page
from components.model_report.artifacts import ModelReport as ModelReportArtifact
from components.model_report import published as published_section
from components.publisher.artifacts import PublishReport

TENSORBOARD_DIR = "tensorboard"


@component
def ModelReport(  # pylint: disable=invalid-name
    evaluation: InputArtifact[standard_artifacts.ModelEvaluation],
    blessing: InputArtifact[standard_artifacts.ModelBlessing],
    examples: InputArtifact[standard_artifacts.Examples],
    report: OutputArtifact[ModelReportArtifact],
    ead_num_thresholds: Parameter[int],  # EAD settings when the transform graph has no asset:
    ead_beta: Parameter[float],  # Transform's (the pipeline passes its TransformConfig)
    ead_t_max_quantile: Parameter[float],
    transform_graph: InputArtifact[standard_artifacts.TransformGraph] = None,
    publish_report: InputArtifact[PublishReport] = None,  # the Publisher's (#10): "Published model"
    watch_feature: Parameter[str] = "watch_time_s",
    click_output: Parameter[str] = "click_prob",
    train_split: Parameter[str] = "train",
    eval_split: Parameter[str] = "eval",
    max_watch_samples: Parameter[int] = 500_000,
):
    """Writes the model-analysis report and TensorBoard summaries of one evaluation."""
    evaluation_data = inputs.load_evaluation(evaluation.uri, calibration_output=click_output)
    is_blessed = inputs.blessed(blessing)

    train_watch = inputs.read_float_feature(examples.uri, train_split, watch_feature, max_watch_samples)
    eval_watch = (inputs.read_float_feature(examples.uri, eval_split, watch_feature, max_watch_samples)
                  if inputs.split_files(examples.uri, eval_split) else None)
    ead_asset = inputs.load_ead_asset(transform_graph.uri if transform_graph is not None else None)
    discretizations = discretization.compare(train_watch, ead_num_thresholds, ead_beta,
                                             t_max_quantile=ead_t_max_quantile, ead_asset=ead_asset)
    overall = evaluation_data.overall()
    data = report_page.ReportData(
        evaluation=evaluation_data,
        blessed=is_blessed,
        train_watch=train_watch,
        eval_watch=eval_watch,
        discretizations=discretizations,
        quantile_coverage=inputs.quantile_coverage(overall.metrics) if overall else {},
        conformal=quantile_calibration.conformal_coverage(evaluation.uri),
        published=published_section.load(publish_report.uri if publish_report is not None else None),
        info={"evaluation": evaluation.uri, "blessing": blessing.uri, "examples": examples.uri,
              "EAD thresholds": ead_asset["path"] if ead_asset else "computed on train watch times",
              "TensorBoard": os.path.join(report.uri, TENSORBOARD_DIR)},
    )
    index = report_page.write_report(report.uri, data)
    tb_summaries.write_summaries(os.path.join(report.uri, TENSORBOARD_DIR), evaluation_data,
                                 blessed=is_blessed)
    report.set_string_custom_property("index_html", index)
    report.set_int_custom_property("blessed", int(is_blessed))
    report.set_int_custom_property("num_slices", len(evaluation_data.slices))
