"""Delta round trip on a tiny published model (int8 + fp32 tables with remaps, dense
weights, an asset): version N + delta(fraction 1) = the full publish of the new weights
under the same plan, bit-exact; with fraction < 1 only the chosen rows change."""
import json
import os

import numpy as np
import pytest

from models.publishing import delta as delta_lib
from tests.helpers.tiny_published import D, V, score, tiny_versions


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """<base>/1 (weights seed 0) and the full publish of the new weights (seed 1), same plan."""
    return tiny_versions(tmp_path_factory.mktemp("delta"), "serving")


def make_delta(versions, fraction, version, priority="row_change", dense="fp32", rows="values"):
    base_vars = delta_lib.read_checkpoint(os.path.join(versions["base"], "1"))
    new_vars = delta_lib.read_checkpoint(versions["new_full"])
    keys = delta_lib.table_keys(base_vars[delta_lib.OBJECT_GRAPH_KEY])
    d = delta_lib.compute_delta(base_vars, new_vars, keys, fraction, priority,
                                published={t: {} for t in keys}, dense_dtype=dense, rows_coding=rows)
    out = os.path.join(versions["base"], delta_lib.DELTAS_DIR, str(version))
    return delta_lib.write_delta(d, out, base_version=1, version=version), out


def test_full_fraction_delta_assembles_the_full_publish_bit_exact(versions):
    from serving.patcher import assemble

    manifest, delta_dir = make_delta(versions, 1.0, 2)
    assert set(manifest["tables"]) == {"emb_video_id", "linear_video_id"}
    emb = manifest["tables"]["emb_video_id"]
    k = V // 2 + 1  # kept rows: 0, the odd ids 1..39 (39 is the OOV row)
    assert emb["rows_total"] == emb["rows_sent"] == k and emb["quantized"] and emb["keys"]["remap"]
    assert emb["payload_bytes"] == k * (2 + D + 4)  # uint16 index + int8 row + fp16 scale/bias
    assert manifest["tables"]["linear_video_id"]["payload_bytes"] == k * (2 + 4)
    assert not os.listdir(os.path.join(versions["base"], delta_lib.DELTAS_DIR))[0].startswith(".tmp")

    out = os.path.join(versions["base"], "2")
    result = assemble(os.path.join(versions["base"], "1"), delta_dir, out)
    assert result["version"] == 2 and os.path.isdir(out)
    got, want = delta_lib.read_checkpoint(out), delta_lib.read_checkpoint(versions["new_full"])
    base = delta_lib.read_checkpoint(os.path.join(versions["base"], "1"))
    assert set(got) == set(want)
    for key in got:
        if key != delta_lib.OBJECT_GRAPH_KEY:
            assert got[key].dtype == want[key].dtype and np.array_equal(got[key], want[key]), key
    assert got[delta_lib.OBJECT_GRAPH_KEY] == base[delta_lib.OBJECT_GRAPH_KEY]
    # graph, assets and warmup hard-linked from the base
    for rel in ("saved_model.pb", "assets/vocab.txt", "assets.extra/tf_serving_warmup_requests"):
        assert os.stat(os.path.join(out, rel)).st_ino == os.stat(os.path.join(versions["base"], "1", rel)).st_ino
    ids = [0, 1, 2, 3, 17, 38, 39]
    np.testing.assert_array_equal(score(out, ids), score(versions["new_full"], ids))
    full_bytes = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(versions["new_full"]) for f in fs)
    print(f"\ntiny model: delta(1.0) {manifest['total_bytes']} B vs full version {full_bytes} B")


def test_partial_delta_changes_only_the_chosen_rows_and_fp16_dense(versions):
    from serving.patcher import assemble

    manifest, delta_dir = make_delta(versions, 0.25, 3, dense="fp16")
    emb = manifest["tables"]["emb_video_id"]
    assert emb["rows_sent"] == int(np.ceil(0.25 * emb["rows_total"]))
    assert manifest["dense"]["dtype"] == "fp16"
    _, tables, dense = delta_lib.read_delta(delta_dir)
    out = os.path.join(versions["base"], "3")
    assemble(os.path.join(versions["base"], "1"), delta_dir, out)
    got, new = delta_lib.read_checkpoint(out), delta_lib.read_checkpoint(versions["new_full"])
    base = delta_lib.read_checkpoint(os.path.join(versions["base"], "1"))
    for name, entry in manifest["tables"].items():
        sent = tables[name]["rows"].astype(int)
        # the chosen rows are the largest ‖x̂_new − x̂_base‖ ones
        change = np.linalg.norm(delta_lib.table_rows(new, entry["keys"]) - delta_lib.table_rows(base, entry["keys"]),
                                axis=1)
        assert change[sent].min() >= np.delete(change, sent).max()
        for part in ("values", "scale_bias"):
            if part in entry["keys"]:
                key = entry["keys"][part]
                np.testing.assert_array_equal(got[key][sent], new[key][sent])
                rest = np.setdiff1d(np.arange(entry["rows_total"]), sent)
                np.testing.assert_array_equal(got[key][rest], base[key][rest])
    (wkey,) = list(dense)
    assert dense[wkey].dtype == np.float16 and got[wkey].dtype == np.float32
    np.testing.assert_array_equal(got[wkey], new[wkey].astype(np.float16).astype(np.float32))


def test_manifest_records_checksums_and_totals(versions):
    manifest, delta_dir = make_delta(versions, 0.5, 4)
    with open(os.path.join(delta_dir, delta_lib.MANIFEST)) as f:
        assert json.load(f) == json.loads(json.dumps(manifest))
    assert manifest["base_version"] == 1 and manifest["version"] == 4
    assert manifest["total_bytes"] == sum(t["bytes"] for t in manifest["tables"].values()) + manifest["dense"]["bytes"]
    assert manifest["total_bytes"] == sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(delta_dir)
                                          for f in fs if f != delta_lib.MANIFEST)
    with pytest.raises(delta_lib.DeltaMismatchError, match="remap"):
        base = delta_lib.read_checkpoint(os.path.join(versions["base"], "1"))
        keys = delta_lib.table_keys(base[delta_lib.OBJECT_GRAPH_KEY])
        other = dict(base)
        remap_key = keys["emb_video_id"]["remap"]
        other[remap_key] = base[remap_key][::-1].copy()
        delta_lib.compute_delta(base, other, keys, 1.0, "row_change")


@pytest.mark.parametrize("coding", ["int8_delta", "int4_delta", "fp16_delta"])
def test_coded_dense_assembles_the_trainer_weights_within_the_bound(versions, coding):
    """dense coded against version N (models/publishing/dense_delta.py): N + delta equals the
    new weights within the coding's bound; rows as with plain dense; send_dense False keeps N's."""
    from models.publishing import dense_delta
    from serving.patcher import assemble

    version = {"int8_delta": 5, "fp16_delta": 6, "int4_delta": 7}[coding]
    manifest, delta_dir = make_delta(versions, 0.25, version, dense=coding)
    assert manifest["format"] == delta_lib.FORMAT == 5 and manifest["dense"]["dtype"] == coding
    (wkey, var), = manifest["dense"]["variables"].items()
    assert var["coding"] == coding and var["sent_dtype"] == ("float16" if coding == "fp16_delta" else "int8")
    _, _, dense = delta_lib.read_delta(delta_dir)
    out = os.path.join(versions["base"], str(version))
    assemble(os.path.join(versions["base"], "1"), delta_dir, out)
    got, new = delta_lib.read_checkpoint(out), delta_lib.read_checkpoint(versions["new_full"])
    base = delta_lib.read_checkpoint(os.path.join(versions["base"], "1"))
    assert got[wkey].dtype == np.float32 and not np.array_equal(base[wkey], new[wkey])
    bound = dense_delta.error_bound(base[wkey], new[wkey], dense[wkey])
    assert np.all(np.abs(got[wkey].astype(np.float64) - new[wkey]) <= bound)
    if coding in dense_delta.LEVELS:
        step = float(np.max(np.abs(new[wkey].astype(np.float64) - base[wkey]))) / dense_delta.LEVELS[coding]
        assert float(dense[wkey].scale) == pytest.approx(step, rel=1e-6)
    keys = delta_lib.table_keys(base[delta_lib.OBJECT_GRAPH_KEY])
    rows_only = delta_lib.compute_delta(base, new, keys, 0.25, "row_change", published={t: {} for t in keys},
                                        dense_dtype=coding, send_dense=False)
    assert rows_only.dense == {} and set(rows_only.tables) == set(manifest["tables"])


@pytest.mark.parametrize("fraction, version", [(1.0, 8), (0.25, 9)])
def test_code_delta_rows_assemble_the_trainer_rows_bit_exact(versions, fraction, version):
    """rows "code_delta" (models/publishing/row_delta.py), int8 and fp32 tables: the table
    files hold row_gaps and the bit differences from version N (deflated); N + delta has the
    new rows bit for bit on the chosen rows and N's elsewhere — the same checkpoint as the
    "values" delta of the same rows."""
    from serving.patcher import assemble

    manifest, delta_dir = make_delta(versions, fraction, version, rows="code_delta")
    emb = manifest["tables"]["emb_video_id"]
    assert emb["coding"] == "code_delta" and emb["rows_sent"] == int(np.ceil(fraction * emb["rows_total"]))
    _, tables, _ = delta_lib.read_delta(delta_dir)
    assert set(tables["emb_video_id"]) == {"row_gaps", "values_delta", "scale_bias_delta"}
    assert tables["emb_video_id"]["values_delta"].dtype == np.uint8
    assert tables["linear_video_id"]["values_delta"].dtype == np.uint32  # fp32 rows: their bit patterns
    out = os.path.join(versions["base"], str(version))
    assemble(os.path.join(versions["base"], "1"), delta_dir, out)
    got = delta_lib.read_checkpoint(out)
    plain_manifest, plain_dir = make_delta(versions, fraction, version + 100)
    base = delta_lib.read_checkpoint(os.path.join(versions["base"], "1"))
    want = delta_lib.apply_delta(base, *delta_lib.read_delta(plain_dir)[:3])
    for key in got:
        if key != delta_lib.OBJECT_GRAPH_KEY:
            assert got[key].dtype == want[key].dtype and np.array_equal(got[key], want[key]), key
    if fraction == 1.0:
        new = delta_lib.read_checkpoint(versions["new_full"])
        for entry in manifest["tables"].values():
            for key in entry["keys"].values():
                assert np.array_equal(got[key], new[key]), key
        np.testing.assert_array_equal(score(out, [0, 1, 2, 38, 39]), score(versions["new_full"], [0, 1, 2, 38, 39]))
    with pytest.raises(ValueError, match="rows_coding"):
        delta_lib.compute_delta(base, base, delta_lib.table_keys(base[delta_lib.OBJECT_GRAPH_KEY]), 0.5,
                                "row_change", rows_coding="int8")
