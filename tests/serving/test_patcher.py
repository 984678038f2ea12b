"""serving/patcher.py: a missing base, a corrupt payload or a key mismatch is refused with a
typed error and nothing appears under the base (the served version does not change); the
embedded ModelManager assembles pending deltas before its scan; the sidecar CLI; an
assembled version loads in a fresh interpreter with no project code."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from models.publishing import delta as delta_lib
from serving import patcher
from serving.model_manager import ModelManager
from tests.helpers.tiny_published import score, tiny_versions


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A pristine base with version 1 and a pending delta 1 -> 2 (row_change, fraction 0.5)."""
    root = tmp_path_factory.mktemp("patcher")
    tiny = tiny_versions(root, "pristine")
    base, new = tiny["base"], tiny["new_full"]
    base_vars, new_vars = delta_lib.read_checkpoint(os.path.join(base, "1")), delta_lib.read_checkpoint(new)
    keys = delta_lib.table_keys(base_vars[delta_lib.OBJECT_GRAPH_KEY])
    d = delta_lib.compute_delta(base_vars, new_vars, keys, 0.5, "row_change", published={t: {} for t in keys})
    delta_lib.write_delta(d, os.path.join(base, "deltas", "2"), base_version=1, version=2)
    return {"pristine": base, "new": new, "root": root}


@pytest.fixture
def base(prepared, tmp_path):
    path = str(tmp_path / "ranker")
    shutil.copytree(prepared["pristine"], path)
    return path


def _served(base):
    return sorted(n for n in os.listdir(base) if not n.startswith("deltas"))


def test_model_manager_assembles_pending_delta_and_cli_is_idempotent(base, prepared):
    manager = ModelManager("tiny", base, poll_wait_seconds=0)
    assert manager.poll()
    assert manager.available_versions() == [2] and _served(base) == ["1", "2"]
    got = delta_lib.read_checkpoint(os.path.join(base, "2"))
    base_vars = delta_lib.read_checkpoint(os.path.join(base, "1"))
    assert {k: (np.asarray(v).dtype, np.shape(v)) for k, v in got.items()} == \
        {k: (np.asarray(v).dtype, np.shape(v)) for k, v in base_vars.items()}
    assert patcher.main(["--model_base_path", base, "--once"]) == 0  # nothing pending any more
    assert _served(base) == ["1", "2"]


def test_missing_base_version_is_refused(base):
    shutil.rmtree(os.path.join(base, "1"))
    with pytest.raises(patcher.BaseVersionMissingError, match="base version"):
        patcher.assemble(os.path.join(base, "1"), os.path.join(base, "deltas", "2"), os.path.join(base, "2"))
    assert patcher.apply_pending(base)["refused"][2].startswith("BaseVersionMissingError")
    assert _served(base) == [] and os.listdir(os.path.join(base, "deltas")) == ["2"]


def test_corrupt_or_mismatched_delta_is_refused_and_served_version_unchanged(base):
    manager = ModelManager("tiny", base, poll_wait_seconds=0)
    delta_dir = os.path.join(base, "deltas", "2")
    payload = os.path.join(delta_dir, "tables", "emb_video_id.npz")
    good = open(payload, "rb").read()
    with open(payload, "r+b") as f:  # one flipped byte in the int8 rows' file
        f.seek(len(good) // 2)
        f.write(bytes([good[len(good) // 2] ^ 0xFF]))
    with pytest.raises(patcher.DeltaChecksumError, match="emb_video_id.npz"):
        patcher.assemble(os.path.join(base, "1"), delta_dir, os.path.join(base, "2"))
    manager.poll()  # the hook refuses it too; version 1 keeps serving
    assert manager.available_versions() == [1] and _served(base) == ["1"]

    with open(payload, "wb") as f:
        f.write(good)
    manifest_path = os.path.join(delta_dir, delta_lib.MANIFEST)
    manifest = json.load(open(manifest_path))
    manifest["tables"]["emb_video_id"]["keys"]["values"] = "no/such/key/.ATTRIBUTES/VARIABLE_VALUE"
    json.dump(manifest, open(manifest_path, "w"))
    with pytest.raises(patcher.DeltaMismatchError, match="no/such/key"):
        patcher.assemble(os.path.join(base, "1"), delta_dir, os.path.join(base, "2"))
    manifest["base_version"] = 7
    json.dump(manifest, open(manifest_path, "w"))
    with pytest.raises(patcher.DeltaMismatchError, match="base_version 7"):
        patcher.assemble(os.path.join(base, "1"), delta_dir, os.path.join(base, "2"))
    assert _served(base) == ["1"] and not [n for n in os.listdir(base) if n.startswith(".tmp")]
    assert manager.available_versions() == [1]


FRESH = r"""
import sys, tensorflow as tf
assert not any(m.split(".")[0] in ("models", "components", "serving", "pipeline", "tests") for m in sys.modules)
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](ids=tf.constant([0, 1, 5, 38, 39], tf.int64))["score"]
print(repr(out.numpy().reshape(-1).tolist()))
"""


def test_assembled_version_loads_in_a_fresh_interpreter(base, prepared):
    out = os.path.join(base, "2")
    patcher.assemble(os.path.join(base, "1"), os.path.join(base, "deltas", "2"), out)
    assert os.path.exists(os.path.join(out, "fingerprint.pb"))
    run = subprocess.run([sys.executable, "-c", FRESH, out], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=""), cwd="/", timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = np.array(eval(run.stdout.strip().splitlines()[-1]))  # noqa: S307 - our own printed list
    np.testing.assert_allclose(got, score(out, [0, 1, 5, 38, 39]).reshape(-1), rtol=0, atol=0)
