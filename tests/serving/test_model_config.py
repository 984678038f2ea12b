"""TF Serving's model config file: several models, version policies, labels (REST
/labels/ routes), re-read with model_config_file_poll_wait_seconds."""
import shutil
import time

import pytest
import requests

from serving.config import ServingConfig
from serving.http_server import make_server
from serving.model_config import parse_model_specs
from tests.serving.tiny_model import GOOD, save_model

CONFIG = """model_config_list {
  config { name: "a" base_path: "a" model_platform: "tensorflow"
           model_version_policy { latest { num_versions: 2 } }
           version_labels { key: "stable" value: 1 } version_labels { key: "canary" value: 2 } }
  config { name: "b" base_path: "b" model_platform: "tensorflow"
           model_version_policy { specific { versions: 1 } } }
}"""


def test_config_file_policies_labels_and_polling(tmp_path):
    save_model(tmp_path / "src", watch_offset=0.0)
    for d in ("a/1", "a/2", "a/3", "b/1", "b/2"):
        shutil.copytree(tmp_path / "src", tmp_path / d)
    config = tmp_path / "models.config"
    config.write_text(CONFIG.replace("value: 1 }", "value: 2 }", 1))  # stable=2 first
    server = make_server({}, model_config_file=str(config), config=ServingConfig(
        file_system_poll_wait_seconds=0, model_config_file_poll_wait_seconds=0.1))
    server.start_background()
    url = server.url
    try:
        assert server.managers["a"].available_versions() == [2, 3]  # latest 2
        assert server.managers["b"].available_versions() == [1]       # specific 1
        r = requests.post(f"{url}/v1/models/a/labels/canary:predict",
                          json={"instances": [GOOD]}, timeout=10)
        assert r.status_code == 200, r.text
        r = requests.get(f"{url}/v1/models/a/labels/stable", timeout=10)
        assert r.json()["model_version_status"][0]["version"] == "2"
        # a label on a version that is not AVAILABLE is refused: old labels kept
        config.write_text(CONFIG)
        time.sleep(0.6)
        assert server.managers["a"].labels == {"stable": 2, "canary": 2}
        # a config that does not parse is ignored; a valid one drops model b
        config.write_text("model_config_list { config { name: ")
        time.sleep(0.4)
        assert set(server.managers) == {"a", "b"}
        config.write_text(CONFIG.split("  config { name: \"b\"")[0].replace(
            "value: 1 }", "value: 3 }") + "}")
        deadline = time.monotonic() + 30
        while set(server.managers) != {"a"} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(server.managers) == {"a"} and server.managers["a"].labels["stable"] == 3
        r = requests.get(f"{url}/v1/models/b", timeout=10)
        assert r.status_code == 404
    finally:
        server.stop()


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="multiple times"):
        parse_model_specs('model_config_list { config { name: "a" base_path: "/x" '
                          'model_platform: "tensorflow" } config { name: "a" base_path: "/y" '
                          'model_platform: "tensorflow" } }')
    with pytest.raises(ValueError, match="model_platform"):
        parse_model_specs('model_config_list { config { name: "a" base_path: "/x" } }')
    specs = parse_model_specs('model_config_list { config { name: "a" base_path: "/x" '
                              'model_platform: "tensorflow" model_version_policy { all {} } } }')
    assert specs[0].policy.kind == "all" and specs[0].policy.aspired([1, 5]) == [1, 5]
