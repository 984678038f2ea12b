"""serving.http_server: start_server, threads, HTTP framing."""
import socket
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tests.serving.tiny_model import GOOD, PREDICT, direct_outputs, make_instance, post


def test_concurrent_requests(served):
    def one(i):
        return post(served["url"], PREDICT, {"instances": [make_instance(i)]}).json()

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(one, range(16)))
    want = direct_outputs(served["base"] / "1", [make_instance(i) for i in range(16)])
    got = np.array([r["predictions"][0]["watch_time_s"] for r in replies], np.float32)
    np.testing.assert_array_equal(got, want["watch_time_s"])


def test_start_server_returns_server_and_port(served):
    server = served["server"]
    assert served["url"] == server.url == f"http://127.0.0.1:{server.port}"


def test_post_without_content_length_is_411_and_closes(served):
    server = served["server"]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        reply = b""
        while chunk := sock.recv(65536):  # the server closes the connection
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 411")
    assert b"application/json" in head and b"Content-Length" in body
    assert post(served["url"], PREDICT, {"instances": [GOOD]}).status_code == 200
