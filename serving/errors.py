"""Refused requests and their HTTP status: TF Serving's ``Status`` -> HTTP mapping
(``model_servers/http_server.cc`` ``ToHTTPStatusCode``): INVALID_ARGUMENT /
FAILED_PRECONDITION / OUT_OF_RANGE 400, NOT_FOUND 404, UNAVAILABLE 503, UNIMPLEMENTED
501, RESOURCE_EXHAUSTED 429, DEADLINE_EXCEEDED 504, INTERNAL/UNKNOWN 500. The body is
always ``{"error": "<message>"}``.
"""
from http import HTTPStatus


class RequestError(Exception):
    """A refused request: becomes HTTP `status` with body {"error": message}."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.message = message
        self.status = int(status)


class RawReply:
    """A non-JSON reply body (Prometheus text)."""

    def __init__(self, body: bytes, content_type: str):
        self.body = body
        self.content_type = content_type
