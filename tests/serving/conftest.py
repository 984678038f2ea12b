"""The `served` fixture: one embedded server on the tiny model (version 1) per session."""
import pytest

from serving.http_server import start_server
from tests.serving.tiny_model import MODEL, save_model


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("models") / MODEL
    save_model(base / "1")
    server, port = start_server(str(base), MODEL, port=0, poll_wait_seconds=0.2)
    yield {"server": server, "url": f"http://127.0.0.1:{port}", "base": base}
    server.stop()
