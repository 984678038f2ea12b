"""Test setup: Keras 2 (tf-keras) everywhere, quiet TF, shared paths."""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

KUAIRAND_DIR = os.path.join(os.path.dirname(ROOT), "shared", "data", "kuairand-pure")

import pytest  # noqa: E402

SMALL_L = 5  # history length of the shared small transform graph


@pytest.fixture(scope="session")
def small_transform_output(tmp_path_factory):
    """One TF Transform analysis (models.preprocessing, the pipeline's TransformConfig) of
    40 random raw rows with L = SMALL_L, shared by the ranker and EAD-asset tests: each
    analysis costs over a minute on this machine, so the pytest-xdist workers of one run
    share it too (the first builds it under a file lock in the run's common temp dir, the
    others wait and read it). Returns (TFTransformOutput, rows)."""
    import fcntl

    import tensorflow_transform as tft

    from tests.helpers.ranker_utils import build_transform_output, raw_rows

    rows = raw_rows(40, SMALL_L, seed=1)
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "small_transform_output"
    with open(shared / "small_transform_output.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "DONE").exists():
            (root / "tft_tmp").mkdir(parents=True, exist_ok=True)
            build_transform_output(rows, SMALL_L, str(root / "tft_tmp"), str(root / "tft_out"))
            (root / "DONE").touch()
    return tft.TFTransformOutput(str(root / "tft_out")), rows
