"""TF Serving's REST contract (issue #11 defects 3, 4, 7) and the serving_rank columnar
form, against the tiny model."""
import numpy as np
import pytest
import requests

from serving import predict_codec
from serving.errors import RequestError
from tests.serving.tiny_model import (GOOD, MODEL, PREDICT, RAW_NAMES, USER_NAMES,
                                      direct_outputs, make_instance, post)


def test_serving_rank_columnar_equals_rows(served):
    """One user (batch 1) x N candidates in the columnar form == the row format with
    the user's fields repeated."""
    cands = [make_instance(i) for i in range(6)]
    user = make_instance(4)
    rows = [dict(c, **{k: user[k] for k in USER_NAMES}) for c in cands]
    inputs = {k: [user[k]] for k in USER_NAMES}
    inputs.update({k: [c[k] for c in cands] for k in RAW_NAMES if k not in USER_NAMES})
    r = post(served["url"], PREDICT, {"signature_name": "serving_rank", "inputs": inputs})
    assert r.status_code == 200, r.text
    want = direct_outputs(served["base"] / "1", rows)
    for name in ("click_prob", "watch_time_s"):
        np.testing.assert_array_equal(np.array(r.json()["outputs"][name], np.float32), want[name])
    inputs["user_id"] = [1, 2]  # the user side has batch 1 in the signature
    r = post(served["url"], PREDICT, {"signature_name": "serving_rank", "inputs": inputs})
    assert r.status_code == 400 and "user_id" in r.json()["error"]


@pytest.mark.parametrize("body,needles", [
    ({"instances": [dict(GOOD, hist_len=1000)]}, ["hist_len", "1000", "[0, 5]", "instances[0]"]),
    ({"instances": [GOOD, dict(GOOD, hist_len=-5)]}, ["hist_len", "-5", "instances[1]"]),
    ('{"instances": [%s]}' % str(dict(GOOD, duration_s="NaN")).replace("'", '"')
     .replace('"NaN"', "NaN"), ["duration_s", "NaN"]),
    ({"instances": [dict(GOOD, duration_s=1e39)]}, ["duration_s", "finite float32"]),
    ("[" * 100000 + "]" * 100000, ["JSON Parse error", "nested"]),
    ("", ["JSON Parse error: The document is empty"]),
    ("[1]", ["Is not object"]),
    ({"instances": [GOOD], "inputs": {}}, ["Not both"]),
    ({"signature_name": 3, "instances": [GOOD]}, ["signature_name"]),
    ({"signature_name": "x", "instances": [GOOD]},
     ['Serving signature name: "x" not found in signature def']),
])
def test_hostile_bodies_are_400(served, body, needles):
    r = post(served["url"], PREDICT, body, raw=isinstance(body, str))
    assert r.status_code == 400, r.text
    for needle in needles:
        assert needle in r.json()["error"], r.json()["error"]


def test_non_finite_outputs_are_refused_not_written_as_bare_nan():
    outputs = {"p": np.array([[0.5], [np.inf]], np.float32)}
    with pytest.raises(RequestError, match="'p' is not finite .* row 1"):
        predict_codec.format_predict_response(outputs, True, 2)
    ok = predict_codec.format_predict_response({"p": np.array([[0.1]], np.float32)}, True, 1)
    assert ok == {"predictions": [[0.1]]}


@pytest.mark.parametrize("method,path,status,error", [
    ("POST", f"/V1/MODELS/{MODEL}:predict", 200, None),               # case-insensitive
    ("POST", f"/v1/models/{MODEL}/VERSIONS/1:predict", 200, None),
    ("POST", f"/v1/models/{MODEL}:PREDICT", 400, f"Malformed request: POST /v1/models/{MODEL}:PREDICT"),
    ("POST", f"/v1/models/{MODEL}/versions/\u0663:predict", 400, "Malformed request"),  # Arabic 3
    ("POST", f"/v1/models/{MODEL}/versions/x1:predict", 400, "Malformed request"),
    ("POST", f"/v1/models/{MODEL}/versions/99999999999999999999:predict", 400,
     "Failed to convert version: 99999999999999999999 to numeric."),
    ("POST", f"/v1/models/{MODEL}/labels/stable:predict", 400,
     "Unrecognized servable version label: stable"),
    ("GET", "/v1/models", 400, "Missing model name in request."),
    ("GET", f"/v1/models/{MODEL}:predict", 400, f"Malformed request: GET /v1/models/{MODEL}:predict"),
    ("POST", f"/v1/models/{MODEL}/metadata", 400, "Malformed request"),
    ("GET", "/v1/models/nope", 404, "Servable not found for request: Latest(nope)"),
    ("GET", f"/v1/models/{MODEL}/versions/9", 404, f"Could not find version 9 of model {MODEL}"),
    ("POST", f"/v1/models/{MODEL}:regress", 400,
     "Expected regression signature method_name to be tensorflow/serving/regress. "
     "Was: tensorflow/serving/predict"),
])
def test_routes_and_tf_serving_messages(served, method, path, status, error):
    body = {"instances": [GOOD]} if path.lower().endswith(":predict") else {"examples": [{"a": 1}]}
    r = requests.request(method, served["url"] + path, json=body, timeout=30)
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "application/json"
    if error is not None:
        assert error in r.json()["error"]


def test_prometheus_metrics(served):
    post(served["url"], PREDICT, {"instances": [GOOD]})
    r = requests.get(served["url"] + "/monitoring/prometheus/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    lines = r.text.splitlines()
    ok = [ln for ln in lines if ln.startswith(":tensorflow:serving:request_count{"
                                              f'model_name="{MODEL}",status="OK"')]
    assert ok and int(ok[0].split()[-1]) >= 1
    assert any(ln.startswith(":tensorflow:serving:request_latency_bucket{"
                             f'model_name="{MODEL}",API="predict",entrypoint="REST"')
               for ln in lines)
