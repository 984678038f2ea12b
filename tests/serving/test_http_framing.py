"""HTTP framing regressions (issue #11 defects 1-3): TCP_NODELAY + one write per reply,
Content-Length checks, read timeout, chunked and gzip bodies, JSON bodies for every
method and for http.server's own 414/431 errors."""
import gzip
import io
import json
import socket

from serving import http_server
from tests.serving.tiny_model import GOOD, MODEL, PREDICT, post


def _raw(port, data: bytes, timeout=10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
                if b"\r\n\r\n" in reply:
                    head, _, body = reply.partition(b"\r\n\r\n")
                    n = [int(h.split(b":")[1]) for h in head.split(b"\r\n")
                         if h.lower().startswith(b"content-length")]
                    if n and len(body) >= n[0]:
                        break
        except socket.timeout:
            pass
    return reply


def _status_json(reply: bytes):
    head, _, body = reply.partition(b"\r\n\r\n")
    assert b"application/json" in head, head
    return int(head.split(b" ")[1]), json.loads(body)["error"]


def test_nodelay_and_one_write_per_reply():
    """Defect 1: headers + body in two writes with Nagle on cost ~40 ms per keep-alive
    request; the handler sets TCP_NODELAY and writes each reply once."""
    assert http_server._Handler.disable_nagle_algorithm is True
    writes = []

    class Recorder(io.RawIOBase):
        def write(self, b):
            writes.append(bytes(b))
            return len(b)
    handler = http_server._Handler.__new__(http_server._Handler)
    handler.wfile, handler.close_connection = Recorder(), False
    handler.server = type("S", (), {"metrics": type("M", (), {"observe_http": lambda *a: None})()})()
    handler._send(200, {"predictions": [1.0]})
    assert len(writes) == 1 and writes[0].endswith(b'{"predictions": [1.0]}')


def test_bad_content_length_and_size_cap(served):
    port = served["server"].port
    req = f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Length: {{}}\r\n\r\n"
    for bad in ("-1", "+5", "1e3", "٣"):
        status, error = _status_json(_raw(port, req.format(bad).encode("utf-8")))
        assert status == 400 and "Content-Length" in error
    status, error = _status_json(_raw(port, req.format(80 * 1024 * 1024).encode()))
    assert status == 413 and "exceeds" in error  # refused before reading 80 MB
    assert post(served["url"], PREDICT, {"instances": [GOOD]}).status_code == 200


def test_stalled_client_is_dropped_after_the_read_timeout(tmp_path):
    from serving.config import ServingConfig
    from tests.serving.tiny_model import save_model

    save_model(tmp_path / MODEL / "1")
    server, port = http_server.start_server(str(tmp_path / MODEL), MODEL, poll_wait_seconds=0,
                                            config=ServingConfig(read_timeout_seconds=0.3))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"POST {PREDICT} HTTP/1.1\r\nContent-Length: 100\r\n\r\n{{".encode())
            assert sock.recv(100) == b""  # the server closed the stalled connection
    finally:
        server.stop()


def test_chunked_and_gzip_bodies(served):
    body = json.dumps({"instances": [GOOD]}).encode()
    want = post(served["url"], PREDICT, {"instances": [GOOD]}).json()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7])
                      for i in range(0, len(body), 7)) + b"0\r\n\r\n"
    reply = _raw(served["server"].port, f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n".encode() + chunks)
    head, _, got = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and json.loads(got) == want
    zipped = gzip.compress(body)
    reply = _raw(served["server"].port, f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\n"
                 f"Content-Encoding: gzip\r\nContent-Length: {len(zipped)}\r\n\r\n".encode()
                 + zipped)
    assert json.loads(reply.partition(b"\r\n\r\n")[2]) == want


def test_every_error_is_json(served):
    port = served["server"].port
    for method in ("PUT", "DELETE", "OPTIONS", "PATCH"):
        status, error = _status_json(_raw(port, f"{method} {PREDICT} HTTP/1.1\r\n"
                                                "Content-Length: 0\r\n\r\n".encode()))
        assert (status, error) == (400, f"Malformed request: {method} {PREDICT}")
    head = _raw(port, f"HEAD {PREDICT} HTTP/1.1\r\n\r\n".encode(), timeout=2)
    assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head
    status, error = _status_json(_raw(port, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"))
    assert status == 414
    status, error = _status_json(_raw(port, b"GET /v1/models/x HTTP/1.1\r\nX: "
                                      + b"a" * 70000 + b"\r\n\r\n"))
    assert status == 431
    status, error = _status_json(_raw(port, b"BREW /v1 HTTP/1.1\r\n\r\n"))
    assert status == 501
