"""Test setup: Keras 2 (tf-keras) everywhere, quiet TF, shared paths."""
import os
import sys

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
    import tensorflow_transform as tft

    from tests.helpers.ranker_utils import build_transform_output, raw_rows
    from tests.helpers.shared_build import built_once

    rows = raw_rows(40, SMALL_L, seed=1)

    def build(root):
        (root / "tft_tmp").mkdir()
        build_transform_output(rows, SMALL_L, str(root / "tft_tmp"), str(root / "tft_out"))

    root = built_once(tmp_path_factory, "small_transform_output", build)
    return tft.TFTransformOutput(str(root / "tft_out")), rows


def pytest_collection_modifyitems(config, items):
    """Longest files first. `make test` runs pytest-xdist with --dist loadfile
    --no-loadscope-reorder, which hands whole files to the two workers in this order:
    the e2e files (5-10 min each) start at once and the short files fill the workers at
    the end. xdist's default order (most tests first) put the e2e files, which have few
    tests, last, so the run ended on them (whether a worker then sat idle was not
    measured). Order: tests/e2e/ (whole
    pipeline runs), other files with e2e tests, then most tests first, as xdist would;
    files keep their own test order (an e2e module's tests share a pipeline run)."""
    files = {}
    for item in items:
        entry = files.setdefault(item.nodeid.split("::")[0], [0, False, len(files)])
        entry[0] += 1
        entry[1] = entry[1] or item.get_closest_marker("e2e") is not None

    def cost(item):
        path = item.nodeid.split("::")[0]
        count, e2e, first = files[path]
        return (not path.startswith("tests/e2e/"), not e2e, -count, first)

    items.sort(key=cost)  # stable: a file's tests stay in order
