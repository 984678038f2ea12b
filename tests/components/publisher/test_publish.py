"""publish() on a small trained ranker: exact at 0 % / fp32, a pruned int8 version that
loads in a fresh process with standard ops only and serves over REST with its warmup
file, and a failing gate that blocks the publish and says why."""
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from components.publisher import publish as publish_lib
from components.publisher import warmup
from models import features as F
from pipeline import configs
from tests.helpers.publisher_models import trained_rankers


@pytest.fixture(scope="module")
def trained(small_transform_output, tmp_path_factory):
    """The shared small ranker after 5 epochs (tests/helpers/publisher_models.py: it fits
    the 40 rows closely, so pruning everything must hurt), its row importance and raw
    eval examples; this module publishes into its own serving base."""
    shared = trained_rankers(small_transform_output, tmp_path_factory)
    return {"artifact": shared["artifacts"]["B"], "tft_dir": shared["tft_dir"], "eval": shared["eval"],
            "base": str(tmp_path_factory.mktemp("publisher") / "serving" / "ranker")}


def _publish(trained, tune_files=None, **changes):
    changes.setdefault("sweep_fractions", [])
    changes.setdefault("prune_auto", False)  # the fixed fractions below (auto: test_gates.py)
    config = configs.publish_config(golden_requests=20, warmup_records=5, warmup_rows_per_request=2,
                                    keep_versions=2, **changes)
    return publish_lib.publish(os.path.join(trained["artifact"], "Format-Serving"), trained["artifact"],
                               trained["tft_dir"], trained["eval"], trained["base"], "ranker", config,
                               tune_files=tune_files)


FRESH = r"""
import sys, tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry
path = sys.argv[1]
assert not any(m.split(".")[0] in ("models", "components", "serving", "pipeline") for m in sys.modules)
sm = saved_model_pb2.SavedModel()
sm.ParseFromString(open(path + "/saved_model.pb", "rb").read())
graph = sm.meta_graphs[0].graph_def
ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
unknown = sorted(o for o in ops if op_def_registry.get(o) is None)
loaded = tf.saved_model.load(path)
print({"ops": sorted(ops), "unknown": unknown, "signatures": sorted(loaded.signatures)})
"""


def test_exact_then_int8_published_then_refused(trained):
    exact = _publish(trained, prune_fraction=None, quantize=False)
    assert exact["decision"] == "published", exact["reason"]
    assert exact["deltas"]["ne_loss"] == 0 and exact["deltas"]["auc_drop"] == 0
    assert exact["golden_max_abs_delta_click_prob"] == 0 and exact["golden_requests"] == 20
    first = exact["version"]

    pub = _publish(trained, prune_fraction=0.5, quantize=True, quantize_min_dim=4, max_ne_loss=1e6,
                   max_auc_drop=1.0, max_xauc_drop=1.0, sweep_fractions=[0.0, 0.5], sweep_criteria=["l2_norm"],
                   allocation="per_table", criterion="opt_state", default_row="oov", tune_files=trained["eval"])
    assert pub["decision"] == "published", pub["reason"]
    assert pub["sweep_split"] == "tune split"
    assert [r["fraction"] for r in pub["sweep"]] == [0.0, 0.5]
    assert pub["sweep"][1]["rows_kept"] < pub["sweep"][1]["rows"]
    assert pub["served_versions"] == [first, pub["version"]], pub["served_versions"]
    tables = pub["tables"].values()
    assert all(t["quantized"] and t["batch"] == "int8_tables_0" for t in tables)  # one table batch
    # per table: int8 rows + fp16 scale/bias, a 2-byte remap entry per vocabulary row and the
    # 16-byte extent in the batch (models/publishing/table_batch.py); the rows: width 4 in int8
    # is half of fp32, and half the rows (+ padding and OOV) are kept
    assert pub["embedding_bytes_published"] == sum(t["rows_kept"] * (t["dim"] + 4) + t["rows"] * 2 + 16
                                                   for t in tables)
    assert sum(t["rows_kept"] * (t["dim"] + 4) for t in tables) < pub["embedding_bytes_fp32"] / 3
    assert all(t["rows_kept"] < t["rows"] for t in pub["tables"].values())
    assert sorted(os.listdir(trained["base"])) == sorted(str(v) for v in pub["served_versions"])
    logs = warmup.read_warmup(pub["path"])
    assert len(logs) == pub["warmup_records"] == 5
    assert logs[0].predict_log.request.model_spec.signature_name == "serving_default"
    assert set(logs[0].predict_log.request.inputs) == set(F.SERVING_RAW_FEATURES)

    # a fresh interpreter with no project code: standard ops only, loads, every signature
    out = subprocess.run([sys.executable, "-c", FRESH, pub["path"]], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=""), cwd="/", timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    found = eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 - our own printed dict
    assert found["unknown"] == [] and "ResourceGather" in found["ops"]
    assert not {"Dequantize", "QuantizeV2"} & set(found["ops"])
    assert {"serving_default", "serving_examples"} <= set(found["signatures"])

    # the embedded server replays the warmup file and answers REST
    from serving.client import examples_to_instances, predict
    from serving.http_server import start_server
    from serving.servable import ServedVersion

    assert ServedVersion(pub["version"], pub["path"]).warmup_records == 5
    server, port = start_server(trained["base"], "ranker", port=0)
    try:
        serialized = [r.numpy() for r in tf.data.TFRecordDataset(trained["eval"], compression_type="GZIP").take(3)]
        preds = predict(f"http://127.0.0.1:{port}", "ranker", examples_to_instances(serialized, F.SERVING_RAW_FEATURES))
        assert len(preds) == 3 and all(0 <= p["click_prob"][0] <= 1 for p in preds)
    finally:
        server.stop()

    refused = _publish(trained, prune_fraction=0.99, criterion="opt_state", quantize=True,
                       max_ne_loss=0.0005, max_auc_drop=0.001)
    assert refused["decision"] == "refused" and refused["version"] is None
    assert "NE loss" in refused["reason"] or "AUC drop" in refused["reason"]
    assert refused["served_versions"] == pub["served_versions"]
    assert not [n for n in os.listdir(trained["base"]) if n.startswith(".publishing-")]
    json.dumps(refused, default=float)  # the report is JSON


@pytest.mark.parametrize("check", ["in memory", "SavedModel"])
def test_refused_auto_fraction_falls_back_to_a_smaller_one(trained, monkeypatch, check):
    """prune_auto picks its fraction in memory on the tune split; when the same in-memory
    check on the eval split refuses it (eval_check), no SavedModel is built for it; when it
    passes there but the SavedModel's verification refuses it (here: eval_check disabled),
    the next candidate (finally no pruning) is assembled and verified before the publish
    is refused."""
    monkeypatch.setattr(publish_lib, "candidate_fractions", lambda config, rows: [0.99, None])
    if check == "SavedModel":
        monkeypatch.setattr(publish_lib, "eval_check", lambda *args: [])
    built = []
    build = publish_lib.build_published_model
    monkeypatch.setattr(publish_lib, "build_published_model", lambda *a, **k: built.append(a[2]) or build(*a, **k))
    before = publish_lib.versioning.list_versions(trained["base"])
    pub = _publish(trained, prune_fraction=0.99, criterion="opt_state", quantize=False, prune_auto=True,
                   sweep_fractions=[0.0], sweep_criteria=["l2_norm"], max_ne_loss=0.0005, max_auc_drop=0.001,
                   full_every=1)  # full versions: the same model twice would be a delta
    assert pub["decision"] == "published", pub["reason"]
    assert [(f["fraction"], f["check"]) for f in pub["prune_fallbacks"]] == [(0.99, check)]
    assert [c.prune_fraction for c in built] == ([0.99, None] if check == "SavedModel" else [None])
    assert bool(pub.get("eval_check")) == (check == "in memory")
    assert "NE loss" in pub["prune_fallbacks"][0]["reason"] or "AUC" in pub["prune_fallbacks"][0]["reason"]
    assert pub["prune_fraction_chosen"] == 0.0 and pub["deltas"]["ne_loss"] == 0
    assert "after 1 refused" in pub["reason"]
    assert pub["version"] > max(before, default=0)
    assert all(t["rows_kept"] == t["rows"] for t in pub["tables"].values())
    assert not [n for n in os.listdir(trained["base"]) if n.startswith(".publishing-")]


def test_swept_model_builds_the_same_saved_model_as_a_fresh_load(trained, tmp_path):
    """publish() builds its first SavedModel from the Keras ranker the sweep rewrote and
    restored (no second load): same variables, same outputs as one built from a fresh load."""
    import tensorflow_transform as tft

    from components.publisher import verification
    from models.publishing import rewrite, sweep

    config = configs.publish_config(prune_fraction=0.5, quantize=True, quantize_min_dim=4, allocation="per_table",
                                    criterion="l2_norm", sweep_fractions=[0.0, 0.5], sweep_criteria=["l2_norm"])
    model_dir = os.path.join(trained["artifact"], "Format-Serving")
    tft_output = tft.TFTransformOutput(trained["tft_dir"])
    serialized = verification.read_examples(trained["eval"])
    swept = rewrite.load_trained_model(model_dir)
    assert len(publish_lib.run_sweep(swept, None, config, tft_output, serialized)) == 2
    # the eval check's rows, transformed batch by batch when read, score as the materialized ones
    length = rewrite.history_length(swept)
    held = sweep.predict(swept, sweep.transformed_eval(tft_output, serialized, length, swept.input_names))
    lazy = sweep.predict(swept, sweep.TransformedRows(tft_output, serialized, length, swept.input_names))
    assert len(serialized) > 0 and all((held[k] == lazy[k]).all() for k in held)
    assert sweep._transform_fn(tft_output, length).experimental_get_tracing_count() == 1  # one trace for all
    built = {}
    for name, model in (("swept", swept), ("fresh", None)):
        publish_lib.build_published_model(model_dir, None, config, tft_output, str(tmp_path / name), model=model)
        built[name] = tf.saved_model.load(str(tmp_path / name))
    variables = {}  # every saved variable, read from each SavedModel's checkpoint
    for name in built:
        reader = tf.train.load_checkpoint(str(tmp_path / name / "variables" / "variables"))
        variables[name] = {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
                           if k != "_CHECKPOINTABLE_OBJECT_GRAPH"}
    assert len(variables["fresh"]) > 0 and sorted(variables["swept"]) == sorted(variables["fresh"])
    assert all((variables["swept"][k] == variables["fresh"][k]).all() for k in variables["fresh"])
    scores = {name: verification.score(m.signatures, serialized) for name, m in built.items()}
    for key in scores["fresh"]:
        assert (scores["swept"][key] == scores["fresh"][key]).all(), key
