"""serving.model_manager: version discovery, atomic swaps, failed loads, status."""
import os
import shutil
import time

import pytest
import requests

from serving import client
from serving.http_server import start_server
from serving.model_manager import (ModelManager, ServableNotFoundError,
                                   ServableUnavailableError, list_versions)
from tests.serving.tiny_model import (GOOD, MODEL, PREDICT, make_instance, post, publish,
                                      save_model)


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
    server, port = start_server(str(base), MODEL, poll_wait_seconds=0.1)
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
        assert list_versions(str(base)) == [1]
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
    server, port = start_server(str(base), MODEL, poll_wait_seconds=0.1)
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


def test_manager_without_a_server(tmp_path):
    base = tmp_path / MODEL
    manager = ModelManager(MODEL, str(base), poll_wait_seconds=0)
    assert manager.poll() is False and manager.current is None
    with pytest.raises(ServableUnavailableError, match="no loaded version"):
        manager.get()
    with pytest.raises(ServableNotFoundError, match="Could not find any versions"):
        manager.version_status()
    save_model(base / "2")
    assert manager.poll() is True and manager.poll() is False
    assert manager.get().version == manager.get(2).version == 2
    assert sorted(manager.get().signatures) == ["click_only", "serving_default",
                                                "serving_examples"]
    with pytest.raises(ServableNotFoundError, match="version 1 is not available"):
        manager.get(1)
    with pytest.raises(ServableNotFoundError, match="has no version 1; serving version 2"):
        manager.version_status(1)
    assert manager.version_status(2)["model_version_status"][0]["state"] == "AVAILABLE"
