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
    analysis costs over a minute on this machine. Returns (TFTransformOutput, rows)."""
    from tests.helpers.ranker_utils import build_transform_output, raw_rows

    rows = raw_rows(40, SMALL_L, seed=1)
    out = build_transform_output(rows, SMALL_L, str(tmp_path_factory.mktemp("tft_tmp")),
                                 str(tmp_path_factory.mktemp("tft_out")))
    return out, rows
