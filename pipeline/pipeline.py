"""The watch-time ranking pipeline: logs -> examples -> transform -> train -> evaluate -> push.

    LogExampleGen -> StatisticsGen -> ImportSchemaGen(schemas/) -> ExampleValidator
                  -> Transform(models.preprocessing) -> Trainer(models.run_fn)
                  -> Evaluator(TFMA, gated vs latest blessed model) -> Pusher

Every argument is explicit; runners take values from `pipeline/configs.py`.
"""
from typing import List, Optional

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx

from components.log_example_gen.component import LogExampleGen
from models import features as F


def _overall(threshold: tfma.MetricThreshold) -> tfma.PerSliceMetricThreshold:
    """Gates apply to the whole eval set; small slices (e.g. a rare tab) only report."""
    return tfma.PerSliceMetricThreshold(slicing_specs=[tfma.SlicingSpec()], threshold=threshold)


def eval_config(auc_floor: float, auc_max_drop: float, mae_ceiling: float) -> tfma.EvalConfig:
    """TFMA config: click AUC and watch-time MAE, overall and by tab; blessing gates.

    A candidate is blessed when AUC >= auc_floor and MAE <= mae_ceiling and, if a
    blessed baseline exists, AUC >= baseline AUC - auc_max_drop.
    """
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(
            signature_name="serving_examples",
            label_keys={"click_prob": F.LABEL_CLICK, "watch_time_s": F.LABEL_WATCH},
        )],
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["tab"])],
        metrics_specs=[
            tfma.MetricsSpec(output_names=["click_prob"], metrics=[
                tfma.MetricConfig(class_name="ExampleCount"),
                tfma.MetricConfig(class_name="BinaryCrossentropy"),
                tfma.MetricConfig(class_name="MeanPrediction"),
                tfma.MetricConfig(class_name="MeanLabel"),
                tfma.MetricConfig(class_name="AUC", per_slice_thresholds=[_overall(tfma.MetricThreshold(
                    value_threshold=tfma.GenericValueThreshold(lower_bound={"value": auc_floor}),
                    change_threshold=tfma.GenericChangeThreshold(
                        direction=tfma.MetricDirection.HIGHER_IS_BETTER,
                        absolute={"value": -auc_max_drop})))]),
            ]),
            tfma.MetricsSpec(output_names=["watch_time_s"], metrics=[
                tfma.MetricConfig(class_name="MeanAbsoluteError", per_slice_thresholds=[_overall(tfma.MetricThreshold(
                    value_threshold=tfma.GenericValueThreshold(upper_bound={"value": mae_ceiling})))]),
                tfma.MetricConfig(class_name="MeanSquaredError"),
                tfma.MetricConfig(class_name="MeanPrediction"),
                tfma.MetricConfig(class_name="MeanLabel"),
            ]),
        ],
    )


def create_pipeline(
    pipeline_name: str,
    pipeline_root: str,
    data_path: str,
    schema_path: str,
    serving_model_dir: str,
    history_length: int,
    history_min_watch_s: float,
    train_days: List[int],
    eval_days: List[int],
    eval_last_n_days: int,
    max_bad_row_fraction: float,
    trainer_config: dict,
    eval_auc_floor: float,
    eval_auc_max_drop: float,
    eval_mae_ceiling: float,
    metadata_connection_config=None,
    beam_pipeline_args: Optional[List[str]] = None,
    train_steps: Optional[int] = None,
    eval_steps: Optional[int] = None,
) -> tfx.dsl.Pipeline:
    """Builds the TFX pipeline (see module docstring)."""
    example_gen = LogExampleGen(
        input_base=data_path,
        history_length=history_length,
        history_min_watch_s=history_min_watch_s,
        train_days=",".join(str(d) for d in train_days),
        eval_days=",".join(str(d) for d in eval_days),
        eval_last_n_days=eval_last_n_days,
        max_bad_row_fraction=max_bad_row_fraction,
    )
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = tfx.components.ImportSchemaGen(schema_file=f"{schema_path}/schema.pbtxt")
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"])
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn="models.preprocessing.preprocessing_fn",
        splits_config=tfx.proto.SplitsConfig(analyze=["train"], transform=["train", "eval"]),
    )
    trainer = tfx.components.Trainer(
        run_fn="models.run_fn.run_fn",
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        train_args=tfx.proto.TrainArgs(num_steps=train_steps),
        eval_args=tfx.proto.EvalArgs(num_steps=eval_steps),
        custom_config=dict(trainer_config, history_length=history_length),
    )
    model_resolver = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    evaluator = tfx.components.Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=model_resolver.outputs["model"],
        eval_config=eval_config(eval_auc_floor, eval_auc_max_drop, eval_mae_ceiling),
        example_splits=["eval"],
    )
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_model_dir)),
    )
    return tfx.dsl.Pipeline(
        pipeline_name=pipeline_name,
        pipeline_root=pipeline_root,
        components=[example_gen, statistics_gen, schema_gen, example_validator, transform,
                    trainer, model_resolver, evaluator, pusher],
        enable_cache=False,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=beam_pipeline_args or [],
    )
