"""The embedded TF-Serving-REST-compatible HTTP server (local runs, tests, `make run`).

Production serves the pushed model directory with TF Serving (`tensorflow/serving`
image, see `serving/models.config`). This server speaks the same REST subset
(`serving.rest_api`) so the same client code and JSON work against either.

`ModelServer` is a threaded HTTP/1.1 server (keep-alive) over one `ModelManager` per
model: a handler thread reads the request body, hands ``(method, path, body)`` to
`serving.rest_api.handle_request` and writes its JSON reply. `start_server` runs one
in a background thread (tests, `make run`, benches); the CLI is `python -m serving`.
"""
import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Optional

from serving import rest_api
from serving.model_manager import DEFAULT_POLL_WAIT_SECONDS, ModelManager
from serving.rest_api import RequestError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for client sessions
    server_version = "watchtime-ranker-serving/1"

    def log_message(self, fmt, *args):  # route http.server's stderr chatter to logging
        log.debug("%s %s", self.address_string(), fmt % args)

    def _send(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError("missing Content-Length header", HTTPStatus.LENGTH_REQUIRED)
        try:
            n = int(length)
        except ValueError:
            raise RequestError(f"bad Content-Length header '{length}'")
        if n > MAX_BODY_BYTES:
            raise RequestError(f"request body of {n} bytes exceeds {MAX_BODY_BYTES}",
                               HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        return self.rfile.read(n)

    def _handle(self, method: str) -> None:
        try:  # always read a POST body, so keep-alive stays in sync
            body = self._read_body() if method == "POST" else None
        except RequestError as e:  # the body was not read: the connection is out of sync
            self.close_connection = True
            reply = rest_api.error_reply(method, self.path, e)
        else:
            reply = rest_api.handle_request(self.server.managers, method, self.path, body)
        self._send(*reply)

    def do_GET(self):  # noqa: N802 (http.server naming)
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")


class ModelServer(ThreadingHTTPServer):
    """Threaded HTTP server over one or more ModelManagers."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, managers: Dict[str, ModelManager]):
        super().__init__(address, _Handler)
        self.managers = managers
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        host = self.server_address[0]
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{self.port}"

    def start_background(self) -> None:
        for m in self.managers.values():
            m.start_polling()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        name="rest-server")
        self._thread.start()

    def stop(self) -> None:
        """Stops accepting requests, stops the pollers, closes the socket."""
        self.shutdown()
        for m in self.managers.values():
            m.stop()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


def make_server(models: Dict[str, str], port: int = 0, host: str = "127.0.0.1",
                poll_wait_seconds: float = DEFAULT_POLL_WAIT_SECONDS) -> ModelServer:
    """Builds a server for {model_name: model_base_path}; loads current versions now."""
    managers = {}
    for name, base in models.items():
        manager = ModelManager(name, base, poll_wait_seconds)
        manager.poll()
        if manager.current is None:
            log.warning("no servable version of model %r under %s yet; waiting for one",
                        name, manager.model_base_path)
        managers[name] = manager
    return ModelServer((host, port), managers)


def start_server(model_base_path: str, model_name: str, port: int = 0,
                 host: str = "127.0.0.1",
                 poll_wait_seconds: float = DEFAULT_POLL_WAIT_SECONDS):
    """Starts a server in a background thread. Returns (server, port).

    The newest version is loaded before this returns. Stop with ``server.stop()``.
    """
    server = make_server({model_name: model_base_path}, port, host, poll_wait_seconds)
    server.start_background()
    return server, server.port
