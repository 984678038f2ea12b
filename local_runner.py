"""Runs the pipeline with TFX's LocalDagRunner (MLMD in SQLite under OUTPUT_DIR).

    python local_runner.py                                   # direct
    tfx pipeline create --engine local --pipeline_path local_runner.py
    tfx run create --engine local --pipeline_name watchtime_ranker

Knobs come from pipeline/configs.py; `LOGS` (input folder) and `OUTPUT_DIR` may be
set in the environment. With no LOGS, simulated logs are written first.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from absl import logging  # noqa: E402
from tfx import v1 as tfx  # noqa: E402

from pipeline import configs  # noqa: E402
from pipeline.pipeline import create_pipeline  # noqa: E402


def trainer_config() -> dict:
    return {
        "model_type": configs.MODEL_TYPE,
        "embedding_dim": configs.EMBEDDING_DIM,
        "hidden_units": list(configs.HIDDEN_UNITS),
        "learning_rate": configs.LEARNING_RATE,
        "batch_size": configs.BATCH_SIZE,
        "shuffle_buffer_size": configs.SHUFFLE_BUFFER_SIZE,
        "epochs": configs.TRAIN_EPOCHS,
        "oov_buckets": configs.VOCAB_OOV_BUCKETS,
        "loss_weight_click": configs.LOSS_WEIGHT_CLICK,
        "loss_weight_watch": configs.LOSS_WEIGHT_WATCH,
        "loss_weight_cread": configs.LOSS_WEIGHT_CREAD,
        "loss_weight_cqe": configs.LOSS_WEIGHT_CQE,
        "watch_head": configs.WATCH_HEAD,
        "cread": dict(configs.CREAD),
        "cqe": dict(configs.CQE),
        "ranking_score": configs.RANKING_SCORE,
        "ranker_params": dict(configs.RANKER_PARAMS.get(configs.MODEL_TYPE, {})),
        "strategy": configs.STRATEGY,
        "ps_min_shard_bytes": configs.PS_MIN_SHARD_BYTES,
        "ps_max_shards": configs.PS_MAX_SHARDS,
    }


def configured_args() -> dict:
    """create_pipeline arguments that come from pipeline/configs.py alone (no paths,
    no MLMD, no Beam flags): shared by the local and the Kubeflow runner."""
    return dict(
        pipeline_name=configs.PIPELINE_NAME,
        schema_path=configs.SCHEMA_PATH,
        history_length=configs.HISTORY_LENGTH,
        history_min_watch_s=configs.HISTORY_MIN_WATCH_S,
        train_days=configs.TRAIN_DAYS,
        eval_days=configs.EVAL_DAYS,
        eval_last_n_days=configs.EVAL_LAST_N_DAYS,
        validation_last_n_days=configs.VALIDATION_LAST_N_TRAIN_DAYS,
        max_bad_row_fraction=configs.MAX_BAD_ROW_FRACTION,
        trainer_config=trainer_config(),
        eval_gates=configs.EVAL_GATES,
        eval_slice_features=configs.EVAL_SLICE_FEATURES,
        train_steps=configs.TRAIN_STEPS,
        eval_steps=configs.EVAL_STEPS,
    )


def build(data_path: str = None, output_dir: str = None, **overrides) -> tfx.dsl.Pipeline:
    """The pipeline as configured in pipeline/configs.py, run locally.

    `output_dir` relocates pipeline root, MLMD and serving dir; `overrides` replace
    any create_pipeline argument (tests use it for small runs).
    """
    paths = configs.output_paths(output_dir or configs.OUTPUT_DIR)
    os.makedirs(os.path.dirname(paths["metadata_path"]), exist_ok=True)
    args = configured_args()
    args.update(
        pipeline_root=paths["pipeline_root"],
        data_path=data_path or configs.DATA_PATH,
        serving_model_dir=paths["serving_model_dir"],
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            paths["metadata_path"]),
        beam_pipeline_args=configs.BEAM_PIPELINE_ARGS,
    )
    args.update(overrides)
    return create_pipeline(**args)


def ensure_simulated_logs() -> None:
    """Writes the default simulated logs if no LOGS folder was given and none exist."""
    if os.environ.get("LOGS") or os.path.isdir(configs.DATA_PATH):
        return
    from data.simulator import simulate

    simulate(configs.DATA_PATH, num_users=configs.SIM_NUM_USERS, num_videos=configs.SIM_NUM_VIDEOS,
             num_days=configs.SIM_NUM_DAYS, impressions_per_user_day=configs.SIM_IMPRESSIONS_PER_USER_DAY,
             seed=configs.SIM_SEED)


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    ensure_simulated_logs()
    tfx.orchestration.LocalDagRunner().run(build())
