"""Runs the pipeline with TFX's LocalDagRunner (MLMD in SQLite under OUTPUT_DIR).

    python local_runner.py                                   # direct
    tfx pipeline create --engine local --pipeline_path local_runner.py
    tfx run create --engine local --pipeline_name watchtime_ranker

Knobs come from pipeline/configs/; `LOGS` (input folder) and `OUTPUT_DIR` may be
set in the environment. With no LOGS, simulated logs are written first.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from absl import logging  # noqa: E402
from tfx import v1 as tfx  # noqa: E402

from pipeline import runners  # noqa: E402

if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    runners.ensure_simulated_logs()
    tfx.orchestration.LocalDagRunner().run(runners.build_local())
