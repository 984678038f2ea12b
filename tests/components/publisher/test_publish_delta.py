"""The Publisher's full-vs-delta choice (first run, every full_every, config / vocabulary /
base changes), and publish() on a small ranker: a full version, then a delta of the
continued training that the patcher assembles, that passes the gates and keeps the plan."""
import os
import shutil

import numpy as np
import pytest

from components.publisher import freshness
from components.publisher import publish as publish_lib
from components.publisher import state as state_lib
from models.publishing import delta as delta_lib
from models.publishing import pruning
from models.training import warm_start
from pipeline import configs
from tests.helpers.publisher_models import trained_rankers


def _state(base_version=5, runs=0, config=None, transform="t0", source="/models/m5"):
    plan = pruning.build_remap(np.array([0, 2, 3]), 4, "oov", oov_rows=[3])
    return state_lib.PublisherState(
        base_version=base_version, runs_since_full=runs,
        fingerprints={"config": state_lib.config_fingerprint(config or configs.publish_config()),
                      "transform": transform, "graph": "g"},
        keys={"emb_x": {"values": "k0", "remap": "k1"}}, plans={"emb_x": plan},
        opt_state={"emb_x": np.zeros(3)}, touches={"emb_x": np.zeros(3)}, source_model=source)


def test_choose_full_first_every_k_and_on_changes_else_delta(tmp_path):
    base = str(tmp_path / "serving" / "ranker")
    os.makedirs(os.path.join(base, "5"))
    config = configs.publish_config(full_every=3)
    warm = ["/models/m7", "/models/m6/", "/models/m5"]  # the trained model continues m5 (served) via m6

    def choose(config=config, transform="t0", lineage=warm):
        return freshness.choose(base, config, transform, lineage)

    assert choose()[:2] == ("full", "no publisher state (first publish)")
    state_lib.save(base, _state())
    assert not [n for n in os.listdir(base) if not n.isdigit()]  # the state lives beside the base
    kind, why, st = choose()
    assert kind == "delta" and st.base_version == 5 and np.array_equal(st.plans["emb_x"].kept, [0, 2, 3]), why
    assert st.source_model == "/models/m5"
    assert choose(config.replace(full_every=1))[0] == "full"
    assert "vocabularies" in choose(transform="t1")[1]
    assert "config changed" in choose(config.replace(prune_fraction=0.25))[1]
    assert choose(config.replace(delta_row_fraction=0.5))[0] == "delta"
    # a cold-trained model (its lineage is itself) or one from another line is not a delta of m5
    kind, why, _ = choose(lineage=["/models/m8"])
    assert kind == "full" and "does not continue the served version 5's model (/models/m5)" in why
    assert choose(lineage=["/models/m8", "/models/m6"])[0] == "full"
    state_lib.save(base, _state(source=None))  # a state written before sources were recorded
    assert "does not continue" in choose()[1]
    state_lib.save(base, _state(runs=2))
    assert "every 3 publishes" in choose()[1]
    state_lib.save(base, _state(runs=1))
    os.makedirs(os.path.join(base, "6"))  # someone else published: resync with a full version
    assert "not the state's base" in choose()[1]
    with open(os.path.join(state_lib.state_dir(base), state_lib.NPZ_NAME), "ab") as f:
        f.write(b"x")  # a corrupt state reads as none
    assert state_lib.load(base) is None


@pytest.fixture(scope="module")
def two_trainings(small_transform_output, tmp_path_factory):
    """A baseline ranker after 3 epochs (artifact A), after 2 more (B) and 2 more (C), same vocabularies
    (tests/helpers/publisher_models.py, shared with test_publish.py); its own serving base."""
    shared = trained_rankers(small_transform_output, tmp_path_factory)
    return {"artifacts": [shared["artifacts"][k] for k in "ABC"], "tft_dir": shared["tft_dir"],
            "eval": shared["eval"], "base": str(tmp_path_factory.mktemp("publish_delta") / "serving" / "ranker")}


def test_full_then_delta_publish_assembles_a_verified_version(two_trainings):
    t = two_trainings
    config = configs.publish_config(golden_requests=5, warmup_records=2, warmup_rows_per_request=2, keep_versions=3,
                                    sweep_fractions=[], prune_auto=False, prune_fraction=0.5, criterion="opt_state",
                                    quantize=True, quantize_min_dim=4, max_ne_loss=1e6, max_auc_drop=1.0,
                                    max_xauc_drop=1.0, full_every=3, delta_row_fraction=0.25,
                                    delta_priority="opt_state_change", delta_dense="fp32")

    def run(artifact, version):
        return publish_lib.publish(os.path.join(artifact, "Format-Serving"), artifact, t["tft_dir"], t["eval"],
                                   t["base"], "ranker", config, version=version)

    full = run(t["artifacts"][0], 100)
    assert full["decision"] == "published" and full["kind"] == "full", full.get("reason")
    delta = run(t["artifacts"][1], 101)
    assert delta["decision"] == "published" and delta["kind"] == "delta", (delta.get("kind_reason"), delta["reason"])
    assert delta["base_version"] == 100 and delta["served_versions"] == [100, 101]
    assert state_lib.load(t["base"]).source_model == os.path.normpath(t["artifacts"][1])
    fp = freshness.transform_fingerprint(t["tft_dir"])  # A again: it does not continue B, which serves
    assert freshness.choose(t["base"], config, fp, warm_start.lineage(t["artifacts"][0]))[0] == "full"
    assert freshness.choose(t["base"], config, fp, warm_start.lineage(t["artifacts"][1]))[0] == "delta"
    assert sorted(os.listdir(t["base"])) == ["100", "101", "deltas"]
    manifest = delta_lib.read_manifest(os.path.join(t["base"], "deltas", "101"))
    assert manifest["total_bytes"] == delta["bytes"] < full["bytes"]
    v100 = delta_lib.read_checkpoint(os.path.join(t["base"], "100"))
    v101 = delta_lib.read_checkpoint(os.path.join(t["base"], "101"))
    for name, entry in manifest["tables"].items():
        assert entry["rows_sent"] == int(np.ceil(0.25 * entry["rows_total"])) == delta["delta_tables"][name]["rows_sent"]
        keys = entry["keys"]
        if "remap" in keys:
            assert np.array_equal(v100[keys["remap"]], v101[keys["remap"]])  # the base's plan
        changed = np.flatnonzero(np.any(delta_lib.table_rows(v100, keys) != delta_lib.table_rows(v101, keys), axis=1))
        assert len(changed) <= entry["rows_sent"]
    assert delta["golden_requests"] == 5 and np.isfinite(delta["deltas"]["ne_loss"])
    assert state_lib.load(t["base"]).runs_since_full == 1
    keys = {n: e["keys"] for n, e in manifest["tables"].items()}
    fp16 = delta_lib.compute_delta(v100, v101, keys, 0.25, "row_change", published={n: {} for n in keys},
                                   dense_dtype="fp16")
    fp16_dense = sum(a.nbytes for a in fp16.dense.values())
    assert 0 < fp16_dense < sum(np.asarray(v101[k]).nbytes for k in fp16.dense)
    print(f"\nsmall ranker: full version {full['bytes']} B (variables {full['published_variables_bytes']} B), "
          f"delta (25 % rows, fp32 dense) {delta['bytes']} B (dense file {delta['delta_dense_bytes']} B; "
          f"fp16 dense payload {fp16_dense} B)")

    # a delta whose ASSEMBLED model fails verification is refused: no version, no delta, same state
    st = state_lib.load(t["base"])

    def refuse(path):
        assert os.path.isfile(os.path.join(path, "saved_model.pb"))
        raise publish_lib.PublishRefused("NE loss forced")

    def build(out, plans):  # the served version as the "new" model: no export needed here
        shutil.copytree(os.path.join(t["base"], "101"), out)
        return {"tables": {}}

    with pytest.raises(publish_lib.PublishRefused):
        freshness.publish_delta(t["base"], st, config, None, build=build, verify=refuse, version=102)
    assert sorted(os.listdir(t["base"])) == ["100", "101", "deltas"]
    assert os.listdir(os.path.join(t["base"], "deltas")) == ["101"]
    assert state_lib.load(t["base"]).runs_since_full == 1 and state_lib.load(t["base"]).base_version == 101
    assert not [n for n in os.listdir(state_lib.state_dir(t["base"])) if n.startswith("scratch")]


def test_dense_schedule():
    """dense_every M: the dense weights ride on deltas M, 2M, … since the last full version."""
    cfg = configs.publish_config(dense_every=3)
    assert [freshness.sends_dense(cfg, n) for n in range(1, 8)] == [False, False, True, False, False, True, False]
    assert all(freshness.sends_dense(cfg.replace(dense_every=1), n) for n in range(1, 5))
    assert not any(freshness.sends_dense(cfg.replace(dense_every=0), n) for n in range(1, 40))
    with pytest.raises(ValueError, match="dense_every"):
        configs.publish_config(dense_every=-1)


def _coded_dense_config():
    """Full every 9, 25 % rows by row_change, int8_delta dense on every 2nd delta, open gates."""
    return configs.publish_config(golden_requests=5, warmup_records=2, warmup_rows_per_request=2, keep_versions=3,
                                  sweep_fractions=[], prune_auto=False, prune_fraction=0.5, criterion="opt_state",
                                  quantize=True, quantize_min_dim=4, max_ne_loss=1e6, max_auc_drop=1.0,
                                  max_xauc_drop=1.0, full_every=9, delta_row_fraction=0.25,
                                  delta_priority="row_change", delta_dense="int8_delta", dense_every=2)


def test_coded_dense_on_schedule_is_coded_against_the_served_version(two_trainings):
    """After the full + delta above: with dense_every 2 and int8_delta, the next delta (the 2nd
    since the full) carries the dense weights coded against the served version N, the one
    after it (the 3rd) none; each assembled version passes the gates."""
    from models.publishing import dense_delta

    t = two_trainings
    config = _coded_dense_config()
    st = state_lib.load(t["base"])
    assert st is not None and st.runs_since_full == 1, "runs after test_full_then_delta_publish_..."
    n = st.base_version
    reports = []
    for version, artifact in ((n + 1, t["artifacts"][2]), (n + 2, t["artifacts"][2])):  # C continues B (served)
        reports.append(publish_lib.publish(os.path.join(artifact, "Format-Serving"), artifact, t["tft_dir"],
                                           t["eval"], t["base"], "ranker", config, version=version))
        assert reports[-1]["decision"] == "published" and reports[-1]["kind"] == "delta", reports[-1]["reason"]
    assert [r["delta_dense_sent"] for r in reports] == [True, False]
    served = {v: delta_lib.read_checkpoint(os.path.join(t["base"], str(v))) for v in (n, n + 1, n + 2)}
    manifest, _, dense = delta_lib.read_delta(os.path.join(t["base"], "deltas", str(n + 1)))
    assert dense and all(isinstance(c, dense_delta.Coded) and c.coding == "int8_delta" for c in dense.values())
    for key, coded in dense.items():  # N+1 = N + q·Δ exactly, the codes of trainer C − N
        np.testing.assert_array_equal(served[n + 1][key], dense_delta.apply(served[n][key], coded))
        assert np.abs(coded.q).max() == 127 or float(coded.scale) == 0.0
    assert delta_lib.read_manifest(os.path.join(t["base"], "deltas", str(n + 2)))["dense"]["variables"] == {}
    for key in dense:  # no dense in the 3rd delta: N+2 keeps N+1's
        np.testing.assert_array_equal(served[n + 2][key], served[n + 1][key])
    assert reports[0]["delta_dense_bytes"] < 0.5 * sum(np.asarray(served[n][k]).nbytes for k in dense)
    print(f"\nsmall ranker: int8_delta dense file {reports[0]['delta_dense_bytes']} B for "
          f"{sum(np.asarray(served[n][k]).nbytes for k in dense)} B of fp32 dense; rows-only delta {reports[1]['bytes']} B")


def test_a_refused_delta_is_published_as_a_full_version(two_trainings, monkeypatch):
    """When the assembled N + delta fails verification (a span moved the model further than 5 %
    of the rows can carry), the blessed model is published whole instead of not at all."""
    t = two_trainings
    config = _coded_dense_config()
    before = state_lib.load(t["base"])
    assert before is not None and before.runs_since_full > 0, "runs after the deltas above"

    def refused(*args, **kwargs):
        raise publish_lib.PublishRefused("NE loss forced")

    monkeypatch.setattr(freshness, "publish_delta", refused)
    artifact = t["artifacts"][2]
    report = publish_lib.publish(os.path.join(artifact, "Format-Serving"), artifact, t["tft_dir"], t["eval"],
                                 t["base"], "ranker", config, version=before.base_version + 1)
    assert report["decision"] == "published" and report["kind"] == "full", report["reason"]
    assert report["delta_refused"] == "NE loss forced" and "assembled delta was refused" in report["kind_reason"]
    after = state_lib.load(t["base"])
    assert after.base_version == before.base_version + 1 and after.runs_since_full == 0
    assert after.source_model == os.path.normpath(artifact)
