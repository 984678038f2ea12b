"""Refused requests and their HTTP status: TF Serving's ``Status`` -> HTTP mapping
(``model_servers/http_server.cc`` ``ToHTTPStatusCode``): INVALID_ARGUMENT /
FAILED_PRECONDITION / OUT_OF_RANGE 400, NOT_FOUND 404, UNAVAILABLE 503, UNIMPLEMENTED
501, RESOURCE_EXHAUSTED 429, DEADLINE_EXCEEDED 504, INTERNAL/UNKNOWN 500. The body is
always ``{"error": "<message>"}``.
"""
import json
from http import HTTPStatus


class RequestError(Exception):
    """A refused request: becomes HTTP `status` with body {"error": message}."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.message = message
        self.status = int(status)


class RawReply:
    """A reply body sent as is (Prometheus text, pre-encoded JSON)."""

    def __init__(self, body: bytes, content_type: str):
        self.body = body
        self.content_type = content_type


class JsonReply(RawReply):
    """A JSON reply already encoded (the :predict hot path, `predict_codec.
    encode_predict_response`); equal to, and indexable like, the object it encodes."""

    def __init__(self, body: bytes):
        super().__init__(body, "application/json")

    def json(self):
        return json.loads(self.body)

    def __eq__(self, other):
        return self.json() == (other.json() if isinstance(other, JsonReply) else other)

    def __getitem__(self, key):
        return self.json()[key]

    __hash__ = None
