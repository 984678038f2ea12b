"""The watch-time ranking pipeline: logs -> examples -> transform -> train -> evaluate -> push.

    LogExampleGen -> StatisticsGen -> ImportSchemaGen(schemas/) -> ExampleValidator
                  -> Transform(models.preprocessing) -> Trainer(models.run_fn)
                  -> Evaluator(TFMA, gated vs latest blessed model) -> Publisher (pruned int8, verified, atomic)
                                                                     -> ModelReport(HTML + TensorBoard)

Splits (LogExampleGen, by date): train -> Transform analysis and Trainer fitting;
validation (the last train day) -> the Trainer's per-epoch validation; eval -> the
Evaluator only. Transform only analyses (vocabularies, z-score moments, EAD thresholds
over the train split) and writes no transformed examples: the Trainer reads
LogExampleGen's raw examples and applies the transform graph itself, in large batches
while it reads each split (models/training/input.py), which is what the serving
signature does too. Materializing would encode, write and re-read every row of three
splits for one training epoch (TRAIN_EPOCHS = 1): about half of Transform's time, and
the part that grew with the log (#33). Continuous runs (`run_mode`, #14; pipeline/continuous.py): LogExampleGen
takes one span (components/log_example_gen/span.py: train = the span, validation/eval =
the next hours), the Trainer reads its raw examples through the transform graph and
warm-starts from the latest Model (Resolver, LatestArtifactStrategy -> base_model);
"full" runs Transform on the span (new vocabularies), "delta" reuses the latest
TransformGraph (Resolver) so vocabulary indices stay fixed. Every argument is explicit; runners take values from
`pipeline/configs/` (through `pipeline/runners.py`). Transform and the Trainer get
their typed configs as `custom_config`, so every knob is in their cache keys.
"""
import json
import os
from typing import List, Optional

import tensorflow_model_analysis as tfma
# TFX's modules, not `tfx.v1`: importing the v1 API also imports every standard component
# and Google Cloud's AI Platform client (imports + definition 17.7 -> 11.5 s, #33)
from tfx.components.evaluator.component import Evaluator
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.components.trainer.component import Trainer
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.input_resolution.strategies.latest_artifact_strategy import LatestArtifactStrategy
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy
from tfx.orchestration.pipeline import Pipeline
from tfx.proto.trainer_pb2 import EvalArgs, TrainArgs
from tfx.proto.transform_pb2 import SplitsConfig
from tfx.types import standard_artifacts
from tfx.types.channel import Channel

from components import beam_in_process
from components.beam_dependencies import skip_for_local_runners
from components.log_example_gen.component import LogExampleGen
from components.log_example_gen.config import LogExampleGenConfig
from components.model_report.component import ModelReport
from components.publisher.component import Publisher
from components.statistics_gen.component import StatisticsGen
from components.transform.component import Transform
from models import features as F
from models.evaluation import tfma as tfma_metrics
from models.heads import CLICK_OUTPUT, WATCH_OUTPUT
from models.publishing.config import PublishConfig
from models.training.config import TrainerConfig
from models.transform_config import FORCE_TF_COMPAT_V1, TransformConfig

# TFX's own Beam executor (the Evaluator) runs in this process on the LocalDagRunner: no
# TFX sdist built for it on the DirectRunner either (components/beam_dependencies.py), and
# no state cache or logger resets per pickle in its worker (components/beam_in_process.py).
skip_for_local_runners()
beam_in_process.install()

RUN_MODES = ("batch", "full", "delta")
CALIBRATION_BUCKETS = 20  # equal-width prediction buckets of TFMA's CalibrationPlot (RowCalibrationPlot)
EVALUATOR_EXTRACTORS = "models.evaluation.tfma.extractors"  # its custom_extractors feed TFMA per-slice batches


def _gate(floor=None, ceiling=None, max_change=None, higher_is_better=True) -> tfma.MetricThreshold:
    """A blessing gate: absolute bound plus allowed change against the baseline."""
    threshold = tfma.MetricThreshold()
    if floor is not None:
        threshold.value_threshold.lower_bound.value = floor
    if ceiling is not None:
        threshold.value_threshold.upper_bound.value = ceiling
    if max_change is not None:
        threshold.change_threshold.direction = (
            tfma.MetricDirection.HIGHER_IS_BETTER if higher_is_better else tfma.MetricDirection.LOWER_IS_BETTER)
        threshold.change_threshold.absolute.value = -max_change if higher_is_better else max_change
    return threshold


def eval_config(gates: dict, slice_features: List[str], watch_head: str = "regression",
                num_quantiles: int = 100) -> tfma.EvalConfig:
    """TFMA config: ranking and watch-time metrics (models/evaluation/tfma), sliced.

    `gates` holds the blessing rules on the overall slice: `auc_floor`,
    `auc_max_drop`, `xauc_floor`, `xauc_max_drop`, `mae_ceiling`, `mae_max_rise`.
    The drops/rises compare with the latest blessed model (no baseline: the
    absolute bounds alone decide). Ranking metrics use the "ranking_score" output;
    with a CQE watch head (`watch_head` "cqe" or "cread+cqe") the "quantiles" output
    [B, num_quantiles] gets the coverage and pinball metrics. CREAD/CQE models carry
    training-only outputs and losses (cread_logits, pinball on quantiles) that the
    serving signature and TFMA's labels do not have; every metric above is computed
    from the signature outputs. ``include_default_metrics`` is off for every head: TFMA
    adds a model's default metrics (its compiled Keras metrics) only for a ``tf_keras``
    ModelSpec, and this one is ``tf_generic``, so the option changes no metric; off, the
    config says so, and every head takes the per-slice batches
    (models/evaluation/tfma/extractors.py ``unsupported``).
    """
    thresholds = {
        "auc": _gate(floor=gates["auc_floor"], max_change=gates["auc_max_drop"]),
        "xauc": _gate(floor=gates["xauc_floor"], max_change=gates["xauc_max_drop"]),
        "mean_absolute_error": _gate(ceiling=gates["mae_ceiling"], max_change=gates["mae_max_rise"],
                                     higher_is_better=False),
    }
    specs = tfma_metrics.metrics_specs(
        thresholds=thresholds, ranking_output="ranking_score", batched=True,
        quantiles_output="quantiles" if "cqe" in watch_head else None, num_quantiles=num_quantiles)
    for spec in specs:  # the report's click calibration curve (TFMA plot, per slice)
        if list(spec.output_names) == [CLICK_OUTPUT]:
            spec.metrics.append(tfma_metrics.metric_config("RowCalibrationPlot", num_buckets=CALIBRATION_BUCKETS))
    options = tfma.Options()
    options.include_default_metrics.value = False
    return tfma.EvalConfig(
        options=options,
        model_specs=[tfma.ModelSpec(
            # TFMA predicts through this signature. Unnamed, it finds the type by loading each
            # model (candidate and baseline) with Keras first (tfma model_util.get_model_type:
            # ~10 s a model), then loads it again to predict; a model whose custom loss Keras
            # cannot revive (the regression head's log1p_mse) was found generic anyway
            model_type=tfma.TF_GENERIC,
            signature_name="serving_examples",
            label_keys={CLICK_OUTPUT: F.LABEL_CLICK, WATCH_OUTPUT: F.LABEL_WATCH},
        )],
        slicing_specs=[tfma.SlicingSpec()] + [tfma.SlicingSpec(feature_keys=[k]) for k in slice_features],
        metrics_specs=specs,
    )


def create_pipeline(
    pipeline_name: str,
    pipeline_root: str,
    data_path: str,
    schema_path: str,
    serving_model_dir: str,
    example_gen_config: LogExampleGenConfig,
    transform_config: TransformConfig,
    trainer_config: TrainerConfig,
    eval_gates: dict,
    eval_slice_features: List[str],
    metadata_connection_config=None,
    beam_pipeline_args: Optional[List[str]] = None,
    train_steps: Optional[int] = None,
    eval_steps: Optional[int] = None,
    enable_cache: bool = False,
    compare_to_blessed: bool = True,
    publish_config: Optional[PublishConfig] = None,
    run_mode: str = "batch",
    model_report: bool = True,
    vocab_example_gen_config: Optional[LogExampleGenConfig] = None,
    statistics_sample_rows: int = 0,
) -> Pipeline:
    """Builds the TFX pipeline (see module docstring).

    `enable_cache`: reuse a component's outputs from MLMD when it already ran with the
    same inputs and parameters (e.g. a second run with another trainer config reuses
    LogExampleGen and Transform).
    `compare_to_blessed`: gate against the latest blessed model (production). False
    drops the Resolver, so only the absolute bounds decide: for comparing models of
    different rankers/heads side by side (bench/bench_pipeline_matrix.py), where the
    latest blessed model is another configuration, not a predecessor.
    `publish_config`: the Publisher's pruning, quantization, gates and versions
    (None: pipeline/configs/ PUBLISHER).
    `run_mode`: "batch" (the graph above), or a continuous span run (module doc): "full"
    (Transform on the span) or "delta" (the latest transform graph, no Transform).
    `model_report`: False leaves the ModelReport out (continuous runs, tests).
    `vocab_example_gen_config` ("full" runs): a second LogExampleGen ("VocabLogExampleGen")
    over this window (e.g. every span so far: vocabularies on a growing window) feeds
    Transform instead of the span's examples.
    `statistics_sample_rows`: StatisticsGen reads about this many examples per split at
    most, sampled before decoding (components/statistics_gen/; 0: every example).
    """
    if run_mode not in RUN_MODES:
        raise ValueError(f"run_mode must be one of {RUN_MODES}, got {run_mode!r}")
    if trainer_config.input_examples != "raw":
        raise ValueError(f"trainer_config.input_examples must be 'raw': Transform materializes no examples "
                         f"(module doc), got {trainer_config.input_examples!r}")
    if publish_config is None:
        from pipeline import configs

        publish_config = configs.PUBLISHER
    if trainer_config.history_length != example_gen_config.history_length:
        raise ValueError(f"trainer_config.history_length {trainer_config.history_length} != history_length "
                         f"{example_gen_config.history_length} of the examples")
    if trainer_config.oov_buckets != transform_config.oov_buckets:
        raise ValueError(f"trainer_config.oov_buckets {trainer_config.oov_buckets} != transform_config.oov_buckets "
                         f"{transform_config.oov_buckets}: the embedding tables must match the vocabularies")
    if run_mode == "batch" and example_gen_config.validation_last_n_days < 1:
        raise ValueError(f"validation_last_n_days must be >= 1: the Trainer validates every epoch on the "
                         f"last train day(s), got {example_gen_config.validation_last_n_days}")
    example_gen = LogExampleGen(input_base=data_path, config=example_gen_config)
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"], sample_rows=statistics_sample_rows)
    schema_gen = ImportSchemaGen(schema_file=f"{schema_path}/schema.pbtxt")
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"])
    vocab_example_gen = None
    if vocab_example_gen_config is not None and run_mode == "full":
        vocab_example_gen = LogExampleGen(input_base=data_path, config=vocab_example_gen_config).with_id(
            "VocabLogExampleGen")
    transform = None if run_mode == "delta" else Transform(
        examples=(vocab_example_gen or example_gen).outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn="models.preprocessing.preprocessing_fn",
        custom_config=transform_config.to_custom_config(),
        splits_config=SplitsConfig(analyze=["train"], transform=[]),
        materialize=False,  # the Trainer transforms raw examples itself (module doc)
        # Neither Transform's pre/post-transform statistics and anomalies (StatisticsGen and
        # ExampleValidator check the examples) nor its analyzer cache (no `analyzer_cache`
        # input is wired) has a reader; without them Transform took 116 s instead of 134 s
        # on the e2e test's 16k simulated rows (the rest is Beam's per-stage cost of the
        # ~30 analyzers).
        disable_statistics=True,
        disable_analyzer_cache=True,
        force_tf_compat_v1=FORCE_TF_COMPAT_V1,  # a TF1-graph analysis (models/transform_config.py)
    )
    continuous = []  # the span run's resolvers
    if run_mode == "delta":  # the latest transform graph: vocabulary indices stay fixed
        graph_resolver = Resolver(
            strategy_class=LatestArtifactStrategy,
            transform_graph=Channel(type=standard_artifacts.TransformGraph),
        ).with_id("latest_transform_graph_resolver")
        continuous.append(graph_resolver)
        transform_graph = graph_resolver.outputs["transform_graph"]
    else:
        transform_graph = transform.outputs["transform_graph"]
    if run_mode != "batch":  # warm start from the latest trained model
        model_warm_resolver = Resolver(
            strategy_class=LatestArtifactStrategy,
            model=Channel(type=standard_artifacts.Model),
        ).with_id("latest_model_resolver")
        continuous.append(model_warm_resolver)
    trainer = Trainer(
        run_fn="models.training.run_fn.run_fn",
        examples=example_gen.outputs["examples"],
        transform_graph=transform_graph,
        base_model=model_warm_resolver.outputs["model"] if run_mode != "batch" else None,
        schema=schema_gen.outputs["schema"],
        train_args=TrainArgs(splits=["train"], num_steps=train_steps),
        eval_args=EvalArgs(splits=["validation"], num_steps=eval_steps),  # epoch selection
        custom_config=trainer_config.to_custom_config(),
    )
    model_resolver = Resolver(
        strategy_class=LatestBlessedModelStrategy,
        model=Channel(type=standard_artifacts.Model),
        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    evaluator = Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=model_resolver.outputs["model"] if compare_to_blessed else None,
        eval_config=eval_config(eval_gates, eval_slice_features, watch_head=trainer_config.watch_head,
                                num_quantiles=int(trainer_config.cqe["num_quantiles"])),
        example_splits=["eval"],
        module_path=EVALUATOR_EXTRACTORS,  # per-slice batches, not one extract per example (#33)
    )
    # pruned int8 rows, verified against the trained model, atomic versioned publish (#10)
    from pipeline import configs as pipeline_configs  # SERVING_BATCHING (pipeline/configs/serving.py)

    pusher = Publisher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        transform_graph=transform_graph,
        examples=example_gen.outputs["examples"],
        serving_base=serving_model_dir,
        model_name=os.path.basename(os.path.normpath(serving_model_dir)),
        config_json=json.dumps(publish_config.to_json_dict()),
        batching_json=json.dumps(pipeline_configs.SERVING_BATCHING),  # TF Serving's files beside the versions
    ).with_id("Pusher")  # the node id of the stock Pusher it replaces: MLMD lineage, KFP task and tooling
    report = None
    if model_report:  # (built only when wanted: add_upstream_node would pull it into the pipeline)
        report = ModelReport(
            evaluation=evaluator.outputs["evaluation"],
            blessing=evaluator.outputs["blessing"],
            examples=example_gen.outputs["examples"],
            transform_graph=transform_graph,
            publish_report=pusher.outputs["publish_report"],
            watch_feature=F.LABEL_WATCH,
            click_output=CLICK_OUTPUT,
            ead_num_thresholds=transform_config.ead_num_buckets,
            ead_beta=transform_config.ead_beta,
            ead_t_max_quantile=transform_config.ead_t_max_quantile,
        )
        report.add_upstream_node(pusher)  # a failing report never holds back a push
    return Pipeline(
        pipeline_name=pipeline_name,
        pipeline_root=pipeline_root,
        components=[example_gen, statistics_gen, schema_gen, example_validator]
        + ([vocab_example_gen] if vocab_example_gen else [])
        + ([transform] if transform is not None else []) + continuous + [trainer]
        + ([model_resolver] if compare_to_blessed else []) + [evaluator, pusher]
        + ([report] if report is not None else []),
        enable_cache=enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=beam_pipeline_args or [],
    )
