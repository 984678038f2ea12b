"""Embedded REST server + client against a tiny SavedModel with known outputs.

The model mimics a pushed ranker's signatures: `serving_default` takes raw features
(int64 ids, a string, a float, an int64 history of length 5), `serving_examples`
takes serialized tf.Examples, `click_only` has a single output. Its outputs are
simple arithmetic of the inputs, so expected numbers are computed by hand and by
calling the SavedModel directly.
"""
import base64
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests
import tensorflow as tf

from serving import client
from serving import server as srv

MODEL = "tiny_ranker"
L = 5
RAW_SPECS = [
    tf.TensorSpec([None], tf.int64, name="user_id"),
    tf.TensorSpec([None], tf.int64, name="video_id"),
    tf.TensorSpec([None], tf.string, name="video_type"),
    tf.TensorSpec([None], tf.float32, name="duration_s"),
    tf.TensorSpec([None, L], tf.int64, name="hist_video_id"),
    tf.TensorSpec([None], tf.int64, name="hist_len"),
]
RAW_NAMES = [s.name for s in RAW_SPECS]
PARSE_SPEC = {
    "user_id": tf.io.FixedLenFeature([], tf.int64),
    "video_id": tf.io.FixedLenFeature([], tf.int64),
    "video_type": tf.io.FixedLenFeature([], tf.string),
    "duration_s": tf.io.FixedLenFeature([], tf.float32),
    "hist_video_id": tf.io.FixedLenFeature([L], tf.int64),
    "hist_len": tf.io.FixedLenFeature([], tf.int64),
}


class TinyRanker(tf.Module):
    """click_prob = ((user_id + video_id) mod 10) / 10 + 0.01 hist_len
    watch_time_s = 0.5 duration_s + sum(non-pad hist_video_id) + len(video_type) + offset
    """

    def __init__(self, watch_offset: float):
        super().__init__()
        self.watch_offset = tf.Variable(watch_offset, dtype=tf.float32)

    def _outputs(self, user_id, video_id, video_type, duration_s, hist_video_id, hist_len):
        click = (tf.cast((user_id + video_id) % 10, tf.float32) / 10.0
                 + 0.01 * tf.cast(hist_len, tf.float32))
        real = tf.where(hist_video_id >= 0, hist_video_id, tf.zeros_like(hist_video_id))
        watch = (0.5 * duration_s + tf.cast(tf.reduce_sum(real, axis=1), tf.float32)
                 + tf.cast(tf.strings.length(video_type), tf.float32) + self.watch_offset)
        return {"click_prob": click[:, None], "watch_time_s": watch[:, None]}

    @tf.function(input_signature=RAW_SPECS)
    def serve(self, user_id, video_id, video_type, duration_s, hist_video_id, hist_len):
        return self._outputs(user_id, video_id, video_type, duration_s, hist_video_id,
                             hist_len)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(self, examples):
        return self._outputs(**tf.io.parse_example(examples, PARSE_SPEC))

    @tf.function(input_signature=RAW_SPECS)
    def click_only(self, user_id, video_id, video_type, duration_s, hist_video_id, hist_len):
        out = self._outputs(user_id, video_id, video_type, duration_s, hist_video_id,
                            hist_len)
        return {"click_prob": out["click_prob"]}


def save_model(path, watch_offset=0.0):
    m = TinyRanker(watch_offset)
    tf.saved_model.save(m, str(path), signatures={
        "serving_default": m.serve, "serving_examples": m.serve_examples,
        "click_only": m.click_only})


def publish(base, version, watch_offset):
    """Atomic publish like the Pusher: write a temp dir, then rename."""
    tmp = os.path.join(base, f".tmp-{version}")
    save_model(tmp, watch_offset)
    os.rename(tmp, os.path.join(base, str(version)))


def make_instance(i):
    return {"user_id": i, "video_id": 3 * i + 1, "video_type": "NORMAL" if i % 2 else "AD",
            "duration_s": 10.5 + i, "hist_video_id": [i, i + 1, -1, -1, -1], "hist_len": 2}


def to_example(inst) -> bytes:
    f = tf.train.Feature
    ex = tf.train.Example(features=tf.train.Features(feature={
        "user_id": f(int64_list=tf.train.Int64List(value=[inst["user_id"]])),
        "video_id": f(int64_list=tf.train.Int64List(value=[inst["video_id"]])),
        "video_type": f(bytes_list=tf.train.BytesList(value=[inst["video_type"].encode()])),
        "duration_s": f(float_list=tf.train.FloatList(value=[inst["duration_s"]])),
        "hist_video_id": f(int64_list=tf.train.Int64List(value=inst["hist_video_id"])),
        "hist_len": f(int64_list=tf.train.Int64List(value=[inst["hist_len"]])),
        "is_click": f(int64_list=tf.train.Int64List(value=[1])),  # a label: dropped
    }))
    return ex.SerializeToString()


def direct_outputs(model_dir, instances, signature="serving_default"):
    fn = tf.saved_model.load(str(model_dir)).signatures[signature]
    dtypes = {s.name: s.dtype for s in RAW_SPECS}
    feed = {k: tf.constant([inst[k] for inst in instances], dtype=dtypes[k])
            for k in RAW_NAMES}
    return {k: v.numpy() for k, v in fn(**feed).items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("models") / MODEL
    save_model(base / "1")
    server, port = srv.start_server(str(base), MODEL, port=0, poll_wait_seconds=0.2)
    yield {"server": server, "url": f"http://127.0.0.1:{port}", "base": base}
    server.stop()


def post(url, path, body, raw=False):
    data = body if raw else json.dumps(body)
    return requests.post(url + path, data=data, timeout=30,
                         headers={"Content-Type": "application/json"})


PREDICT = f"/v1/models/{MODEL}:predict"


def test_row_format_matches_direct_savedmodel_call(served):
    instances = [make_instance(i) for i in range(7)]
    r = post(served["url"], PREDICT, {"instances": instances})
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    assert len(preds) == 7
    want = direct_outputs(served["base"] / "1", instances)
    for name in ("click_prob", "watch_time_s"):
        got = np.array([p[name] for p in preds], dtype=np.float32)
        assert got.shape == (7, 1)
        np.testing.assert_array_equal(got, want[name])  # float32 round-trips exactly
    # instance 3 by hand: (3 + 10) mod 10 / 10 + 0.02; 0.5*13.5 + (3+4) + len("NORMAL")
    assert preds[3]["click_prob"] == [pytest.approx(0.32, abs=1e-6)]
    assert preds[3]["watch_time_s"] == [pytest.approx(6.75 + 7 + 6, abs=1e-5)]


def test_explicit_version_and_signature_name(served):
    inst = [make_instance(2)]
    r = post(served["url"], f"/v1/models/{MODEL}/versions/1:predict",
             {"signature_name": "serving_default", "instances": inst})
    assert r.status_code == 200, r.text
    assert r.json()["predictions"][0]["watch_time_s"] == [pytest.approx(6.25 + 5 + 2)]


def test_single_output_signature_returns_bare_values(served):
    instances = [make_instance(i) for i in range(3)]
    r = post(served["url"], PREDICT, {"signature_name": "click_only", "instances": instances})
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    want = direct_outputs(served["base"] / "1", instances, "click_only")["click_prob"]
    np.testing.assert_array_equal(np.array(preds, np.float32), want)
    # columnar: bare value too
    cols = {k: [inst[k] for inst in instances] for k in RAW_NAMES}
    r = post(served["url"], PREDICT, {"signature_name": "click_only", "inputs": cols})
    np.testing.assert_array_equal(np.array(r.json()["outputs"], np.float32), want)


def test_columnar_format(served):
    instances = [make_instance(i) for i in range(4)]
    cols = {k: [inst[k] for inst in instances] for k in RAW_NAMES}
    r = post(served["url"], PREDICT, {"inputs": cols})
    assert r.status_code == 200, r.text
    outputs = r.json()["outputs"]
    assert sorted(outputs) == ["click_prob", "watch_time_s"]
    want = direct_outputs(served["base"] / "1", instances)
    for name in outputs:
        np.testing.assert_array_equal(np.array(outputs[name], np.float32), want[name])


def test_b64_examples_signature_matches_raw(served):
    instances = [make_instance(i) for i in range(5)]
    b64 = [base64.b64encode(to_example(inst)).decode() for inst in instances]
    raw = post(served["url"], PREDICT, {"instances": instances}).json()["predictions"]
    named = post(served["url"], PREDICT, {"signature_name": "serving_examples",
                                         "instances": [{"examples": {"b64": b}} for b in b64]})
    bare = post(served["url"], PREDICT, {"signature_name": "serving_examples",
                                        "instances": [{"b64": b} for b in b64]})
    cols = post(served["url"], PREDICT, {"signature_name": "serving_examples",
                                        "inputs": {"examples": [{"b64": b} for b in b64]}})
    assert named.status_code == bare.status_code == cols.status_code == 200, named.text
    assert named.json()["predictions"] == raw
    assert bare.json()["predictions"] == raw
    assert cols.json()["outputs"]["watch_time_s"] == [p["watch_time_s"] for p in raw]


def test_status_and_metadata(served):
    r = requests.get(f"{served['url']}/v1/models/{MODEL}", timeout=10)
    assert r.status_code == 200
    assert r.json() == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE",
         "status": {"error_code": "OK", "error_message": ""}}]}
    assert requests.get(f"{served['url']}/v1/models/{MODEL}/versions/1",
                        timeout=10).status_code == 200
    r = requests.get(f"{served['url']}/v1/models/{MODEL}/metadata", timeout=10)
    assert r.status_code == 200
    meta = r.json()
    assert meta["model_spec"] == {"name": MODEL, "signature_name": "", "version": "1"}
    sigs = meta["metadata"]["signature_def"]["signature_def"]
    assert {"serving_default", "serving_examples", "click_only"} <= set(sigs)
    default = sigs["serving_default"]
    assert sorted(default["inputs"]) == sorted(RAW_NAMES)
    hist = default["inputs"]["hist_video_id"]
    assert hist["dtype"] == "DT_INT64"
    assert [d["size"] for d in hist["tensor_shape"]["dim"]] == ["-1", "5"]
    assert default["inputs"]["video_type"]["dtype"] == "DT_STRING"
    assert default["outputs"]["click_prob"]["dtype"] == "DT_FLOAT"
    assert default["method_name"] == "tensorflow/serving/predict"
    assert sigs["serving_examples"]["inputs"]["examples"]["dtype"] == "DT_STRING"


def _without(d, key):
    return {k: v for k, v in d.items() if k != key}


GOOD = make_instance(1)
BAD_REQUESTS = [
    # (id, path, body (dict or raw str), status, substrings the error must contain)
    ("unknown model", "/v1/models/nope:predict", {"instances": [GOOD]}, 404, ["nope"]),
    ("unknown version", f"/v1/models/{MODEL}/versions/42:predict", {"instances": [GOOD]},
     404, ["42"]),
    ("invalid json", PREDICT, '{"instances": [', 400, ["JSON"]),
    ("missing instances", PREDICT, {"signature_name": "serving_default"}, 400,
     ["instances", "inputs"]),
    ("typo top-level field", PREDICT, {"instance": [GOOD]}, 400, ["instance"]),
    ("empty instances", PREDICT, {"instances": []}, 400, ["instances", "empty"]),
    ("unknown signature", PREDICT, {"signature_name": "bogus_sig", "instances": [GOOD]},
     400, ["bogus_sig"]),
    ("missing feature", PREDICT, {"instances": [_without(GOOD, "hist_len")]}, 400,
     ["hist_len", "missing"]),
    ("unknown feature", PREDICT, {"instances": [dict(GOOD, foo_feature=1)]}, 400,
     ["foo_feature", "unknown"]),
    ("string for int64", PREDICT, {"instances": [dict(GOOD, user_id="abc")]}, 400,
     ["user_id", "integer"]),
    ("float for int64", PREDICT, {"instances": [dict(GOOD, video_id=1.5)]}, 400,
     ["video_id", "integer"]),
    ("number for string", PREDICT, {"instances": [dict(GOOD, video_type=7)]}, 400,
     ["video_type", "string"]),
    ("string for float", PREDICT, {"instances": [dict(GOOD, duration_s="long")]}, 400,
     ["duration_s", "number"]),
    ("int64 overflow", PREDICT, {"instances": [dict(GOOD, user_id=2 ** 70)]}, 400,
     ["user_id", "range"]),
    ("wrong history length", PREDICT,
     {"instances": [GOOD, dict(GOOD, hist_video_id=[1, 2, 3])]}, 400,
     ["hist_video_id", "instances[1]", "length 5"]),
    ("history not a list", PREDICT, {"instances": [dict(GOOD, hist_video_id=3)]}, 400,
     ["hist_video_id", "list"]),
    ("bad history element", PREDICT,
     {"instances": [dict(GOOD, hist_video_id=[1, 2, "x", 4, 5])]}, 400,
     ["hist_video_id", "[2]"]),
    ("inconsistent keys", PREDICT,
     {"instances": [GOOD, _without(GOOD, "video_type")]}, 400,
     ["inconsistent", "video_type", "instances[1]"]),
    ("columnar batch mismatch", PREDICT,
     {"inputs": {k: [GOOD[k]] * (2 if k == "hist_len" else 1) for k in RAW_NAMES}}, 400,
     ["hist_len", "batch"]),
    ("columnar missing input", PREDICT,
     {"inputs": {k: [GOOD[k]] for k in RAW_NAMES if k != "duration_s"}}, 400,
     ["duration_s", "missing"]),
    ("bad base64", PREDICT,
     {"signature_name": "serving_examples", "instances": [{"examples": {"b64": "!!"}}]},
     400, ["examples", "base64"]),
    ("unparsable example", PREDICT,
     {"signature_name": "serving_examples",
      "instances": [{"b64": base64.b64encode(b"not an example").decode()}]}, 400,
     ["serving_examples", "Could not parse example input"]),
]


@pytest.mark.parametrize("path,body,status,needles", [b[1:] for b in BAD_REQUESTS],
                         ids=[b[0] for b in BAD_REQUESTS])
def test_bad_requests_name_the_field(served, path, body, status, needles):
    r = post(served["url"], path, body, raw=isinstance(body, str))
    assert r.status_code == status, r.text
    error = r.json()["error"]
    for needle in needles:
        assert needle in error, error
    # the server is still healthy afterwards
    assert post(served["url"], PREDICT, {"instances": [GOOD]}).status_code == 200


def test_unknown_routes(served):
    assert requests.get(served["url"] + "/v2/whatever", timeout=10).status_code == 404
    r = requests.get(f"{served['url']}/v1/models/other/metadata", timeout=10)
    assert r.status_code == 404 and "other" in r.json()["error"]
    r = post(served["url"], f"/v1/models/{MODEL}:classify", {"examples": []})
    assert r.status_code == 501


def test_concurrent_requests(served):
    def one(i):
        return post(served["url"], PREDICT, {"instances": [make_instance(i)]}).json()

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(one, range(16)))
    want = direct_outputs(served["base"] / "1", [make_instance(i) for i in range(16)])
    got = np.array([r["predictions"][0]["watch_time_s"] for r in replies], np.float32)
    np.testing.assert_array_equal(got, want["watch_time_s"])


def test_client_predict_and_errors(served):
    instances = [make_instance(i) for i in range(3)]
    preds = client.predict(served["url"], MODEL, instances)
    assert preds == post(served["url"], PREDICT, {"instances": instances}).json()["predictions"]
    assert client.predict_columns(served["url"], MODEL,
                                  {k: [i[k] for i in instances] for k in RAW_NAMES},
                                  signature_name="click_only") == [p["click_prob"] for p in preds]
    with pytest.raises(client.ServingError) as err:
        client.predict(served["url"], MODEL, [_without(GOOD, "hist_len")])
    assert err.value.status == 400 and "hist_len" in str(err.value)
    with pytest.raises(client.ServingError) as err:
        client.predict(served["url"], "nope", [GOOD])
    assert err.value.status == 404 and "nope" in err.value.message
    assert client.wait_until_available(served["url"], MODEL, timeout=5) == 1
    assert client.model_status(served["url"], MODEL)["model_version_status"][0]["version"] == "1"


def test_examples_to_instances_round_trip(served):
    instances = [make_instance(i) for i in range(4)]
    serialized = [to_example(inst) for inst in instances]
    # the default list features come from models.features.HISTORY_FEATURES
    got = client.examples_to_instances(serialized, RAW_NAMES)
    assert got == instances  # the label is_click is dropped; types are JSON-native
    assert isinstance(got[0]["user_id"], int) and isinstance(got[0]["duration_s"], float)
    assert client.examples_to_instances([tf.train.Example.FromString(serialized[0])],
                                        RAW_NAMES) == instances[:1]
    assert client.predict(served["url"], MODEL, got) == client.predict(
        served["url"], MODEL, [{"b64": base64.b64encode(s).decode()} for s in serialized],
        signature_name="serving_examples")
    with pytest.raises(ValueError, match="no feature 'tab'"):
        client.examples_to_instances(serialized, RAW_NAMES + ["tab"])
    with pytest.raises(ValueError, match="hist_video_id"):
        client.examples_to_instances(serialized, RAW_NAMES, list_feature_names=[])


def _wait_for_version(url, version, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = requests.get(f"{url}/v1/models/{MODEL}", timeout=10).json()
        if status["model_version_status"][0]["version"] == str(version):
            return status
        time.sleep(0.1)
    raise AssertionError(f"version {version} not picked up: {status}")


def test_new_versions_are_picked_up_and_temp_dirs_ignored(tmp_path):
    base = tmp_path / MODEL
    save_model(base / "1", watch_offset=0.0)
    server, port = srv.start_server(str(base), MODEL, poll_wait_seconds=0.1)
    url = f"http://127.0.0.1:{port}"
    inst = [make_instance(3)]
    try:
        def watch():
            r = post(url, PREDICT, {"instances": inst})
            assert r.status_code == 200, r.text
            return r.json()["predictions"][0]["watch_time_s"][0]

        base_watch = watch()
        assert base_watch == pytest.approx(19.75)
        # an unfinished publish (temp dir, non-numeric names, numeric dir without a
        # saved_model.pb) is never loaded
        save_model(base / ".tmp-3", watch_offset=300.0)
        shutil.copytree(base / ".tmp-3", base / "4.partial")
        os.makedirs(base / "5" / "variables")
        time.sleep(1.0)  # ~10 polls
        assert srv.list_versions(str(base)) == [1]
        assert _wait_for_version(url, 1)
        assert watch() == base_watch

        publish(str(base), 2, watch_offset=100.0)
        status = _wait_for_version(url, 2)
        assert status == {"model_version_status": [
            {"version": "2", "state": "AVAILABLE",
             "status": {"error_code": "OK", "error_message": ""}}]}
        assert watch() == pytest.approx(base_watch + 100.0)
        r = post(url, f"/v1/models/{MODEL}/versions/1:predict", {"instances": inst})
        assert r.status_code == 404 and "version 1" in r.json()["error"]
        assert post(url, f"/v1/models/{MODEL}/versions/2:predict",
                    {"instances": inst}).status_code == 200

        # the temp dir's rename completes the publish of version 3
        os.rename(base / ".tmp-3", base / "3")
        _wait_for_version(url, 3)
        assert watch() == pytest.approx(base_watch + 300.0)

        # a corrupt newer version: reported, old version keeps serving
        os.makedirs(base / "9")
        (base / "9" / "saved_model.pb").write_bytes(b"garbage")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = requests.get(f"{url}/v1/models/{MODEL}", timeout=10).json()[
                "model_version_status"]
            if len(rows) == 2:
                break
            time.sleep(0.1)
        assert rows[0]["version"] == "3" and rows[0]["state"] == "AVAILABLE"
        assert rows[1]["version"] == "9" and rows[1]["state"] == "END"
        assert rows[1]["status"]["error_message"]
        assert watch() == pytest.approx(base_watch + 300.0)
    finally:
        server.stop()


def test_no_version_yet_is_503_then_served(tmp_path):
    base = tmp_path / MODEL
    os.makedirs(base)
    server, port = srv.start_server(str(base), MODEL, poll_wait_seconds=0.1)
    url = f"http://127.0.0.1:{port}"
    try:
        r = post(url, PREDICT, {"instances": [GOOD]})
        assert r.status_code == 503 and MODEL in r.json()["error"]
        assert requests.get(f"{url}/v1/models/{MODEL}", timeout=10).status_code == 404
        publish(str(base), 1, 0.0)
        assert client.wait_until_available(url, MODEL, timeout=60) == 1
        assert post(url, PREDICT, {"instances": [GOOD]}).status_code == 200
    finally:
        server.stop()


def test_cli_flags_and_model_config(tmp_path):
    args = srv.build_arg_parser().parse_args(
        ["--model_base_path", "/m/x", "--model_name", "watchtime_ranker", "--port", "8501",
         "--file_system_poll_wait_seconds", "5"])
    assert (args.model_base_path, args.model_name, args.port,
            args.file_system_poll_wait_seconds) == ("/m/x", "watchtime_ranker", 8501, 5.0)
    assert srv.build_arg_parser().parse_args(["--rest_api_port", "9000"]).port == 9000
    assert srv.main(["--model_base_path", str(tmp_path / "missing")]) == 2
    config = tmp_path / "models.config"
    config.write_text('model_config_list { config { name: "a" base_path: "models/a" '
                      'model_platform: "tensorflow" } }')
    assert srv._read_model_config(str(config)) == {"a": str(tmp_path / "models" / "a")}
    repo_config = os.path.join(os.path.dirname(srv.__file__), "models.config")
    assert srv._read_model_config(repo_config) == {
        "watchtime_ranker": "/models/watchtime_ranker"}
