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


def test_coded_dense_payload_is_checked_and_a_refusal_leaves_nothing(prepared, tmp_path):
    """An int8_delta dense payload (models/publishing/dense_delta.py): a flipped byte, a wrong
    shape or a missing step is refused with a typed error, nothing appears under the base;
    intact, it assembles base + q·Δ."""
    import hashlib
    import io

    from models.publishing import dense_delta

    base = str(tmp_path / "coded")
    shutil.copytree(prepared["pristine"], base, ignore=shutil.ignore_patterns("deltas"))
    base_vars, new_vars = delta_lib.read_checkpoint(os.path.join(base, "1")), delta_lib.read_checkpoint(prepared["new"])
    keys = delta_lib.table_keys(base_vars[delta_lib.OBJECT_GRAPH_KEY])
    d = delta_lib.compute_delta(base_vars, new_vars, keys, 0.5, "row_change", published={t: {} for t in keys},
                                dense_dtype="int8_delta")
    delta_dir = os.path.join(base, "deltas", "2")
    delta_lib.write_delta(d, delta_dir, base_version=1, version=2)
    dense_path, manifest_path = os.path.join(delta_dir, delta_lib.DENSE_FILE), os.path.join(delta_dir, delta_lib.MANIFEST)
    good_dense, good_manifest = open(dense_path, "rb").read(), open(manifest_path).read()

    def refused(error, match):
        with pytest.raises(error, match=match):
            patcher.assemble(os.path.join(base, "1"), delta_dir, os.path.join(base, "2"))
        assert _served(base) == ["1"] and not [n for n in os.listdir(base) if n.startswith(".tmp")]

    with open(dense_path, "r+b") as f:
        f.seek(len(good_dense) // 2)
        f.write(bytes([good_dense[len(good_dense) // 2] ^ 0xFF]))
    refused(patcher.DeltaChecksumError, "dense.npz")
    open(dense_path, "wb").write(good_dense)

    manifest = json.loads(good_manifest)
    (wkey, var), = manifest["dense"]["variables"].items()
    with np.load(io.BytesIO(good_dense)) as npz:
        arrays = {k: npz[k] for k in npz.files}
    assert arrays[var["entry"]].dtype == np.int8 and arrays[f"{var['entry']}_scale"].shape == ()

    def rewrite(arrays):  # a well-formed file with a valid checksum, but a bad payload
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        data = buf.getvalue()
        open(dense_path, "wb").write(data)
        m = json.loads(good_manifest)
        m["dense"].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
        json.dump(m, open(manifest_path, "w"))

    rewrite({var["entry"]: arrays[var["entry"]][:-1]})
    refused(patcher.DeltaMismatchError, f"dense variable {wkey}: shape")
    rewrite({var["entry"]: arrays[var["entry"]]})
    refused(patcher.DeltaMismatchError, "step")
    rewrite({var["entry"]: arrays[var["entry"]].astype(np.int16), f"{var['entry']}_scale": arrays[f"{var['entry']}_scale"]})
    refused(patcher.DeltaMismatchError, "int8_delta codes int16")

    rewrite(arrays)
    patcher.assemble(os.path.join(base, "1"), delta_dir, os.path.join(base, "2"))
    got = delta_lib.read_checkpoint(os.path.join(base, "2"))[wkey]
    coded = dense_delta.Coded("int8_delta", arrays[var["entry"]], arrays[f"{var['entry']}_scale"])
    np.testing.assert_array_equal(got, base_vars[wkey] + arrays[var["entry"]].astype(np.float32) * coded.scale)
    assert np.all(np.abs(got.astype(np.float64) - new_vars[wkey]) <= dense_delta.error_bound(base_vars[wkey],
                                                                                           new_vars[wkey], coded))


def test_code_delta_rows_are_checked_and_a_refusal_leaves_nothing(prepared, tmp_path):
    """Rows coded against the base (models/publishing/row_delta.py): a flipped byte, rows out
    of range, codes of the wrong width or an unknown row coding are refused with a typed error
    naming the table, nothing appears under the base; intact, the chosen rows are the new ones."""
    import hashlib
    import io

    base = str(tmp_path / "rows")
    shutil.copytree(prepared["pristine"], base, ignore=shutil.ignore_patterns("deltas"))
    base_vars, new_vars = delta_lib.read_checkpoint(os.path.join(base, "1")), delta_lib.read_checkpoint(prepared["new"])
    keys = delta_lib.table_keys(base_vars[delta_lib.OBJECT_GRAPH_KEY])
    d = delta_lib.compute_delta(base_vars, new_vars, keys, 0.5, "row_change", published={t: {} for t in keys},
                                rows_coding="code_delta")
    delta_dir = os.path.join(base, "deltas", "2")
    delta_lib.write_delta(d, delta_dir, base_version=1, version=2)
    manifest_path = os.path.join(delta_dir, delta_lib.MANIFEST)
    good_manifest = open(manifest_path).read()
    table_path = os.path.join(delta_dir, json.loads(good_manifest)["tables"]["emb_video_id"]["file"])
    good_table = open(table_path, "rb").read()
    with np.load(io.BytesIO(good_table)) as npz:
        arrays = {k: npz[k] for k in npz.files}

    def refused(error, match):
        with pytest.raises(error, match=match):
            patcher.assemble(os.path.join(base, "1"), delta_dir, os.path.join(base, "2"))
        assert _served(base) == ["1"] and not [n for n in os.listdir(base) if n.startswith(".tmp")]

    def rewrite(arrays, **entry):  # a well-formed file with a valid checksum, but a bad payload
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        data = buf.getvalue()
        open(table_path, "wb").write(data)
        m = json.loads(good_manifest)
        m["tables"]["emb_video_id"].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), **entry)
        json.dump(m, open(manifest_path, "w"))

    with open(table_path, "r+b") as f:
        f.seek(len(good_table) // 2)
        f.write(bytes([good_table[len(good_table) // 2] ^ 0xFF]))
    refused(patcher.DeltaChecksumError, "emb_video_id.npz")
    gaps = arrays["row_gaps"].copy()
    gaps[-1] += 40  # past the table's last row
    rewrite(dict(arrays, row_gaps=gaps))
    refused(patcher.DeltaMismatchError, "table emb_video_id: row_gaps")
    rewrite(dict(arrays, values_delta=arrays["values_delta"].astype(np.uint16)))
    refused(patcher.DeltaMismatchError, "table emb_video_id: values_delta")
    rewrite(arrays, coding="xor")
    refused(patcher.DeltaMismatchError, "unknown row coding")

    rewrite(arrays)
    patcher.assemble(os.path.join(base, "1"), delta_dir, os.path.join(base, "2"))
    got = delta_lib.read_checkpoint(os.path.join(base, "2"))
    rows = np.cumsum(arrays["row_gaps"].astype(np.int64))
    assert "extent" not in keys["emb_video_id"] and len(rows) == len(got[keys["emb_video_id"]["values"]]) // 2 + 1
    for part in ("values", "scale_bias"):
        key = keys["emb_video_id"][part]
        np.testing.assert_array_equal(got[key][rows], new_vars[key][rows])
        rest = np.setdiff1d(np.arange(len(got[key])), rows)
        assert len(rest) and np.array_equal(got[key][rest], base_vars[key][rest])
