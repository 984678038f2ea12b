"""serving.client against the embedded server."""
import base64

import pytest
import tensorflow as tf

from serving import client
from tests.serving.tiny_model import (GOOD, MODEL, PREDICT, RAW_NAMES, make_instance, post,
                                      to_example, without)


def test_client_predict_and_errors(served):
    instances = [make_instance(i) for i in range(3)]
    preds = client.predict(served["url"], MODEL, instances)
    assert preds == post(served["url"], PREDICT, {"instances": instances}).json()["predictions"]
    assert client.predict_columns(served["url"], MODEL,
                                  {k: [i[k] for i in instances] for k in RAW_NAMES},
                                  signature_name="click_only") == [p["click_prob"] for p in preds]
    with pytest.raises(client.ServingError) as err:
        client.predict(served["url"], MODEL, [without(GOOD, "hist_len")])
    assert err.value.status == 400 and "hist_len" in str(err.value)
    with pytest.raises(client.ServingError) as err:
        client.predict(served["url"], "nope", [GOOD])
    assert err.value.status == 404 and "nope" in err.value.message
    assert client.wait_until_available(served["url"], MODEL, timeout=5) == 1
    assert client.model_status(served["url"], MODEL)["model_version_status"][0]["version"] == "1"


def test_examples_to_instances_round_trip(served):
    instances = [make_instance(i) for i in range(4)]
    serialized = [to_example(inst) for inst in instances]
    # the default list features come from models.features.SERVING_LIST_FEATURES
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


def test_examples_to_instances_keeps_hist_tab_a_list_when_it_is_a_serving_input():
    """LOG_SIGNALS=hist_tab (a fresh interpreter): the publisher's golden rows keep the
    history scenes as a list (they failed as "50 values; expected exactly one")."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, tensorflow as tf; from models import features as F; from serving import client\n"
            "ex = tf.train.Example()\n"
            "for k in F.SERVING_RAW_FEATURES:\n"
            "    n = 4 if k in F.SERVING_LIST_FEATURES else 1\n"
            "    f = ex.features.feature[k]\n"
            "    (f.bytes_list.value.extend([b'x'] * n) if k in F.STRING_FEATURES else f.float_list.value.extend([1.0] * n)\n"
            "     if k in F.NUMERIC_FEATURES or k in ('hist_watch_time_s', 'hist_time_gap_s') else f.int64_list.value.extend([2] * n))\n"
            "inst = client.examples_to_instances([ex.SerializeToString()], F.SERVING_RAW_FEATURES)[0]\n"
            "print(json.dumps(inst['hist_tab']))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, LOG_SIGNALS="hist_tab"),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [2, 2, 2, 2]


def test_rank_and_retries(served, tmp_path):
    import threading

    from serving.http_server import start_server
    from tests.serving.tiny_model import USER_NAMES, publish

    cands = [make_instance(i) for i in range(4)]
    user = make_instance(2)
    out = client.rank(served["url"], MODEL, {k: user[k] for k in USER_NAMES},
                      {k: [c[k] for c in cands] for k in RAW_NAMES if k not in USER_NAMES})
    rows = [dict(c, **{k: user[k] for k in USER_NAMES}) for c in cands]
    assert out["click_prob"] == [p["click_prob"] for p in client.predict(served["url"], MODEL, rows)]
    # 404 "Servable not found ... Latest" (no version yet) is retried with backoff until
    # the version is published
    base = tmp_path / MODEL
    base.mkdir()
    server, port = start_server(str(base), MODEL, poll_wait_seconds=0.05)
    try:
        threading.Timer(0.3, publish, args=(str(base), 1, 0.0)).start()
        assert len(client.predict(f"http://127.0.0.1:{port}", MODEL, [GOOD], retries=8)) == 1
    finally:
        server.stop()
    with pytest.raises(client.ServingError) as err:  # connection refused, after a retry
        client.predict(f"http://127.0.0.1:{port}", MODEL, [GOOD], retries=1, timeout=2)
    assert err.value.status is None and "cannot reach" in err.value.message
