"""Runs the pipeline with TFX's LocalDagRunner (MLMD in SQLite under OUTPUT_DIR).

    python local_runner.py                                   # direct
    tfx pipeline create --engine local --pipeline_path local_runner.py
    tfx run create --engine local --pipeline_name watchtime_ranker

Knobs come from pipeline/configs/; `LOGS` (input folder) and `OUTPUT_DIR` may be
set in the environment. With no LOGS, simulated logs are written first. Every component
runs in this one process, as in `make run`: the freed heap goes back to the OS after each
one and TensorFlow's oneDNN kernels are off unless TF_ENABLE_ONEDNN_OPTS is set (their
caches kept ~0.9 GiB after the Trainer; pipeline/run_local.py, README "Scale").
"""
import logging as py_logging

from pipeline.process_memory import ReleaseAfterComponents, default_onednn_off, freeze_loaded_objects  # pipeline/ sets Keras 2

default_onednn_off()  # before TensorFlow loads

from absl import logging  # noqa: E402
from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # noqa: E402

from pipeline import runners  # noqa: E402

if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    py_logging.getLogger().addHandler(ReleaseAfterComponents())  # absl's records propagate to the root
    runners.ensure_simulated_logs()
    dag = runners.build_local()
    freeze_loaded_objects()
    LocalDagRunner().run(dag)
