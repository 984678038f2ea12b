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
