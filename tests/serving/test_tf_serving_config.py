"""TF Serving artifacts (models.config, batching, monitoring) parsed back with the TF
Serving protos, the CLI, and the docker-compose / KServe manifests that use them."""
import os

import pytest
import yaml
from google.protobuf import text_format

from serving import tf_serving_config as t
from serving.model_config import read_model_specs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_artifacts(paths):
    """The three files parsed back with the TF Serving protos: (ModelSpec, BatchingParameters,
    MonitoringConfig)."""
    [spec] = read_model_specs(paths["--model_config_file"])
    batching_cls, monitoring_cls = t.proto_classes()
    b = text_format.Parse(open(paths["--batching_parameters_file"]).read(), batching_cls())
    m = text_format.Parse(open(paths["--monitoring_config_file"]).read(), monitoring_cls())
    return spec, b, m


def test_artifacts_parse_with_tf_serving_protos(tmp_path):
    a = t.ServingArtifacts("watchtime_ranker", 2, t.BatchingParameters(128, 2000, 16, 2, (8, 128)),
                           {"stable": 3})
    paths = t.write_artifacts(str(tmp_path), a)
    assert sorted(os.listdir(tmp_path)) == sorted([t.MODEL_CONFIG_FILE, t.BATCHING_FILE,
                                                   t.MONITORING_FILE])
    spec, b, m = parse_artifacts(paths)
    assert (spec.name, spec.base_path, spec.labels) == ("watchtime_ranker",
                                                        "/models/watchtime_ranker", {"stable": 3})
    assert (spec.policy.kind, spec.policy.num_versions) == ("latest", 2)
    assert (b.max_batch_size.value, b.batch_timeout_micros.value, b.num_batch_threads.value,
            list(b.allowed_batch_sizes)) == (128, 2000, 2, [8, 128])
    assert m.prometheus_config.enable and m.prometheus_config.path == t.PROMETHEUS_PATH
    batching_cls, _ = t.proto_classes()
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
    from pipeline import configs  # the thread pools the embedded server is measured with
    for args in (flags, dict(a.split("=", 1) for a in model["args"])):
        for flag in ("tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism"):
            assert args[f"--{flag}"] == str(configs.SERVING[flag])


def test_publisher_writes_the_files_beside_its_versions(tmp_path):
    """components/publisher/serving_files.py (the Publisher's last step): the files land in
    the parent of the model's serving base, parse with the TF Serving protos, serve the
    latest min(2, keep) versions with canary = newest and stable = the one before, and
    carry pipeline/configs/ SERVING_BATCHING."""
    import json

    from components.publisher import serving_files
    from pipeline import configs

    base = tmp_path / "serving_model" / "watchtime_ranker"
    batching = json.dumps(configs.SERVING_BATCHING)
    paths = serving_files.write_serving_files(str(base), "watchtime_ranker", [7], 3, batching)
    assert {os.path.dirname(p) for p in paths.values()} == {str(tmp_path / "serving_model")}
    spec, b, m = parse_artifacts(paths)
    assert (spec.name, spec.base_path) == ("watchtime_ranker", "/models/watchtime_ranker")
    assert (spec.policy.kind, spec.policy.num_versions, spec.labels) == ("latest", 1, {"canary": 7, "stable": 7})
    assert (b.max_batch_size.value, b.batch_timeout_micros.value, b.max_enqueued_batches.value,
            b.num_batch_threads.value) == tuple(configs.SERVING_BATCHING[k] for k in (
                "max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads"))
    assert m.prometheus_config.enable
    paths = serving_files.write_serving_files(str(base), "watchtime_ranker", [7, 8, 9], 3, batching, "/srv")
    spec, _, _ = parse_artifacts(paths)
    assert (spec.base_path, spec.policy.num_versions, spec.labels) == ("/srv/watchtime_ranker", 2,
                                                                      {"canary": 9, "stable": 8})
    assert sorted(os.listdir(tmp_path / "serving_model")) == sorted([t.MODEL_CONFIG_FILE, t.BATCHING_FILE,
                                                                     t.MONITORING_FILE])  # no temp left
    assert serving_files.write_serving_files(str(base), "r", [1, 2], 1, batching)  # keep 1: latest 1
    assert parse_artifacts(paths)[0].labels == {"canary": 2, "stable": 2}
    with pytest.raises(TypeError):  # an unknown batching field never reaches a server
        serving_files.write_serving_files(str(base), "r", [1], 1, json.dumps({"max_batch": 1}))
