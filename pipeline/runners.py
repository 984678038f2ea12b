"""What every runner shares: create_pipeline's arguments from pipeline/configs/.

`local_runner.py` (LocalDagRunner, the `tfx` CLI), `pipeline/run_local.py`
(`make run`), `kubeflow_v2_runner.py` and the benches build the pipeline through
these functions, so a knob is read in one place.
"""
import os

from pipeline import configs


def configured_args(trainer_config=None) -> dict:
    """create_pipeline arguments that come from pipeline/configs/ alone (no paths,
    no MLMD, no Beam flags): shared by the local and the Kubeflow runner.
    `trainer_config`: a TrainerConfig replacing configs.TRAINER."""
    return dict(
        pipeline_name=configs.PIPELINE_NAME,
        schema_path=configs.SCHEMA_PATH,
        example_gen_config=configs.LOG_EXAMPLE_GEN,
        statistics_sample_rows=configs.STATISTICS_SAMPLE_ROWS,
        transform_config=configs.TRANSFORM,
        trainer_config=trainer_config or configs.TRAINER,
        eval_gates=configs.EVAL_GATES,
        eval_slice_features=configs.EVAL_SLICE_FEATURES,
        train_steps=configs.TRAIN_STEPS,
        eval_steps=configs.EVAL_STEPS,
    )


def beam_args(runner: str = None, **values) -> list:
    """The Beam flags of `runner` (default configs.BEAM_RUNNER) from configs.BEAM_RUNNER_ARGS,
    with its {fields} filled from `values` (e.g. project=..., region=..., temp_location=...,
    job_endpoint=..., image=..., num_workers=...); ValueError naming a missing field or
    an unknown runner."""
    import string

    runner = runner or configs.BEAM_RUNNER
    if runner not in configs.BEAM_RUNNER_ARGS:
        raise ValueError(f"unknown Beam runner {runner!r}; known: {sorted(configs.BEAM_RUNNER_ARGS)}")
    template = configs.BEAM_RUNNER_ARGS[runner]
    fields = sorted({f for arg in template for _, f, _, _ in string.Formatter().parse(arg) if f})
    missing = [f for f in fields if f not in values]
    if missing:
        raise ValueError(f"Beam runner {runner!r} needs values for {missing} (pass them as key=value)")
    return [arg.format(**values) for arg in template]


def build_local(data_path: str = None, output_dir: str = None, **overrides):
    """The pipeline as configured in pipeline/configs/, for LocalDagRunner.

    `output_dir` relocates pipeline root, MLMD and serving dir; `overrides` replace
    any create_pipeline argument (tests use it for small runs)."""
    from tfx.orchestration.metadata import sqlite_metadata_connection_config

    from pipeline.pipeline import create_pipeline

    paths = configs.output_paths(output_dir or configs.OUTPUT_DIR)
    os.makedirs(os.path.dirname(paths["metadata_path"]), exist_ok=True)
    args = configured_args()
    args.update(
        pipeline_root=paths["pipeline_root"],
        data_path=data_path or configs.DATA_PATH,
        serving_model_dir=paths["serving_model_dir"],
        metadata_connection_config=sqlite_metadata_connection_config(
            paths["metadata_path"]),
        beam_pipeline_args=configs.BEAM_PIPELINE_ARGS,
    )
    args.update(overrides)
    return create_pipeline(**args)


def ensure_simulated_logs(data_path: str = None) -> str:
    """Writes the default simulated logs (pipeline/configs/ SIM_*) to `data_path` (default
    configs.DATA_PATH) unless a LOGS folder was given or `data_path` is another existing
    folder (the user's logs: never written into); returns the folder. Files that already
    hold the same rows are left untouched (data/simulator/writer.py), so a rerun keeps
    LogExampleGen's input fingerprint and TFX's cache; changed SIM_* knobs rewrite them."""
    data_path = data_path or configs.DATA_PATH
    other = os.path.abspath(data_path) != os.path.abspath(configs.DATA_PATH)
    if os.environ.get("LOGS") or (other and os.path.isdir(data_path)):
        return data_path
    from data.simulator import simulate

    simulate(data_path, num_users=configs.SIM_NUM_USERS, num_videos=configs.SIM_NUM_VIDEOS,
             num_days=configs.SIM_NUM_DAYS, impressions_per_user_day=configs.SIM_IMPRESSIONS_PER_USER_DAY,
             seed=configs.SIM_SEED)
    return data_path
