"""Names, output paths, the input logs, the log simulator and the Beam arguments."""
import os

from models import features as _features

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PIPELINE_NAME = os.environ.get("PIPELINE_NAME", "watchtime_ranker")
MODEL_NAME = "watchtime_ranker"  # name in the serving path <base>/<MODEL_NAME>/<version>/

# Where runs write. OUTPUT_DIR is overridable so tests and `make run` use their own roots.
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", os.path.join(_ROOT, "outputs"))


def env_flag(name: str, default: str) -> bool:
    """An on/off switch from the environment: "1" on, "0" off; ValueError otherwise."""
    value = os.environ.get(name, default)
    if value not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1, got {value!r}")
    return value == "1"


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
# The curated schema; when a signal family is a model input (LOG_SIGNALS, #37) the one that
# also declares the family signals (schemas/make_schema.py writes both).
SCHEMA_PATH = os.path.join(_ROOT, "schemas", *(["with_families"] if _features.FAMILY_INPUTS else []))


# ---------------------------------------------------------------- log simulator
SIM_NUM_USERS = 400
SIM_NUM_VIDEOS = 300
SIM_NUM_DAYS = 6
SIM_IMPRESSIONS_PER_USER_DAY = 8.0
SIM_SEED = 7

# ---------------------------------------------------------------- Beam
BEAM_PIPELINE_ARGS = [
    "--direct_running_mode=in_memory",
    "--direct_num_workers=1",
]
