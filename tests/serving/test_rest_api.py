"""serving.rest_api over HTTP against the tiny model: formats, status, metadata, errors.

Expected numbers come from the model's arithmetic (by hand) and from calling the
SavedModel directly (tests/serving/tiny_model.py).
"""
import base64
import json

import numpy as np
import pytest
import requests

from serving import rest_api
from tests.serving.tiny_model import (GOOD, MODEL, PREDICT, RAW_NAMES, direct_outputs,
                                      make_instance, post, to_example, without)


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
    ("missing feature", PREDICT, {"instances": [without(GOOD, "hist_len")]}, 400,
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
     {"instances": [GOOD, without(GOOD, "video_type")]}, 400,
     ["missing", "video_type", "instances[1]"]),
    ("columnar batch mismatch", PREDICT,
     {"inputs": {k: [GOOD[k]] * (2 if k == "hist_len" else 1) for k in RAW_NAMES}}, 400,
     ["hist_len", "dimension 0"]),
    ("columnar missing input", PREDICT,
     {"inputs": {k: [GOOD[k]] for k in RAW_NAMES if k != "duration_s"}}, 400,
     ["duration_s", "Missing named input"]),
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
    r = post(served["url"], f"/v1/models/{MODEL}:classify", {"examples": [{"a": 1}]})
    assert r.status_code == 400 and r.json()["error"] == (
        "Expected classification signature method_name to be tensorflow/serving/classify. "
        "Was: tensorflow/serving/predict")


def test_handle_request_needs_no_socket(served):
    """The whole API is a function of (managers, method, path, body)."""
    managers = served["server"].managers
    instances = [make_instance(i) for i in range(3)]
    status, reply = rest_api.handle_request(
        managers, "POST", PREDICT, json.dumps({"instances": instances}).encode())
    assert status == 200
    assert reply == post(served["url"], PREDICT, {"instances": instances}).json()
    status, reply = rest_api.handle_request(managers, "GET", f"/v1/models/{MODEL}?x=1")
    assert (status, reply["model_version_status"][0]["version"]) == (200, "1")
    status, reply = rest_api.handle_request(managers, "GET", "/v2/whatever")
    assert status == 404 and "/v2/whatever" in reply["error"]
    status, reply = rest_api.handle_request(
        managers, "POST", f"/v1/models/{MODEL}/versions/7:predict", b"{}")
    assert status == 404 and reply["error"] == f"Servable not found for request: Specific({MODEL}, 7)"
    status, reply = rest_api.handle_request(managers, "PUT", PREDICT, b"{}")
    assert (status, reply["error"]) == (400, f"Malformed request: PUT {PREDICT}")
