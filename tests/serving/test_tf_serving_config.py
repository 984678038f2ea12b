"""TF Serving artifacts (models.config, batching, monitoring) parsed back with the TF
Serving protos, the CLI, and the docker-compose / KServe manifests that use them."""
import os

import pytest
import yaml
from google.protobuf import text_format

from serving import tf_serving_config as t
from serving.model_config import read_model_specs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_artifacts_parse_with_tf_serving_protos(tmp_path):
    a = t.ServingArtifacts("watchtime_ranker", 2, t.BatchingParameters(128, 2000, 16, 2, (8, 128)),
                           {"stable": 3})
    paths = t.write_artifacts(str(tmp_path), a)
    assert sorted(os.listdir(tmp_path)) == sorted([t.MODEL_CONFIG_FILE, t.BATCHING_FILE,
                                                   t.MONITORING_FILE])
    [spec] = read_model_specs(paths["--model_config_file"])
    assert (spec.name, spec.base_path, spec.labels) == ("watchtime_ranker",
                                                        "/models/watchtime_ranker", {"stable": 3})
    assert (spec.policy.kind, spec.policy.num_versions) == ("latest", 2)
    batching_cls, monitoring_cls = t.proto_classes()
    b = text_format.Parse(open(paths["--batching_parameters_file"]).read(), batching_cls())
    assert (b.max_batch_size.value, b.batch_timeout_micros.value, b.num_batch_threads.value,
            list(b.allowed_batch_sizes)) == (128, 2000, 2, [8, 128])
    m = text_format.Parse(open(paths["--monitoring_config_file"]).read(), monitoring_cls())
    assert m.prometheus_config.enable and m.prometheus_config.path == t.PROMETHEUS_PATH
    with pytest.raises(ValueError, match="allowed_batch_sizes"):
        t.batching_text(t.BatchingParameters(128, 0, 1, 1, (8, 64)))
    with pytest.raises(text_format.ParseError):
        text_format.Parse("max_batch_size { value: -x }", batching_cls())
    assert t.main(["--serving_base", str(tmp_path / "cli"), "--label", "canary=4",
                   "--num_versions", "2"]) == 0
    assert read_model_specs(str(tmp_path / "cli" / t.MODEL_CONFIG_FILE))[0].labels == {"canary": 4}


def test_compose_and_kserve_manifests_point_tf_serving_at_the_artifacts():
    compose = yaml.safe_load(open(os.path.join(ROOT, "deploy", "docker-compose.yml")))
    svc = compose["services"]["tf-serving"]
    assert svc["image"].startswith("tensorflow/serving:2.16")
    assert svc["entrypoint"] == ["tensorflow_model_server"]
    flags = dict(arg.split("=", 1) for arg in svc["command"])
    assert flags["--rest_api_port"] == "8501" and flags["--port"] == "8500"
    mount = [v for v in svc["volumes"] if v.endswith(":/models:ro")]
    assert mount, svc["volumes"]
    for flag, name in (("--model_config_file", t.MODEL_CONFIG_FILE),
                       ("--batching_parameters_file", t.BATCHING_FILE),
                       ("--monitoring_config_file", t.MONITORING_FILE)):
        assert flags[flag] == f"{t.CONTAINER_BASE}/{name}"
    assert {"8500:8500", "8501:8501"} <= set(svc["ports"])
    isvc = yaml.safe_load(open(os.path.join(ROOT, "deploy", "kserve", "inferenceservice.yaml")))
    assert (isvc["apiVersion"], isvc["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    model = isvc["spec"]["predictor"]["model"]
    assert model["modelFormat"]["name"] == "tensorflow" and model["runtimeVersion"] == "2.16.1"
    assert model["storageUri"].endswith("/watchtime_ranker")
    assert all(a.startswith("--") and "=" in a for a in model["args"])
