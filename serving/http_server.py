"""The embedded TF-Serving-REST-compatible HTTP server (local runs, tests, `make run`).

Production serves the published model directory with TF Serving (`tensorflow/serving`
image, see `deploy/`). This server speaks the same REST API (`serving.rest_api`) so the
same client code and JSON work against either.

`ModelServer` is a threaded HTTP/1.1 server (keep-alive) over a `ServerCore` (one
`ModelManager` per model): a handler thread reads the request body (Content-Length or
chunked, optionally gzip), hands ``(method, path, body)`` to `rest_api.handle_request`
and writes the reply in **one** ``send`` with ``TCP_NODELAY`` set: headers and body
written separately with Nagle's algorithm on cost ~40 ms per keep-alive request (the
delayed-ACK interaction). Every reply, errors included, is JSON with
``Content-Type: application/json`` (TF Serving's ``http_rest_api_util.cc``), also for
the framing errors http.server answers itself (400/414/431/501).

Framing limits TF Serving leaves to proxies: ``Content-Length`` must be plain ASCII
digits (``-1`` or ``+5`` is a 400, never an uncapped read), bodies over
``max_body_bytes`` are 413 (decoded gzip too), and the socket has a read timeout
(``read_timeout_seconds``) so a client that sends headers and stalls frees its thread.
"""
import json
import logging
import re
import socket
import threading
import time
import zlib
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Optional

from serving import rest_api
from serving.config import ServingConfig
from serving.model_manager import ModelManager
from serving.rest_api import RawReply, RequestError

log = logging.getLogger(__name__)

_DIGITS = re.compile(r"[0-9]{1,19}")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:;[^\r\n]*)?\r?\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for client sessions
    server_version = "watchtime-ranker-serving/2"
    disable_nagle_algorithm = True  # socketserver.StreamRequestHandler sets TCP_NODELAY

    def setup(self):
        self.timeout = self.server.config.read_timeout_seconds  # per recv, incl. idle keep-alive
        super().setup()
        self.server.track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def log_message(self, fmt, *args):  # route http.server's stderr chatter to logging
        log.debug("%s %s", self.address_string(), fmt % args)

    # ------------------------------------------------------------------ replies
    def _send(self, status: int, payload, head_only: bool = False) -> None:
        if isinstance(payload, RawReply):
            body, ctype = payload.body, payload.content_type
        else:
            body, ctype = json.dumps(payload).encode("utf-8"), "application/json"
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
        lines = [f"HTTP/1.1 {status} {reason}", f"Server: {self.server_version}",
                 f"Content-Type: {ctype}", f"Content-Length: {len(body)}"]
        if self.close_connection:
            lines.append("Connection: close")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(data if head_only else data + body)  # one write: no Nagle stall
        self.server.metrics.observe_http(status)

    def send_error(self, code, message=None, explain=None):
        """http.server's own framing errors (400 bad request line, 414, 431, 501) as JSON,
        not its HTML page; the connection is closed as http.server does."""
        self.close_connection = True
        text = message or HTTPStatus(code).phrase
        if self.command and getattr(self, "path", None):
            text = f"{text}: {self.command} {self.path}"
        try:
            self._send(int(code), {"error": text}, head_only=self.command == "HEAD")
        except OSError:
            pass

    # ------------------------------------------------------------------ bodies
    def _read_body(self) -> Optional[bytes]:
        limit = self.server.config.max_body_bytes
        te = self.headers.get("Transfer-Encoding")
        length = self.headers.get("Content-Length")
        if te is not None:
            if length is not None:  # RFC 9112 6.3: ambiguous framing (request smuggling)
                raise RequestError("both Transfer-Encoding and Content-Length given")
            if te.strip().lower() != "chunked":
                raise RequestError(f"unsupported Transfer-Encoding '{te}'",
                                   HTTPStatus.NOT_IMPLEMENTED)
            body = self._read_chunked(limit)
        elif length is None:
            if self.command == "POST":
                raise RequestError("missing Content-Length header", HTTPStatus.LENGTH_REQUIRED)
            return None
        else:
            if not _DIGITS.fullmatch(length.strip()):
                raise RequestError(f"bad Content-Length header '{length}'")
            n = int(length.strip())
            if n > limit:
                raise RequestError(f"request body of {n} bytes exceeds {limit}",
                                   HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            body = self.rfile.read(n)
            if len(body) != n:
                raise ConnectionError("client closed the connection inside the body")
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if "gzip" in encoding:  # TF Serving decodes gzip bodies (tensorflow/serving#1091)
            body = _gunzip(body, limit)
        return body

    def _read_chunked(self, limit: int) -> bytes:
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            m = _CHUNK_SIZE.fullmatch(line)
            if not m:
                raise RequestError("malformed chunked request body")
            size = int(m.group(1), 16)
            if size == 0:
                while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            total += size
            if total > limit:
                raise RequestError(f"chunked request body exceeds {limit} bytes",
                                   HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            parts.append(self.rfile.read(size))
            if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                raise RequestError("malformed chunked request body")

    def _handle(self) -> None:
        method = self.command
        start = time.perf_counter()
        try:
            body = self._read_body()
        except (socket.timeout, ConnectionError, OSError) as e:
            log.debug("dropping connection: %s", e)
            self.close_connection = True
            return
        except RequestError as e:  # the body was not read: the connection is out of sync
            self.close_connection = True
            reply = rest_api.error_reply(method, self.path, e)
        else:
            reply = rest_api.handle_request(self.server.core, method, self.path, body)
        self._send(*reply, head_only=method == "HEAD")
        self.server.metrics.observe_latency(self.path, time.perf_counter() - start)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = _handle  # noqa: N815


class ModelServer(ThreadingHTTPServer):
    """Threaded HTTP server over a `ServerCore` (several models, config polling)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, core, config: ServingConfig):
        super().__init__(address, _Handler)
        self.core = core
        self.config = config
        self.metrics = core.metrics
        self._thread: Optional[threading.Thread] = None
        self._conns = set()
        self._conns_lock = threading.Lock()

    def track(self, conn, open_: bool) -> None:
        with self._conns_lock:
            (self._conns.add if open_ else self._conns.discard)(conn)

    @property
    def managers(self) -> Dict[str, ModelManager]:
        return self.core.managers

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        host = self.server_address[0]
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{self.port}"

    def start_background(self) -> None:
        self.core.start()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        name="rest-server")
        self._thread.start()

    def stop(self) -> None:
        """Stops accepting requests, stops the pollers, closes the socket."""
        self.shutdown()
        self.server_close()
        with self._conns_lock:  # keep-alive connections would outlive the listener
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.core.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _gunzip(body: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise RequestError(f"Content-Encoding gzip: {e}")
    if len(out) > limit:
        raise RequestError(f"decoded gzip body exceeds {limit} bytes",
                           HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
    return out


def make_server(models: Dict[str, str], port: int = 0, host: str = "127.0.0.1",
                poll_wait_seconds: Optional[float] = None,
                config: Optional[ServingConfig] = None,
                model_config_file: Optional[str] = None) -> ModelServer:
    """A server for {model_name: model_base_path} (or a TF Serving model config file);
    loads every model's versions (with warmup) before it returns, as TF Serving does."""
    from serving.server_core import ServerCore

    config = config or ServingConfig()
    if poll_wait_seconds is not None:
        config = config.replace(file_system_poll_wait_seconds=poll_wait_seconds)
    core = ServerCore(config)
    if model_config_file:
        core.load_config_file(model_config_file)
    else:
        core.set_models(models)
    return ModelServer((host, port), core, config)


def start_server(model_base_path: str, model_name: str, port: int = 0,
                 host: str = "127.0.0.1", poll_wait_seconds: Optional[float] = None,
                 config: Optional[ServingConfig] = None):
    """Starts a server in a background thread. Returns (server, port).

    The newest version is loaded (and warmed up) before this returns. Stop with
    ``server.stop()``.
    """
    server = make_server({model_name: model_base_path}, port, host, poll_wait_seconds,
                         config)
    server.start_background()
    return server, server.port
