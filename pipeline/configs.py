"""Every knob of the pipeline, in one place (TFX template convention).

`create_pipeline(...)` takes these as explicit arguments; the runners
(`local_runner.py`, `kubeflow_v2_runner.py`, `pipeline/run_local.py`) read them
from here and may override a few from the environment (documented per knob).
"""
import os

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PIPELINE_NAME = os.environ.get("PIPELINE_NAME", "watchtime_ranker")
MODEL_NAME = "watchtime_ranker"  # name in the serving path <base>/<MODEL_NAME>/<version>/

# Where runs write. OUTPUT_DIR is overridable so tests and `make run` use their own roots.
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", os.path.join(_ROOT, "outputs"))


def output_paths(output_dir: str) -> dict:
    """Pipeline root, MLMD SQLite file and serving base directory under one output root."""
    return {
        "pipeline_root": os.path.join(output_dir, "tfx_pipeline_output", PIPELINE_NAME),
        "metadata_path": os.path.join(output_dir, "tfx_metadata", PIPELINE_NAME, "metadata.db"),
        "serving_model_dir": os.path.join(output_dir, "serving_model", MODEL_NAME),
    }


PIPELINE_ROOT = output_paths(OUTPUT_DIR)["pipeline_root"]
METADATA_PATH = output_paths(OUTPUT_DIR)["metadata_path"]
SERVING_MODEL_DIR = output_paths(OUTPUT_DIR)["serving_model_dir"]

# Input logs: a folder of KuaiRand-Pure-format files. Default: the simulator's output.
DATA_PATH = os.environ.get("LOGS") or os.path.join(_ROOT, "data", "generated", "sim")
SCHEMA_PATH = os.path.join(_ROOT, "schemas")

# ---------------------------------------------------------------- log simulator
SIM_NUM_USERS = 300
SIM_NUM_VIDEOS = 400
SIM_NUM_DAYS = 6
SIM_IMPRESSIONS_PER_USER_DAY = 6.0
SIM_SEED = 7

# ---------------------------------------------------------------- LogExampleGen
# File name patterns inside DATA_PATH (KuaiRand-Pure release names).
LOG_FILE_PATTERN = "log_*.csv"
USER_FEATURES_PATTERN = "user_features*.csv"
VIDEO_FEATURES_PATTERN = "video_features_basic*.csv"
HISTORY_LENGTH = 50  # L: fixed length of every behaviour history (padded)
# Which earlier events enter the history: play time >= this many seconds (0 = every
# earlier impression, whatever its outcome; outcomes are features of the history).
HISTORY_MIN_WATCH_S = 0.0
# Time split by log date (yyyymmdd). Empty lists: the last EVAL_LAST_N_DAYS days are
# eval, every earlier day is train. Days in neither list feed histories only.
TRAIN_DAYS = [int(d) for d in os.environ.get("TRAIN_DAYS_LIST", "").split(",") if d]
EVAL_DAYS = [int(d) for d in os.environ.get("EVAL_DAYS_LIST", "").split(",") if d]
EVAL_LAST_N_DAYS = 2
MAX_BAD_ROW_FRACTION = 0.01  # the run fails above this share of bad log rows

# ---------------------------------------------------------------- Transform
VOCAB_OOV_BUCKETS = 1
VOCAB_FREQUENCY_THRESHOLD = 1

# ---------------------------------------------------------------- Trainer
MODEL_TYPE = os.environ.get("MODEL_TYPE", "baseline")
EMBEDDING_DIM = 16
HIDDEN_UNITS = [128, 64]
LEARNING_RATE = 1e-3
BATCH_SIZE = 64
TRAIN_EPOCHS = 1  # one-epoch phenomenon of id-heavy CTR models (DESIGN.md section 6)
TRAIN_STEPS = None  # None: one pass of TRAIN_EPOCHS over the train split
EVAL_STEPS = None
LOSS_WEIGHT_CLICK = 1.0
LOSS_WEIGHT_WATCH = 1.0

# ---------------------------------------------------------------- Evaluator
# Absolute floors for blessing. Change thresholds apply against the latest blessed model.
EVAL_AUC_FLOOR = 0.5
EVAL_AUC_MAX_DROP = 0.01  # candidate AUC may be at most this much below the baseline
EVAL_MAE_CEILING = 1e6

# ---------------------------------------------------------------- Beam
BEAM_PIPELINE_ARGS = [
    "--direct_running_mode=in_memory",
    "--direct_num_workers=1",
]
