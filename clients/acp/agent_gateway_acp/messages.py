"""JSON-RPC 2.0 messages as the relay sees them: each parsed once into a request, a
notification, a response or something it only passes on, with the original text kept so that
a message the relay does not change goes on byte for byte.

This is the parsing edge: ``JsonObject`` is what the wire carries, and the relay reads only
the few fields it acts on (ids, methods, session ids and ``_meta.agentGateway``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

JsonObject = dict[str, Any]
RequestId = int | str

INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000
"""ACP's "authentication required" error code."""

META = "_meta"
GATEWAY = "agentGateway"
"""The key of the gateway's own fields inside a ``_meta`` (docs/acp.md)."""


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: JsonObject
    message: JsonObject
    text: str


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: JsonObject
    message: JsonObject
    text: str


@dataclass(frozen=True, slots=True)
class Response:
    id: RequestId
    message: JsonObject
    text: str

    @property
    def failed(self) -> bool:
        return "error" in self.message

    @property
    def result(self) -> JsonObject:
        result = self.message.get("result")
        return result if isinstance(result, dict) else {}

    @property
    def error(self) -> JsonObject:
        error = self.message.get("error")
        return error if isinstance(error, dict) else {}


@dataclass(frozen=True, slots=True)
class Opaque:
    """Not a JSON-RPC message the relay tracks (not JSON, a batch, a null id): passed on."""

    text: str
    value: object = None
    parsed: bool = False
    """Whether ``text`` is JSON (``value``)."""


Message = Request | Notification | Response | Opaque


def _is_id(value: object) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def parse(text: str) -> Message:
    """What ``text`` is; anything the relay does not understand is ``Opaque``."""
    try:
        message = json.loads(text)
    except ValueError:
        return Opaque(text)
    if not isinstance(message, dict):
        return Opaque(text, message, parsed=True)
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    if isinstance(method, str):
        if "id" not in message:
            return Notification(method, params, message, text)
        if _is_id(message["id"]):
            return Request(message["id"], method, params, message, text)
        return Opaque(text, message, parsed=True)
    if ("result" in message or "error" in message) and _is_id(message.get("id")):
        return Response(message["id"], message, text)
    return Opaque(text, message, parsed=True)


def encode(message: object) -> str:
    """One line of compact JSON."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def one_line(message: Message) -> str | None:
    """The text to write as one stdio line: as it came when it has no line break, re-encoded
    when it is JSON spread over lines, None when it is neither."""
    if "\n" not in message.text and "\r" not in message.text:
        return message.text
    if isinstance(message, Opaque):
        return encode(message.value) if message.parsed else None
    return encode(message.message)


def request(id: RequestId, method: str, params: JsonObject) -> str:
    return encode({"jsonrpc": "2.0", "id": id, "method": method, "params": params})


def notification(method: str, params: JsonObject) -> str:
    return encode({"jsonrpc": "2.0", "method": method, "params": params})


def result(id: RequestId, value: object) -> str:
    return encode({"jsonrpc": "2.0", "id": id, "result": value})


def error(id: RequestId, code: int, message: str, data: object = None) -> str:
    body: JsonObject = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return encode({"jsonrpc": "2.0", "id": id, "error": body})


def answer_with(response: Response, id: RequestId) -> str:
    """``response``'s result or error as the answer to request ``id``."""
    if response.failed:
        return encode({"jsonrpc": "2.0", "id": id, "error": response.message.get("error")})
    return result(id, response.message.get("result"))


def gateway_meta(fields: object) -> JsonObject:
    """``fields["_meta"]["agentGateway"]``, or {} when any part is missing."""
    if not isinstance(fields, dict):
        return {}
    meta = fields.get(META)
    found = meta.get(GATEWAY) if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def with_gateway_meta(params: JsonObject, **fields: object) -> JsonObject:
    """A copy of ``params`` with ``fields`` set in its ``_meta.agentGateway``."""
    meta = params.get(META)
    meta = dict(meta) if isinstance(meta, dict) else {}
    own = meta.get(GATEWAY)
    meta[GATEWAY] = {**(own if isinstance(own, dict) else {}), **fields}
    return {**params, META: meta}


def as_seq(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def seq_of(fields: object) -> int | None:
    """The ``_meta.agentGateway.seq`` of a message's params or result, when it has one."""
    return as_seq(gateway_meta(fields).get("seq"))


def text_field(fields: object, name: str) -> str | None:
    value = fields.get(name) if isinstance(fields, dict) else None
    return value if isinstance(value, str) and value else None
